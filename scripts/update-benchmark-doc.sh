#!/usr/bin/env bash
# Regenerates the report part of docs/benchmarks.md from a tern-bench run.
#
# docs/benchmarks.md has two parts: the method, written by hand, and the report, between the lines
# "<!-- report:begin -->" and "<!-- report:end -->", which this script replaces with the run's report.md (headings
# moved one level down, chart links pointing at docs/benchmarks/). The charts of the run replace the PNGs in
# docs/benchmarks/. No figure in the report part is ever written by hand.
#
# usage: scripts/update-benchmark-doc.sh [--instructions] [--from DIR | --bench PATH] [--out DIR] [--doc PAGE]
#                                       [--allow-failures] [-- ARGS...]
#
#   (default)         build the release preset and run the quick profile through scripts/bench.sh
#   --bench PATH      run this tern-bench executable instead (no build)
#   --from DIR        run nothing: take DIR/report.md and DIR/plots/*.png from an earlier --report DIR run
#   --out DIR         where the run writes its report (default: build/benchmark-doc)
#   --doc PAGE        the page to update instead of docs/benchmarks.md (its charts go to PAGE without .md), e.g.
#                     docs/benchmarks-full.md for a full-profile run
#   --allow-failures  update the page even when some points failed (the report lists them)
#   --instructions    the instruction counts instead: run tern-bench --instructions (about 10 minutes) and replace
#                     the part between "<!-- instructions:begin -->" and "<!-- instructions:end -->" (default
#                     --out build/instructions-doc); the charts are left alone
#   -- ARGS...        tern-bench arguments instead of "--profile quick", e.g. to try the script on a subset:
#                     -- --scenario 'timers/*' --duration 0.2 --repeat 1
#
# Run it on a quiet machine: the report records the load average before and after the run.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/doc-block.sh
source "$repo/scripts/lib/doc-block.sh"
doc_arg=""
begin_marker='<!-- report:begin -->'
end_marker='<!-- report:end -->'

from=""
bench=""
out="build/benchmark-doc"  # relative to the repository, so that the report's command line shows no local path
allow_failures=0
instructions=0
bench_args=(--profile quick)

die() {
  echo "update-benchmark-doc: $*" >&2
  exit 1
}

while (($#)); do
  case "$1" in
    --from) from=${2:?--from needs a directory}; shift 2 ;;
    --bench) bench=${2:?--bench needs a path}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --doc) doc_arg=${2:?--doc needs a page}; shift 2 ;;
    --allow-failures) allow_failures=1; shift ;;
    --) shift; bench_args=("$@"); break ;;
    --instructions)
      instructions=1
      begin_marker='<!-- instructions:begin -->'
      end_marker='<!-- instructions:end -->'
      [[ "$out" == build/benchmark-doc ]] && out="build/instructions-doc"
      [[ "${bench_args[*]}" == "--profile quick" ]] && bench_args=(--instructions)
      shift ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n "$from" && -n "$bench" ]] && die "--from and --bench exclude each other"
# Paths given on the command line are relative to where the script was started; everything below runs from the
# repository root.
[[ -n "$from" ]] && from=$(realpath -m -- "$from")
[[ -n "$bench" ]] && bench=$(realpath -m -- "$bench")
[[ "$out" == build/benchmark-doc || "$out" == build/instructions-doc ]] || out=$(realpath -m -- "$out")
if [[ -n "$doc_arg" ]]; then
  doc=$(realpath -m -- "$doc_arg")
  [[ "$doc" == "$repo"/docs/*.md ]] || die "--doc must name a .md page in $repo/docs"
else
  doc="$repo/docs/benchmarks.md"
fi
images="${doc%.md}"       # the page's charts: docs/benchmarks/ for docs/benchmarks.md
image_link=$(basename "$images")
cd "$repo"

[[ -f "$doc" ]] || die "$doc is missing"
doc_block_valid "$doc" "$begin_marker" "$end_marker" ||
  die "$doc must hold exactly one '$begin_marker' line and one '$end_marker' line"

if [[ -z "$from" ]]; then
  for a in "${bench_args[@]}"; do
    [[ "$a" == --report* || "$a" == --list ]] && die "'$a' is set by this script; pass --out DIR instead"
  done
  mkdir -p "$out"
  rm -f "$out/report.md" "$out/results.jsonl"
  status=0
  if [[ -n "$bench" ]]; then
    "$bench" "${bench_args[@]}" --report "$out" || status=$?
  else
    bash "$repo/scripts/bench.sh" "${bench_args[@]}" --report "$out" || status=$?
  fi
  [[ -f "$out/report.md" ]] || die "the run wrote no $out/report.md (exit status $status)"
  if ((status != 0 && !allow_failures)); then
    die "the run ended with status $status (failed points are listed in $out/report.md); ${doc#"$repo"/} is unchanged. Fix them, or pass --allow-failures to publish the report as it is"
  fi
  from="$out"
fi

report="$from/report.md"
[[ -f "$report" ]] || die "$report is missing"
[[ $(head -n 1 "$report") == "# tern-bench report" ]] || die "$report is not a tern-bench report"
if ((!allow_failures)) && grep -qx '## Failed points' "$report"; then
  die "$report lists failed points; ${doc#"$repo"/} is unchanged (pass --allow-failures to publish it anyway)"
fi

# The report part: the report without its title, every heading one level down (two for the instruction counts,
# which sit inside a section of their own), chart links into docs/benchmarks/.
block=$(mktemp)
trap 'rm -f "$block"' EXIT
shift_heading='s/^#/##/'
((instructions)) && shift_heading='s/^#/###/'
{
  echo
  if ((instructions)); then
    echo '_Generated by `scripts/update-benchmark-doc.sh --instructions` from a `tern-bench --instructions` run; do not edit by hand._'
  else
    echo '_Generated by `scripts/update-benchmark-doc.sh` from a tern-bench run; do not edit by hand._'
  fi
  # Paths on the run's command line lose their directories: they name places on the machine that ran it.
  tail -n +2 "$report" | sed -E -e "$shift_heading" -e "s#\]\(plots/#](${image_link}/#g" \
    -e 's#(--json|--report) /[^ `]*/#\1 #g'
  echo
} >"$block"

doc_block_replace "$doc" "$begin_marker" "$end_marker" "$block" || die "could not write $doc"

if ((instructions)); then
  echo "update-benchmark-doc: ${doc#"$repo"/} updated (instruction counts) from $report"
  exit 0
fi

mkdir -p "$images"
rm -f "$images"/*.png
shopt -s nullglob
charts=("$from"/plots/*.png)
((${#charts[@]})) && cp "${charts[@]}" "$images/"

# Every chart the page links must exist.
missing=0
while read -r png; do
  [[ -f "$repo/docs/$png" ]] || { echo "update-benchmark-doc: the page links $png, which is missing" >&2; missing=1; }
done < <(grep -o "](${image_link}/[^)]*\\.png)" "$doc" | sed -e 's/^](//' -e 's/)$//')
((missing == 0)) || exit 1

echo "update-benchmark-doc: ${doc#"$repo"/} updated from $report, charts in ${images#"$repo"/}/: ${#charts[@]}"
