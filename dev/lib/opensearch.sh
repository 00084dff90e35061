# OpenSearch 2.19 (Java 17) and OpenSearch 3.x (Java 21+: the Temurin JDK), each a single
# embedded node run from its jars on Maven Central the way Elasticsearch 7.17 runs (a small
# Java launcher loads the Netty HTTP transport): services `opensearch2` on 127.0.0.1:9202 and
# `opensearch3` on 127.0.0.1:9203. No security plugin: authentication is tested through
# fronts the tests start (HTTPS with client certificates, a proxy that checks basic, bearer,
# API-key and AWS SigV4 credentials).

OS2_PORT=${RIVUS_OPENSEARCH2_PORT:-9202}
OS3_PORT=${RIVUS_OPENSEARCH3_PORT:-9203}

# opensearch_install_flavour MAJOR JAVA_HOME: resolves the jars and compiles the launcher;
# sets OS<MAJOR>_JARS, OS<MAJOR>_LAUNCHER and OS<MAJOR>_JAVA.
opensearch_install_flavour() {
  local major=$1 jhome=$2 dev="$REPO_ROOT/dev/opensearch$1" jars launcher
  jars=$(resolve_jars "opensearch$major" "$dev/pom.xml") || exit 1
  local src="$dev/OsNode.java"
  if [ ! -f "$src" ]; then
    # OpenSearch 2 kept Elasticsearch 7's embedding API under its own package: its launcher is
    # Elasticsearch's, renamed (OpenSearch 3 has a launcher of its own).
    src="$CACHE_DIR/opensearch$major-launcher-src/OsNode.java"
    mkdir -p "$(dirname "$src")"
    sed -e 's/org\.elasticsearch\./org.opensearch./g' -e 's/\bEsNode\b/OsNode/g' \
      -e 's/rivus-es/rivus-opensearch/g' -e "s/Elasticsearch 7\.17/OpenSearch $major/" \
      "$REPO_ROOT/dev/elasticsearch/EsNode.java" > "$src"
  fi
  launcher=$(compile_class "opensearch$major-launcher" "$jars" "$src" "$jhome/bin/javac") || exit 1
  printf -v "OS${major}_JARS" '%s' "$jars"
  printf -v "OS${major}_LAUNCHER" '%s' "$launcher"
  printf -v "OS${major}_JAVA" '%s' "$jhome/bin/java"
}

# opensearch_start_flavour MAJOR PORT: starts the node of OpenSearch MAJOR on PORT (transport
# on PORT + 100).
opensearch_start_flavour() {
  local major=$1 port=$2 svc="opensearch$1" d jars launcher java
  d=$(svc_dir "$svc")
  jars=OS${major}_JARS; launcher=OS${major}_LAUNCHER; java=OS${major}_JAVA
  mkdir -p "$d/data" "$d/logs" "$d/config"
  cp "$REPO_ROOT/dev/opensearch$major/log4j2.properties" "$d/config/log4j2.properties"
  nohup "${!java}" -Xms512m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$d/config/log4j2.properties" -Dlog4j2.disable.jmx=true \
    -Dio.netty.noUnsafe=true -Dio.netty.recycler.maxCapacityPerThread=0 \
    -cp "${!jars}/*:${!launcher}" OsNode "$d" "$port" "$((port + 100))" >"$d/stdout.log" 2>&1 &
  echo $! > "$d/pid"
}

opensearch_check_port() {
  curl -sf "http://127.0.0.1:$1/_cluster/health?wait_for_status=yellow&timeout=1s" | grep -q '"status":"\(green\|yellow\)"'
}

opensearch_version_of() { ls "$1" | sed -n 's/^opensearch-\([0-9.]*\)\.jar$/\1/p'; }

opensearch2_install() { java_install; opensearch_install_flavour 2 "$(dirname "$(dirname "$(readlink -f "$(command -v "$JAVA_BIN")")")")"; }
opensearch2_check() { opensearch_check_port "$OS2_PORT"; }
opensearch2_version() { opensearch_version_of "$OS2_JARS"; }
opensearch2_address() { echo "http://127.0.0.1:$OS2_PORT"; }
opensearch2_log() { echo "$(svc_dir opensearch2)/stdout.log"; }
opensearch2_start() { opensearch_start_flavour 2 "$OS2_PORT"; }

opensearch3_install() {
  java_install
  local j; j=$(java21_home opensearch3) || exit 1
  opensearch_install_flavour 3 "$j"
}
opensearch3_check() { opensearch_check_port "$OS3_PORT"; }
opensearch3_version() { opensearch_version_of "$OS3_JARS"; }
opensearch3_address() { echo "http://127.0.0.1:$OS3_PORT"; }
opensearch3_log() { echo "$(svc_dir opensearch3)/stdout.log"; }
opensearch3_start() { opensearch_start_flavour 3 "$OS3_PORT"; }
