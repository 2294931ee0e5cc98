#!/usr/bin/env bash
# Fetches real Lark grammars from their PyPI packages into a cache folder
# (default .cache/grammars), extracting only the .lark files; nothing here is
# committed.  Versions are pinned so that the walks in
# tests/py/test_real_grammars.py see the same grammars every time.
#
#   tests/realgrammars/fetch.sh [DEST]     (needs pip: $CFGMASK_PYTHON -m pip)
#
# DEST/syncode/{go,java,c,sql,prover9}.lark  syncode 0.4.16 (syncode/parsers/grammars/)
# DEST/vyper/grammar.lark         vyper 0.4.3    (vyper/ast/grammar.lark)
# DEST/beancount/*.lark           beancount-parser 1.2.3 (beancount_parser/grammar/)
# DEST/cel/cel.lark               cel-python 0.5.0 (celpy/cel.lark): Google's Common Expression Language
# DEST/hcl2/hcl2.lark             python-hcl2 8.1.4 (hcl2/hcl2.lark): HashiCorp configuration language
# DEST/commentjson/commentjson.lark  commentjson 0.9.0: the grammar string of commentjson/commentjson.py
# DEST/pddl/grammar.lark          pddl 0.5.1 (pddl/parser/grammar.lark): planning domains and problems
# DEST/blark/iec.lark             blark 0.8.3 (blark/iec.lark): IEC 61131-3 structured text
# DEST/gdscript/gdscript.lark     gdtoolkit 4.5.0 (gdtoolkit/parser/gdscript.lark): Godot's GDScript
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${1:-$ROOT/.cache/grammars}"
PY="${CFGMASK_PYTHON:-$ROOT/.venv/bin/python}"
if [ -f "$DEST/.complete-2" ]; then exit 0; fi
DL="$DEST/.download"
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"/{syncode,vyper,beancount,cel,hcl2,commentjson,pddl,blark,gdscript} "$DL"
"$PY" -m pip download -q --no-deps -d "$DL" syncode==0.4.16 vyper==0.4.3 beancount-parser==1.2.3 \
  cel-python==0.5.0 python-hcl2==8.1.4 commentjson==0.9.0 pddl==0.5.1 blark==0.8.3 gdtoolkit==4.5.0
"$PY" - "$DL" "$DEST.tmp" <<'PY'
import ast, glob, os, sys, tarfile, zipfile
dl, dest = sys.argv[1], sys.argv[2]
def wheel(pattern, member, out):
    with zipfile.ZipFile(glob.glob(os.path.join(dl, pattern))[0]) as z:
        open(os.path.join(dest, out), "wb").write(z.read(member))
with tarfile.open(glob.glob(os.path.join(dl, "syncode-0.4.16.tar.gz"))[0]) as t:
    for name in ("go", "java", "c", "sql", "prover9"):
        src = t.extractfile("syncode-0.4.16/syncode/parsers/grammars/%s.lark" % name)
        open(os.path.join(dest, "syncode", name + ".lark"), "wb").write(src.read())
with zipfile.ZipFile(glob.glob(os.path.join(dl, "vyper-0.4.3-*.whl"))[0]) as z:
    open(os.path.join(dest, "vyper", "grammar.lark"), "wb").write(z.read("vyper/ast/grammar.lark"))
with zipfile.ZipFile(glob.glob(os.path.join(dl, "beancount_parser-1.2.3-*.whl"))[0]) as z:
    for n in z.namelist():
        if n.startswith("beancount_parser/grammar/") and n.endswith(".lark"):
            open(os.path.join(dest, "beancount", os.path.basename(n)), "wb").write(z.read(n))
wheel("cel_python-0.5.0-*.whl", "celpy/cel.lark", "cel/cel.lark")
wheel("python_hcl2-8.1.4-*.whl", "hcl2/hcl2.lark", "hcl2/hcl2.lark")
wheel("pddl-0.5.1-*.whl", "pddl/parser/grammar.lark", "pddl/grammar.lark")
wheel("blark-0.8.3-*.whl", "blark/iec.lark", "blark/iec.lark")
wheel("gdtoolkit-4.5.0-*.whl", "gdtoolkit/parser/gdscript.lark", "gdscript/gdscript.lark")
# commentjson keeps its grammar in a string: the first argument of Lark(...).
with tarfile.open(glob.glob(os.path.join(dl, "commentjson-0.9.0.tar.gz"))[0]) as t:
    src = t.extractfile("commentjson-0.9.0/commentjson/commentjson.py").read().decode()
grammar = next(node.args[0].value for node in ast.walk(ast.parse(src))
               if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Lark")
open(os.path.join(dest, "commentjson", "commentjson.lark"), "w").write(grammar)
PY
rm -rf "$DL"
touch "$DEST.tmp/.complete-2"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
