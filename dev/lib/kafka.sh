# Apache Kafka 4.x, a single KRaft node (broker + controller in one process) run from its jars,
# on 127.0.0.1:9092 (controller on 9093). Transactions work (internal topics at replication 1).

KAFKA_PORT=${RIVUS_KAFKA_PORT:-9092}
KAFKA_DEV=$REPO_ROOT/dev/kafka

kafka_install() {
  java_install
  KAFKA_JARS=$(resolve_jars kafka "$KAFKA_DEV/pom.xml")
  KAFKA_PROBE=$(compile_class kafka-probe "$KAFKA_JARS" "$KAFKA_DEV/Probe.java")
}

kafka_probe() { "$JAVA_BIN" -Xmx128m -cp "$KAFKA_JARS/*:$KAFKA_PROBE" Probe "127.0.0.1:$KAFKA_PORT" 2>/dev/null; }

kafka_check() { kafka_probe | grep -q '^kafka '; }

kafka_version() { ls "$KAFKA_JARS" | sed -n 's/^kafka_2.13-\(.*\)\.jar$/\1/p'; }

kafka_address() { echo "127.0.0.1:$KAFKA_PORT"; }

kafka_log() { echo "$(svc_dir kafka)/logs/server.log"; }

kafka_start() {
  local d; d=$(svc_dir kafka)
  mkdir -p "$d/data" "$d/logs"
  cat > "$d/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((KAFKA_PORT + 1))
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$((KAFKA_PORT + 1))
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$d/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
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
