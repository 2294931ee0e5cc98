"""Coverage of a Python grammar on real code: of the files that CPython
compiles, how many Lark (LALR, contextual lexer, PythonIndenter) accepts, with
the refused files tallied by the construct at the first refused token.

  python tests/pycorpus/coverage.py [--grammar G.lark] [--examples N] [--list] (stdlib | DIR...)

`stdlib` takes the standard library (as tests/py/test_python_strict.py does);
each DIR is searched for *.py (e.g. the folders of tests/pycorpus/fetch.sh).
The construct is read from the text around the error position (a heuristic:
the first matching class in CLASSES, "other" when none matches).
"""
from __future__ import annotations

import argparse
import re
import sys
import sysconfig
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (class, pattern on the error line, pattern on the text from the statement
# start to the error): the first match names the construct.
CLASSES = [
    ("from __future__ after a docstring/comment or repeated", r"from\s+__future__", None),
    ("f-string field", r"""(?i)(?<![A-Za-z0-9_])(?:[rf]?f|fr)['"]""", None),
    ("\\N{...} escape", r"\\N\{", None),
    ("nonlocal", r"^\s*nonlocal\b", None),
    ("match statement", r"^\s*(?:match|case)\b", None),
    ("except*", r"except\s*\*", None),
    ("yield as an expression or in an async function", r"\byield\b", None),
    ("await inside an expression", r"\bawait\b", None),
    ("async comprehension", r"\basync\s+for\b", None),
    ("walrus outside an if/while condition", r":=", None),
    ("parenthesised with items", r"^\s*(?:async\s+)?with\s*\(", None),
    ("starred subscript or target", r"\[\s*\*|\(\s*\*|,\s*\*\w+\s*\)|\*\w+\s*,.*\)\s*=", None),
    ("tab or form feed in indentation", r"^[ ]*[\t\f]", None),
    ("non-ASCII name", r"[^\x00-\x7f]", None),
]


def cpython_ok(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<text>", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


def gather(args: list[str]) -> list[Path]:
    out = []
    for a in args:
        if a == "stdlib":
            root = Path(sysconfig.get_paths()["stdlib"])
            out += sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
        else:
            out += sorted(Path(a).rglob("*.py"))
    return out


def classify(text: str, line: int) -> str:
    lines = text.splitlines()
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    for name, pat, _ in CLASSES:
        if re.search(pat, src):
            return name
    return "other"


def main() -> int:
    from lark import Lark
    from lark.exceptions import LarkError
    from lark.indenter import PythonIndenter
    ap = argparse.ArgumentParser()
    ap.add_argument("--grammar", default=str(ROOT / "grammar/lark/python.lark"))
    ap.add_argument("--examples", type=int, default=2)
    ap.add_argument("--list", help="write the accepted files' paths here, one a line")
    ap.add_argument("what", nargs="+")
    a = ap.parse_args()
    p = Lark(Path(a.grammar).read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
             postlex=PythonIndenter(), start="file_input")
    files, accepted = [], []
    tally, where = Counter(), {}
    for path in gather(a.what):
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not cpython_ok(text):
            continue
        files.append(path)
        try:
            p.parse(text)
            accepted.append(path)
            continue
        except LarkError as e:
            line = getattr(e, "line", 0) or 0
        key = classify(text, line)
        tally[key] += 1
        lines = text.splitlines()
        src = lines[line - 1].strip()[:90] if 0 < line <= len(lines) else ""
        where.setdefault(key, []).append(f"{path}:{line}: {src}")
    n = len(files)
    print(f"{len(accepted)} of {n} files that CPython compiles are accepted "
          f"({len(accepted) / max(n, 1):.1%}); {n - len(accepted)} refused")
    for key, k in tally.most_common():
        print(f"{k:5d}  {key}")
        for w in where[key][:a.examples]:
            print(f"         {w}")
    if a.list:
        Path(a.list).write_text("".join(f"{q}\n" for q in accepted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
