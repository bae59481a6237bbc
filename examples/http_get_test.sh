#!/bin/sh
# Usage: http_get_test.sh HTTP_GET
# http_get against Python's http.server serving a directory: a file's bytes come back whole, -I prints the fields
# without the body, two URLs of one host are fetched in one run, and a missing file exits with status 2. Then
# --http2 against nghttpd (nghttp2's server, which speaks only HTTP/2) serving the same directory in clear.
set -eu
prog=$1
dir=$(mktemp -d)
. "$(dirname "$0")/start_server.sh"
cleanup_dir() { cleanup; rm -rf "$dir"; }
trap cleanup_dir EXIT

head -c 200000 /dev/urandom | base64 > "$dir/data.txt"
echo "second" > "$dir/two.txt"
start_server python3 -c '
import functools, http.server, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
h.log_message = lambda *a: None
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
print("listening on 127.0.0.1:%d" % s.server_address[1], flush=True)
s.serve_forever()
' "$dir"

out=$(mktemp)
"$prog" "http://$endpoint/data.txt" > "$out"
head -n 1 "$out" | grep -q "^HTTP/1.1 200 OK" || { echo "http_get: status line '$(head -n 1 "$out")'"; exit 1; }
# The body follows the first empty line.
sed '1,/^$/d' "$out" | cmp -s - "$dir/data.txt" || { echo "http_get: the body differs from the file"; exit 1; }

"$prog" -I "http://$endpoint/data.txt" > "$out"
grep -q "^Content-Length: $(wc -c < "$dir/data.txt")" "$out" || { echo "http_get -I: no Content-Length"; cat "$out"; exit 1; }
[ "$(sed '1,/^$/d' "$out" | wc -c)" -eq 0 ] || { echo "http_get -I printed a body"; exit 1; }

"$prog" "http://$endpoint/two.txt" "http://$endpoint/two.txt" > "$out"
[ "$(grep -c '^second$' "$out")" -eq 2 ] || { echo "http_get: two URLs in one run"; cat "$out"; exit 1; }

status=0
"$prog" "http://$endpoint/missing" > "$out" 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "http_get of a missing file: status $status"; exit 1; }

# nghttpd prints no port: a free one is asked of Python, then waited for.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nghttpd --no-tls -a 127.0.0.1 -d "$dir" "$port" >/dev/null 2>&1 &
nghttpd_pid=$!
trap 'kill "$nghttpd_pid" 2>/dev/null; cleanup_dir' EXIT
for _ in $(seq 100); do
  python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null && break
  sleep 0.05
done
"$prog" --http2 "http://127.0.0.1:$port/data.txt" "http://127.0.0.1:$port/two.txt" > "$out"
head -n 1 "$out" | grep -q "^HTTP/2 200" || { echo "http_get --http2: status line '$(head -n 1 "$out")'"; exit 1; }
grep -q '^second$' "$out" || { echo "http_get --http2: the second URL"; cat "$out"; exit 1; }
"$prog" --http2 "http://127.0.0.1:$port/data.txt" | sed '1,/^$/d' | cmp -s - "$dir/data.txt" ||
  { echo "http_get --http2: the body differs from the file"; exit 1; }
if "$prog" "http://127.0.0.1:$port/data.txt" > "$out" 2>&1; then
  echo "http_get without --http2 was answered by an HTTP/2-only server"; exit 1
fi
rm -f "$out"
echo "http_get: file bytes, -I, a 404 and --http2 as expected"
