# MariaDB from Debian's package, on 127.0.0.1:3306: root without password on loopback and a
# `rivus` database. TLS on the same port with the test CA's server certificate; the user
# `rivus_tls` (password) may only connect over TLS.

MYSQL_PORT=${RIVUS_MYSQL_PORT:-3306}
MYSQL_TLS_USER=rivus_tls
MYSQL_TLS_PASSWORD=rivus-mysql-pw

mariadb_install() { command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server mariadb-client; }

mariadb_client() { mariadb --protocol=tcp -h 127.0.0.1 -P "$MYSQL_PORT" -uroot "$@"; }

mariadb_check() { mariadb_client -Nse 'select 1' rivus | grep -qx 1; }

mariadb_version() { /usr/sbin/mariadbd --version | awk '{print $3}'; }

mariadb_address() { echo "mysql://root@127.0.0.1:$MYSQL_PORT/rivus"; }

mariadb_tls_address() {
  echo "mysql://$MYSQL_TLS_USER:$MYSQL_TLS_PASSWORD@127.0.0.1:$MYSQL_PORT/rivus?ssl-mode=VERIFY_IDENTITY&ssl-ca=$(tls_dir)/ca.crt"
}

mariadb_log() { echo "$(svc_dir mariadb)/log"; }

mariadb_start() {
  local d; d=$(svc_dir mariadb)
  tls_files
  mkdir -p "$d"
  chown mysql:mysql "$d"
  if [ ! -d "$d/data/mysql" ]; then
    rm -rf "$d/data"
    mariadb-install-db --datadir="$d/data" --user=mysql --auth-root-authentication-method=normal \
      --skip-test-db >"$d/install.log" 2>&1 || fail mariadb install-db "$d/install.log" "mariadb-install-db failed"
  fi
  nohup /usr/sbin/mariadbd --no-defaults --datadir="$d/data" --user=mysql --bind-address=127.0.0.1 \
    --port="$MYSQL_PORT" --socket="$d/mysqld.sock" --pid-file="$d/mariadbd.pid" \
    --log-error="$d/log" --innodb-flush-log-at-trx-commit=2 --max-connections=300 \
    --skip-name-resolve --ssl-ca="$(tls_dir)/ca.crt" --ssl-cert="$(tls_dir)/server.crt" \
    --ssl-key="$(tls_dir)/server.key" >/dev/null 2>&1 &
  echo $! > "$d/pid"
  local i; for i in $(seq 1 120); do
    mariadb_client -Nse 'select 1' >/dev/null 2>&1 && break
    pid_alive mariadb || fail mariadb start "$d/log" "mariadbd exited"
    sleep 0.5
  done
  mariadb_client -e "CREATE DATABASE IF NOT EXISTS rivus;
    CREATE USER IF NOT EXISTS '$MYSQL_TLS_USER'@'127.0.0.1' IDENTIFIED BY '$MYSQL_TLS_PASSWORD' REQUIRE SSL;
    GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_TLS_USER'@'127.0.0.1';" >>"$d/log" 2>&1 \
    || fail mariadb "create database" "$d/log" "could not create the rivus database and TLS user"
}
