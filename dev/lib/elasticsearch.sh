# Elasticsearch 7.17, a single embedded node run from its jars on Maven Central (a small Java
# launcher loads the Netty HTTP transport), serving HTTP on 127.0.0.1:9200.

ES_PORT=${RIVUS_ES_PORT:-9200}
ES_DEV=$REPO_ROOT/dev/elasticsearch

elasticsearch_install() {
  java_install
  ES_JARS=$(resolve_jars elasticsearch "$ES_DEV/pom.xml")
  ES_LAUNCHER=$(compile_class es-launcher "$ES_JARS" "$ES_DEV/EsNode.java")
}

elasticsearch_check() {
  curl -sf "http://127.0.0.1:$ES_PORT/_cluster/health?wait_for_status=yellow&timeout=1s" | grep -q '"status":"\(green\|yellow\)"'
}

elasticsearch_version() { ls "$ES_JARS" | sed -n 's/^elasticsearch-\([0-9.]*\)\.jar$/\1/p'; }

elasticsearch_address() { echo "http://127.0.0.1:$ES_PORT"; }

elasticsearch_log() { echo "$(svc_dir elasticsearch)/stdout.log"; }

elasticsearch_start() {
  local d; d=$(svc_dir elasticsearch)
  mkdir -p "$d/data" "$d/logs" "$d/config"
  cp "$ES_DEV/log4j2.properties" "$d/config/log4j2.properties"
  nohup "$JAVA_BIN" -Xms512m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$d/config/log4j2.properties" -Dlog4j2.disable.jmx=true \
    -Des.networkaddress.cache.ttl=60 -Dio.netty.noUnsafe=true -Dio.netty.recycler.maxCapacityPerThread=0 \
    -cp "$ES_JARS/*:$ES_LAUNCHER" EsNode "$d" "$ES_PORT" "$((ES_PORT + 100))" >"$d/stdout.log" 2>&1 &
  echo $! > "$d/pid"
}
