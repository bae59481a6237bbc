#!/bin/sh
# Usage: udp_echo_test.sh UDP_ECHO
# Starts the server on a free loopback port, then clients with small, large and empty-ish datagrams, and checks
# that the server stops on SIGTERM.
set -eu
prog=$1
log=$(mktemp)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup EXIT

"$prog" server 127.0.0.1:0 >"$log" 2>&1 &
server_pid=$!
endpoint=
for _ in $(seq 100); do
  endpoint=$(sed -n 's/^listening on \([^ ]*\).*/\1/p' "$log")
  [ -n "$endpoint" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$endpoint" ] || { echo "the server did not start:"; cat "$log"; exit 1; }

"$prog" client "$endpoint" 2000 64
"$prog" client "$endpoint" 200 60000
"$prog" client "$endpoint" 100 1
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=
echo "udp_echo: every echo verified; the server stopped on SIGTERM"
