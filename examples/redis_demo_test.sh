#!/bin/sh
# Usage: redis_demo_test.sh REDIS_DEMO
# redis_demo against a redis-server started here (a free port, a Unix socket in a temporary directory, nothing
# persisted), over TCP and over the Unix socket; each run must end with status 0 and print what it did. A port with
# no server makes it fail with status 1.
set -eu
prog=$1
dir=$(mktemp -d)
# The port is drawn below the kernel's ephemeral range (no socket bound to port 0 or connecting out can take it),
# and drawn again if the server exits at once (another test took it first).
free_port() {
  python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
while True:
    p = random.randrange(10000, low)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try: s.bind(("127.0.0.1", p)); print(p); break
    except OSError: pass
    finally: s.close()'
}
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 10); do
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --unixsocket "$dir/redis.sock" --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" --daemonize no &
  pid=$!
  for _ in $(seq 250); do
    [ -S "$dir/redis.sock" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  [ -S "$dir/redis.sock" ] && break
  wait "$pid" 2>/dev/null || true
  pid=
done
[ -n "$pid" ] || { echo "redis_demo_test: redis-server did not start:"; cat "$dir/redis.log"; exit 1; }

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
