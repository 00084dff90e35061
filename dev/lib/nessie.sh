# An Iceberg REST catalog: Project Nessie 0.99.0 from Maven Central (its ready-to-run Quarkus
# jar, `org.projectnessie.nessie:nessie-quarkus:0.99.0:jar:runner`), serving the Iceberg REST
# API under /iceberg on 127.0.0.1:19120, its tables' metadata on the dev S3 store (bucket
# $S3_BUCKET, under nessie/), path-style, with the store's keys. The version store is in memory
# (empty at each start). Its management port (health) is bound to 127.0.0.1:19121, never to
# every interface. It needs Java 21 or newer: the Temurin JDK in /usr/lib/jvm (or
# $RIVUS_JAVA21_HOME).

NESSIE_PORT=${RIVUS_NESSIE_PORT:-19120}
NESSIE_MGMT_PORT=${RIVUS_NESSIE_MGMT_PORT:-19121}
NESSIE_VERSION=0.99.0

nessie_install() {
  java_install
  NESSIE_JAVA=$(java21_home nessie)/bin/java || exit 1
  NESSIE_HOME="$CACHE_DIR/nessie-$NESSIE_VERSION"
  NESSIE_JAR="$NESSIE_HOME/nessie-quarkus-$NESSIE_VERSION-runner.jar"
  if [ ! -f "$NESSIE_HOME/.complete" ]; then
    say "nessie: fetching Nessie $NESSIE_VERSION from Maven Central (first run only)"
    rm -rf "$NESSIE_HOME"; mkdir -p "$NESSIE_HOME"
    mvn -q -B -Dmaven.repo.local="$CACHE_DIR/m2" dependency:copy \
      -Dartifact="org.projectnessie.nessie:nessie-quarkus:$NESSIE_VERSION:jar:runner" \
      -DoutputDirectory="$NESSIE_HOME" >"$CACHE_DIR/nessie-mvn.log" 2>&1 \
      || fail nessie "fetching Nessie" "$CACHE_DIR/nessie-mvn.log" "mvn dependency:copy failed"
    # The copy in the local repository is not needed again.
    rm -rf "$CACHE_DIR/m2/org/projectnessie/nessie/nessie-quarkus"
    touch "$NESSIE_HOME/.complete"
  fi
}

nessie_check() { curl -sf "http://127.0.0.1:$NESSIE_MGMT_PORT/q/health/ready" >/dev/null; }

nessie_version() { echo "$NESSIE_VERSION"; }

nessie_address() { echo "http://127.0.0.1:$NESSIE_PORT/iceberg"; }

nessie_log() { echo "$(svc_dir nessie)/stdout.log"; }

nessie_start() {
  local d; d=$(svc_dir nessie)
  mkdir -p "$d"
  # `exec`: the recorded pid is Java's own, so `down` stops Nessie itself.
  (cd "$d" && exec nohup "$NESSIE_JAVA" -Xms64m -Xmx512m -XX:+UseSerialGC \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$NESSIE_PORT" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$NESSIE_MGMT_PORT" \
    -Dquarkus.log.level=WARN -Dquarkus.banner.enabled=false \
    -Dquarkus.otel.sdk.disabled=true \
    -Dnessie.version.store.type=IN_MEMORY \
    -Dnessie.server.authentication.enabled=false \
    -Dnessie.catalog.default-warehouse=warehouse \
    -Dnessie.catalog.warehouses.warehouse.location="s3://$S3_BUCKET/nessie/" \
    -Dnessie.catalog.service.s3.default-options.region=us-east-1 \
    -Dnessie.catalog.service.s3.default-options.path-style-access=true \
    -Dnessie.catalog.service.s3.default-options.endpoint="$(s3_address)/" \
    -Dnessie.catalog.service.s3.default-options.access-key=urn:nessie-secret:quarkus:rivus.secrets.s3 \
    -Drivus.secrets.s3.name="$S3_ACCESS_KEY" \
    -Drivus.secrets.s3.secret="$S3_SECRET_KEY" \
    -jar "$NESSIE_JAR" >"$d/stdout.log" 2>&1) &
  echo $! > "$d/pid"
}
