#!/bin/sh
# Usage: http_ping_server_test.sh HTTP_PING_SERVER
# The /ping service with one thread and with two: curl's and Python's requests answered with their own sequence,
# over keep-alive, and over HTTP/2 on the same port (curl with prior knowledge and with Upgrade: h2c); malformed JSON, another content type and another path refused with their status; /metrics in
# Prometheus's format with a series per worker that counted the work; SIGTERM shuts the server down.
set -eu
prog=$1
. "$(dirname "$0")/start_server.sh"

check() {  # check THREADS
  start_server "$prog" 127.0.0.1:0 "$1"
  got=$(curl -sS -H 'Content-Type: application/json' --data '{"sequence": 42}' "http://$endpoint/ping")
  [ "$got" = '{"sequence":42}' ] || { echo "threads $1: /ping answered '$got'"; exit 1; }
  for how in --http2-prior-knowledge --http2; do
    got=$(curl -sS $how -H 'Content-Type: application/json' --data '{"sequence": 7}' -w ' %{http_version}' \
      "http://$endpoint/ping")
    [ "$got" = '{"sequence":7} 2' ] || { echo "threads $1: /ping over curl $how answered '$got'"; exit 1; }
  done
  for body in '{"sequence": -1}' '{"sequence": 1, "x": 2}' '[1]' '{"sequence": 1} x'; do
    code=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data "$body" "http://$endpoint/ping")
    [ "$code" = 400 ] || { echo "threads $1: '$body' answered $code"; exit 1; }
  done
  code=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Content-Type: text/plain' --data '{"sequence": 1}' "http://$endpoint/ping")
  [ "$code" = 415 ] || { echo "threads $1: text/plain answered $code"; exit 1; }
  code=$(curl -sS -o /dev/null -w '%{http_code}' "http://$endpoint/other")
  [ "$code" = 404 ] || { echo "threads $1: /other answered $code"; exit 1; }
  python3 - "$endpoint" <<'PY'
import http.client, json, sys
host, port = sys.argv[1].rsplit(":", 1)
c = http.client.HTTPConnection(host, int(port), timeout=10)
for n in range(200):
    c.request("POST", "/ping", body=json.dumps({"sequence": n}), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and json.loads(r.read()) == {"sequence": n}, n
PY
  metrics=$(curl -sS "http://$endpoint/metrics")
  fail_metrics() { echo "threads $1: /metrics lacks $2:"; echo "$metrics" | head -40; exit 1; }
  echo "$metrics" | grep -q '^# TYPE tern_loop_items_run_total counter$' || fail_metrics "$1" "the TYPE line"
  echo "$metrics" | grep -Eq '^tern_loop_items_run_total\{loop="0"\} [1-9][0-9]*$' || fail_metrics "$1" "items run"
  # Every request above was answered after a receive on some worker.
  echo "$metrics" | grep -Eq '^tern_ops_started_total\{loop="[0-9]",op="recv"\} [1-9][0-9]*$' ||
    fail_metrics "$1" "receives"
  last=$(($1 - 1))
  echo "$metrics" | grep -Eq "^tern_loop_turns_total\\{loop=\"$last\"\\} [0-9]+\$" || fail_metrics "$1" "worker $last"
  kill -TERM "$server_pid"
  wait "$server_pid" || { echo "threads $1: the server did not exit cleanly on SIGTERM"; exit 1; }
  server_pid=
}

check 1
check 2
echo "http_ping_server: answers, refusals and shutdown as expected with 1 and 2 threads"
