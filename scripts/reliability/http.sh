# The HTTP checks of the reliability suite (sourced by scripts/reliability.sh; docs/reliability.md, "HTTP", says what
# they do and why): many/http (wrk holding thousands of verified keep-alive connections to examples/http_ping_server),
# hostile/http (the http-attack subcommand against the server while wrk measures a good client's p99 beside it), and
# shutdown/http and shutdown/echo (SIGTERM to a server under verified traffic from the shutdown-client subcommand).
#
# The servers' binaries are read from $http_server and $echo_server when a check starts, so that a pass which swaps
# them (sanitizer builds) can re-run http_shutdown_check and echo_shutdown_check with its own programs.

if [[ $mode == quick ]]; then
  http_many_conns=2000; http_many_secs=4
  http_slowloris=300; http_attack_secs=5; http_good_conns=16
  http_shutdown_conns=200
else
  http_many_conns=9000; http_many_secs=20
  http_slowloris=2000; http_attack_secs=20; http_good_conns=16
  http_shutdown_conns=1000
fi
# The good client of the hostile check: 16 connections, each pausing 2 ms before each request (a few thousand
# requests a second, well below what the server can do): a saturating client's p99 is its own queue and the CPU
# share the machine gives the server, which on two shared CPUs swings several times over between runs.
http_good_pause_ms=2
# The hostile check's server: timeouts short enough for the check's seconds, a body limit small enough for a chunked
# body to pass it in a few writes. The other checks run the example with its defaults.
http_header_timeout_ms=2000
http_max_body=65536
# Seconds the servers have from SIGTERM to their exit: the examples' 2 s of grace, plus the time a loaded 2-CPU
# machine takes to run the closes and the exit.
http_exit_deadline_s=6

http_server=${http_server:-$repo/build/release/examples/http_ping_server}
if pkg-config --exists simdjson 2>/dev/null; then
  build_targets+=(http_ping_server)
  http_why_not=""
else
  http_why_not="no simdjson (libsimdjson-dev): examples/http_ping_server is not built"
fi
command -v wrk >/dev/null || http_why_not="${http_why_not:+$http_why_not; }no wrk (scripts/setup-deps.sh installs it)"

# A wrk script that sends POST /ping with a new sequence number each time and checks every answer: status 200 and
# the body {"sequence":N} for a number this thread sent and has not had answered yet (wrk's responses do not say
# which connection they came on, so the check is per thread: each answer must match exactly one request in flight).
# done() prints one VERIFY line the script reads.
write_http_lua() {  # write_http_lua FILE
  cat >"$1" <<'LUA'
local threads = {}
function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end
function init(args)
  pause_ms = tonumber(args[1] or "0")
  base = id * 100000000
  counter, pending, ok, bad, first_bad = 0, 0, 0, 0, ""
  inflight = {}
end
-- With a pause (the script's first argument), each connection waits that long before each request: a client at a
-- steady rate well below what the server can do, whose latency is then the server's, not a queue of its own.
function delay()
  return pause_ms
end
function request()
  counter = counter + 1
  local n = base + counter
  inflight[n] = true
  pending = pending + 1
  return wrk.format("POST", "/ping", { ["Content-Type"] = "application/json" }, '{"sequence": ' .. n .. '}')
end
function response(status, headers, body)
  local n = tonumber(string.match(body or "", '^{"sequence":(%d+)}$') or "")
  if status == 200 and n ~= nil and inflight[n] then
    inflight[n] = nil
    pending = pending - 1
    ok = ok + 1
  else
    bad = bad + 1
    if first_bad == "" then first_bad = status .. ":" .. string.gsub(string.sub(body or "", 1, 40), "%s", "_") end
  end
end
function done(summary, latency, requests)
  local ok, bad, pending, first_bad = 0, 0, 0, "-"
  for _, t in ipairs(threads) do
    ok = ok + t:get("ok")
    bad = bad + t:get("bad")
    pending = pending + t:get("pending")
    if first_bad == "-" and t:get("first_bad") ~= "" then first_bad = t:get("first_bad") end
  end
  local e = summary.errors
  io.write(string.format("VERIFY ok=%d bad=%d unanswered=%d responses=%d first_bad=%s\n", ok, bad, pending,
    summary.requests, first_bad))
  io.write(string.format("ERRORS connect=%d read=%d write=%d timeout=%d status=%d\n", e.connect, e.read, e.write,
    e.timeout, e.status))
  io.write(string.format("LATENCY p50_us=%d p99_us=%d max_us=%d rps=%.0f\n", latency:percentile(50),
    latency:percentile(99), latency.max, summary.requests / (summary.duration / 1e6)))
end
LUA
}

# The verdict on a wrk log: empty when every answer was verified and no socket error happened, else why not.
# CONNS: the connections (answers still in flight when wrk stopped, at most one per connection, are not errors).
wrk_verdict() {  # wrk_verdict LOG STATUS CONNS
  local log=$1 status=$2 conns=$3 v e
  v=$(grep -m1 '^VERIFY ' "$log" || true)
  e=$(grep -m1 '^ERRORS ' "$log" || true)
  if [[ $status != 0 || -z $v || -z $e ]]; then
    echo "wrk exited with status $status without its summary; last lines: $(tail -n 2 "$log" | tr '\n' ' ')"
    return
  fi
  local ok bad unanswered responses
  ok=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$v")
  bad=$(sed -n 's/.* bad=\([0-9]*\).*/\1/p' <<<"$v")
  unanswered=$(sed -n 's/.* unanswered=\([0-9]*\).*/\1/p' <<<"$v")
  responses=$(sed -n 's/.* responses=\([0-9]*\).*/\1/p' <<<"$v")
  if ((bad != 0)); then echo "wrk: $bad answers wrong (${v##*first_bad=})"; return; fi
  if ((ok == 0 || ok != responses)); then echo "wrk: $ok answers verified of $responses"; return; fi
  # At most one request per connection is in flight when wrk stops; one more per connection is allowed for the request
  # wrk may have built (and counted here) without sending it when its time ran out.
  if ((unanswered > 2 * conns)); then
    echo "wrk: $unanswered requests unanswered at the end, more than 2 per connection"
    return
  fi
  if [[ $e != "ERRORS connect=0 read=0 write=0 timeout=0 status=0" ]]; then
    echo "wrk: socket errors: ${e#ERRORS }"
    return
  fi
}
wrk_field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <(grep -m1 "^$1 " "$3"); }  # wrk_field LINE KEY LOG

