#!/usr/bin/env bash
# The whole GPU check of cfgmask, as one command on a bare CUDA machine
# (docs/gpu.md): unpack the kit that tests/gpu/prepare.sh gathered, build
# cfgmask with CUDA (the tests, the benchmarks and the Python extension
# only), then run, writing every figure as JSON under $OUT:
#   kernels     cuda_batch_test (the CUDA kernels against their CPU twins, at
#               every vocabulary size the CPU tests sweep), or_reduce_test and
#               batch_test (the twins against the plain references)
#   sanitizer   compute-sanitizer memcheck and racecheck on one small case
#   hf          tests/gpu/test_hf_device.py: HFLogitsProcessor on device
#               logits in model.generate (greedy, sampling, batch, beams)
#   engine      tests/bench/cuda_batch_bench: CPU fill against the GPU
#               OR-reduction and masking, B = 1, 16, 64, 256, 152k and 262k
#   processor   tests/gpu/processor_batch_bench.py: the processor call per
#               step, beside xgrammar's masking kernel
# Files under $OUT (at most 8): summary.json, kernels.json, sanitizer.txt,
# hf.xml, bench_engine.json, bench_processor.json, logs.txt.
#
#   tests/gpu/run.sh           on the GPU machine (sm_90 by default;
#                              CFGMASK_CUDA_ARCH=80 for an A100)
#   tests/gpu/run.sh --cpu     the dry run: everything above minus CUDA, at
#                              quick size, with the build ./setup.sh made; the
#                              kit's packages are checked by a configure-only
#                              build against them, its wheels by a pip dry run
#                              for Python 3.12.  CI runs this, so the kit
#                              cannot rot between GPU runs.
# Options: --kit DIR (default .gpukit), --out DIR (default $OUT, else
# out/gpu), --quick (small sizes on the GPU too).  Exits 1 if any step failed.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KIT="$ROOT/.gpukit"
MODE=gpu
QUICK=0
OUTDIR="${OUT:-$ROOT/out/gpu}"
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) MODE=cpu; QUICK=1; shift ;;
    --quick) QUICK=1; shift ;;
    --kit) KIT="$2"; shift 2 ;;
    --out) OUTDIR="$2"; shift 2 ;;
    *) echo "usage: $0 [--cpu] [--quick] [--kit DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done
if [ ! -d "$KIT/debs" ] || [ ! -d "$KIT/data" ]; then
  echo "run.sh: no kit at $KIT: run tests/gpu/prepare.sh first" >&2
  exit 2
