#!/usr/bin/env bash
# Compare two folders written by identity_check.sh: stores byte-identical
# (timing and checksum aside), samples identical.  Exit 1 on any difference.
set -uo pipefail
a=$1 b=$2 status=0
here=$(dirname "$0")
for s in "$a"/*.cfgm; do
  tag=$(basename "$s" .cfgm)
  printf '%-18s store: ' "$tag"
  python3 "$here/store_compare.py" "$s" "$b/$tag.cfgm" || status=1
  printf '%-18s samples: ' "$tag"
  if diff -r "$a/$tag.samples" "$b/$tag.samples" >/dev/null; then echo identical; else echo DIFFER; status=1; fi
done
paste "$a/times.txt" "$b/times.txt"
exit $status
