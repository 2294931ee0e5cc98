#!/usr/bin/env python3
"""SQLite statements that no test of this project reads, for benchmarks.

The tests' SQL corpus (tests/corpus/harvest_sql.py) is CPython's test_sqlite3
and Debian's sqlite3-doc pages.  This script harvests other material on the
machine that nobody here wrote, for `cfgmask bench` over held-out statements
(docs/performance.md):

* PostgreSQL's shipped SQL files (/usr/share/postgresql*/**/*.sql), split into
  statements with ``sqlite3.complete_statement`` (psql meta-commands dropped);
* string constants that start with an SQL keyword in the Python files of the
  given folders (default: this interpreter's site-packages), found with
  ``ast``; files of a ``test_sqlite3`` folder are skipped;
* string literals that start with an SQL keyword in Free Pascal's sources
  (/usr/share/fpcsrc/**/*.pas, *.pp), ``'a' + 'b'`` chains joined.

A statement is kept if SQLite's parser takes it (``EXPLAIN`` prepared in an
empty database; an error other than a syntax error counts as valid, as in
harvest_sql.py) and, whitespace and case aside, it is not in the tests'
corpus (read from OUTDIR/testsql, made by harvest_sql.py).

SQLite's verdict is lenient where a name error comes first (an ``ALTER TABLE``
on a table the empty database lacks is refused for the table, before a syntax
error later in it), so a benchmark keeps the statements its grammar accepts
(``cfgmask check STORE OUTDIR/heldout/*.sql``) and says how many it dropped.

Usage: heldout_sql.py OUTDIR [--python-roots DIR...]
Writes OUTDIR/heldout/NNNN.sql, one statement per file.
"""
from __future__ import annotations

import argparse
import ast
import glob
import os
import re
import sqlite3
import subprocess
import sys
import sysconfig

SYNTAX_MARKERS = ("syntax error", "incomplete input", "unrecognized token")
KEYWORD = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|WITH|REPLACE|PRAGMA|BEGIN|COMMIT|"
    r"VACUUM|ANALYZE|ATTACH|DETACH|REINDEX|SAVEPOINT|RELEASE|ROLLBACK|VALUES)\b",
    re.I,
)


def valid(db: sqlite3.Connection, statement: str) -> bool:
    try:
        db.execute("EXPLAIN " + statement)
        return True
    except sqlite3.Error as e:
        return not any(m in str(e) for m in SYNTAX_MARKERS)
    except Exception:  # e.g. a NUL byte
        return False


def split(text: str):
    buf = ""
    for line in text.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            yield buf.strip()
            buf = ""
    if buf.strip():
        yield buf.strip()


def postgres():
    files = sorted(glob.glob("/usr/share/postgresql*/**/*.sql", recursive=True))
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = "\n".join(l for l in fh.read().splitlines() if not l.startswith("\\"))
        yield from split(text)


def python_strings(roots):
    for root in roots:
        for f in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
            if "test_sqlite3" in f:
                continue
            try:
                with open(f, "rb") as fh:
                    tree = ast.parse(fh.read())
            except Exception:
                continue
            for n in ast.walk(tree):
                if (isinstance(n, ast.Constant) and isinstance(n.value, str)
                        and len(n.value) < 4000 and KEYWORD.match(n.value)):
                    yield from split(n.value)


def pascal_strings():
    lit = re.compile(r"'((?:[^'\n]|'')*)'")
    chain = re.compile(r"'(?:[^'\n]|'')*'(?:\s*\+\s*(?:'(?:[^'\n]|'')*'|sLineBreak|LineEnding|#1[03]))*")
    files = sorted(glob.glob("/usr/share/fpcsrc/**/*.pas", recursive=True)
                   + glob.glob("/usr/share/fpcsrc/**/*.pp", recursive=True))
    for f in files:
        with open(f, encoding="latin-1") as fh:
            text = fh.read()
        for m in chain.finditer(text):
            s = " ".join(p.replace("''", "'") for p in lit.findall(m.group(0))).strip()
            if KEYWORD.match(s):
                yield s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--python-roots", nargs="*", default=[sysconfig.get_paths()["purelib"]])
    args = ap.parse_args()
    test_dir = os.path.join(args.outdir, "testsql")
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "..", "corpus", "harvest_sql.py"),
                    "--quiet", test_dir], check=True, stdout=subprocess.DEVNULL)
    norm = lambda s: " ".join(s.split()).lower().rstrip(";")
    tested = set()
    for f in glob.glob(os.path.join(test_dir, "sql", "valid", "*.sql")):
        with open(f, encoding="utf-8") as fh:
            tested.add(norm(fh.read()))
    db = sqlite3.connect(":memory:")
    out, seen = [], set()
    for source in (postgres(), python_strings(args.python_roots), pascal_strings()):
        for s in source:
            k = norm(s)
            if not s or k in seen or k in tested or s.upper().startswith("EXPLAIN"):
                continue
            seen.add(k)
            if valid(db, s):
                out.append(s)
    dest = os.path.join(args.outdir, "heldout")
    os.makedirs(dest, exist_ok=True)
    for i, s in enumerate(out):
        with open(os.path.join(dest, f"{i:04d}.sql"), "w", encoding="utf-8") as fh:
            fh.write(s)
    print(f"{len(out)} statements in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
