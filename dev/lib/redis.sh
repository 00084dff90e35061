# Redis from Debian's package, on 127.0.0.1:6379, with an append-only file (fsync every
# second; a stop with SIGTERM writes it out), so a restart keeps what was acknowledged. The
# same server also listens with TLS on 6380 and requires a client certificate there
# (certificates from dev/lib/tls.sh).

REDIS_PORT=${RIVUS_REDIS_PORT:-6379}
REDIS_TLS_PORT=${RIVUS_REDIS_TLS_PORT:-6380}

redis_install() { command -v redis-server >/dev/null || apt_install redis-server redis-tools; }

redis_check() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

redis_version() { redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p'; }

redis_address() { echo "redis://127.0.0.1:$REDIS_PORT/"; }

redis_tls_address() { echo "rediss://127.0.0.1:$REDIS_TLS_PORT/"; }

redis_start() {
  local d t; d=$(svc_dir redis); t=$(tls_dir)
  mkdir -p "$d"
  tls_files
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$d" --daemonize yes \
    --pidfile "$d/pid" --logfile "$d/log" --save "" --appendonly yes --appendfsync everysec --protected-mode yes \
    --tls-port "$REDIS_TLS_PORT" --tls-cert-file "$t/server.crt" --tls-key-file "$t/server.key" \
    --tls-ca-cert-file "$t/ca.crt" --tls-auth-clients yes \
    || fail redis start "$d/log" "redis-server refused to start"
  local i; for i in $(seq 1 20); do [ -s "$d/pid" ] && break; sleep 0.25; done
}

redis_log() { echo "$(svc_dir redis)/log"; }
