# Sourced by the scripts that write a generated part of a page in docs/ (update-benchmark-doc.sh, reliability.sh,
# fuzz.sh). A generated part lies between two marker lines, each on the page exactly once; what lies outside them is
# written by hand and kept as it is.

# doc_block_valid PAGE BEGIN END: true when PAGE holds the line BEGIN exactly once and the line END exactly once.
doc_block_valid() {
  [[ -f $1 && $(grep -cxF -- "$2" "$1") == 1 && $(grep -cxF -- "$3" "$1") == 1 ]]
}

# doc_block_replace PAGE BEGIN END FILE: what lies between the markers becomes FILE's lines (the markers stay). The
# page is written whole at the end, so a failure leaves it as it was.
doc_block_replace() {
  local page
  page=$(mktemp)
  awk -v begin="$2" -v end="$3" -v block="$4" '
    $0 == begin { print; while ((getline line < block) > 0) print line; skipping = 1; next }
    $0 == end { skipping = 0 }
    !skipping { print }
  ' "$1" >"$page" && cp "$page" "$1"
  local status=$?
  rm -f "$page"
  return $status
}

# doc_block_lines PAGE BEGIN END: prints the lines between the markers (nothing when the page has no such part).
doc_block_lines() {
  [[ -f $1 ]] || return 0
  awk -v begin="$2" -v end="$3" '$0 == end { inside = 0 } inside { print } $0 == begin { inside = 1 }' "$1"
}
