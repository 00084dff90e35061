# A Redis Cluster of three primaries (no replicas) on 127.0.0.1:7001-7003, from the same
# Debian package as `redis`. Slots are assigned once (`redis-cli --cluster create`); each
# node's nodes.conf keeps the layout across restarts. The pid file holds the first node's pid;
# the other nodes have their own next to it.

REDIS_CLUSTER_PORTS=(7001 7002 7003)

redis-cluster_install() { redis_install; }

redis-cluster_check() {
  redis-cli -h 127.0.0.1 -p "${REDIS_CLUSTER_PORTS[0]}" cluster info 2>/dev/null | grep -q '^cluster_state:ok'
}

redis-cluster_version() { redis_version; }

redis-cluster_address() {
  local p out=()
  for p in "${REDIS_CLUSTER_PORTS[@]}"; do out+=("redis://127.0.0.1:$p/"); done
  (IFS=,; echo "${out[*]}")
}

redis-cluster_log() { echo "$(svc_dir redis-cluster)/${REDIS_CLUSTER_PORTS[0]}/log"; }

redis-cluster_start() {
  local d p n i nodes=()
  d=$(svc_dir redis-cluster)
  for p in "${REDIS_CLUSTER_PORTS[@]}"; do
    n="$d/$p"; mkdir -p "$n"
    redis-server --bind 127.0.0.1 --port "$p" --dir "$n" --daemonize yes --pidfile "$n/pid" \
      --logfile "$n/log" --save "" --appendonly yes --appendfsync everysec \
      --cluster-enabled yes --cluster-config-file "$n/nodes.conf" --cluster-node-timeout 5000 \
      || fail redis-cluster "start of node $p" "$n/log" "redis-server refused to start"
    for i in $(seq 1 20); do [ -s "$n/pid" ] && break; sleep 0.25; done
    nodes+=("127.0.0.1:$p")
  done
  cp "$d/${REDIS_CLUSTER_PORTS[0]}/pid" "$d/pid"
  for i in $(seq 1 40); do
    redis-cli -h 127.0.0.1 -p "${REDIS_CLUSTER_PORTS[-1]}" ping 2>/dev/null | grep -q PONG && break
    sleep 0.25
  done
  # Slots are assigned only once; a restarted cluster finds its layout in nodes.conf.
  if redis-cli -h 127.0.0.1 -p "${REDIS_CLUSTER_PORTS[0]}" cluster info | grep -q '^cluster_slots_assigned:0'; then
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes \
      >"$d/create.log" 2>&1 || fail redis-cluster "cluster create" "$d/create.log" "see log"
  fi
}

redis-cluster_stop_extra() {
  local d p f; d=$(svc_dir redis-cluster)
  for p in "${REDIS_CLUSTER_PORTS[@]}"; do
    f="$d/$p/pid"
    [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  for p in "${REDIS_CLUSTER_PORTS[@]}"; do
    f="$d/$p/pid"
    for i in $(seq 1 60); do [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null || break; sleep 0.5; done
    rm -f "$f"
  done
  return 0
}