# start_http_server BACKEND LOG [VAR=VALUE...]: $http_server with two workers and the environment given; sets
# http_pid (the timeout around it), http_prog (the server itself) and http_ep.
start_http_server() {
  local backend=$1 log=$2
  shift 2
  : >"$log"  # emptied before the start: wait_listening must not find an earlier run's port in it
  TERN_BACKEND=$backend timeout -k 5 "$proc_timeout" env "$@" "$http_server" 127.0.0.1:0 2 >"$log" 2>&1 &
  http_pid=$!
  pids+=("$http_pid")
  http_ep=$(wait_listening "$log" "$http_pid") || return 1
  http_prog=$(pgrep -P "$http_pid" | head -n 1)
  [[ -n $http_prog ]]
}
# SIGTERM to http_prog; sets http_status (its exit status) and http_exit_s (seconds from the signal to the exit).
stop_http_server() {
  local t0
  t0=$(now)
  kill -TERM "$http_prog" 2>/dev/null || true
  http_status=0
  wait "$http_pid" || http_status=$?
  http_exit_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
}
cpu_of() { local t; t=$(cpu_ticks_of "$1"); echo "${t:-0}"; }
cpu_ticks_of() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
ticks_per_s=$(getconf CLK_TCK)

# ---- many/http -------------------------------------------------------------------------------------------------------
http_many_check() {  # http_many_check BACKEND
  local backend=$1 log="$logs/many_http.$backend.server.log" start why="" fd0 rss0 fig="" round status wlog wpid
  local rss_after=() fd_max rss_max f r
  local load="wrk $http_many_conns conns (2 threads) ${http_many_secs} s, twice"
  local verified="every answer 200 with its own sequence; no socket error; server fds back after each round,"
  verified+=" RSS of round 2 within 5% of round 1"
  start=$(now)
  if ! start_http_server "$backend" "$log"; then
    record many/http "$backend" "$load" "$start" "FAILED: http_ping_server did not start: $(tail -n 1 "$log")" \
      "$verified"
    return 0
  fi
  sleep 0.2
  fd0=$(fd_count "$http_prog")
  rss0=$(rss_of "$http_prog")
  fig="server fds $fd0, RSS $rss0 KiB at the start"
  for round in 1 2; do
    wlog="$logs/many_http.$backend.wrk$round.log"
    status=0
    # wrk opens every connection at its start and keeps them: the samples while it runs see them all.
    timeout -k 5 $((http_many_secs + 120)) wrk -t2 -c"$http_many_conns" -d"${http_many_secs}s" --timeout 30s \
      -s "$http_lua" "http://$http_ep/ping" >"$wlog" 2>&1 &
    wpid=$!
    pids+=("$wpid")
    fd_max=0 rss_max=0
    while kill -0 "$wpid" 2>/dev/null; do
      f=$(fd_count "$http_prog")
      r=$(rss_of "$http_prog")
      ((f > fd_max)) && fd_max=$f
      ((r > rss_max)) && rss_max=$r
      sleep 0.2
    done
    wait "$wpid" || status=$?
    why=$(wrk_verdict "$wlog" "$status" "$http_many_conns")
    if [[ -n $why ]]; then why="round $round: $why"; break; fi
    if ((fd_max < fd0 + http_many_conns)); then
      why="round $round: the server held at most $((fd_max - fd0)) connections at once, $http_many_conns were asked for"
      break
    fi
    if ! wait_fds "$http_prog" "$fd0"; then
      why="round $round: the server holds $(fd_count "$http_prog") descriptors 15 s after wrk closed, $fd0 at the start"
      break
    fi
    rss_after+=("$(rss_of "$http_prog")")
    fig+="; round $round: $(wrk_field VERIFY ok "$wlog") answers verified ($(wrk_field LATENCY rps "$wlog") per s,"
    fig+=" p99 $(wrk_field LATENCY p99_us "$wlog") us), at most fds $fd_max and RSS $rss_max KiB while held,"
    fig+=" fds $fd0 and RSS ${rss_after[-1]} KiB after"
  done
  if [[ -z $why ]] && ((rss_after[1] * 100 > rss_after[0] * 105)); then
    why="server RSS grew from ${rss_after[0]} KiB after round 1 to ${rss_after[1]} KiB after round 2 (more than 5%)"
  fi
  stop_http_server
  if [[ -z $why && $http_status != 0 ]]; then why="http_ping_server exited with status $http_status after SIGTERM"; fi
  local result=passed
  [[ -n $why ]] && result="FAILED: $why"
  record many/http "$backend" "$load" "$start" "$result" "$verified"
  figure many/http "$backend" "$fig"
}

