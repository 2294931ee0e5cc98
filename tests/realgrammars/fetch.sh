#!/usr/bin/env bash
# Fetches real Lark grammars from their PyPI packages into a cache folder
# (default .cache/grammars), extracting only the .lark files; nothing here is
# committed.  Versions are pinned so that the walks in
# tests/py/test_real_grammars.py see the same grammars every time.
#
#   tests/realgrammars/fetch.sh [DEST]     (needs pip: $CFGMASK_PYTHON -m pip)
#
# DEST/syncode/{go,java,c}.lark   syncode 0.4.16 (syncode/parsers/grammars/)
# DEST/vyper/grammar.lark         vyper 0.4.3    (vyper/ast/grammar.lark)
# DEST/beancount/*.lark           beancount-parser 1.2.3 (beancount_parser/grammar/)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${1:-$ROOT/.cache/grammars}"
PY="${CFGMASK_PYTHON:-$ROOT/.venv/bin/python}"
if [ -f "$DEST/.complete-1" ]; then exit 0; fi
DL="$DEST/.download"
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/syncode" "$DEST.tmp/vyper" "$DEST.tmp/beancount" "$DL"
"$PY" -m pip download -q --no-deps -d "$DL" syncode==0.4.16 vyper==0.4.3 beancount-parser==1.2.3
"$PY" - "$DL" "$DEST.tmp" <<'PY'
import glob, os, sys, tarfile, zipfile
dl, dest = sys.argv[1], sys.argv[2]
with tarfile.open(glob.glob(os.path.join(dl, "syncode-0.4.16.tar.gz"))[0]) as t:
    for name in ("go", "java", "c"):
        src = t.extractfile("syncode-0.4.16/syncode/parsers/grammars/%s.lark" % name)
        open(os.path.join(dest, "syncode", name + ".lark"), "wb").write(src.read())
with zipfile.ZipFile(glob.glob(os.path.join(dl, "vyper-0.4.3-*.whl"))[0]) as z:
    open(os.path.join(dest, "vyper", "grammar.lark"), "wb").write(z.read("vyper/ast/grammar.lark"))
with zipfile.ZipFile(glob.glob(os.path.join(dl, "beancount_parser-1.2.3-*.whl"))[0]) as z:
    for n in z.namelist():
        if n.startswith("beancount_parser/grammar/") and n.endswith(".lark"):
            open(os.path.join(dest, "beancount", os.path.basename(n)), "wb").write(z.read(n))
PY
rm -rf "$DL"
touch "$DEST.tmp/.complete-1"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
