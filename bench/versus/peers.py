"""The contestants of bench/versus: how each is built or resolved, which cases it runs, and the
command line of one run. Every peer runs at its defaults except what a fair comparison needs
(the same parallelism, batch sizes where the peer exposes them, a commit/checkpoint every
second, the same delivery guarantee)."""

import hashlib
import os
import signal
import subprocess
from urllib.parse import urlparse

from harness import CASES, INTERVAL_MS, ROOT, CACHE, TARGET, lib, sh

HERE = os.path.dirname(os.path.abspath(__file__))

# Flink 1.17 (the Elasticsearch case) on Java 17 needs what Flink's own scripts pass from 1.18.
OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.reflect", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.text",
    "java.time", "java.util", "java.util.concurrent", "java.util.concurrent.atomic",
    "java.util.concurrent.locks")]
COLUMNS = ["id", "account", "amount", "status", "ts", "pad"]


class Peer:
    """What the harness asks of a contestant; `tuned`: configured as its own documentation
    advises for throughput (named `NAME-tuned`)."""
    name = ""

    def __init__(self, tuned=False):
        self.tuned = tuned
        if tuned:
            self.name = f"{self.name}-tuned"
    # The line of its log that says the job restarted (None: it does not restart itself).
    restart_line = None

    def setup(self, env):
        """Builds or resolves what it runs (cached)."""

    def refuses(self, case):
        """Why it does not run `case` (None: it does)."""
        return None

    def input_kind(self, case):
        """`plain` JSON records, or `envelope` (Kafka Connect's JsonConverter with schemas)."""
        return "plain"

    def output_name(self, default, inp, case):
        return default

    def id_field(self, case):
        """Where the id is in an output record (`-`: the record is the id)."""
        return "id"

    def ends_itself(self, case, bounded):
        """Whether a run ends by itself once the input is read (else it is stopped)."""
        return False

    def command(self, env, case, run):
        raise NotImplementedError


class Rivus(Peer):
    name = "rivus"
    restart_line = "job failed: restarting from the newest completed checkpoint"

    def setup(self, env):
        print("== building rivus (release)", flush=True)
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "rivus-cli"], cwd=ROOT,
                       check=True, env={**os.environ, "CARGO_TARGET_DIR": TARGET})
        self.bin = os.path.join(TARGET, "release", "rivus")

    def ends_itself(self, case, bounded):
        return bounded

    def command(self, env, case, run):
        c = CASES[case]
        text = 'format = "text"\n' if c.fmt == "pass" else ""
        if c.source == "generator":
            source = f'[source]\ntype = "generator"\ncount = {run.n}\n'
        else:
            source = (f'[source]\ntype = "kafka"\nbootstrap_servers = "{env.kafka}"\n'
                      f'topics = ["{run.inp}"]\ngroup_id = "{run.group}"\nstart = "earliest"\n'
                      f'bounded = {"true" if run.bounded else "false"}\n{text}')
        if c.sink == "kafka":
            sink = (f'[sink]\ntype = "kafka"\nbootstrap_servers = "{env.kafka}"\n'
                    f'topic = "{run.out}"\nexactly_once = {"true" if c.exactly else "false"}\n{text}')
        elif c.sink == "elasticsearch":
            sink = f'[sink]\ntype = "elasticsearch"\nurl = "{env.es}"\nindex = "{run.out}"\nid_field = "id"\n'
        else:
            sink = (f'[sink]\ntype = "jdbc"\nurl = "{env.pg}"\ntable = "{run.out}"\n'
                    f'exactly_once = {"true" if c.exactly else "false"}\n')
        f = os.path.join(env.work, f"{run.group}.toml")
        with open(f, "w") as o:
            o.write(f'name = "{run.group}"\nparallelism = {env.p}\n'
                    f'[checkpoint]\ninterval = "{INTERVAL_MS}ms"\ndir = "state-{run.group}"\n'
                    f'{source}{sink}')
        return [self.bin, "run", f]


