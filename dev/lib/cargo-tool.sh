# cargo_tool NAME VERSION BINARY [cargo install arguments…]: installs crate NAME at VERSION from
# the crate registry into $CACHE_DIR/tools/NAME-VERSION once (unoptimised: a tool that waits
# on tests or renders a few pages gains little from optimisation and builds three times
# faster), and prints the path of BINARY. Sourced after common.sh, not run.
cargo_tool() {
  local name=$1 version=$2 binary=$3; shift 3
  local root="$CACHE_DIR/tools/$name-$version"
  local bin="$root/bin/$binary"
  if [ ! -x "$bin" ]; then
    say "$name: building $name $version from the crate registry (first run only)"
    # A target directory of its own: the workspace's shared one keeps debug builds.
    CARGO_TARGET_DIR="$CACHE_DIR/tools/build-$name" cargo install --locked --quiet --debug \
      --version "$version" --root "$root" "$@" "$name" >"$CACHE_DIR/$name-install.log" 2>&1 \
      || fail "$name" "install" "$CACHE_DIR/$name-install.log" "cargo install $name failed"
    rm -rf "$CACHE_DIR/tools/build-$name"
  fi
  echo "$bin"
}