# ---- hostile/http ----------------------------------------------------------------------------------------------------
# good_wrk LOG: the good client, one wrk thread with the same settings in every phase.
good_wrk() {
  timeout -k 5 $((http_attack_secs + 60)) wrk -t1 -c"$http_good_conns" -d"${http_attack_secs}s" --timeout 10s \
    -s "$http_lua" "http://$http_ep/ping" -- "$http_good_pause_ms" >"$1" 2>&1
}
cpu_share() {  # cpu_share TICKS_BEFORE TICKS_AFTER SECONDS: percent of one CPU
  awk -v a="$1" -v b="$2" -v t="$ticks_per_s" -v d="$3" 'BEGIN { printf "%.0f%%", (d > 0 ? 100 * (b - a) / t / d : 0) }'
}

# One measurement of the hostile check; sets hostile_why (empty when it passed), hostile_fig and hostile_ratio_only
# (1 when the only failure is the good client's p99 ratio).
http_hostile_attempt() {  # http_hostile_attempt BACKEND
  local backend=$1 log="$logs/hostile_http.$backend.server.log" start why="" status=0 astatus=0 apid aprog r=""
  local tag="$logs/hostile_http.$backend" p99_b1 p99_a p99_b2 s0 s1 s2 s3 a1 a2 t1 t2 fig="" rss_before rss_after
  hostile_ratio_only=0
  if ! start_http_server "$backend" "$log" TERN_HTTP_HEADER_TIMEOUT_MS=$http_header_timeout_ms \
    TERN_HTTP_BODY_TIMEOUT_MS=2000 TERN_HTTP_IDLE_TIMEOUT_MS=5000 TERN_HTTP_WRITE_TIMEOUT_MS=2000 \
    TERN_HTTP_MAX_BODY=$http_max_body; then
    hostile_why="http_ping_server did not start: $(tail -n 1 "$log")"
    hostile_fig=$hostile_why
    return 0
  fi
  # The good client without the attack, under it, and without it again: the same wrk each time. The machine's other
  # load drifts over seconds (two CPUs, shared), so the attacked p99 is compared with the worse of the two runs that
  # surround it; both are in the report, with the CPU time the server and the attacker used in each phase, so that
  # a slower good client can be told apart from a starved one.
  s0=$(cpu_of "$http_prog")
  good_wrk "$tag.wrk-before.log" || status=$?
  why=$(wrk_verdict "$tag.wrk-before.log" "$status" "$http_good_conns")
  [[ -n $why ]] && why="without the attack (before): $why"
  s1=$(cpu_of "$http_prog")
  if [[ -z $why ]]; then
    rss_before=$(rss_of "$http_prog")
    TERN_BACKEND=$backend timeout -k 5 "$proc_timeout" "$tool" http-attack --connect "$http_ep" \
      --duration-ms $(((http_attack_secs + 2) * 1000)) --header-timeout-ms "$http_header_timeout_ms" \
      --slowloris "$http_slowloris" --max-body "$http_max_body" --write-timeout-ms 2000 >"$tag.attack.log" 2>&1 &
    apid=$!
    pids+=("$apid")
    sleep 1  # the slowloris connections open and start dripping
    aprog=$(pgrep -P "$apid" | head -n 1)
    s1=$(cpu_of "$http_prog") a1=$(cpu_of "$aprog") t1=$(now)
    status=0
    good_wrk "$tag.wrk-attacked.log" || status=$?
    s2=$(cpu_of "$http_prog") a2=$(cpu_of "$aprog") t2=$(now)
    rss_after=$(rss_of "$http_prog")
    wait "$apid" || astatus=$?
    r=$(result_of "$tag.attack.log" "$astatus")
    why=$(wrk_verdict "$tag.wrk-attacked.log" "$status" "$http_good_conns")
    [[ -n $why ]] && why="under the attack: $why"
    if [[ -z $why && ($r != ok* || $astatus != 0) ]]; then why="attacker: ${r#fail }"; fi
  fi
  if [[ -z $why ]]; then
    status=0
    good_wrk "$tag.wrk-after.log" || status=$?
    s3=$(cpu_of "$http_prog")
    why=$(wrk_verdict "$tag.wrk-after.log" "$status" "$http_good_conns")
    [[ -n $why ]] && why="without the attack (after): $why"
  fi
  if [[ -z $why ]]; then
    p99_b1=$(wrk_field LATENCY p99_us "$tag.wrk-before.log")
    p99_a=$(wrk_field LATENCY p99_us "$tag.wrk-attacked.log")
    p99_b2=$(wrk_field LATENCY p99_us "$tag.wrk-after.log")
    local worse=$((p99_b1 > p99_b2 ? p99_b1 : p99_b2))
    if ((p99_a > 2 * worse)); then
      why="the good client's p99 was $p99_a us under the attack, $p99_b1 us before it and $p99_b2 us after"
      why+=" (more than 2x)"
      hostile_ratio_only=1
    fi
    fig="good client p99 $p99_b1 us ($(wrk_field LATENCY rps "$tag.wrk-before.log") per s) before the attack,"
    fig+=" $p99_a us ($(wrk_field LATENCY rps "$tag.wrk-attacked.log") per s) under it,"
    fig+=" $p99_b2 us ($(wrk_field LATENCY rps "$tag.wrk-after.log") per s) after;"
    fig+=" server CPU $(cpu_share "$s0" "$s1" "$http_attack_secs") of a CPU before,"
    fig+=" $(cpu_share "$s1" "$s2" "$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')") under the attack"
    fig+=" (the attacker $(cpu_share "$a1" "$a2" "$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')")),"
    fig+=" $(cpu_share "$s2" "$s3" "$http_attack_secs") after; server RSS $rss_before KiB before the attack,"
    fig+=" $rss_after KiB at its end; attacker: ${r#ok }"
  fi
  stop_http_server
  if [[ $http_status != 0 ]]; then
    [[ -z $why ]] && why="http_ping_server exited with status $http_status after SIGTERM"
    hostile_ratio_only=0
  fi
  hostile_why=$why
  hostile_fig=${fig:-$why}
}

