# RabbitMQ from Debian's package, on 127.0.0.1:5672 (guest/guest), with epmd and the Erlang
# distribution port also on loopback only; AMQPS on 5671 requires a client certificate
# (certificates from dev/lib/tls.sh).

AMQP_PORT=${RIVUS_AMQP_PORT:-5672}
AMQPS_PORT=${RIVUS_AMQPS_PORT:-5671}
RABBIT_NODE=rivus@localhost

rabbitmq_install() { command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server; }

rabbitmq_env() {
  local d; d=$(svc_dir rabbitmq)
  export RABBITMQ_NODENAME=$RABBIT_NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT=$AMQP_PORT RABBITMQ_DIST_PORT=$((AMQP_PORT + 20000)) \
    RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_LOG_BASE=$d/logs RABBITMQ_PID_FILE=$d/rabbit.pid \
    RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins RABBITMQ_CONFIG_FILE=$d/rabbitmq \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    ERL_EPMD_ADDRESS=127.0.0.1
}

rabbitmq_check() {
  ( rabbitmq_env; rabbitmq-diagnostics -q -n "$RABBIT_NODE" check_port_connectivity ) \
    && ( rabbitmq_env; rabbitmq-diagnostics -q -n "$RABBIT_NODE" check_running )
}

rabbitmq_version() { dpkg-query -W -f='${Version}' rabbitmq-server | cut -d- -f1; }

rabbitmq_address() { echo "amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f"; }

rabbitmq_tls_address() { echo "amqps://guest:guest@127.0.0.1:$AMQPS_PORT/%2f"; }

rabbitmq_log() { ls -t "$(svc_dir rabbitmq)"/logs/*.log 2>/dev/null | head -n 1 || echo "$(svc_dir rabbitmq)/out.log"; }

rabbitmq_start() {
  local d; d=$(svc_dir rabbitmq)
  mkdir -p "$d/logs" "$d/mnesia"
  tls_files
  local t; t=$(tls_dir)
  # guest may only log in from loopback, which is where the tests are.
  cat > "$d/rabbitmq.conf" <<CONF
loopback_users.guest = true
listeners.tcp.default = 127.0.0.1:$AMQP_PORT
listeners.ssl.default = 127.0.0.1:$AMQPS_PORT
ssl_options.cacertfile = $t/ca.crt
ssl_options.certfile = $t/server.crt
ssl_options.keyfile = $t/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true
CONF
  printf '[].\n' > "$d/enabled_plugins"
  # As root, Debian's wrapper runs the server as the rabbitmq user.
  chown -R rabbitmq:rabbitmq "$d"
  ( rabbitmq_env
    if ! epmd -names >/dev/null 2>&1; then
      nohup epmd -address 127.0.0.1 >"$d/epmd.log" 2>&1 &
      echo $! > "$d/epmd.pid"
      sleep 0.5
    fi
    nohup rabbitmq-server >"$d/out.log" 2>&1 &
    echo $! > "$d/pid" )
}

rabbitmq_stop_extra() {
  local d; d=$(svc_dir rabbitmq)
  if [ -f "$d/epmd.pid" ]; then kill "$(cat "$d/epmd.pid")" 2>/dev/null || true; rm -f "$d/epmd.pid"; fi
}
