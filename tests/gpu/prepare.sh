#!/usr/bin/env bash
# Gathers the GPU kit: everything a bare CUDA machine needs to build cfgmask
# and run tests/gpu/run.sh, in one ignored folder (.gpukit/ by default) that
# travels beside the working tree.  Run on a Debian 12 x86-64 machine with
# network access to Debian's and PyPI's registries (the project's own build
# machine: ./setup.sh must have run, for the tokenizer files in .cache/).
#
# What the GPU machine is assumed to have (docs/gpu.md): x86-64 Linux, one
# NVIDIA GPU with its driver, nvcc, CMake >= 3.20, ninja or make, a C++20
# host compiler, Python 3.12 with torch (CUDA), transformers, numpy,
# pybind11 and pytest.  What it may lack, and this kit carries:
#   debs/     Debian 12 packages, unpacked by run.sh under .gpukit/prefix:
#             bison, flex, Boost headers, oneTBB, GoogleTest, nlohmann-json
#   wheels/   wheels for CPython 3.12, manylinux x86-64: lark (the oracle),
#             gguf, and xgrammar with the dependencies the image lacks
#             (its token-bitmask kernel is the peer of the masking bench)
#   data/     tokenizer files: Qwen2's 151,936-token GGUF, LLaMA's 32,000-token
#             SentencePiece GGUF (cuda_batch_test) and Gemma 4's 262,144-token
#             GGUF, the vocabulary files of llama.cpp that ./setup.sh extracts
#
# vLLM is not carried: its wheel and its pinned dependencies are far past the
# carry limit (docs/gpu.md).
#
# Usage: tests/gpu/prepare.sh [--kit DIR] [--limit-mib N]
# Prints the kit's manifest and size; exits 1 if it is over the limit
# (default 56 MiB, leaving room for the working tree under a 64 MiB carry).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KIT="$ROOT/.gpukit"
LIMIT_MIB=56
while [ $# -gt 0 ]; do
  case "$1" in
    --kit) KIT="$2"; shift 2 ;;
    --limit-mib) LIMIT_MIB="$2"; shift 2 ;;
    *) echo "usage: $0 [--kit DIR] [--limit-mib N]" >&2; exit 2 ;;
  esac
done
log() { printf '[gpu-kit] %s\n' "$*" >&2; }

# Pinned so that a kit made on another day builds the same way.
DEBS="bison flex libfl2 libfl-dev libboost1.74-dev libtbb-dev libtbb12 libtbbmalloc2
      libtbbbind-2-5 libgtest-dev libgmock-dev googletest nlohmann-json3-dev"
WHEELS="lark==1.3.1 gguf==0.19.0 xgrammar==0.2.8 apache-tvm-ffi==0.1.15.post2
        pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5"

mkdir -p "$KIT/debs" "$KIT/wheels" "$KIT/data"

log "Debian packages -> $KIT/debs"
(
  cd "$KIT/debs"
  # apt-get download needs the package lists; refresh them only when missing.
  # shellcheck disable=SC2086
  if ! apt-get download -q $DEBS >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    apt-get download -q $DEBS >/dev/null
  fi
)

log "wheels for CPython 3.12 manylinux x86-64 -> $KIT/wheels"
PY="${CFGMASK_PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$KIT/wheels" $WHEELS

log "tokenizer files -> $KIT/data"
TOKS="$ROOT/.cache/tokenizers"
for f in qwen2.gguf llama-spm.gguf gemma4.gguf; do
  if [ ! -f "$TOKS/$f" ]; then
    echo "prepare.sh: $TOKS/$f is missing: run ./setup.sh first" >&2
    exit 1
  fi
  cp "$TOKS/$f" "$KIT/data/$f"
done
rm -f "$KIT/data/qwen2-256k.tokenizer.json"  # an older kit's stand-in for Gemma 4's vocabulary

# One version of each wheel: two would stop the install there.
dups="$(ls "$KIT/wheels" | sed 's/-[0-9].*//' | sort | uniq -d)"
if [ -n "$dups" ]; then
  echo "prepare.sh: more than one version of: $dups (remove the old ones from $KIT/wheels)" >&2
  exit 1
fi

{
  echo "# cfgmask GPU kit, made $(date -u '+%Y-%m-%d %H:%M UTC') from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  (cd "$KIT" && find debs wheels data -type f -printf '%s\t%p\n' | sort -k2 |
     awk -F'\t' '{printf "%9.2f MiB  %s\n", $1 / 1048576, $2}')
} > "$KIT/MANIFEST.txt"
kit_bytes="$(du -sb "$KIT/debs" "$KIT/wheels" "$KIT/data" "$KIT/MANIFEST.txt" | awk '{s += $1} END {print s}')"
tree_bytes="$(git -C "$ROOT" ls-files -z --cached --others --exclude-standard | (cd "$ROOT" && xargs -0 du -cb 2>/dev/null) | awk 'END {print $1}')"
kit_mib="$(awk -v b="$kit_bytes" 'BEGIN {printf "%.1f", b / 1048576}')"
tree_mib="$(awk -v b="$tree_bytes" 'BEGIN {printf "%.1f", b / 1048576}')"
cat "$KIT/MANIFEST.txt" >&2
log "kit $kit_mib MiB (limit $LIMIT_MIB MiB) + working tree $tree_mib MiB"
echo "kit_mib=$kit_mib tree_mib=$tree_mib" >> "$KIT/MANIFEST.txt"
if awk -v k="$kit_bytes" -v l="$LIMIT_MIB" 'BEGIN {exit !(k > l * 1048576)}'; then
  echo "prepare.sh: the kit is $kit_mib MiB, over the $LIMIT_MIB MiB limit" >&2
  exit 1
fi
