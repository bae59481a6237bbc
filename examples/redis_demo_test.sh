#!/bin/sh
# Usage: redis_demo_test.sh REDIS_DEMO
# redis_demo against a redis-server started here (a free port, a Unix socket in a temporary directory, nothing
# persisted), over TCP and over the Unix socket; each run must end with status 0 and print what it did. A port with
# no server makes it fail with status 1.
set -eu
prog=$1
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --unixsocket "$dir/redis.sock" --save '' --appendonly no \
  --dir "$dir" --logfile "$dir/redis.log" --daemonize no &
pid=$!
cleanup() { kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 200); do
  [ -S "$dir/redis.sock" ] && break
  sleep 0.02
done

for where in "127.0.0.1:$port" "$dir/redis.sock"; do
  "$prog" "$where" > "$dir/out"
  for expected in "GET demo:greeting -> hello from tern" "pipeline of 10000 INCRs: 10000" \
                  "10000 INCRs from 100 tasks: 10000" "message on demo:news: tern says hi"; do
    grep -q "$expected" "$dir/out" || { echo "redis_demo $where: no '$expected' in:"; cat "$dir/out"; exit 1; }
  done
done

kill -9 "$pid"; wait "$pid" 2>/dev/null || true
if "$prog" "127.0.0.1:$port" > "$dir/out" 2>&1; then echo "redis_demo: succeeded without a server"; exit 1; fi
grep -q "connect" "$dir/out" || { echo "redis_demo: no connect error:"; cat "$dir/out"; exit 1; }