fi
mkdir -p "$OUTDIR"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cfgmask-gpu.XXXXXX")"
LOGS="$WORK/logs"
mkdir -p "$LOGS"
T0=$(date +%s)
STEPS="$WORK/steps.tsv"
: > "$STEPS"
log() { printf '[gpu-run %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }

# step NAME TIMEOUT_S CMD...: runs CMD with its output in $LOGS/NAME.log,
# records its exit status and seconds; a failed step does not stop the run.
step() {
  local name="$1" limit="$2"
  shift 2
  log "$name ..."
  local s rc
  s=$(date +%s.%N)
  # Through bash -c, so that CMD may be one of the functions exported below.
  timeout --kill-after=10 "$limit" bash -c '"$@"' _ "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')" >> "$STEPS"
  if [ "$rc" -ne 0 ]; then
    log "$name FAILED (exit $rc); last lines:"
    tail -n 15 "$LOGS/$name.log" >&2
  fi
  return "$rc"
}

PREFIX="$KIT/prefix"
unpack() {
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  for d in "$KIT"/debs/*.deb; do dpkg -x "$d" "$PREFIX" || return 1; done
  # Debian's libtbb.so is a link to the versioned file; dpkg -x keeps it.
  ls "$PREFIX/usr/bin/bison" "$PREFIX/usr/bin/flex" "$PREFIX/usr/include/boost/version.hpp" \
     "$PREFIX/usr/include/nlohmann/json.hpp" "$PREFIX/usr/include/gtest/gtest.h"
}
export -f unpack
export PREFIX KIT WORK MODE
step unpack 120 unpack
export PATH="$PREFIX/usr/bin:$PATH"
export BISON_PKGDATADIR="$PREFIX/usr/share/bison"
export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
KIT_CMAKE=(-DCMAKE_PREFIX_PATH="$PREFIX/usr" -DBISON_EXECUTABLE="$PREFIX/usr/bin/bison"
           -DFLEX_EXECUTABLE="$PREFIX/usr/bin/flex")

if [ "$MODE" = gpu ]; then
  PY="$(command -v python3)"
  BUILD="$ROOT/build-gpu"
  SITE="$KIT/site"
  step wheels 180 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target "$SITE" "$KIT"/wheels/*.whl
  export PYTHONPATH="$SITE:$ROOT/runtime/python${PYTHONPATH:+:$PYTHONPATH}"
  GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
  # CMake 4 refuses package files that ask for a policy level below 3.5.
  step configure 180 cmake "${GEN[@]}" -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
      -DCFGMASK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CFGMASK_CUDA_ARCH:-90}" \
      -DCFGMASK_PYTHON_MODULE=ON -DCFGMASK_PYTHON_CUDA=ON -DPython3_EXECUTABLE="$PY" \
      "${KIT_CMAKE[@]}"
  step build 420 cmake --build "$BUILD" -j"$(nproc)" --target cfgmask cuda_batch_test \
      or_reduce_test batch_test cuda_batch_bench _core _cuda
  cp "$BUILD"/_core*.so "$BUILD"/_cuda*.so "$ROOT/runtime/python/cfgmask/" 2>/dev/null
  export CFGMASK_REQUIRE_GPU=1 CFGMASK_REQUIRE_CUDA_KERNEL=1
else
  # The dry run uses the build and the venv that ./setup.sh made; the kit's
  # packages must still be enough to configure the project on their own.
  PY="${CFGMASK_PYTHON:-$ROOT/.venv/bin/python}"
  BUILD="${CFGMASK_BUILD:-$ROOT/build}"
  step wheels 180 "$PY" -m pip install -q --dry-run --no-index --no-deps --ignore-installed \
      --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --target "$WORK/site" "$KIT"/wheels/*.whl
  step configure 180 cmake -S "$ROOT" -B "$WORK/kit-configure" -DCMAKE_BUILD_TYPE=Release \
      -DCFGMASK_CUDA=OFF -DCFGMASK_PYTHON_MODULE=OFF -DPython3_EXECUTABLE="$PY" "${KIT_CMAKE[@]}"
  # Every package the build needs came from the kit, not from the system.
  kit_found() {
    local cache="$WORK/kit-configure/CMakeCache.txt" bad=0
    for var in BISON_EXECUTABLE FLEX_EXECUTABLE Boost_DIR TBB_DIR GTest_DIR nlohmann_json_DIR \
               FLEX_INCLUDE_DIR; do
      local v
      v="$(grep "^$var:" "$cache" | cut -d= -f2-)"
      echo "$var=$v"
      case "$v" in "$PREFIX"/*) ;; *) echo "  not from the kit" ; bad=1 ;; esac
    done
    return $bad
  }
  export -f kit_found
  step kit_found 30 kit_found
  for t in cfgmask tests/cuda_batch_test tests/or_reduce_test tests/batch_test \
           tests/cuda_batch_bench; do
    [ -x "$BUILD/$t" ] || { log "missing $BUILD/$t: run ./setup.sh first"; exit 2; }
  done
  export CFGMASK_TEST_DEVICE=cpu
fi

export CFGMASK_PYTHON="$PY"
export CFGMASK_TOK_QWEN2="$KIT/data/qwen2.gguf"
export CFGMASK_TOK_LLAMA_SPM="$KIT/data/llama-spm.gguf"
export CFGMASK_BIN="$BUILD/cfgmask"
export CFGMASK_TEST_CACHE="$WORK/test-cache"
[ "$QUICK" = 1 ] && export CFGMASK_QUICK=1

# The stores: cfgmask's strict Python grammar with Qwen2's 151,936-token
# and Gemma 4's 262,144-token vocabularies (the dry run compiles the first
# only).
STORE152="$WORK/py-152k.cfgm"
STORE262="$WORK/py-262k.cfgm"
step store_152k 300 "$BUILD/cfgmask" compile "$ROOT/grammar/lark/python.lark" --start file_input \
    --tokenizer "$KIT/data/qwen2.gguf" -o "$STORE152"
STORES=(--store "152k=$STORE152")
if [ "$QUICK" = 0 ]; then
  step store_262k 300 "$BUILD/cfgmask" compile "$ROOT/grammar/lark/python.lark" \
      --start file_input --tokenizer "$KIT/data/gemma4.gguf" -o "$STORE262" &&
    STORES+=(--store "262k=$STORE262")
fi
export CFGMASK_GPU_STORE="$STORE152"

# kernels: each binary's gtest JSON, merged below into kernels.json.
kernels() {
  local rc=0
  for t in cuda_batch_test or_reduce_test batch_test; do
    # batch_test's corpus cases compile Lark's python.lark (CPU work that
    # CI runs): left out here to keep the GPU run short.
    "$BUILD/tests/$t" --gtest_output="json:$WORK/gtest-$t.json" --gtest_filter='-*Corpus*' || rc=1
  done
  if [ "$MODE" = gpu ] && grep -q '"result": "SKIPPED"' "$WORK/gtest-cuda_batch_test.json"; then
    echo "cuda_batch_test skipped tests on the GPU machine"
    rc=1
  fi
  return $rc
}
export -f kernels
export BUILD
step kernels 300 kernels

if [ "$MODE" = gpu ]; then
  sanitize() {
    local rc=0
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool"
      compute-sanitizer --tool "$tool" --error-exitcode 1 \
          "$BUILD/tests/cuda_batch_test" --gtest_filter=CudaBatchTest.SanitizerSmallCase || rc=1
    done
    return $rc
  }
  export -f sanitize
  step sanitizer 240 sanitize
  cp "$LOGS/sanitizer.log" "$OUTDIR/sanitizer.txt"
fi

step hf 300 "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/gpu/test_hf_device.py" \
    --junitxml="$OUTDIR/hf.xml"

if [ "$QUICK" = 1 ]; then BATCHES=1,4; BSTEPS=6; else BATCHES=1,16,64,256; BSTEPS=48; fi
# Every core, and one core (a server gives each request a share of a few).
step engine_bench 300 "$BUILD/tests/cuda_batch_bench" "${STORES[@]}" --batches "$BATCHES" \
    --threads 0,1 \
    --steps "$BSTEPS" --json "$OUTDIR/bench_engine.json"
step processor_bench 300 "$PY" "$ROOT/tests/gpu/processor_batch_bench.py" "${STORES[@]}" \
    --batches "$BATCHES" --steps "$BSTEPS" --json "$OUTDIR/bench_processor.json"

# summary.json: the machine, the kit, every step, the kernel tests' counts.
"$PY" - "$MODE" "$KIT" "$STEPS" "$WORK" "$OUTDIR" <<'PY'
import glob, json, os, platform, subprocess, sys, time
mode, kit, steps, work, out = sys.argv[1:]
def cmd(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"({type(e).__name__})"
s = {"mode": mode, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
     "host": platform.node(), "cpus": os.cpu_count(), "load": os.getloadavg(),
     "python": platform.python_version(),
     "gpu": cmd("nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"),
     "nvcc": cmd("nvcc", "--version").splitlines()[-1:] ,
     "steps": [], "kernel_tests": {}}
try:
    import torch
    s["torch"] = torch.__version__
except Exception:
    pass
try:
    s["kit"] = open(os.path.join(kit, "MANIFEST.txt")).read().splitlines()
except OSError:
    pass
for line in open(steps):
    name, rc, secs = line.rstrip("\n").split("\t")
    s["steps"].append({"step": name, "exit": int(rc), "seconds": round(float(secs), 1)})
merged = {}
for f in sorted(glob.glob(os.path.join(work, "gtest-*.json"))):
    j = json.load(open(f))
    name = os.path.basename(f)[6:-5]
    merged[name] = j
    cases = [t for suite in j.get("testsuites", []) for t in suite.get("testsuite", [])]
    s["kernel_tests"][name] = {
        "tests": len(cases),
        "failed": sum(1 for t in cases if t.get("failures")),
        "skipped": sum(1 for t in cases if t.get("result") == "SKIPPED"),
    }
json.dump(merged, open(os.path.join(out, "kernels.json"), "w"), indent=1)
s["failed_steps"] = [x["step"] for x in s["steps"] if x["exit"] != 0]
json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps({k: s[k] for k in ("gpu", "failed_steps", "kernel_tests")}, indent=1))
PY
for f in "$LOGS"/*.log; do
  printf '===== %s\n' "$(basename "$f")"
  tail -n 60 "$f"
done > "$OUTDIR/logs.txt"
FAILED="$(awk -F'\t' '$2 != 0 {print $1}' "$STEPS" | tr '\n' ' ')"
log "done in $(( $(date +%s) - T0 )) s; results in $OUTDIR"
rm -rf "$WORK"
if [ -n "$FAILED" ]; then
  log "failed steps: $FAILED"
  exit 1
fi
