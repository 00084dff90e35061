# Apache Kafka 4.x, a single KRaft node (broker + controller in one process) run from its jars.
# Transactions work (internal topics at replication 1). Listeners, all on 127.0.0.1:
#   9092  PLAINTEXT (anonymous, a super user)        9093  the KRaft controller
#   9094  SSL with client certificates required (the test CA's client certificate: principal
#         `rivus-client`)
#   9095  SASL_SSL: SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, users `rivus` (every right) and
#         `guest` (rights on `public-*` topics and groups only), enforced by the KRaft authorizer.

KAFKA_PORT=${RIVUS_KAFKA_PORT:-9092}
KAFKA_SSL_PORT=${RIVUS_KAFKA_SSL_PORT:-9094}
KAFKA_SASL_PORT=${RIVUS_KAFKA_SASL_PORT:-9095}
# A plaintext listener advertised at another port, where a fault-injecting proxy of a test
# listens and forwards to it: clients that bootstrap through the proxy stay behind it.
KAFKA_PROXIED_PORT=${RIVUS_KAFKA_PROXIED_PORT:-9096}
KAFKA_PROXY_PORT=${RIVUS_KAFKA_PROXY_PORT:-9097}
KAFKA_SASL_USERNAME=rivus
KAFKA_SASL_PASSWORD=rivus-kafka-pw
KAFKA_GUEST_USERNAME=guest
KAFKA_GUEST_PASSWORD=guest-kafka-pw
KAFKA_DEV=$REPO_ROOT/dev/kafka

kafka_install() {
  java_install
  KAFKA_JARS=$(resolve_jars kafka "$KAFKA_DEV/pom.xml")
  KAFKA_PROBE=$(compile_class kafka-probe "$KAFKA_JARS" "$KAFKA_DEV/Probe.java")
  KAFKA_SECURITY=$(compile_class kafka-security "$KAFKA_JARS" "$KAFKA_DEV/Security.java")
  KAFKA_PRODUCE=$(compile_class kafka-produce "$KAFKA_JARS" "$KAFKA_DEV/Produce.java")
}

# The class path of Kafka's Java client and dev/kafka/Produce.java, for tests that read what
# Kafka's own producer wrote.
kafka_java_classpath() { echo "$KAFKA_JARS/*:$KAFKA_PRODUCE"; }

kafka_probe() { "$JAVA_BIN" -Xmx128m -cp "$KAFKA_JARS/*:$KAFKA_PROBE" Probe "127.0.0.1:$KAFKA_PORT" 2>/dev/null; }

# Answers on the plaintext listener, and runs with today's listeners (a broker started by an
# older checkout lacks the secured ones and is restarted).
kafka_check() {
  grep -q "PROXIED://127.0.0.1:$KAFKA_PROXY_PORT" "$(svc_dir kafka)/server.properties" 2>/dev/null \
    && kafka_probe | grep -q '^kafka '
}

# After the broker answers: SCRAM users and ACLs (idempotent).
kafka_ready() {
  local log; log="$(svc_dir kafka)/logs/security.log"
  "$JAVA_BIN" -Xmx128m -cp "$KAFKA_JARS/*:$KAFKA_SECURITY" Security "127.0.0.1:$KAFKA_PORT" \
    "$KAFKA_SASL_USERNAME" "$KAFKA_SASL_PASSWORD" "$KAFKA_GUEST_USERNAME" "$KAFKA_GUEST_PASSWORD" \
    >"$log" 2>&1 || fail kafka "creating SCRAM users and ACLs" "$log" "Security.java failed"
}

kafka_version() { ls "$KAFKA_JARS" | sed -n 's/^kafka_2.13-\(.*\)\.jar$/\1/p'; }

kafka_address() { echo "127.0.0.1:$KAFKA_PORT"; }
kafka_ssl_address() { echo "127.0.0.1:$KAFKA_SSL_PORT"; }
kafka_sasl_address() { echo "127.0.0.1:$KAFKA_SASL_PORT"; }
kafka_proxied_address() { echo "127.0.0.1:$KAFKA_PROXIED_PORT"; }

kafka_log() { echo "$(svc_dir kafka)/logs/server.log"; }

kafka_start() {
  local d; d=$(svc_dir kafka)
  local tls; tls=$(tls_dir)
  mkdir -p "$d/data" "$d/logs"
  tls_files
  # A PEM key store: the server's (unencrypted PKCS#8) key followed by its certificate.
  cat "$tls/server.key" "$tls/server.crt" > "$d/server.pem"
  chmod 600 "$d/server.pem"
  cat > "$d/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((KAFKA_PORT + 1))
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$((KAFKA_PORT + 1)),SSL://127.0.0.1:$KAFKA_SSL_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_PORT,PROXIED://127.0.0.1:$KAFKA_PROXIED_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SSL://127.0.0.1:$KAFKA_SSL_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_PORT,PROXIED://127.0.0.1:$KAFKA_PROXY_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,PROXIED:PLAINTEXT
ssl.keystore.type=PEM
ssl.keystore.location=$d/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
listener.name.ssl.ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+)\$/\$1/,DEFAULT
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SASL_USERNAME="$KAFKA_SASL_PASSWORD" user_$KAFKA_GUEST_USERNAME="$KAFKA_GUEST_PASSWORD";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
log.dirs=$d/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
# A transaction whose producer died aborts within a second of its timeout (default 10 s):
# read_committed readers in the worker tests wait that much less.
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=9223372036854775807
# A dev broker keeps two hours of data: benchmark and test topics would otherwise fill the disk
# over weeks of runs (segments of 128 MiB, so old ones can be deleted).
log.retention.minutes=120
log.segment.bytes=134217728
log.retention.check.interval.ms=60000
PROPS
  local java_opts=(-Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$KAFKA_DEV/log4j2.properties" -Dkafka.logs.dir="$d/logs")
  if [ ! -f "$d/data/meta.properties" ]; then
    local id; id=$("$JAVA_BIN" -cp "$KAFKA_JARS/*" kafka.tools.StorageTool random-uuid 2>"$d/logs/format.log") \
      || fail kafka "generating a cluster id" "$d/logs/format.log" "StorageTool random-uuid failed"
    "$JAVA_BIN" "${java_opts[@]}" -cp "$KAFKA_JARS/*" kafka.tools.StorageTool format -t "$id" \
      -c "$d/server.properties" --ignore-formatted >>"$d/logs/format.log" 2>&1 \
      || fail kafka "formatting storage" "$d/logs/format.log" "StorageTool format failed"
  fi
  nohup "$JAVA_BIN" "${java_opts[@]}" -cp "$KAFKA_JARS/*" kafka.Kafka "$d/server.properties" \
    >"$d/logs/stdout.log" 2>&1 &
  echo $! > "$d/pid"
}
