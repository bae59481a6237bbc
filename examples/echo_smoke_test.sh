#!/bin/sh
# Usage: echo_smoke_test.sh ECHO_SERVER ECHO_CLIENT
# Starts the server on a free loopback port, runs clients one after another and four at once, and checks that the
# server is still serving after a client that disconnects mid-message.
set -eu

server=$1
client=$2
. "$(dirname "$0")/start_server.sh"
start_server "$server" 127.0.0.1:0
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
