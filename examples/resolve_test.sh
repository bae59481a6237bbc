#!/bin/sh
# Usage: resolve_test.sh RESOLVE
# Compares resolve's addresses with getent's for names of /etc/hosts and numeric hosts, checks the service's port,
# and checks that a name no server can answer fails with the resolver's message and exit status 2.
set -eu
prog=$1

addresses() { awk '{ print $1 }' | sort -u; }

for name in localhost 127.0.0.1 ::1 192.0.2.33; do
  ours=$("$prog" "$name" | addresses)
  theirs=$(getent ahosts "$name" | addresses)
  if [ "$ours" != "$theirs" ]; then
    echo "resolve $name: got '$ours', getent says '$theirs'" >&2
    exit 1
  fi
done

line=$("$prog" 127.0.0.1 http | head -n 1)
case "$line" in
  "127.0.0.1 port 80 "*STREAM*) ;;
  *) echo "resolve 127.0.0.1 http: unexpected line '$line'" >&2; exit 1 ;;
esac

v4=$("$prog" localhost -4 | addresses)
[ "$v4" = "127.0.0.1" ] || { echo "resolve localhost -4: got '$v4'" >&2; exit 1; }

# Port 9 on loopback has no DNS server: the query is refused, and resolve says so.
status=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$prog" no-such-host.invalid --server 127.0.0.1:9 --timeout 200 2>"$err" >/dev/null || status=$?
if [ "$status" -ne 2 ] || ! grep -q "no-such-host.invalid: " "$err"; then
  echo "resolve of an unanswerable name: status $status, stderr '$(cat "$err")'" >&2
  exit 1
fi
echo "resolve: addresses agree with getent; an unanswerable name fails clearly"
