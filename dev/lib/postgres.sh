# PostgreSQL from Debian's package, on 127.0.0.1:5432: trust auth on loopback, a `rivus`
# superuser and database, prepared transactions enabled (for exactly-once sinks). TLS on the
# same port with the test CA's server certificate; two users that may only connect over TLS:
# `rivus_tls` with a password (SCRAM) and `rivus-client` with the test client certificate.
# Logical decoding on (`wal_level = logical`, slots and WAL senders for the change-data-capture
# tests) and `rivus_cdc`, a user with only the REPLICATION attribute and a password (SCRAM):
# what a CDC source needs, tables' SELECT granted by the tests that use it.

PG_PORT=${RIVUS_PG_PORT:-5432}
PG_TLS_USER=rivus_tls
PG_TLS_PASSWORD=rivus-pg-pw
PG_CDC_USER=rivus_cdc
PG_CDC_PASSWORD=rivus-cdc-pw

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

postgres_install() { [ -n "$(pg_bin)" ] && [ -x "$(pg_bin)/initdb" ] || apt_install postgresql; }

postgres_check() { psql "postgres://rivus@127.0.0.1:$PG_PORT/rivus" -Atc 'select 1' | grep -qx 1; }

postgres_version() { "$(pg_bin)/postgres" --version | awk '{print $3}'; }

postgres_address() { echo "postgres://rivus@127.0.0.1:$PG_PORT/rivus"; }

postgres_tls_address() {
  echo "postgres://$PG_TLS_USER:$PG_TLS_PASSWORD@127.0.0.1:$PG_PORT/rivus?sslmode=verify-full&sslrootcert=$(tls_dir)/ca.crt"
}

postgres_cdc_address() {
  echo "postgres://$PG_CDC_USER:$PG_CDC_PASSWORD@127.0.0.1:$PG_PORT/rivus"
}

postgres_log() { echo "$(svc_dir postgres)/log"; }

postgres_start() {
  local d bin; d=$(svc_dir postgres); bin=$(pg_bin)
  mkdir -p "$d"
  chown postgres:postgres "$d"
  if [ ! -f "$d/data/PG_VERSION" ]; then
    rm -rf "$d/data"
    run_as postgres "$bin/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 >"$d/initdb.log" 2>&1 \
      || fail postgres initdb "$d/initdb.log" "initdb failed"
  fi
  rm -f "$d/data/postmaster.pid"   # stale after a kill; the data dir is ours alone
  # TLS: the server's key must belong to the server's user and be private.
  tls_files
  mkdir -p "$d/tls"
  cp "$(tls_dir)/server.key" "$(tls_dir)/server.crt" "$(tls_dir)/ca.crt" "$d/tls/"
  chown -R postgres:postgres "$d/tls"; chmod 600 "$d/tls/server.key"
  # First match wins: the TLS users only over TLS, everyone else trusted on loopback.
  cat > "$d/data/pg_hba.conf" <<HBA
local     all  all                        trust
hostnossl all  $PG_TLS_USER,rivus-client  0.0.0.0/0     reject
hostssl   all  $PG_TLS_USER               127.0.0.1/32  scram-sha-256
hostssl   all  rivus-client               127.0.0.1/32  cert
host      all  $PG_CDC_USER               127.0.0.1/32  scram-sha-256
host      all  all                        127.0.0.1/32  trust
host      all  all                        ::1/128       trust
HBA
  chown postgres:postgres "$d/data/pg_hba.conf"
  run_as postgres "$bin/pg_ctl" -D "$d/data" -l "$d/log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $d -c max_prepared_transactions=64 -c max_connections=200 -c fsync=off -c ssl=on -c ssl_cert_file=$d/tls/server.crt -c ssl_key_file=$d/tls/server.key -c ssl_ca_file=$d/tls/ca.crt -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=64" \
    >"$d/pg_ctl.log" 2>&1 || fail postgres start "$d/log" "pg_ctl start failed (see also $d/pg_ctl.log)"
  head -n 1 "$d/data/postmaster.pid" > "$d/pid"
  # The test user and database (idempotent).
  psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -q >>"$d/log" 2>&1 <<'SQL' || fail postgres "create rivus user" "$d/log" "psql failed"
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rivus') THEN CREATE ROLE rivus LOGIN SUPERUSER; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rivus_tls') THEN CREATE ROLE rivus_tls LOGIN SUPERUSER; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rivus-client') THEN CREATE ROLE "rivus-client" LOGIN SUPERUSER; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rivus_cdc') THEN CREATE ROLE rivus_cdc LOGIN REPLICATION; END IF;
END $$;
ALTER ROLE rivus_tls PASSWORD 'rivus-pg-pw';
ALTER ROLE rivus_cdc PASSWORD 'rivus-cdc-pw';
SELECT 'CREATE DATABASE rivus OWNER rivus' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'rivus')\gexec
SQL
}
