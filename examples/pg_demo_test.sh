#!/bin/sh
# Usage: pg_demo_test.sh PG_DEMO
# Starts a PostgreSQL cluster of its own (Debian's postgresql: initdb in a temporary directory, as the postgres user
# when run as root, since initdb refuses root; a Unix socket in that directory, no TCP), runs pg_demo against it,
# checks each step's line, and stops and removes the cluster.
set -eu
prog=$1

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "pg_demo_test: no PostgreSQL server under /usr/lib/postgresql (postgresql)" >&2; exit 1; }
dir=$(mktemp -d /tmp/tern-pg-demo-XXXXXX)
as_server=""
if [ "$(id -u)" -eq 0 ]; then
  chown postgres:postgres "$dir"
  as_server="setpriv --reuid=postgres --regid=postgres --clear-groups"
fi
out=$(mktemp)
cleanup() {
  $as_server "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir" "$out"
}
trap cleanup EXIT

(cd "$dir" && $as_server "$bin/initdb" -D "$dir/data" -U tern --auth=trust --no-sync -E UTF8 --locale=C >/dev/null)
$as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-c listen_addresses='' -k $dir -c fsync=off" start >/dev/null

"$prog" "host=$dir user=tern dbname=postgres" >"$out"
for line in "table pg_demo_items created" "inserted 10000 rows in one pipelined batch" "copied 10000 rows" \
            "streamed 20000 rows, every one checked" "notification on pg_demo: hello from pid" "done"; do
  if ! grep -q "^$line" "$out"; then
    echo "pg_demo: no line '$line' in:" >&2
    cat "$out" >&2
    exit 1
  fi
done
echo "pg_demo: pipelined inserts, COPY, a stream and a notification, every step checked"