class Flink(Peer):
    """Apache Flink 2.2 (DataStream API, local MiniCluster); Flink 1.17 for Elasticsearch.
    Tuned (`flink-tuned`, `-Dversus.tuned=true`, not for Elasticsearch) as its documentation
    advises for throughput: object reuse between chained operators, the Kafka producers
    lingering 5 ms over 256 KiB batches (operator chaining is on by default)."""
    name = "flink"
    restart_line = "switched from state RUNNING to RESTARTING"

    def setup(self, env):
        d = os.path.join(HERE, "flink")
        jars = lib(f"resolve_jars flink '{d}/pom.xml'")
        job = lib(f"compile_class flink-job '{jars}' '{d}/FlinkJob.java'")
        es_jars = lib(f"resolve_jars flink-es '{d}/pom-es.xml'")
        es_job = lib(f"compile_class flink-es-job '{es_jars}' '{d}/FlinkEsJob.java'")
        self.cp = {"flink": f"{job}:{jars}/*", "flink-es": f"{es_job}:{es_jars}/*"}

    def refuses(self, case):
        if CASES[case].source != "kafka":
            return "the bench's Flink job reads Kafka only"
        if self.tuned and CASES[case].sink == "elasticsearch":
            return "no tuned configuration of the Flink 1.17 Elasticsearch job"
        return None

    def ends_itself(self, case, bounded):
        return bounded

    def command(self, env, case, run):
        c = CASES[case]
        args = [env.kafka, run.inp, run.out, run.group, str(env.p), str(INTERVAL_MS),
                "exactly" if c.exactly else "atleast", c.fmt,
                "bounded" if run.bounded else "unbounded"]
        logging = [f"-Dlog4j2.configurationFile={HERE}/flink/log4j2.properties",
                   f"-Dversus.log={run.log}"]
        if c.sink == "elasticsearch":
            return ["java", *OPENS, *logging, "-cp", self.cp["flink-es"], "FlinkEsJob", *args, env.es]
        if c.sink == "postgres":
            args.append(env.jdbc_url())
        tuned = ["-Dversus.tuned=true"] if self.tuned else []
        return ["java", *logging, *tuned, "-cp", self.cp["flink"], "FlinkJob", *args]


class AtLeastOnceService(Peer):
    """A peer with no exactly-once delivery that runs on until stopped, except over a counted
    generator: Benthos's `generate` closes its input and Benthos stops, Vector stops once
    `demo_logs` has emitted its count."""

    def refuses(self, case):
        if CASES[case].exactly:
            return "no exactly-once delivery"
        return None

    def ends_itself(self, case, bounded):
        return CASES[case].source == "generator"


