#!/usr/bin/env bash
# One command for the side-by-side benchmark (see README.md):
#   tests/bench/peers/run.sh [--size smoke|modest|full] [run_peers.py options]
# Creates .venv-peers from PyPI (xgrammar pulls torch and its CUDA wheels,
# about 6 GiB, unless the project's .venv already has them: setup.sh installs
# them there), builds cfgmask and cfgmask_peer_driver in build-peers, runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
VENV="$ROOT/.venv-peers"
BUILD="${CFGMASK_PEERS_BUILD:-$ROOT/build-peers}"
source "$ROOT/.cache/env.sh"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # The project's .venv (setup.sh) already holds torch, transformers and the
  # CUDA wheels PyPI's torch brings: .venv-peers sees its packages after its
  # own, so pip installs only what .venv lacks (or pins differently).
  SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  PROJECT_SITE="$("$ROOT/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)"
  [ -n "$PROJECT_SITE" ] && echo "$PROJECT_SITE" > "$SITE/cfgmask-project-venv.pth"
fi
# CFGMASK_PEERS_ONLY="xgrammar==0.2.8 llguidance==1.9.1": just those (no
# Outlines, no SynCode), for a quicker set-up.
if [ -n "${CFGMASK_PEERS_ONLY:-}" ]; then
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $CFGMASK_PEERS_ONLY
else
  "$VENV/bin/pip" install -q -r "$ROOT/tests/bench/peers/requirements.txt"
fi
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