# The p99 ratio is a timing on a shared two-CPU machine: a ratio over the bound is measured once more, and the row
# reports both. Every other failure (a wrong answer, an attack not cut off, a server that does not exit) fails at once.
http_hostile_check() {  # http_hostile_check BACKEND
  local backend=$1 start first_fig
  local load="$http_slowloris slowloris + malformed + floods, wrk $http_good_conns conns ${http_attack_secs} s"
  local verified="each attack refused with its status and closed, slowloris cut by 408 at the header timeout;"
  verified+=" good client verified, its p99 within 2x"
  start=$(now)
  http_hostile_attempt "$backend"
  if [[ -n $hostile_why && $hostile_ratio_only == 1 ]]; then
    first_fig=$hostile_fig
    http_hostile_attempt "$backend"
    hostile_fig="measured twice, the first over 2x ($first_fig); second: $hostile_fig"
  fi
  local result=passed
  [[ -n $hostile_why ]] && result="FAILED: $hostile_why"
  record hostile/http "$backend" "$load" "$start" "$result" "$verified"
  figure hostile/http "$backend" "$hostile_fig"
}

# ---- shutdown/http, shutdown/echo ------------------------------------------------------------------------------------
# shutdown_under_traffic NAME BACKEND PROTO: the server is already started (server_prog, server_wrapper set); the
# shutdown-client runs C connections of verified requests, and once every one has had answers, SIGTERM goes to the
# server. Sets shut_why (empty when it passed) and shut_fig.
shutdown_under_traffic() {
  local name=$1 backend=$2 proto=$3 ep=$4 clog="$logs/${1//\//_}.$2.client.log" cpid status=0 sstatus=0 r t0 exit_s
  shut_why="" shut_fig=""
  : >"$clog"
  TERN_BACKEND=$backend timeout -k 5 "$proc_timeout" "$tool" shutdown-client --connect "$ep" --proto "$proto" \
    --conns "$http_shutdown_conns" >"$clog" 2>&1 &
  cpid=$!
  pids+=("$cpid")
  while kill -0 "$cpid" 2>/dev/null && ! grep -q '^running' "$clog"; do sleep 0.05; done
  sleep 0.5  # full traffic: every connection has a request in flight or about to be
  t0=$(now)
  kill -TERM "$server_prog" 2>/dev/null || true
  # The exit is timed from the signal; the wait itself is bounded by the timeout around the server.
  wait "$server_wrapper" || sstatus=$?
  exit_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  wait "$cpid" || status=$?
  r=$(result_of "$clog" "$status")
  if [[ $r != ok* || $status != 0 ]]; then
    shut_why="client: ${r#fail }"
  elif [[ $sstatus != 0 ]]; then
    shut_why="the server exited with status $sstatus after SIGTERM"
  elif awk -v s="$exit_s" -v d="$http_exit_deadline_s" 'BEGIN { exit !(s > d) }'; then
    shut_why="the server took $exit_s s to exit after SIGTERM (deadline $http_exit_deadline_s s)"
  fi
  shut_fig="server exited 0 ${exit_s} s after SIGTERM; client: ${r#ok }"
}

