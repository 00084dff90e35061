"""What bench/versus does to any contestant: the cases, the servers, fresh destinations, one
measured run (throughput, CPU, peak RSS, first output, what arrived twice or not at all), one
latency run, and one fault round (SIGKILL mid-run, then a restart)."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import namedtuple
from urllib.parse import urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("RIVUS_CACHE_DIR", "/var/cache/rivus")
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(CACHE, "target"))
INTERVAL_MS = 1000
TINY = 2000

Case = namedtuple("Case", "source sink exactly fmt size")
# `json` parses each value and writes it back; `pass` hands values through untouched. Into
# PostgreSQL each JSON record becomes a row, into Elasticsearch a document with its id.
CASES = {
    "kafka-kafka-alo": Case("kafka", "kafka", False, "json", 100),
    "kafka-kafka-eo": Case("kafka", "kafka", True, "json", 100),
    "kafka-kafka-alo-pass": Case("kafka", "kafka", False, "pass", 100),
    "kafka-kafka-eo-pass": Case("kafka", "kafka", True, "pass", 100),
    "kafka-kafka-alo-1k": Case("kafka", "kafka", False, "json", 1024),
    "kafka-kafka-eo-1k": Case("kafka", "kafka", True, "json", 1024),
    "kafka-postgres-alo": Case("kafka", "postgres", False, "json", 100),
    "kafka-postgres-eo": Case("kafka", "postgres", True, "json", 100),
    "kafka-elasticsearch": Case("kafka", "elasticsearch", False, "json", 100),
    "generator-kafka": Case("generator", "kafka", False, "json", 100),
}
COLUMNS = "id bigint, account text, amount double precision, status text, ts bigint, pad text"
Run = namedtuple("Run", "inp out group bounded n log")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def lib(script):
    """Runs a function of dev/lib (resolve_jars, compile_class) and returns what it printed."""
    return sh(["bash", "-c", f". '{ROOT}/dev/lib/common.sh'; . '{ROOT}/dev/lib/java.sh'; {script}"]).strip()


class Env:
    """The servers, the work directory, the parallelism, and the neutral watcher (`Watch.java`,
    on Kafka's own client and the PostgreSQL driver that Kafka Connect's class path has)."""

    def __init__(self, kafka, pg, es, work, p, connect_jars):
        self.kafka, self.pg, self.es, self.work, self.p = kafka, pg, es, work, p
        watch = lib(f"compile_class versus-watch '{connect_jars}' '{HERE}/Watch.java'")
        self.watch_cp = f"{watch}:{connect_jars}/*"

    def watch(self, target, topic, *args):
        return ["java", "-cp", self.watch_cp, "Watch", target, topic, *map(str, args)]

    def topic(self, name):
        sh(self.watch(self.kafka, name, "create", self.p))

    def drop_topic(self, name):
        subprocess.run(self.watch(self.kafka, name, "delete"), capture_output=True)

    def fill(self, topic, n, size, rate=0, kind="plain"):
        sh(self.watch(self.kafka, topic, "fill" if kind == "plain" else "fill-envelope", n, size, rate))

    def es_call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.es}/{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)

    def sql(self, statement):
        return sh(["psql", "-qtA", "-v", "ON_ERROR_STOP=1", self.pg, "-c", statement]).strip()

    def jdbc_url(self):
        u = urlparse(self.pg)
        user = f"user={u.username}" + (f"&password={u.password}" if u.password else "")
        return f"jdbc:postgresql://{u.hostname}:{u.port or 5432}{u.path}?{user}"


class Output:
    """A fresh destination (a topic, a table or an index): how to watch it, what arrived in
    it once the job ended, how to drop it."""

    def __init__(self, env, case, name, id_field):
        self.env, self.kind, self.name, self.id_field = env, CASES[case].sink, name, id_field
        if self.kind == "kafka":
            env.topic(name)
            self.watch = (env.kafka, name, "watch")
        elif self.kind == "elasticsearch":
            # Refreshed every 100 ms (not 1 s) so that the watcher sees documents as they land.
            env.es_call("PUT", name, {"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                                                   "refresh_interval": "100ms"}})
            self.watch = (env.es, name, "docs")
        else:
            env.sql(f"CREATE TABLE {name} ({COLUMNS})")
            self.watch = (env.jdbc_url(), name, "rows")

    def arrived(self, n, wait_s=0):
        """`(duplicates, missing)` of ids 0..n-1 (duplicates None where documents are written by
        id); with `wait_s`, first waits up to that long for every id."""
        if self.kind == "kafka":
            total, distinct, missing = map(int, sh(self.env.watch(
                self.env.kafka, self.name, "ids", n, self.id_field, max(wait_s, 300),
                1 if wait_s else 0)).split())
            if wait_s:
                total, distinct, missing = map(int, sh(self.env.watch(
                    self.env.kafka, self.name, "ids", n, self.id_field, 300, 0)).split())
            return total - distinct, missing
        if self.kind == "postgres":
            deadline = time.time() + wait_s
            while True:
                total, distinct = map(int, self.env.sql(
                    f"SELECT count(*), count(DISTINCT id) FILTER (WHERE id < {n}) FROM {self.name}").split("|"))
                if distinct >= n or time.time() >= deadline:
                    return total - distinct, n - distinct
                time.sleep(0.5)
        self.env.es_call("POST", f"{self.name}/_refresh")
        count = self.env.es_call("GET", f"{self.name}/_count")["count"]
        return None, n - count

    def drop(self):
        if self.kind == "kafka":
            self.env.drop_topic(self.name)
        elif self.kind == "elasticsearch":
            self.env.es_call("DELETE", self.name)
        else:
            self.env.sql(f"DROP TABLE {self.name}")


def watcher(env, watch, n, log, mode=None):
    target, name, default = watch
    w = subprocess.Popen(env.watch(target, name, mode or default, n, 900),
                         stdout=subprocess.PIPE, stderr=log, text=True)
    if w.stdout.readline().strip() != "ready":
        sys.exit(f"the watcher of {name} did not start: see {log.name}")
    return w


def restarts(peer, log_path):
    if not peer.restart_line or not os.path.exists(log_path):
        return 0
    with open(log_path, errors="replace") as f:
        return sum(peer.restart_line in line for line in f)


class RunFailed(Exception):
    """A run without figures: its job failed, or did not end in time (`hung`)."""

    def __init__(self, why, hung):
        super().__init__(why)
        self.hung = hung


def stop(job, timeout=30):
    """Asks a job's process group to stop (SIGINT: every contestant stops on it, and
    /usr/bin/time ignores it); a job that does not stop within `timeout` has the processes
    below `job` killed (so /usr/bin/time still reports), then the group."""
    try:
        os.killpg(job.pid, signal.SIGINT)
        return job.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-KILL", "-P", str(job.pid)])
        try:
            return job.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            return job.wait()
    except ProcessLookupError:
        return job.wait()


def measure(env, peer, case, cmd, out, run, timeout):
    """Runs cmd until it ends (or, for a contestant that runs on, until the destination holds
    n records, then stops it); returns its figures. Raises RunFailed when the job fails or
    does not end within `timeout` seconds."""
    n = run.n
    timing = os.path.join(env.work, f"time-{out.name}")
    log = open(os.path.join(env.work, f"watch-{out.name}.log"), "w")
    w = watcher(env, out.watch, n, log)
    start = time.time() * 1000
    with open(run.log, "a") as err:
        job = subprocess.Popen(["/usr/bin/time", "-f", "%e %U %S %M", "-o", timing, *cmd],
                               cwd=env.work, stdout=subprocess.DEVNULL, stderr=err,
                               start_new_session=True)
        code = None
        if peer.ends_itself(case, run.bounded):
            try:
                code = job.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
        else:
            # Runs on until the watcher saw every record; a job that ends first failed.
            deadline = time.time() + timeout
            while w.poll() is None and job.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            if w.poll() is not None:
                code = 0 if w.returncode == 0 else -1
            elif job.poll() is not None:
                code = job.returncode or -1
            stop(job)
    if code != 0:
        w.kill()
        log.close()
        why = (f"did not end within {timeout} s" if code is None else f"failed (exit {code})")
        raise RunFailed(f"{why}, {restarts(peer, run.log)} restarts; see {run.log}", hung=code is None)
    first, last = map(int, w.communicate(timeout=900)[0].split())
    log.close()
    duplicates, missing = out.arrived(n)
    figures = open(timing).read().split()[-4:]
    if len(figures) != 4:
        raise RunFailed(f"/usr/bin/time reported nothing; see {run.log}", hung=False)
    wall, user, system, rss_kib = figures
    return {
        "restarts": restarts(peer, run.log),
        "duplicates": duplicates,
        "missing": missing,
        "whole": n / max(1e-3, (last - start) / 1000),
        "steady": n / max(1e-3, (last - first) / 1000),
        "cpu": float(user) + float(system),
        "rss_mib": int(rss_kib) / 1024,
        "first_output_ms": first - start,
        "done_ms": last - start,
    }


def latency(env, peer, case, stamp, seconds, rate):
    """An unbounded job over a paced feed: p50 and p99 of arrival minus send time, in ms."""
    size = CASES[case].size
    inp = f"versus-live-{case}-{peer.name}-{stamp}"
    env.topic(inp)
    out = Output(env, case, peer.output_name(
        f"versus_{case}_{peer.name}_live_{stamp}".replace("-", "_"), inp, case), peer.id_field(case))
    group = f"versus-{case}-{peer.name}-live-{stamp}"
    log = open(os.path.join(env.work, f"latency-{out.name}.log"), "w")
    # Ten more seconds of feed cover the job's start-up (records sent then are not counted).
    n = (seconds + 10) * rate
    run = Run(inp, out.name, group, False, n, os.path.join(env.work, f"job-{out.name}.log"))
    cmd = peer.command(env, case, run)
    w = watcher(env, out.watch, n, log, mode="latency")
    job = subprocess.Popen(cmd, cwd=env.work, stdout=subprocess.DEVNULL, stderr=log,
                           start_new_session=True)
    env.fill(inp, n, size, rate)
    figures = w.communicate(timeout=900)[0].split()
    stop(job)
    log.close()
    out.drop()
    env.drop_topic(inp)
    if w.returncode != 0 or len(figures) != 3:
        # The watcher says why on its last line (too few records, or none sent after the
        # job's first output came, when its start-up outlasted the feed).
        with open(log.name, errors="replace") as f:
            why = ([line.strip() for line in f if line.startswith("latency:")] or ["no figures"])[-1]
        raise RunFailed(f"{why}; see {log.name} and {run.log}", hung=False)
    p50, p99, measured = map(int, figures)
    return p50, p99, measured


def fault_round(env, peer, case, stamp, n):
    """Unbounded over a filled topic; SIGKILL once half the records arrived; the same command
    again (same group, offsets or checkpoints); the records that arrived twice or not at all
    once every id arrived (or five minutes passed)."""
    c = CASES[case]
    inp = f"versus-fault-{peer.name}-{stamp}"
    env.topic(inp)
    env.fill(inp, n, c.size, kind=peer.input_kind(case))
    out = Output(env, case, peer.output_name(
        f"versus_fault_{peer.name}_{stamp}".replace("-", "_"), inp, case), peer.id_field(case))
    group = f"versus-fault-{peer.name}-{stamp}"
    run = Run(inp, out.name, group, False, n, os.path.join(env.work, f"job-{out.name}.log"))
    cmd = peer.command(env, case, run)
    log = open(os.path.join(env.work, f"watch-{out.name}.log"), "w")
    w = watcher(env, out.watch, n // 2, log)
    with open(run.log, "a") as err:
        job = subprocess.Popen(cmd, cwd=env.work, stdout=subprocess.DEVNULL, stderr=err,
                               start_new_session=True)
        w.communicate(timeout=900)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        job = subprocess.Popen(cmd, cwd=env.work, stdout=subprocess.DEVNULL, stderr=err,
                               start_new_session=True)
        t = time.time()
        out.arrived(n, wait_s=300)
        took = time.time() - t
        stop(job)
    log.close()
    duplicates, missing = out.arrived(n)
    out.drop()
    env.drop_topic(inp)
    return duplicates, missing, took
