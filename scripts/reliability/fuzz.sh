# Part of scripts/reliability.sh (sourced by it, see there): fuzzing in the report. Each libFuzzer target of
# tests/fuzz (the HTTP request and response parsers, the chunked decoder, the TLS record and WebSocket frame
# parsers) is fuzzed by scripts/fuzz.sh (preset fuzz: ASan + UBSan) for a given time, and each gets a row
# "fuzz/<target>": time, executions, corpus size, and any crash with its reproducer.
#
#   --fuzz-seconds N   fuzz each target N s in this run, two at a time (default: 0 in --quick, 60 in --full)
#
# The issue asks an hour per target, five hours of CPU: that is scripts/fuzz.sh's own long run
# (`scripts/fuzz.sh --seconds 3600 --jobs 2 --doc`), not part of a reliability run; it writes its own section of
# docs/reliability.md ("Long fuzzing"), target by target, so it can be made a few targets at a time.
part_option fuzz_seconds fuzz-seconds ""
if [[ -z $fuzz_seconds ]]; then
  if [[ $mode == full ]]; then fuzz_seconds=60; else fuzz_seconds=0; fi
fi
if ! [[ $fuzz_seconds =~ ^[0-9]+$ ]]; then
  echo "reliability.sh: --fuzz-seconds takes a number of seconds" >&2
  exit 2
fi
parts+=(fuzz_part)

fuzz_verified="libFuzzer on the committed corpus and the working one, ASan + UBSan: no crash, sanitizer report, invariant violation, timeout (30 s per input) or out-of-memory"

# One row per target from a log folder of scripts/fuzz.sh (its TARGET.log and TARGET.status files).
fuzz_rows() {  # fuzz_rows DIR
  local dir=$1 t log status execs secs corpus input why start result targets=()
  if [[ -f $dir/run ]]; then
    read -r -a targets <<<"$(sed -n 's/.* targets=//p' "$dir/run")"
  else
    for log in "$dir"/*.log; do [[ -e $log ]] && targets+=("$(basename "$log" .log)"); done
  fi
  for t in "${targets[@]}"; do
    selected "fuzz/$t" || continue
    log="$dir/$t.log"
    status=$(cat "$dir/$t.status" 2>/dev/null || echo "none")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null | tail -n 1)
    [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$log" 2>/dev/null | tail -n 1 | tr -d '#')
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" 2>/dev/null | tail -n 1)
    corpus=$(grep -oE 'corp: [0-9]+/[0-9A-Za-z]+' "$log" 2>/dev/null | tail -n 1 | cut -d' ' -f2)
    start=$(awk -v n="$(now)" -v s="${secs:-0}" 'BEGIN { printf "%.3f", n - s }')
    result=passed
    if [[ $status != 0 ]]; then
      why=$(grep -m1 -E 'invariant violated|ERROR: |runtime error|deadly signal|timeout|out-of-memory' "$log" 2>/dev/null |
        cut -c1-160 || true)
      input=$(grep -oE 'Test unit written to [^ ]+' "$log" 2>/dev/null | tail -n 1 | sed 's/Test unit written to //' || true)
      result="FAILED: ${why:-exit status $status}${input:+; reproducer: ${input#"$repo"/} (scripts/fuzz.sh shows how to replay it)}"
    fi
    record "fuzz/$t" "-" "${secs:-?} s: ${execs:-?} executions, corpus ${corpus:-?} (inputs/size)" "$start" \
      "$result" "$fuzz_verified"
  done
}

fuzz_part() {
  if ((fuzz_seconds == 0)); then
    selected "fuzz/*" && record "fuzz/*" "-" "every libFuzzer target of tests/fuzz" "$(now)" \
      "skipped: not in --quick (--full fuzzes 60 s per target; --fuzz-seconds N)" "-"
    return 0
  fi
  local status=0
  selected "fuzz/*" || return 0
  rm -rf "$logs/fuzz"
  mkdir -p "$logs/fuzz"
  # Two targets at a time: each is one process on one CPU, and nothing else runs at this point of the suite.
  timeout -k 10 $((fuzz_seconds * 3 + 1800)) bash scripts/fuzz.sh --seconds "$fuzz_seconds" --jobs 2 \
    --logs "$logs/fuzz" >"$logs/fuzz.out" 2>&1 || status=$?
  if [[ ! -f $logs/fuzz/run ]]; then
    record "fuzz/build" "-" "preset fuzz" "$(now)" "FAILED: scripts/fuzz.sh did not start fuzzing (status $status): $(tail -n 1 "$logs/fuzz.out")" "-"
    return 0
  fi
  fuzz_rows "$logs/fuzz"
}