http_shutdown_check() {  # http_shutdown_check BACKEND   (the server: $http_server)
  local backend=$1 log="$logs/shutdown_http.$backend.server.log" start
  local load="$http_shutdown_conns conns of back-to-back requests, SIGTERM"
  local verified="every answer received verified; closes only between answers; exit 0 within ${http_exit_deadline_s} s"
  start=$(now)
  if ! start_http_server "$backend" "$log"; then
    record shutdown/http "$backend" "$load" "$start" "FAILED: the server did not start: $(tail -n 1 "$log")" "$verified"
    return 0
  fi
  server_prog=$http_prog server_wrapper=$http_pid
  shutdown_under_traffic shutdown/http "$backend" http "$http_ep"
  record shutdown/http "$backend" "$load" "$start" "$([[ -z $shut_why ]] && echo passed || echo "FAILED: $shut_why")" \
    "$verified"
  figure shutdown/http "$backend" "$shut_fig"
}

echo_shutdown_check() {  # echo_shutdown_check BACKEND   (the server: $echo_server)
  local backend=$1 log="$logs/shutdown_echo.$backend.server.log" start
  local load="$http_shutdown_conns conns of back-to-back 4 KiB echoes, SIGTERM"
  local verified="every echoed byte verified (a cut echo as far as it came); exit 0 within ${http_exit_deadline_s} s"
  start=$(now)
  if ! start_echo_server "$backend" "$log"; then
    record shutdown/echo "$backend" "$load" "$start" "FAILED: the server did not start: $(tail -n 1 "$log")" "$verified"
    return 0
  fi
  server_prog=$echo_prog server_wrapper=$echo_pid
  shutdown_under_traffic shutdown/echo "$backend" echo "$echo_ep"
  record shutdown/echo "$backend" "$load" "$start" "$([[ -z $shut_why ]] && echo passed || echo "FAILED: $shut_why")" \
    "$verified"
  figure shutdown/echo "$backend" "$shut_fig"
}

http_part() {
  local backend name
  http_lua="$out/http_ping.lua"
  write_http_lua "$http_lua"
  for backend in "${backends[@]}"; do
    [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
    if [[ -n $http_why_not ]]; then
      for name in many/http hostile/http shutdown/http; do
        selected "$name" && record "$name" "$backend" "-" "$(now)" "skipped: $http_why_not" "-"
      done
    else
      selected many/http && http_many_check "$backend"
      selected hostile/http && http_hostile_check "$backend"
      selected shutdown/http && http_shutdown_check "$backend"
    fi
    selected shutdown/echo && echo_shutdown_check "$backend"
  done
  return 0
}
parts+=(http_part)
