#!/bin/sh
# Usage: echo_smoke_test.sh ECHO_SERVER ECHO_CLIENT
# Starts the server on a free loopback port, runs clients one after another and four at once, and checks that the
# server is still serving after a client that disconnects mid-message.
set -eu

server=$1
client=$2
log=$(mktemp)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup EXIT

"$server" 127.0.0.1:0 >"$log" 2>&1 &
server_pid=$!

endpoint=
for _ in $(seq 100); do
  endpoint=$(sed -n 's/^listening on \([^ ]*\).*/\1/p' "$log")
  [ -n "$endpoint" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$endpoint" ]; then
  echo "the server did not start:"; cat "$log"; exit 1
fi
echo "server: $(head -n 1 "$log")"

"$client" "$endpoint" 2000 1
"$client" "$endpoint" 200 65536
"$client" "$endpoint" 3 16000000   # larger than the socket buffers

pids=
for size in 16 512 4096 100000; do
  "$client" "$endpoint" 300 "$size" &
  pids="$pids $!"
done
for pid in $pids; do wait "$pid"; done

# A peer killed in the middle of its stream must not take the server down.
"$client" "$endpoint" 100000000 4096 &
sleep 0.3
kill "$!" 2>/dev/null || true
wait "$!" 2>/dev/null || true

"$client" "$endpoint" 100 64
kill -0 "$server_pid"
echo "server log:"; cat "$log"
