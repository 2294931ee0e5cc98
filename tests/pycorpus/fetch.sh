#!/usr/bin/env bash
# Fetches the sources of popular PyPI packages written for Python 3.8+ into a
# cache folder (default .cache/pypkgs), keeping only their *.py files; nothing
# here is committed.  Versions are pinned (pure-Python wheels) so that
# tests/py/test_python_packages.py sees the same files every time.
#
#   tests/pycorpus/fetch.sh [DEST]     (needs pip: $CFGMASK_PYTHON -m pip)
#
# DEST/<package>/**/*.py for
#   attrs 23.2.0, click 8.1.7, rich 13.7.1, httpx 0.27.0, anyio 4.3.0,
#   starlette 0.37.2, fastapi 0.110.0, pydantic 2.6.4, typer 0.12.3
# (async code, type hints, dataclasses, f-strings, match statements).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${1:-$ROOT/.cache/pypkgs}"
PY="${CFGMASK_PYTHON:-$ROOT/.venv/bin/python}"
if [ -f "$DEST/.complete-1" ]; then exit 0; fi
DL="$DEST.download"
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp" "$DL"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 -d "$DL" \
  attrs==23.2.0 click==8.1.7 rich==13.7.1 httpx==0.27.0 anyio==4.3.0 starlette==0.37.2 \
  fastapi==0.110.0 pydantic==2.6.4 typer==0.12.3
"$PY" - "$DL" "$DEST.tmp" <<'PY'
import glob, os, sys, zipfile
dl, dest = sys.argv[1], sys.argv[2]
for whl in sorted(glob.glob(os.path.join(dl, "*.whl"))):
    pkg = os.path.basename(whl).split("-")[0].lower()
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            if n.endswith(".py") and ".dist-info/" not in n:
                out = os.path.join(dest, pkg, n)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(z.read(n))
PY
rm -rf "$DL"
touch "$DEST.tmp/.complete-1"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
