# The HTTP/2 checks of the reliability suite (sourced by scripts/reliability.sh; docs/reliability.md, "HTTP/2", says
# what they do and why), against examples/http_ping_server, which answers h2c with prior knowledge on its HTTP port:
# shutdown/h2 (SIGTERM to the server under many streams on a few connections from a verifying client on Python's h2,
# tests/reliability/h2_shutdown_client.py) and loss/h2 (h2load with many streams through packet loss between two
# network namespaces). They use the HTTP part's helpers (start_http_server, $http_server, http_exit_deadline_s).

if [[ $mode == quick ]]; then
  h2_shutdown_conns=4; h2_shutdown_streams=16
  h2_loss_conns=4; h2_loss_streams=32; h2_loss_requests=20000
else
  h2_shutdown_conns=16; h2_shutdown_streams=100
  h2_loss_conns=16; h2_loss_streams=100; h2_loss_requests=500000
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

# ---- loss/h2 ---------------------------------------------------------------------------------------------------------
# h2load reads no bodies it could check: the row asks that every request succeed with a 2xx and that the server end
# as it started (its descriptors back once h2load has closed, a clean exit on SIGTERM); the bodies are checked by the
# rows above.
h2_loss_check() {  # h2_loss_check BACKEND
  local backend=$1 log="$logs/loss_h2.$backend.server.log" hlog="$logs/loss_h2.$backend.h2load.log" start
  local pct status=0 why="" fd0 ep line codes total succeeded arrived dropped
  pct="$(awk -v p="$h2_loss" 'BEGIN { print p * 100 }')%"
  local load="h2load -c $h2_loss_conns -m $h2_loss_streams, $h2_loss_requests POSTs, $pct loss each way"
  local verified="every request succeeded with a 2xx (h2load's succeeded = requests); server fds back to the start,"
  verified+=" exit 0 on SIGTERM"
  start=$(now)
  if ((!netns_ok)); then
    record loss/h2 "$backend" "$load" "$start" "skipped: needs root and netns ($netns_why)" "-"
    return 0
  fi
  if [[ -n $http_why_not ]] || ! command -v h2load >/dev/null; then
    record loss/h2 "$backend" "$load" "$start" "skipped: ${http_why_not:-no h2load (nghttp2-client)}" "-"
    return 0
  fi
  set_loss "$h2_loss"
  TERN_BACKEND=$backend ip netns exec "$ns_server" timeout -k 5 "$proc_timeout" "$http_server" "$subnet.1:0" 2 \
    >"$log" 2>&1 &
  http_pid=$!
  pids+=("$http_pid")
  if ! ep=$(wait_listening "$log" "$http_pid") || ! http_prog=$(pgrep -P "$http_pid" | head -n 1); then
    record loss/h2 "$backend" "$load" "$start" "FAILED: the server did not start: $(tail -n 1 "$log")" "$verified"
    set_loss 0
    return 0
  fi
  sleep 0.2
  fd0=$(fd_count "$http_prog")
  printf '{"sequence": 1}' >"$out/h2_ping_body.json"
  ip netns exec "$ns_client" timeout -k 5 "$proc_timeout" h2load -c "$h2_loss_conns" -m "$h2_loss_streams" \
    -n "$h2_loss_requests" -d "$out/h2_ping_body.json" -H 'content-type: application/json' "http://$ep/ping" \
    >"$hlog" 2>&1 || status=$?
  read -r arrived dropped <<<"$(packet_counts)"
  line=$(grep -m1 '^requests: ' "$hlog" || true)
  codes=$(grep -m1 '^status codes: ' "$hlog" || true)
  total=$(sed -n 's/^requests: \([0-9]*\) total.*/\1/p' <<<"$line")
  succeeded=$(sed -n 's/.* \([0-9]*\) succeeded.*/\1/p' <<<"$line")
  if [[ $status != 0 || -z $line ]]; then
    why="h2load exited with status $status; last lines: $(tail -n 2 "$hlog" | tr '\n' ' ')"
  elif [[ $total != "$h2_loss_requests" || $succeeded != "$h2_loss_requests" ]]; then
    why="h2load: ${line#requests: }"
  elif [[ $codes != "status codes: $h2_loss_requests 2xx, "* ]]; then
    why="h2load: $codes"
  elif ((dropped == 0)); then
    why="no packet was dropped: the loss rules did not work"
  elif ! wait_fds "$http_prog" "$fd0"; then
    why="the server holds $(fd_count "$http_prog") descriptors 15 s after h2load closed, $fd0 at the start"
  fi
  stop_http_server
  set_loss 0
  if [[ -z $why && $http_status != 0 ]]; then why="http_ping_server exited with status $http_status after SIGTERM"; fi
  record loss/h2 "$backend" "$load" "$start" "$([[ -z $why ]] && echo passed || echo "FAILED: $why")" "$verified"
  local share
  share=$(awk -v a="$arrived" -v d="$dropped" 'BEGIN { printf "%.2f", a ? 100 * d / a : 0 }')
  figure loss/h2 "$backend" "${line#requests: }; $(grep -m1 '^finished in' "$hlog"); $arrived packets reached the\
 veth pair, $dropped dropped ($share%); server fds back to $fd0, exit $http_status"
}

http2_part() {
  local backend
  for backend in "${backends[@]}"; do
    [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
    selected shutdown/h2 && h2_shutdown_check "$backend"
    selected loss/h2 && h2_loss_check "$backend"
  done
  return 0
}
parts+=(http2_part)
