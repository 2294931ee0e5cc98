#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz and runs each one in turn.
#
#   tests/fuzz/run_fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Default: 600 s per target, every *_fuzz.cc, one process at a time at the
# lowest priority (nice 19).  Needs clang and libFuzzer (Debian: clang,
# libclang-rt-14-dev; installed here with apt-get when missing).  Everything
# generated (build, corpora, crash artifacts, logs) lives under
# $CFGMASK_FUZZ_BUILD (default build-fuzz/), never in the source tree.
# Each run stops at the first crash, sanitizer report, leak, input slower than
# the time limit (1 s) or over 2 GB; the crashing input is left as
# $CFGMASK_FUZZ_BUILD/fuzz-artifacts/<target>-crash-*.  The summary lists
# executions per target.  Exit status: 1 if any target failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SECONDS_PER_TARGET="${1:-600}"
shift || true
BUILD="${CFGMASK_FUZZ_BUILD:-$ROOT/build-fuzz}"
# Per-input time limit (s).  Inputs slower than 1 s are written as
# slow-unit-* artifacts either way; a higher limit only keeps a machine
# shared with other jobs from stopping the run on a starved process.
TIMEOUT="${CFGMASK_FUZZ_TIMEOUT:-1}"
JOBS="${CFGMASK_JOBS:-2}"
log() { printf '[fuzz] %s\n' "$*" >&2; }

if ! command -v clang++ >/dev/null || ! dpkg -s libclang-rt-14-dev >/dev/null 2>&1; then
  log "apt-get install clang libclang-rt-14-dev"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi
[ -f "$ROOT/.cache/env.sh" ] || { echo "run ./setup.sh first (tokenizers, .venv)" >&2; exit 2; }
# shellcheck disable=SC1091
source "$ROOT/.cache/env.sh"

ALL=()
for f in "$ROOT"/tests/fuzz/*_fuzz.cc; do ALL+=("$(basename "$f" .cc)"); done
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")

# CFGMASK_FUZZ_NO_BUILD=1 runs the binaries already built.
if [ "${CFGMASK_FUZZ_NO_BUILD:-0}" != 1 ]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCFGMASK_FUZZ=ON -DCFGMASK_CUDA=OFF -DPython3_EXECUTABLE="$CFGMASK_PYTHON" >/dev/null
  nice cmake --build "$BUILD" -j"$JOBS" --target "${ALL[@]}"
fi

SEEDS="$BUILD/fuzz-seeds"
CORPUS="$BUILD/fuzz-corpus"
ARTIFACTS="$BUILD/fuzz-artifacts"
LOGS="$BUILD/fuzz-logs"
mkdir -p "$CORPUS" "$ARTIFACTS" "$LOGS"
[ -f "$SEEDS/small_tokenizer.json" ] || "$CFGMASK_PYTHON" "$ROOT/tests/fuzz/make_seeds.py" "$SEEDS"

# The runtime targets read stores compiled with the small tokenizer.
export CFGMASK_FUZZ_TOKENIZER="$SEEDS/small_tokenizer.json"
export CFGMASK_FUZZ_STORE="$SEEDS/python-small.cfgm"
# store_file_fuzz's rows mode (mode byte 2) damages the rows part of this one.
export CFGMASK_FUZZ_ROWS_STORE="$SEEDS/json-small.cfgm"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
store_seeds() {
  # A json.lark store with the small tokenizer: the whole file (mode byte 0)
  # and its bare payload (mode byte 1, the target writes the header).
  local dir="$SEEDS/store_file_fuzz" f="$SEEDS/json-small.cfgm"
  mkdir -p "$dir"
  CFGMASK_FUZZ_GRAMMAR="$ROOT/tests/data/engine/json.lark" CFGMASK_FUZZ_STORE="$f" \
    "$BUILD/tests/fuzz/session_fuzz" -runs=0 "$SEEDS/session_fuzz" >"$LOGS/json-store.log" 2>&1
  { printf '\0'; cat "$f"; } > "$dir/json-small.file"
  { printf '\1'; tail -c +57 "$f"; } > "$dir/json-small.payload"  # header: 56 bytes
  # Rows mode: one edit (offset 0, xor 1) and a token seed.
  printf '\2\0\0\0\0\1\3' > "$dir/json-small.rows"
}

status=0
summary=""
for t in "${TARGETS[@]}"; do
  bin="$BUILD/tests/fuzz/$t"
  [ "$t" = store_file_fuzz ] && [ ! -f "$SEEDS/store_file_fuzz/json-small.rows" ] && store_seeds
  dict=()
  case "$t" in
    lark_reader_fuzz) dict=(-dict="$ROOT/tests/fuzz/lark.dict") ;;
    regex_fuzz) dict=(-dict="$ROOT/tests/fuzz/regex.dict") ;;
  esac
  max_len=4096
  case "$t" in
    tokenizer_*|store_file_fuzz) max_len=65536 ;;
    lark_reader_fuzz) max_len=16384 ;;
  esac
  mkdir -p "$CORPUS/$t" "$SEEDS/$t"  # targets without seeds start from nothing
  log "$t: ${SECONDS_PER_TARGET}s"
  start="$(date -u +%FT%TZ)"
  touch "$LOGS/$t.log.start"
  rc=0
  # CPU seconds (user + sys) next to the wall-clock limit: on a machine shared
  # with other work a nice-19 run gets less than its wall time.
  timer=()
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -f '%U %S %e' -o "$LOGS/$t.cpu")
  "${timer[@]}" nice -n 19 "$bin" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout="$TIMEOUT" \
    -report_slow_units=1 \
    -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$ARTIFACTS/$t-" "$CORPUS/$t" "$SEEDS/$t" >"$LOGS/$t.log" 2>&1 || rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$LOGS/$t.log" | tail -1)"
  cpu="?"
  wall="$SECONDS_PER_TARGET"
  if [ -s "$LOGS/$t.cpu" ]; then
    cpu="$(awk 'END { printf "%.0f", $1 + $2 }' "$LOGS/$t.cpu")"
    wall="$(awk 'END { printf "%.0f", $3 }' "$LOGS/$t.cpu")"
  fi
  slow="$(find "$ARTIFACTS" -name "$t-slow-unit-*" -newer "$LOGS/$t.log.start" 2>/dev/null | wc -l)"
  line="$t: started $start, ${wall}s wall (limit ${SECONDS_PER_TARGET}s), ${cpu}s CPU, ${execs:-?} executions, ${slow} slow units, exit $rc"
  log "$line"
  summary+="$line"$'\n'
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -m3 -E "ERROR|SUMMARY|check failed|runtime error" "$LOGS/$t.log" >&2 || true
  fi
done
printf '%s' "$summary"
exit "$status"
