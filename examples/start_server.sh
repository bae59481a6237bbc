# Sourced by the examples' smoke tests: start_server PROGRAM ARGS... runs a server in the background, waits for its
# "listening on HOST:PORT" line, and sets server_pid and endpoint; the server is killed when the script exits.
log=$(mktemp)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup EXIT

start_server() {
  # Emptied here, not only by the redirection below: that one is made by the background child, which may not have
  # run yet when the loop first reads the log, and a second server's start would then find the first one's port.
  : >"$log"
  "$@" >"$log" 2>&1 &
  server_pid=$!
  endpoint=
  for _ in $(seq 100); do
    endpoint=$(sed -n 's/^listening on \([^ ]*\).*/\1/p' "$log")
    [ -n "$endpoint" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$endpoint" ]; then
    echo "the server did not start:"; cat "$log"; exit 1
  fi
}
