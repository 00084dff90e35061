# Shared helpers for dev/services: paths, logging, pid files, waiting for health.
# Sourced, not run.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Data, logs and pid files of the running services.
SERVICES_DIR=${RIVUS_SERVICES_DIR:-$REPO_ROOT/target/services}
# Downloads kept across clones and runs (Maven repository, resolved jars, compiled probes).
CACHE_DIR=${RIVUS_CACHE_DIR:-/var/cache/rivus}
# Seconds to wait for a service to answer after starting it.
START_TIMEOUT=${RIVUS_START_TIMEOUT:-180}

say() { printf '%s\n' "$*" >&2; }
die() { say "dev/services: $*"; exit 1; }

# fail SERVICE STEP LOGFILE MESSAGE: report a failure with the log's tail, then exit.
fail() {
  local svc=$1 step=$2 log=$3; shift 3
  say "dev/services: $svc: $step failed: $*"
  if [ -n "$log" ] && [ -f "$log" ]; then
    say "  log: $log (last lines below)"
    tail -n 25 "$log" | sed 's/^/  | /' >&2
  fi
  exit 1
}

svc_dir() { echo "$SERVICES_DIR/$1"; }
pid_file() { echo "$SERVICES_DIR/$1/pid"; }

# pid_alive SERVICE: true when the recorded pid is a live process.
pid_alive() {
  local f; f=$(pid_file "$1")
  [ -f "$f" ] || return 1
  local pid; pid=$(cat "$f" 2>/dev/null)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# clear_stale SERVICE: forget a pid file whose process is gone (after a kill or reboot).
clear_stale() {
  local f; f=$(pid_file "$1")
  if [ -f "$f" ] && ! pid_alive "$1"; then
    say "$1: removing stale pid file (process $(cat "$f") is gone)"
    rm -f "$f"
  fi
}

# wait_for SERVICE LOGFILE CHECK-FUNCTION: poll CHECK until it succeeds or time runs out.
wait_for() {
  local svc=$1 log=$2 check=$3 waited=0
  until "$check" >/dev/null 2>&1; do
    if ! pid_alive "$svc"; then
      fail "$svc" "start" "$log" "the process exited"
    fi
    if [ "$waited" -ge "$START_TIMEOUT" ]; then
      fail "$svc" "health check" "$log" "no answer after ${START_TIMEOUT}s"
    fi
    sleep 1
    waited=$((waited + 1))
  done
}

# stop_pid SERVICE: stop the process recorded for SERVICE (TERM, then KILL after 30 s).
stop_pid() {
  local svc=$1 f pid i
  f=$(pid_file "$svc")
  [ -f "$f" ] || { say "$svc: not started by dev/services"; return 0; }
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "$svc: still running after 30s, killing $pid"
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$f"
  say "$svc: stopped"
}

# apt_install PACKAGE...: install missing Debian packages without starting their services.
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]} (Debian packages)"
  # Packages must not start system-wide copies of the servers: dev/services runs its own.
  local policy=/usr/sbin/policy-rc.d created=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && created=1
  fi
  if [ ! -f "$CACHE_DIR/.apt-updated" ] || [ -n "$(find "$CACHE_DIR/.apt-updated" -mmin +720 2>/dev/null)" ]; then
    apt-get update -q >"$CACHE_DIR/apt-update.log" 2>&1 || { [ $created = 1 ] && rm -f "$policy"; fail apt "apt-get update" "$CACHE_DIR/apt-update.log" "see log"; }
    touch "$CACHE_DIR/.apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >"$CACHE_DIR/apt-install.log" 2>&1
  local rc=$?
  [ $created = 1 ] && rm -f "$policy"
  [ $rc -eq 0 ] || fail apt "apt-get install ${missing[*]}" "$CACHE_DIR/apt-install.log" "exit $rc"
}

# run_as USER CMD...: run a command as an unprivileged user (servers that refuse root).
run_as() {
  local user=$1; shift
  if [ "$(id -u)" = 0 ]; then runuser -u "$user" -- "$@"; else "$@"; fi
}
