#!/bin/sh
# Usage: services_test.sh SERVICES
# Starts the service graph on a free port with a 10 ms tick, checks that GET /status counts events and that the
# count grows, sends SIGTERM, and checks that the services started in dependency order and stopped in reverse.
set -eu
prog=$1
. "$(dirname "$0")/start_server.sh"

start_server "$prog" 127.0.0.1:0 10

seen() {  # the events_seen of /status
  curl -sS "http://$endpoint/status" | sed -n 's/.*"events_seen":\([0-9]*\).*/\1/p'
}
first=$(seen)
[ -n "$first" ] || { echo "/status did not answer with a count"; cat "$log"; exit 1; }
# The producer ticks every 10 ms: within 5 s the count must have grown.
grown=
for _ in $(seq 50); do
  now=$(seen)
  if [ "$now" -gt "$first" ]; then grown=yes; break; fi
  sleep 0.1
done
[ -n "$grown" ] || { echo "the event count stayed at $first"; exit 1; }
code=$(curl -sS -o /dev/null -w '%{http_code}' "http://$endpoint/other")
[ "$code" = 404 ] || { echo "/other answered $code"; exit 1; }

kill -TERM "$server_pid"
wait "$server_pid" || { echo "the program did not exit cleanly on SIGTERM:"; cat "$log"; exit 1; }
server_pid=

line() {  # the line number of an exact line of the log (empty if absent)
  grep -n -x "$1" "$log" | head -n 1 | cut -d: -f1
}
before() {  # before FIRST SECOND: both lines present, FIRST earlier
  a=$(line "$1"); b=$(line "$2")
  if [ -z "$a" ] || [ -z "$b" ] || [ "$a" -ge "$b" ]; then
    echo "expected '$1' before '$2' in:"; cat "$log"; exit 1
  fi
}
before "started config" "started producer"
before "started config" "started consumer"
before "started consumer" "started http"
before "stopped http" "stopped consumer"
before "stopped consumer" "stopped config"
before "stopped producer" "stopped config"
echo "services: /status counts events; started in dependency order, stopped in reverse"
