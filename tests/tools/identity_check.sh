#!/usr/bin/env bash
# Compile a fixed set of grammars with two tokenizers using the cfgmask binary
# BIN, and record stores, sampled walks and compile times under OUT.  Run it
# with the binaries of two trees and compare the folders with
# tests/tools/identity_compare.sh: a refactoring of the engine must leave
# every store byte-identical (timing fields and checksum aside) and every
# sample identical.
#   usage: identity_check.sh BIN OUT
# Needs CFGMASK_TOK_LLAMA_SPM, CFGMASK_TOK_QWEN2 and CFGMASK_LARK_GRAMMARS
# (source .cache/env.sh).
set -euo pipefail
bin=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
grammars=("$root/grammar/lark/json.lark" "$root/grammar/lark/sql.lark"
          "$CFGMASK_LARK_GRAMMARS/python.lark" "$CFGMASK_LARK_GRAMMARS/lark.lark")
names=(json sql lark-python lark)
toks=("$CFGMASK_TOK_LLAMA_SPM" "$CFGMASK_TOK_QWEN2")
toknames=(llama qwen2)
for i in "${!grammars[@]}"; do
  for j in "${!toks[@]}"; do
    tag=${names[$i]}-${toknames[$j]}
    start=()
    [ "${names[$i]}" = lark-python ] && start=(--start file_input)
    /usr/bin/time -f "$tag %e s %M KB" -a -o "$out/times.txt" \
      "$bin" compile "${grammars[$i]}" --tokenizer "${toks[$j]}" "${start[@]}" --quiet \
      -o "$out/$tag.cfgm"
    "$bin" sample "$out/$tag.cfgm" -n 20 --seed 11 --max-tokens 200 -o "$out/$tag.samples" >/dev/null
  done
done
