# A schema registry: Apicurio Registry 3.3.3 from Maven Central (its ready-to-run Quarkus
# build, `io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all`), serving Confluent's REST API
# under /apis/ccompat/v7 on 127.0.0.1:8085. It needs Java 21 or newer: the Temurin JDK in
# /usr/lib/jvm (or $RIVUS_JAVA21_HOME). Storage is in memory (empty at each start); the
# default compatibility is set to BACKWARD, as Confluent's registry has it. Its management
# port (health) is bound to 127.0.0.1:9085, never to every interface.

REGISTRY_PORT=${RIVUS_REGISTRY_PORT:-8085}
REGISTRY_MGMT_PORT=${RIVUS_REGISTRY_MGMT_PORT:-9085}
REGISTRY_VERSION=3.3.3

schema-registry_install() {
  java_install
  REGISTRY_JAVA=$(java21_home schema-registry)/bin/java || exit 1
  REGISTRY_HOME="$CACHE_DIR/apicurio-registry-$REGISTRY_VERSION"
  if [ ! -f "$REGISTRY_HOME/.complete" ]; then
    say "schema-registry: fetching Apicurio Registry $REGISTRY_VERSION from Maven Central (first run only)"
    rm -rf "$REGISTRY_HOME"; mkdir -p "$REGISTRY_HOME"
    mvn -q -B -Dmaven.repo.local="$CACHE_DIR/m2" dependency:copy \
      -Dartifact="io.apicurio:apicurio-registry-app:$REGISTRY_VERSION:tar.gz:all" \
      -DoutputDirectory="$REGISTRY_HOME" >"$CACHE_DIR/registry-mvn.log" 2>&1 \
      || fail schema-registry "fetching the registry" "$CACHE_DIR/registry-mvn.log" "mvn dependency:copy failed"
    tar xzf "$REGISTRY_HOME"/apicurio-registry-app-*.tar.gz -C "$REGISTRY_HOME" \
      || fail schema-registry "unpacking the registry" "" "tar failed"
    rm -f "$REGISTRY_HOME"/apicurio-registry-app-*.tar.gz
    touch "$REGISTRY_HOME/.complete"
  fi
}

schema-registry_check() { curl -sf "http://127.0.0.1:$REGISTRY_MGMT_PORT/health/ready" >/dev/null; }

schema-registry_version() { echo "$REGISTRY_VERSION"; }

schema-registry_address() { echo "http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"; }

schema-registry_log() { echo "$(svc_dir schema-registry)/stdout.log"; }

schema-registry_start() {
  local d; d=$(svc_dir schema-registry)
  mkdir -p "$d"
  # `exec`: the recorded pid is Java's own, so `down` stops the registry itself.
  (cd "$REGISTRY_HOME" && exec nohup "$REGISTRY_JAVA" -Xms64m -Xmx512m -XX:+UseSerialGC \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$REGISTRY_PORT" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$REGISTRY_MGMT_PORT" \
    -Dquarkus.log.level=WARN -Dquarkus.banner.enabled=false \
    -jar quarkus-run.jar >"$d/stdout.log" 2>&1) &
  echo $! > "$d/pid"
}

# BACKWARD by default, as Confluent's registry: an incompatible version is refused.
schema-registry_ready() {
  curl -sf -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
    --data '{"compatibility":"BACKWARD"}' "$(schema-registry_address)/config" >/dev/null \
    || die "schema-registry: setting the default compatibility failed"
}
