# Java services run from jars resolved from Maven Central into the cache directory.

JAVA_BIN=${JAVA_HOME:+$JAVA_HOME/bin/}java
JAVAC_BIN=${JAVA_HOME:+$JAVA_HOME/bin/}javac

java_install() {
  command -v "$JAVA_BIN" >/dev/null && command -v "$JAVAC_BIN" >/dev/null && command -v mvn >/dev/null \
    || apt_install openjdk-17-jdk-headless maven
}

# java21_home NAME: a JDK of Java 21 or newer (the Temurin JDK in /usr/lib/jvm, or
# $RIVUS_JAVA21_HOME), for services that need one; dies naming NAME when there is none.
java21_home() {
  local j
  for j in "${RIVUS_JAVA21_HOME:-}" /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/temurin-21-jdk-amd64; do
    [ -n "$j" ] && [ -x "$j/bin/java" ] && [ -x "$j/bin/javac" ] && { echo "$j"; return 0; }
  done
  die "$1: needs Java 21+ (a Temurin JDK in /usr/lib/jvm, or set RIVUS_JAVA21_HOME)"
}

# resolve_jars NAME POM: copy POM's runtime dependencies into the cache (once per POM content);
# prints the directory holding the jars.
resolve_jars() {
  local name=$1 pom=$2 key dir
  key=$(sha256sum "$pom" | cut -c1-12)
  dir="$CACHE_DIR/$name-lib-$key"
  if [ ! -f "$dir/.complete" ]; then
    say "$name: resolving jars from Maven Central (first run only)"
    rm -rf "$dir"
    mkdir -p "$dir"
    mvn -q -B -f "$pom" -Dmaven.repo.local="$CACHE_DIR/m2" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$dir" >"$CACHE_DIR/$name-mvn.log" 2>&1 \
      || fail "$name" "resolving jars" "$CACHE_DIR/$name-mvn.log" "mvn dependency:copy-dependencies failed"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# compile_class NAME JARDIR SOURCE [JAVAC]: compile SOURCE against the jars (once per
# content) with JAVAC (default: the JDK 17 one); prints the directory holding the class.
compile_class() {
  local name=$1 jars=$2 src=$3 javac=${4:-$JAVAC_BIN} key dir
  key=$( (sha256sum "$src"; echo "$jars") | sha256sum | cut -c1-12)
  dir="$CACHE_DIR/$name-classes-$key"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"; mkdir -p "$dir"
    "$javac" -cp "$jars/*" -d "$dir" "$src" >"$CACHE_DIR/$name-javac.log" 2>&1 \
      || fail "$name" "compiling $(basename "$src")" "$CACHE_DIR/$name-javac.log" "javac failed"
    touch "$dir/.complete"
  fi
  echo "$dir"
}
