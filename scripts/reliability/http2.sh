# The HTTP/2 checks of the reliability suite (sourced by scripts/reliability.sh; docs/reliability.md, "HTTP/2", says
# what they do and why), against examples/http_ping_server, which answers h2c with prior knowledge on its HTTP port:
# shutdown/h2 (SIGTERM to the server under many streams on a few connections from a verifying client on Python's h2,
# tests/reliability/h2_shutdown_client.py) and loss/h2 (h2load with many streams through packet loss between two
# network namespaces). They use the HTTP part's helpers (start_http_server, $http_server, http_exit_deadline_s).

if [[ $mode == quick ]]; then
  h2_shutdown_conns=4; h2_shutdown_streams=16
  h2_loss_conns=4; h2_loss_streams=32; h2_loss_requests=4000
else
  h2_shutdown_conns=16; h2_shutdown_streams=100
  h2_loss_conns=16; h2_loss_streams=100; h2_loss_requests=100000
fi
h2_loss=0.01

# Debian's interpreter, where python3-h2 is installed (a python3 earlier on PATH may not have it).
h2_python=/usr/bin/python3
h2_why_not=""
if ! "$h2_python" -c 'import h2' 2>/dev/null; then h2_why_not="no python3-h2 for $h2_python (scripts/setup-deps.sh installs it)"; fi

# ---- shutdown/h2 -----------------------------------------------------------------------------------------------------
h2_shutdown_check() {  # h2_shutdown_check BACKEND
  local backend=$1 log="$logs/shutdown_h2.$backend.server.log" clog="$logs/shutdown_h2.$backend.client.log" start
  local cpid status=0 sstatus=0 r t0 exit_s why=""
  local load="$h2_shutdown_conns h2c conns x $h2_shutdown_streams streams, SIGTERM"
  local verified="every answer 200 with its own sequence; GOAWAY, then every stream up to its last-stream-id"
  verified+=" answered (accepted ones finished after it), none reset; exit 0 within ${http_exit_deadline_s} s"
  start=$(now)
  if [[ -n $h2_why_not$http_why_not ]]; then
    record shutdown/h2 "$backend" "$load" "$start" "skipped: ${h2_why_not:-$http_why_not}" "-"
    return 0
  fi
  if ! start_http_server "$backend" "$log"; then
    record shutdown/h2 "$backend" "$load" "$start" "FAILED: the server did not start: $(tail -n 1 "$log")" "$verified"
    return 0
  fi
  : >"$clog"
  timeout -k 5 "$proc_timeout" "$h2_python" "$repo/tests/reliability/h2_shutdown_client.py" "$http_ep" \
    --conns "$h2_shutdown_conns" --streams "$h2_shutdown_streams" >"$clog" 2>&1 &
  cpid=$!
  pids+=("$cpid")
  while kill -0 "$cpid" 2>/dev/null && ! grep -q '^running' "$clog"; do sleep 0.05; done
  sleep 0.5  # full traffic: every connection has its streams in flight, the odd ones waiting for their bodies
  t0=$(now)
  kill -TERM "$http_prog" 2>/dev/null || true
  wait "$http_pid" || sstatus=$?
  exit_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  wait "$cpid" || status=$?
  r=$(result_of "$clog" "$status")
  if [[ $r != ok* || $status != 0 ]]; then
    why="client: ${r#fail }"
  elif [[ $sstatus != 0 ]]; then
    why="the server exited with status $sstatus after SIGTERM"
  elif awk -v s="$exit_s" -v d="$http_exit_deadline_s" 'BEGIN { exit !(s > d) }'; then
    why="the server took $exit_s s to exit after SIGTERM (deadline $http_exit_deadline_s s)"
  fi
  record shutdown/h2 "$backend" "$load" "$start" "$([[ -z $why ]] && echo passed || echo "FAILED: $why")" "$verified"
  figure shutdown/h2 "$backend" "server exited $sstatus ${exit_s} s after SIGTERM; client: ${r#ok }"
}

http2_part() {
  local backend
  for backend in "${backends[@]}"; do
    [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
    selected shutdown/h2 && h2_shutdown_check "$backend"
  done
  return 0
}
parts+=(http2_part)