class Benthos(AtLeastOnceService):
    """Benthos v4.27.0 (Go), built from its module with `go build` (cached by go.sum). Tuned
    (`benthos-tuned`) as its documentation advises for throughput: the Kafka input batched
    (2 000 records or 5 ms per partition) with a `checkpoint_limit` of 100 000 (50 batches in
    flight per partition: a flushed batch counts whole against it), 64 output requests in
    flight, the generator emitting batches of 2 000."""
    name = "benthos"

    def setup(self, env):
        d = os.path.join(HERE, "benthos")
        key = hashlib.sha256(open(os.path.join(d, "go.sum"), "rb").read()
                             + open(os.path.join(d, "main.go"), "rb").read()).hexdigest()[:12]
        out = os.path.join(CACHE, f"benthos-{key}", "benthos")
        if not os.path.exists(out):
            print("== building Benthos v4.27.0 (first run only)", flush=True)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            go_env = {**os.environ, "GOPATH": os.path.join(CACHE, "go"),
                      "GOCACHE": os.path.join(CACHE, "go-build"), "GOFLAGS": "-mod=mod"}
            subprocess.run(["go", "build", "-o", out + ".tmp", "."], cwd=d, check=True, env=go_env)
            os.rename(out + ".tmp", out)
        self.bin = out


    def command(self, env, case, run):
        c = CASES[case]
        t = self.tuned
        in_flight = "    max_in_flight: 64\n" if t else ""
        if c.source == "generator":
            inp = (f"input:\n  generate:\n    count: {run.n}\n    interval: \"\"\n"
                   + ("    batch_size: 2000\n" if t else "") + "    mapping: |\n"
                   f"      let i = count(\"gen\") - 1\n"
                   f"      root.id = $i\n      root.user = \"user-%d\".format($i % 50)\n"
                   f"      root.amount = ($i * 7919 % 100000) / 100\n"
                   f"      root.status = [\"new\", \"paid\", \"shipped\"].index($i % 3)\n"
                   f"      root.ts = timestamp_unix_milli()\n")
        else:
            inp = (f"input:\n  kafka_franz:\n    seed_brokers: [\"{env.kafka}\"]\n"
                   f"    topics: [\"{run.inp}\"]\n    consumer_group: \"{run.group}\"\n"
                   f"    start_from_oldest: true\n    commit_period: {INTERVAL_MS}ms\n"
                   + ("    checkpoint_limit: 100000\n    batching:\n      count: 2000\n"
                      "      period: 5ms\n" if t else ""))
        processors = "    - mapping: root = this\n" if c.fmt == "json" else ""
        pipeline = f"pipeline:\n  threads: {env.p}\n" + (f"  processors:\n{processors}" if processors else "")
        if c.sink == "kafka":
            # Batches as rivus's producer makes them (librdkafka: up to 10 000 records, 5 ms
            # linger): without a batching policy Benthos awaits each record's acknowledgement,
            # ten at a time, and stays near 15 k records/s.
            out = (f"output:\n  kafka_franz:\n    seed_brokers: [\"{env.kafka}\"]\n    topic: \"{run.out}\"\n"
                   f"    batching:\n      count: 10000\n      period: 5ms\n{in_flight}")
        elif c.sink == "elasticsearch":
            # rivus's bulks: 1 000 actions or flushed every second.
            out = (f"output:\n  elasticsearch:\n    urls: [\"{env.es}\"]\n    index: \"{run.out}\"\n"
                   f"    id: '${{! json(\"id\") }}'\n    sniff: false\n"
                   f"    batching:\n      count: 1000\n      period: 1s\n{in_flight}")
        else:
            args = ", ".join(f"this.{k}" for k in COLUMNS)
            # rivus's batches: 1 000 rows or flushed every second.
            out = (f"output:\n  sql_insert:\n    driver: postgres\n    dsn: \"{env.pg}?sslmode=disable\"\n"
                   f"    table: \"{run.out}\"\n    columns: [{', '.join(COLUMNS)}]\n"
                   f"    args_mapping: root = [{args}]\n"
                   f"    batching:\n      count: 1000\n      period: 1s\n{in_flight}")
        f = os.path.join(env.work, f"{run.group}.yaml")
        with open(f, "w") as o:
            o.write(f"http:\n  enabled: false\nlogger:\n  level: WARN\n{inp}{pipeline}{out}")
        return [self.bin, "-c", f]


