#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ (preset fuzz: clang-16, ASan + UBSan, in build/fuzz) and runs each
# for a given time on its committed corpus (tests/fuzz/corpus/<target>/, read only) plus a working corpus that
# grows from run to run (build/fuzz/corpus-<target>/), with its dictionary.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--no-build|--build-only] [--logs DIR] [--doc] [target...]
#                   [-- libFuzzer flags...]
#
#   --seconds N   fuzzing time per target (default 600)
#   --jobs J      targets run at the same time (default 1; each uses one core)
#   --no-build    run what build/fuzz holds, without configuring or building
#   --build-only  configure and build the targets, run none (scripts/test.sh builds them beside other work, then runs
#                 them beside the reliability suite)
#   --logs DIR    where the logs go (default build/fuzz/logs; scripts/reliability.sh keeps its own)
#   --doc         write the run into docs/reliability.md, section "Long fuzzing": a row per target run, the rows of
#                 the targets not run kept, so that the long run (--seconds 3600, an hour each as the reliability
#                 suite asks) can be made a few targets at a time. Also when a target crashed: its row says so.
#   target        request_parser, response_parser, chunked_decoder, http2_server, http2_client, tls_record,
#                 ws_frame, ws_handshake, resp_parser, pg_value, pg_result (default: all)
#
# Prints libFuzzer's progress (its cov:/ft: lines) and a summary per target: executions, coverage, corpus, and
# whether it crashed (or violated an invariant, or hung, or ran out of memory), and the CPU time it got (a target
# shares its CPU with whatever else runs). A crash input is written to build/fuzz/crashes-<target>/ and shown
# hex-escaped; the exit status is then 1. Full logs: build/fuzz/logs/ (or --logs DIR), with a file "run" that says
# when and for how long, and per target TARGET.log, TARGET.status (libFuzzer's exit status), TARGET.run (when it
# started) and TARGET.cpu (user and system seconds).
# Lower its priority on a shared machine: nice -n 10 scripts/fuzz.sh
set -euo pipefail

