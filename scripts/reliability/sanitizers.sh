# Part of scripts/reliability.sh (sourced by it, see there): the sanitizer pass. Checks already run above are run
# again with their programs built under AddressSanitizer + UndefinedBehaviorSanitizer (preset asan, build/asan) and
# under ThreadSanitizer (preset tsan, build/tsan), with smaller loads; their rows are named "asan:loss/stream",
# "tsan:many/echo", ... ('--only asan:*' runs one pass alone). The loads are those of --quick.
#
#   --sanitizers      run the pass (what --full does)
#   --no-sanitizers   do not run it in --full
#
# Not in --quick by default: the two sanitizer builds of tern, tern::http, the tool and the examples take several
# minutes each from scratch on 2 CPUs (docs/reliability.md, "Sanitizer pass", has the figures).
#
# How another part takes part: append the name of its check function to sanitizer_checks (called with a backend;
# "name:ROW-GLOB" when the function does not test `selected` itself, so that --only can skip it), and the name of
# each variable holding a program of build/release it runs to sanitizer_vars (the pass builds the target of that
# name in build/asan and build/tsan and points the variable there while the function runs). A function or variable
# that is not defined when the pass runs is left out.
part_option sanitizers_flag sanitizers ""
part_option no_sanitizers_flag no-sanitizers ""
if [[ -n $no_sanitizers_flag ]]; then
  sanitizer_pass=0
elif [[ -n $sanitizers_flag || $mode == full ]]; then
  sanitizer_pass=1
else
  sanitizer_pass=0
fi
sanitizer_builds=(asan tsan)
sanitizer_checks+=(loss_check many_check:many/echo http_shutdown_check:shutdown/http echo_shutdown_check:shutdown/echo)
sanitizer_vars+=(tool echo_server http_server)
parts+=(sanitizer_part)

# A report of any sanitizer, as the runtimes print it (halt_on_error stops the program after the first one).
sanitizer_report_re='ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:|SUMMARY: [A-Za-z]*Sanitizer'

# Turns the rows recorded since index FROM into failures when a log under DIR holds a sanitizer report: a program
# that reported but still printed "RESULT ok" (a leak found at exit, a race that did not change a byte) must not
# pass.
sanitizer_verdict() {  # sanitizer_verdict FROM DIR SAN FUNCTION BACKEND
  local from=$1 dir=$2 san=$3 fn=$4 backend=$5 hit file line i c b l d r v
  hit=$(grep -rlE "$sanitizer_report_re" "$dir" 2>/dev/null | head -n 1 || true)
  [[ -n $hit ]] || return 0
  line=$(grep -m1 -E "$sanitizer_report_re" "$hit" | cut -c1-200)
  file=${hit#"$repo"/}
  if ((${#rows[@]} == from)); then
    record "$san:$fn" "$backend" "-" "$(now)" "FAILED: $san report in $file: $line" "no sanitizer report"
    return 0
  fi
  for ((i = from; i < ${#rows[@]}; i++)); do
    IFS='|' read -r c b l d r v <<<"${rows[i]}"
    if [[ $r == passed ]]; then
      r="FAILED: $san report in $file: $line"
      passes=$((passes - 1))
      failures=$((failures + 1))
    elif [[ $r == FAILED:* ]]; then
      r="$r; $san report in $file: $line"
    else
      continue
    fi
    rows[i]="$c|$b|$l|$d|$r|$v"
    printf '%-28s %-9s %-40s %9s  %s\n' "$c" "$b" "(sanitizer report)" "" "$r"
  done
}

sanitizer_part() {
  if ((!sanitizer_pass)); then
    local san
    for san in "${sanitizer_builds[@]}"; do
      selected "$san:*" || continue
      record "$san:*" "-" "the quick loss, many-connection and shutdown checks" "$(now)" \
        "skipped: not in --quick (--sanitizers or --full runs the pass)" "-"
    done
    return 0
  fi
  local san var entry fn glob backend from build_log start targets=() saved=() base_logs=$logs
  local saved_loads=("$loss_stream_bytes" "$loss_exchanges" "$loss_conns" "$many_conns" "$hold_ms" "$proc_timeout")
  for var in "${sanitizer_vars[@]}"; do
    [[ -n ${!var:-} ]] && targets+=("$(basename "${!var}")")
  done
  for san in "${sanitizer_builds[@]}"; do
    [[ $only == '*' || $only == "$san:"* ]] || continue
    mkdir -p "$base_logs/$san"
    build_log="$base_logs/$san/build.log"
    start=$(now)
    if ! { cmake --preset "$san" && cmake --build --preset "$san" -j2 --target "${targets[@]}"; } >"$build_log" 2>&1; then
      record "$san:build" "-" "${targets[*]}" "$start" "FAILED: the $san build failed: $(tail -n 1 "$build_log")" "-"
      continue
    fi
    figure "$san:build" "-" "built ${targets[*]} in $(elapsed "$start") (an incremental build when build/$san existed)"
    # The programs of this build in place of the release ones, with the loads of --quick (those of reliability.sh's
    # loads section, also in --full): what is looked for, a bad access or a race, needs the paths, not the volume,
    # and ASan (about 2x) and TSan (5-15x) run them in seconds here.
    saved=()
    for var in "${sanitizer_vars[@]}"; do
      saved+=("${!var:-}")
      [[ -n ${!var:-} ]] && printf -v "$var" '%s' "${!var/\/build\/release\//\/build\/$san\/}"
    done
    loss_stream_bytes=$((64 << 20)); loss_exchanges=2000; loss_conns=16
    many_conns=2000; hold_ms=3000
    proc_timeout=600
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:exitcode=66"
    row_prefix="$san:"
    sanitized=$san
    for backend in "${backends[@]}"; do
      [[ " ${backends_available[*]} " == *" $backend "* ]] || continue
      for entry in "${sanitizer_checks[@]}"; do
        fn=${entry%%:*}
        glob=${entry#"$fn"}
        glob=${glob#:}
        declare -F "$fn" >/dev/null || continue
        if [[ -n $glob ]] && ! selected "$glob"; then continue; fi
        logs="$base_logs/$san/$fn.$backend"
        rm -rf "$logs"
        mkdir -p "$logs"
        from=${#rows[@]}
        "$fn" "$backend"
        row_prefix=""
        sanitizer_verdict "$from" "$logs" "$san" "$fn" "$backend"
        row_prefix="$san:"
      done
    done
    row_prefix=""
    sanitized=""
    logs=$base_logs
    unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS
    local k=0
    for var in "${sanitizer_vars[@]}"; do
      printf -v "$var" '%s' "${saved[k]}"
      k=$((k + 1))
    done
    read -r loss_stream_bytes loss_exchanges loss_conns many_conns hold_ms proc_timeout <<<"${saved_loads[*]}"
  done
}
