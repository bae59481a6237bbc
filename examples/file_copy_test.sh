#!/bin/sh
# Copies a 13 MB + 123 byte file of random bytes with file_copy, plainly and with --direct, small and large blocks,
# and compares each copy with the original.
set -eu
copy="$1"
dir=$(mktemp -d /tmp/tern-file-copy.XXXXXX)
trap 'rm -rf "$dir"' EXIT
head -c 13631611 /dev/urandom > "$dir/source"
"$copy" "$dir/source" "$dir/plain" 2>/dev/null
cmp "$dir/source" "$dir/plain"
"$copy" "$dir/source" "$dir/direct" --direct --block 65536 --in-flight 16 2>/dev/null
cmp "$dir/source" "$dir/direct"
if "$copy" "$dir/missing" "$dir/out" 2>/dev/null; then
  echo "copying a missing file succeeded" >&2
  exit 1
fi
echo "file_copy: copies equal the source"
