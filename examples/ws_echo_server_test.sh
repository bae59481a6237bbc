#!/bin/sh
# Usage: ws_echo_server_test.sh WS_ECHO_SERVER
# Python's websockets client against ws_echo_server, plain and with --tls (a certificate made here): text, binary,
# fragmented and 1 MiB messages come back equal, with and without permessage-deflate; a ping is answered; SIGTERM
# ends the server with status 0.
set -eu
prog=$1
dir=$(mktemp -d)
. "$(dirname "$0")/start_server.sh"
cleanup_dir() { cleanup; rm -rf "$dir"; }
trap cleanup_dir EXIT

cat > "$dir/client.py" <<'PY'
import asyncio, os, ssl, sys, websockets
async def main(uri, cafile):
    ctx = None
    if cafile:
        ctx = ssl.create_default_context(cafile=cafile)
    for comp in (None, "deflate"):
        async with websockets.connect(uri, ssl=ctx, compression=comp, max_size=None) as ws:
            await ws.send("hello")
            assert await ws.recv() == "hello"
            data = os.urandom(1 << 20)
            await ws.send(data)
            assert await ws.recv() == data
            await ws.send(iter([b"frag", b"mented"]))
            assert await ws.recv() == b"fragmented"
            await asyncio.wait_for(await ws.ping(b"?"), 5)
            print("ok", comp, [e.name for e in ws.extensions])
asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
PY

start_server "$prog" 127.0.0.1:0
/usr/bin/python3 "$dir/client.py" "ws://$endpoint/echo" > "$dir/out"
grep -q "^ok None \[\]$" "$dir/out" || { echo "ws_echo_server: plain echo"; cat "$dir/out"; exit 1; }
grep -q "^ok deflate \['permessage-deflate'\]$" "$dir/out" || { echo "ws_echo_server: deflate"; cat "$dir/out"; exit 1; }
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=
[ "$status" -eq 0 ] || { echo "ws_echo_server: exit status $status after SIGTERM"; cat "$log"; exit 1; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
start_server "$prog" 127.0.0.1:0 --tls "$dir/cert.pem" "$dir/key.pem"
/usr/bin/python3 "$dir/client.py" "wss://localhost:${endpoint##*:}/echo" "$dir/cert.pem" > "$dir/out"
[ "$(grep -c '^ok ' "$dir/out")" -eq 2 ] || { echo "ws_echo_server --tls"; cat "$dir/out"; cat "$log"; exit 1; }
echo "ws_echo_server: plain and TLS echoes, deflate, ping and SIGTERM as expected"
