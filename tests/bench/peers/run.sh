#!/usr/bin/env bash
# One command for the side-by-side benchmark (see README.md):
#   tests/bench/peers/run.sh [--size smoke|modest|full] [run_peers.py options]
# Creates .venv-peers from PyPI (xgrammar pulls torch and its CUDA wheels:
# about 6 GiB), builds cfgmask and cfgmask_peer_driver in build-peers, runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
VENV="$ROOT/.venv-peers"
BUILD="${CFGMASK_PEERS_BUILD:-$ROOT/build-peers}"
source "$ROOT/.cache/env.sh"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/pip" install -q -r "$ROOT/tests/bench/peers/requirements.txt"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCFGMASK_PYTHON_MODULE=ON \
  -DPython3_EXECUTABLE="$CFGMASK_PYTHON" >/dev/null
nice cmake --build "$BUILD" -j2 --target cfgmask cfgmask_peer_driver _core >/dev/null
# The cfgmask package of this checkout, for the in-process compile timing
# (cfgmask_compile.py runs under $CFGMASK_PYTHON with it first on the path).
PKG="$BUILD/pypkg"
rm -rf "$PKG" && mkdir -p "$PKG"
cp -r "$ROOT/runtime/python/cfgmask" "$PKG/"
cp "$BUILD"/_core*.so "$PKG/cfgmask/"
export CFGMASK_PEERS_PYTHONPATH="$PKG"
exec "$VENV/bin/python" "$ROOT/tests/bench/peers/run_peers.py" \
  --cfgmask "$BUILD/cfgmask" --driver "$BUILD/tests/cfgmask_peer_driver" "$@"