class Connect(Peer):
    """Kafka Connect 4.3.1, a standalone worker: MirrorSourceConnector (Kafka -> Kafka, bytes
    copied), Debezium's JDBC sink (Kafka -> PostgreSQL, records with schemas), the
    VerifiableSourceConnector (a generator). Tuned (`connect-tuned`) as the Kafka and Debezium
    documentation advise for throughput: the source tasks' producers linger 5 ms over batches
    of 256 KiB (`producer.linger.ms`, `producer.batch.size`), the sink task polls as many
    records as the JDBC sink's batch holds (`consumer.override.max.poll.records`, else its
    batches stay at the consumer's 500), and the PostgreSQL driver rewrites a batch into
    multi-row inserts (`reWriteBatchedInserts=true`)."""
    name = "connect"

    def setup(self, env):
        self.jars = lib(f"resolve_jars versus-connect '{HERE}/connect/pom.xml'")

    def refuses(self, case):
        c = CASES[case]
        if c.exactly:
            return "exactly-once needs a distributed worker and is not set up here"
        if c.sink == "elasticsearch":
            return "no open Elasticsearch sink for Kafka Connect on Maven Central"
        if c.source == "kafka" and c.sink == "kafka" and c.fmt == "json":
            return "Connect copies bytes (MirrorSourceConnector); parsing needs a connector of one's own"
        return None

    def input_kind(self, case):
        return "envelope" if CASES[case].sink == "postgres" else "plain"

    def output_name(self, default, inp, case):
        # MirrorSourceConnector names its output `<source alias>.<topic>`.
        c = CASES[case]
        return f"{default}.{inp}" if c.source == "kafka" and c.sink == "kafka" else default

    def id_field(self, case):
        return "-" if CASES[case].source == "generator" else "id"

    def command(self, env, case, run):
        c = CASES[case]
        worker = {
            "bootstrap.servers": env.kafka,
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "offset.storage.file.filename": os.path.join(env.work, f"offsets-{run.group}"),
            # The same commit interval as the others' checkpoints (default 60 s).
            "offset.flush.interval.ms": str(INTERVAL_MS),
            "listeners": "http://127.0.0.1:0",
            "plugin.discovery": "only_scan",
        }
        if self.tuned:
            worker.update({"producer.linger.ms": "5", "producer.batch.size": str(256 * 1024)})
        conn = {"name": run.group, "tasks.max": str(env.p)}
        if c.source == "generator":
            conn.update({"connector.class": "org.apache.kafka.connect.tools.VerifiableSourceConnector",
                         "tasks.max": "1", "topic": run.out, "throughput": "-1",
                         "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                         "key.converter.schemas.enable": "false",
                         "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                         "value.converter.schemas.enable": "false"})
        elif c.sink == "kafka":
            alias = run.out[: -len(run.inp) - 1]
            conn.update({"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
                         "source.cluster.alias": alias, "target.cluster.alias": "target",
                         "source.cluster.bootstrap.servers": env.kafka,
                         "target.cluster.bootstrap.servers": env.kafka,
                         "topics": run.inp, "sync.topic.acls.enabled": "false",
                         "sync.topic.configs.enabled": "false",
                         "replication.factor": "1", "offset-syncs.topic.replication.factor": "1"})
        else:
            u = urlparse(env.pg)
            conn.update({"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
                         "topics": run.inp,
                         "connection.url": f"jdbc:postgresql://{u.hostname}:{u.port or 5432}{u.path}"
                                           + ("?reWriteBatchedInserts=true" if self.tuned else ""),
                         "connection.username": u.username or "",
                         "connection.password": u.password or "",
                         "insert.mode": "insert", "primary.key.mode": "none",
                         "schema.evolution": "none", "table.name.format": run.out,
                         # rivus's batches: 1 000 rows.
                         "batch.size": "1000",
                         "consumer.override.auto.offset.reset": "earliest",
                         "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                         "value.converter.schemas.enable": "true"})
            if self.tuned:
                conn["consumer.override.max.poll.records"] = conn["batch.size"]
        files = []
        for name, props in (("worker", worker), ("connector", conn)):
            f = os.path.join(env.work, f"{run.group}-{name}.properties")
            with open(f, "w") as o:
                o.write("".join(f"{k}={v}\n" for k, v in props.items()))
            files.append(f)
        return ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", f"{self.jars}/*",
                "org.apache.kafka.connect.cli.ConnectStandalone", *files]


class Vector(AtLeastOnceService):
    """Vector 0.56 (Rust, MPL-2.0), built from its source with only the components the cases
    use (cached by tag, patches and features): `--vector-src DIR` names a directory holding
    clones of vectordotdev/vector (`vector`), of tokio-rs/tracing (`tracing`, for the
    `tracing-tower` crate at the revision Vector's manifest pins) and of vectordotdev/heim
    (`heim`, branch `update-nix`: the `update-deps` branch Vector's manifest names is no longer
    published); the Windows-only `ntapi` patch is dropped, and the toolchain that builds rivus
    builds it (not the one Vector's `rust-toolchain.toml` pins). At-least-once with end-to-end
    acknowledgements (a Kafka offset is committed once the sink acknowledged its event),
    Vector's own log namespace (the Kafka metadata stays out of the written record), as many
    worker threads as the others' parallelism. Tuned (`vector-tuned`) as its buffering and
    Kafka sink references advise for throughput: 10 000-event buffers before each sink (the
    default holds 500), the Kafka producer batching up to 10 000 records or 5 ms."""
    name = "vector"
    src = None  # --vector-src
    TAG = "v0.56.0"
    HEIM = "update-nix"
    FEATURES = ("unix", "vrl/stdlib", "sources-kafka", "sources-demo_logs", "transforms-remap",
                "sinks-kafka", "sinks-elasticsearch", "sinks-postgres")

    def setup(self, env):
        key = hashlib.sha256(f"{self.TAG} {self.HEIM} {self.FEATURES}".encode()).hexdigest()[:12]
        out = os.path.join(CACHE, f"vector-{key}", "vector")
        if not os.path.exists(out):
            if not self.src:
                raise SystemExit(
                    "vector: not built yet; give --vector-src DIR, a directory with clones of "
                    "vectordotdev/vector (as `vector`), tokio-rs/tracing (`tracing`) and "
                    "vectordotdev/heim (`heim`) — see bench/versus/README.md")
            self.build(out)
        self.bin = out

    def build(self, out):
        print(f"== building Vector {self.TAG} (first run only; about 20 minutes on 2 cores)",
              flush=True)
        lib("apt_install protobuf-compiler libclang-dev")
        work = os.path.join(CACHE, "vector-build")
        src = {}
        manifest = sh(["git", "-C", os.path.join(self.src, "vector"), "show",
                       f"{self.TAG}:Cargo.toml"])
        tracing_rev = next(l.split('rev = "')[1].split('"')[0] for l in manifest.splitlines()
                           if l.startswith("tracing-tower = {"))
        # The sources afresh; `work/target` stays, so an interrupted build resumes.
        for repo, rev in (("vector", self.TAG), ("tracing", tracing_rev), ("heim", self.HEIM)):
            src[repo] = os.path.join(work, repo)
            subprocess.run(["rm", "-rf", src[repo]], check=True)
            os.makedirs(src[repo])
            archive = subprocess.Popen(["git", "-C", os.path.join(self.src, repo), "archive", rev],
                                       stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", src[repo]], stdin=archive.stdout, check=True)
            if archive.wait() != 0:
                raise SystemExit(f"vector: {self.src}/{repo} has no revision {rev}")
        lines = []
        for line in manifest.splitlines():
            if line.startswith("tracing-tower = {"):
                line = f'tracing-tower = {{ path = "{src["tracing"]}/tracing-tower", default-features = false }}'
            elif line.startswith("heim = {"):
                line = (f'heim = {{ path = "{src["heim"]}/heim", default-features = false, '
                        'features = ["disk"] }')
            elif line.startswith("ntapi = { git"):
                continue
            lines.append(line)
        with open(os.path.join(src["vector"], "Cargo.toml"), "w") as f:
            f.write("\n".join(lines) + "\n")
        # Built with the toolchain that builds rivus, not the one Vector pins.
        os.remove(os.path.join(src["vector"], "rust-toolchain.toml"))
        target = os.path.join(work, "target")
        # Its crates `deny(warnings)`; a newer compiler's new lints must not stop the build.
        subprocess.run(["cargo", "build", "--release", "--no-default-features",
                        "--features", ",".join(self.FEATURES)], cwd=src["vector"], check=True,
                       env={**os.environ, "CARGO_TARGET_DIR": target,
                            "RUSTFLAGS": "--cap-lints=warn"})
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run(["cp", os.path.join(target, "release", "vector"), out + ".tmp"], check=True)
        os.rename(out + ".tmp", out)
        subprocess.run(["rm", "-rf", work], check=True)


    def command(self, env, case, run):
        c = CASES[case]
        t = self.tuned
        buffer = "buffer.max_events = 10000\n" if t else ""
        if c.source == "generator":
            source = (f'[sources.in]\ntype = "demo_logs"\nformat = "shuffle"\nlines = ["order"]\n'
                      f'sequence = true\ncount = {run.n}\ninterval = 0.0\n'
                      '[transforms.orders]\ntype = "remap"\ninputs = ["in"]\nsource = \'\'\'\n'
                      'parts = split(string!(.), " ", limit: 2)\n'
                      'i = to_int!(parts[0])\n'
                      'm = mod(i, 3)\n'
                      'status = if m == 0 { "new" } else if m == 1 { "paid" } else { "shipped" }\n'
                      '. = {"id": i, "user": "user-" + to_string(mod(i, 50)),\n'
                      '     "amount": mod(i * 7919, 100000) / 100, "status": status,\n'
                      '     "ts": to_unix_timestamp(now(), unit: "milliseconds")}\n\'\'\'\n')
            last = "orders"
        else:
            codec = "json" if c.fmt == "json" else "bytes"
            source = (f'[sources.in]\ntype = "kafka"\nbootstrap_servers = "{env.kafka}"\n'
                      f'topics = ["{run.inp}"]\ngroup_id = "{run.group}"\n'
                      f'auto_offset_reset = "earliest"\ncommit_interval_ms = {INTERVAL_MS}\n'
                      f'decoding.codec = "{codec}"\n')
            last = "in"
        sink = (f'[sinks.out]\ninputs = ["{last}"]\nacknowledgements.enabled = true\n{buffer}')
        if c.sink == "kafka":
            encoding = "raw_message" if c.fmt == "pass" else "json"
            sink += (f'type = "kafka"\nbootstrap_servers = "{env.kafka}"\ntopic = "{run.out}"\n'
                     f'encoding.codec = "{encoding}"\n'
                     + ("batch.max_events = 10000\nbatch.timeout_secs = 0.005\n" if t else ""))
        elif c.sink == "elasticsearch":
            # rivus's bulks: 1 000 actions or flushed every second. At-least-once needs
            # `request_retry_partial`: without it the sink drops the documents of a bulk that
            # Elasticsearch partly rejected (`es_rejected_execution_exception` when its write
            # queue is full) instead of retrying them — seen at 200 000 records (the `id_key`
            # makes a retried document an overwrite, as its reference advises).
            sink += (f'type = "elasticsearch"\nendpoints = ["{env.es}"]\nmode = "bulk"\n'
                     f'bulk.index = "{run.out}"\nid_key = "id"\nrequest_retry_partial = true\n'
                     'batch.max_events = 1000\nbatch.timeout_secs = 1\n')
        else:
            # rivus's batches: 1 000 rows or flushed every second.
            sink += (f'type = "postgres"\nendpoint = "{env.pg}"\ntable = "{run.out}"\n'
                     'batch.max_events = 1000\nbatch.timeout_secs = 1\n')
        f = os.path.join(env.work, f"{run.group}.toml")
        with open(f, "w") as o:
            o.write(f'data_dir = "{env.work}"\nschema.log_namespace = true\n{source}{sink}')
        return [self.bin, "--quiet", "--threads", str(env.p), "--config", f]


PEERS = {p.name: p for p in (Rivus(), Benthos(), Benthos(tuned=True), Vector(), Vector(tuned=True),
                              Connect(), Connect(tuned=True), Flink(), Flink(tuned=True))}
STOP = signal.SIGINT
