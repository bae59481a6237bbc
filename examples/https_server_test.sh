#!/bin/sh
# Usage: https_server_test.sh HTTPS_SERVER
# The /ping service over TLS with one thread and with two, on a self-signed certificate made here for localhost:
# curl (trusting that certificate) and Python's http.client over ssl get their own sequence back over keep-alive
# and TLS 1.3 with ALPN http/1.1, and curl over HTTP/2 when its ALPN offers h2; curl without the certificate is refused; a missing key file is a clear error;
# SIGTERM shuts the server down.
set -eu
prog=$1
. "$(dirname "$0")/start_server.sh"
dir=$(mktemp -d)
trap 'cleanup; rm -rf "$dir"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null

if "$prog" 127.0.0.1:0 "$dir/cert.pem" "$dir/missing.pem" >"$dir/out" 2>&1; then
  echo "a missing key file was accepted"; exit 1
fi
grep -q "missing.pem" "$dir/out" || { echo "no clear error for a missing key:"; cat "$dir/out"; exit 1; }

check() {  # check THREADS
  start_server "$prog" 127.0.0.1:0 "$dir/cert.pem" "$dir/key.pem" "$1"
  port=${endpoint##*:}
  url="https://localhost:$port/ping"
  got=$(curl -sS --cacert "$dir/cert.pem" --resolve "localhost:$port:127.0.0.1" -H 'Content-Type: application/json' \
    --data '{"sequence": 42}' -w ' %{http_version}' "$url")
  [ "$got" = '{"sequence":42} 2' ] || { echo "threads $1: /ping answered '$got'"; exit 1; }
  got=$(curl -sS --http1.1 --cacert "$dir/cert.pem" --resolve "localhost:$port:127.0.0.1" \
    -H 'Content-Type: application/json' --data '{"sequence": 43}' -w ' %{http_version}' "$url")
  [ "$got" = '{"sequence":43} 1.1' ] || { echo "threads $1: /ping over HTTP/1.1 answered '$got'"; exit 1; }
  code=$(curl -sS --cacert "$dir/cert.pem" --resolve "localhost:$port:127.0.0.1" -o /dev/null -w '%{http_code}' \
    -H 'Content-Type: application/json' --data '{"sequence": x}' "$url")
  [ "$code" = 400 ] || { echo "threads $1: bad JSON answered $code"; exit 1; }
  if curl -sS --resolve "localhost:$port:127.0.0.1" "$url" >/dev/null 2>&1; then
    echo "threads $1: curl accepted a certificate it was not given"; exit 1
  fi
  python3 - "$port" "$dir/cert.pem" <<'PY'
import http.client, json, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
ctx.set_alpn_protocols(["http/1.1"])
c = http.client.HTTPSConnection("localhost", int(sys.argv[1]), context=ctx, timeout=10)
for n in range(200):
    c.request("POST", "/ping", body=json.dumps({"sequence": n}), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and json.loads(r.read()) == {"sequence": n}, n
assert c.sock.version() == "TLSv1.3", c.sock.version()
assert c.sock.selected_alpn_protocol() == "http/1.1", c.sock.selected_alpn_protocol()
PY
  kill -TERM "$server_pid"
  wait "$server_pid" || { echo "threads $1: the server did not exit cleanly on SIGTERM"; exit 1; }
  server_pid=
}

check 1
check 2
echo "https_server: answers over TLS, refusals and shutdown as expected with 1 and 2 threads"
