#!/bin/sh
# Usage: ws_client_test.sh WS_CLIENT
# ws_client against Python's websockets echo server, plain and over TLS (a certificate made here, given with
# --cacert): the lines sent come back in order and the client exits 0 after the close handshake; a server that
# refuses the upgrade makes it exit 1 with the status.
set -eu
prog=$1
dir=$(mktemp -d)
. "$(dirname "$0")/start_server.sh"
cleanup_dir() { cleanup; rm -rf "$dir"; }
trap cleanup_dir EXIT

cat > "$dir/server.py" <<'PY'
import asyncio, ssl, sys, websockets
async def echo(ws, path=None):
    async for m in ws:
        await ws.send(m)
async def main():
    ctx = None
    if len(sys.argv) > 2:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    async with websockets.serve(echo, "127.0.0.1", 0, ssl=ctx, compression="deflate") as s:
        print("listening on 127.0.0.1:%d" % s.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
PY
printf 'first line\nsecond, with κόσμε\n\nlast\n' > "$dir/in"

start_server /usr/bin/python3 "$dir/server.py"
"$prog" "ws://$endpoint/" < "$dir/in" > "$dir/out"
cmp -s "$dir/in" "$dir/out" || { echo "ws_client: the echoes differ"; cat "$dir/out"; exit 1; }
cleanup

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
log=$(mktemp)
start_server /usr/bin/python3 "$dir/server.py" "$dir/cert.pem" "$dir/key.pem"
"$prog" "wss://localhost:${endpoint##*:}/" --cacert "$dir/cert.pem" < "$dir/in" > "$dir/out"
cmp -s "$dir/in" "$dir/out" || { echo "ws_client: the echoes over TLS differ"; cat "$dir/out"; exit 1; }
cleanup

# A plain HTTP server refuses the upgrade.
log=$(mktemp)
start_server /usr/bin/python3 -c '
import http.server
s = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
print("listening on 127.0.0.1:%d" % s.server_address[1], flush=True)
s.serve_forever()'
status=0
"$prog" "ws://$endpoint/nothing-here" < "$dir/in" > "$dir/out" 2> "$dir/err" || status=$?
[ "$status" -eq 1 ] || { echo "ws_client against a plain HTTP server: status $status"; exit 1; }
grep -q "status 404" "$dir/err" || { echo "ws_client: no status in '$(cat "$dir/err")'"; exit 1; }
echo "ws_client: plain and TLS echoes, and a refused upgrade, as expected"