# All in one function, which bash reads whole before running any of it: bash reads a script as it runs it, and a run
# takes minutes, during which the file may change (an edit, a checkout).
main() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.."

  usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

  seconds=600
  jobs=1
  build=1
  logdir=build/fuzz/logs
  targets=()
  extra=()
  doc=0
  while (($#)); do
    case "$1" in
      --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
      --seconds=*) seconds=${1#*=}; shift ;;
      --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
      --jobs=*) jobs=${1#*=}; shift ;;
      --no-build) build=0; shift ;;
      --build-only) build=2; shift ;;
      --logs) logdir=${2:?--logs needs a directory}; shift 2 ;;
      --doc) doc=1; shift ;;
      -h | --help) usage; exit 0 ;;
      --) shift; extra=("$@"); break ;;
      -*) echo "fuzz.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
      *) targets+=("$1"); shift ;;
    esac
  done
  if ! [[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 && $jobs =~ ^[0-9]+$ && $jobs -gt 0 ]]; then
    echo "fuzz.sh: --seconds and --jobs take a positive number" >&2
    exit 2
  fi

  # The targets are the folders of the committed corpus: every target has one.
  all=()
  for dir in tests/fuzz/corpus/*/; do all+=("$(basename "$dir")"); done
  if ((${#targets[@]} == 0)); then targets=("${all[@]}"); fi
  for t in "${targets[@]}"; do
    if [[ ! -d tests/fuzz/corpus/$t ]]; then
      echo "fuzz.sh: no target '$t' (the targets: ${all[*]})" >&2
      exit 2
    fi
  done

  # --doc: the section "Long fuzzing" of docs/reliability.md, a row per target. The rows of this run are made in the
  # summary at the end (local_row); the others are kept from the page as they were. The page is checked now, not
  # after an hour of fuzzing.
  page=docs/reliability.md
  begin_marker='<!-- fuzz:begin -->'
  end_marker='<!-- fuzz:end -->'
  declare -A doc_rows=()
  if ((doc)); then
    # shellcheck source=lib/doc-block.sh
    source scripts/lib/doc-block.sh
    if ! doc_block_valid "$page" "$begin_marker" "$end_marker"; then
      echo "fuzz.sh: $page must hold exactly one '$begin_marker' line and one '$end_marker' line" >&2
      exit 2
    fi
  fi
  out=build/fuzz
  if ((build)); then
    bash scripts/setup-deps.sh
    cmake --preset fuzz
    # Only the targets to run, and the libraries they link: not the whole tree (tern::pg, tern::services), which no
    # target parses with.
    cmake --build --preset fuzz -j2 --target "${targets[@]/#/fuzz_}"
    if ((build == 2)); then return 0; fi
  fi

  export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:print_stacktrace=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

  mkdir -p "$logdir"
  # What of libFuzzer's output is shown as it runs (all of it is in the log): progress, and anything gone wrong.
  shown='INITED|pulse|DONE|ERROR|SUMMARY|invariant violated|runtime error|Test unit written|^stat::'
  shown+='|^whole input|^fed |^the |^with |^reference|^chunked_decoder:'  # the targets' own reports

  run() {
    local t=$1
    local bin="$out/tests/fuzz/fuzz_$t" work="$out/corpus-$t" crashes="$out/crashes-$t"
    local log="$logdir/$t.log"
    mkdir -p "$work" "$crashes"
    rm -f "$logdir/$t.status" "$logdir/$t.cpu"
    echo "started=$(date -u '+%Y-%m-%d %H:%M UTC') seconds=$seconds jobs=$jobs nice=$(nice)" >"$logdir/$t.run"
    if [[ ! -x $bin ]]; then
      echo "fuzz.sh: $bin is not built" >&2
      echo 127 >"$logdir/$t.status"
      return
    fi
    local flags=(-max_total_time="$seconds" -timeout=30 -print_final_stats=1 -artifact_prefix="$crashes/")
    if [[ -f tests/fuzz/$t.dict ]]; then flags+=(-dict="tests/fuzz/$t.dict"); fi
    # New inputs go to the first folder, the working corpus; the committed one is only read.
    # The CPU the target got, user and system (bash's own `time`, of the pipeline: the fuzzer and three small
    # filters): on a shared machine the wall-clock time says little about how much fuzzing was done.
    local TIMEFORMAT='%U %S' statuses
    set +e
    {
      time {
        "$bin" "${flags[@]}" "${extra[@]}" "$work" "tests/fuzz/corpus/$t" 2>&1 | tee "$log" |
          { grep --line-buffered -E "$shown" || true; } | sed -u "s/^/[$t] /"
        statuses=("${PIPESTATUS[@]}")
      }
    } 2>"$logdir/$t.cpu"
    echo "${statuses[0]}" >"$logdir/$t.status"
    set -e
  }

  echo "fuzz.sh: ${targets[*]}: ${seconds} s each, ${jobs} at a time"
  echo "started=$(date -u '+%Y-%m-%d %H:%M UTC') seconds=$seconds jobs=$jobs targets=${targets[*]}" >"$logdir/run"
  running=0
  for t in "${targets[@]}"; do
    if ((running == jobs)); then
      wait -n || true
      running=$((running - 1))
    fi
    run "$t" &
    running=$((running + 1))
  done
  wait

  local_row() {  # local_row TARGET RESULT
    local t=$1 result=$2 why input started how
    started=$(sed -n 's/^started=\(.* UTC\) .*/\1/p' "$logdir/$t.run" 2>/dev/null)
    how="$(sed -n 's/.* jobs=\([0-9]*\).*/\1/p' "$logdir/$t.run" 2>/dev/null) at a time"
    how+=", nice $(sed -n 's/.* nice=\([0-9-]*\).*/\1/p' "$logdir/$t.run" 2>/dev/null)"
    if [[ $result != ok ]]; then
      why=$(grep -m1 -E 'invariant violated|ERROR: |runtime error|deadly signal|timeout|out-of-memory' "$logdir/$t.log" |
        cut -c1-120 | tr '|' '/' || true)
      input=$(grep -oE 'Test unit written to [^ ]+' "$logdir/$t.log" | tail -n 1 | sed 's/Test unit written to //' || true)
      result="**FAILED: ${why:-exit status $(cat "$logdir/$t.status")}${input:+; reproducer $input}**"
    else
      result="no crash, sanitizer report, invariant violation, timeout or out-of-memory"
    fi
    doc_rows[$t]="| $t | $started | $how | $seconds s | $(cpu_seconds "$t") s | ${execs:-?} | \
$(final_stat average_exec_per_sec "$log") | $(status_field cov) | $(status_field ft) | $(status_field corp) | $result |"
  }
  write_doc() {
    local t line block
    # The rows already on the page, for the targets this run left alone.
    while IFS= read -r line; do
      t=$(sed -n 's/^| \([a-z0-9_]*\) | .*/\1/p' <<<"$line")
      if [[ -n $t && $t != target && -z ${doc_rows[$t]+set} && -d tests/fuzz/corpus/$t ]]; then doc_rows[$t]=$line; fi
    done < <(doc_block_lines "$page" "$begin_marker" "$end_marker")
    block=$(mktemp)
    {
      echo
      echo '_Generated by `scripts/fuzz.sh --doc`: the last such run of each target; do not edit by hand._'
      echo
      echo "| target | started | run | time | CPU | executions | exec/s | edges | features | corpus (inputs/size) | result |"
      echo "|---|---|---|---|---|---|---|---|---|---|---|"
      for t in "${all[@]}"; do
        if [[ -n ${doc_rows[$t]+set} ]]; then
          echo "${doc_rows[$t]}"
        else
          echo "| $t | - | - | - | - | - | - | - | - | - | not fuzzed with --doc yet |"
        fi
      done
      echo
    } >"$block"
    doc_block_replace "$page" "$begin_marker" "$end_marker" "$block"
    rm -f "$block"
    echo "fuzz.sh: $page updated (section \"Long fuzzing\")"
  }

  # The summary, from each log: libFuzzer's final stats and its last status line.
  final_stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }
  status_field() { sed -n "s/.* $1: \([^ ]*\).*/\1/p" <<<"$last"; }
  failed=()
  echo
  cpu_seconds() { awk '{ printf "%.0f", $1 + $2 }' "$logdir/$1.cpu" 2>/dev/null; }
  printf '%-18s %-8s %12s %8s %6s %6s %7s %14s %6s %8s\n' target result executions exec/s cpu_s cov ft corpus new rss_mb
  for t in "${targets[@]}"; do
    log="$logdir/$t.log"
    status=$(cat "$logdir/$t.status" 2>/dev/null || echo 127)
    last=$(grep -E '^#[0-9]+.* cov: ' "$log" 2>/dev/null | tail -n 1 || true)
    execs=$(final_stat number_of_executed_units "$log")
    [[ -n $execs ]] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
    result=ok
    if [[ $status != 0 ]]; then
      result=CRASH
      failed+=("$t")
    fi
    printf '%-18s %-8s %12s %8s %6s %6s %7s %14s %6s %8s\n' "$t" "$result" "${execs:-?}" \
      "$(final_stat average_exec_per_sec "$log")" "$(cpu_seconds "$t")" "$(status_field cov)" "$(status_field ft)" \
      "$(status_field corp)" "$(final_stat new_units_added "$log")" "$(final_stat peak_rss_mb "$log")"
    if ((doc)); then
      local_row "$t" "$result"
    fi
  done
  if ((doc)); then write_doc; fi

  if ((${#failed[@]} == 0)); then
    echo
    echo "fuzz.sh: no crash (working corpora: $out/corpus-<target>/)"
    exit 0
  fi

  for t in "${failed[@]}"; do
    log="$logdir/$t.log"
    echo
    echo "== $t failed (exit status $(cat "$logdir/$t.status" 2>/dev/null)); log: $log"
    grep -E 'invariant violated|ERROR:|SUMMARY:|runtime error' "$log" | head -n 5 || true
    grep -oE 'Test unit written to [^ ]+' "$log" | sed 's/Test unit written to //' | while read -r input; do
      [[ -f $input ]] || continue
      echo "input: $input ($(stat -c %s "$input") bytes)"
      python3 - "$input" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
print(repr(data[:1024]), "..." if len(data) > 1024 else "")
PY
      echo "reproduce: $out/tests/fuzz/fuzz_$t $input"
      echo "keep it:   cp $input tests/fuzz/corpus/$t/crash-<what-it-shows> (and a case in tests/http/parser_test.cpp)"
    done
  done
  echo
  echo "fuzz.sh: failed: ${failed[*]}"
  exit 1
}

main "$@"
