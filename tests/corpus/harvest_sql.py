#!/usr/bin/env python3
"""Harvest real SQLite statements that nobody in this project wrote.

Sources (nothing is downloaded; both are read from the local machine):

* CPython's own SQLite tests, ``<stdlib>/test/test_sqlite3/*.py``: the string
  constants passed as the SQL argument of ``execute``/``executescript``/
  ``executemany`` (found with the ``ast`` module; a plain variable argument is
  resolved when the same function or module assigns it one string constant).
* Debian's ``sqlite3-doc`` package, if installed (``/usr/share/doc/sqlite3``):
  the contents of every ``<pre>`` / ``codeblock`` example of every HTML page.

Each source string is split into statements with ``sqlite3.complete_statement``
and every statement is judged by SQLite's own parser: it is prepared (never
run) as ``EXPLAIN <statement>`` in an empty in-memory database.

Validity rule: an error whose message contains ``syntax error``,
``incomplete input`` or ``unrecognized token`` means the statement is not valid
SQLite syntax; any other outcome (success, ``no such table``, ``no such
column``, wrong number of bindings, ``unknown database``, ...) means it is
syntactically valid -- the database is empty on purpose, so names cannot
resolve.  (SQLite stops at the first error of any kind, so a name-resolution
error raised early -- e.g. the table of CREATE TRIGGER -- hides whatever
follows; this makes the oracle slightly lenient for such statements.)

Output under OUTDIR (default ``.cache/corpus``):

    sql/valid/NNNN.sql      one statement per file (UTF-8, no trailing newline)
    sql/invalid/NNNN.sql    statements SQLite rejects as syntax errors
    sql/manifest.json       {"valid": [...], "invalid": [...]} with source + sha1

Usage: harvest_sql.py [OUTDIR] [--no-doc] [--quiet]
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import html
import json
import os
import re
import sqlite3
import sys
import sysconfig
from pathlib import Path

SYNTAX_MARKERS = ("syntax error", "incomplete input", "unrecognized token")
DOC_DIR = Path("/usr/share/doc/sqlite3")
SQL_METHODS = {"execute", "executescript", "executemany"}


# ---------------------------------------------------------------- sources

def _const_str(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _assigned_strings(tree):
    """name -> list of string constants assigned to it, per enclosing scope."""
    scopes = {}
    for scope in [tree] + [n for n in ast.walk(tree)
                           if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        table = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                s = _const_str(node.value)
                if s is not None:
                    table.setdefault(node.targets[0].id, []).append(s)
        scopes[scope] = table
    return scopes


def strings_from_python(path: Path):
    """SQL string constants given to execute/executescript/executemany."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    scopes = _assigned_strings(tree)
    # map every node to its innermost function (for variable resolution)
    owner = {}

    def walk(node, fn):
        for child in ast.iter_child_nodes(node):
            nfn = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            owner[child] = nfn
            walk(child, nfn)
    walk(tree, tree)

    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SQL_METHODS and node.args):
            continue
        arg = node.args[0]
        s = _const_str(arg)
        if s is not None:
            out.append((s, node.lineno))
        elif isinstance(arg, ast.Name):
            fn = owner.get(node, tree)
            cands = scopes.get(fn, {}).get(arg.id) or scopes[tree].get(arg.id) or []
            for s in cands:
                out.append((s, node.lineno))
    return out


PRE_RE = re.compile(r"<pre[^>]*>(.*?)</pre>", re.S | re.I)
CODEBLOCK_RE = re.compile(r"<(?:div|blockquote)[^>]*class=['\"]?codeblock['\"]?[^>]*>(.*?)</(?:div|blockquote)>",
                          re.S | re.I)
PROMPT_RE = re.compile(r"^\s*(?:sqlite>|\.\.\.>)\s?", re.M)


def strings_from_html(path: Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    out = []
    for rx in (PRE_RE, CODEBLOCK_RE):
        for m in rx.finditer(text):
            body = re.sub(r"<br\s*/?>", "\n", m.group(1), flags=re.I)
            body = html.unescape(re.sub(r"<[^>]+>", "", body))
            body = PROMPT_RE.sub("", body)
            out.append((body, text.count("\n", 0, m.start()) + 1))
    return out


# ---------------------------------------------------------------- splitting / judging

# SQLite's whitespace is [ \t\n\r\f] (not \s, not str.strip()'s Unicode set:
# U+00A0 or U+0085 are identifier characters to SQLite, and \v is illegal).
SQL_SPACE = " \t\n\r\f"


def split_statements(text: str):
    """Split a script into statements the way the sqlite3 shell does."""
    stmts, buf = [], ""
    for piece in re.split(r"(;)", text):
        buf += piece
        if piece == ";" and sqlite3.complete_statement(buf):
            stmts.append(buf)
            buf = ""
    if buf.strip(SQL_SPACE):
        stmts.append(buf)
    return stmts


_LEAD_RE = re.compile(r"\A(?:[ \t\n\r\f]+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.S)


def strip_statement(stmt: str) -> str:
    """Trim whitespace and one trailing ';'; '' when only comments remain."""
    s = stmt.strip(SQL_SPACE)
    if s.endswith(";"):
        s = s[:-1].rstrip(SQL_SPACE)
    if not _LEAD_RE.sub("", s):
        return ""
    return s


# EXPLAIN as SQLite reads it: ASCII case folding only, and not followed by an
# identifier character (A-Z a-z 0-9 _ $ or any non-ASCII character).
_EXPLAIN_RE = re.compile(r"[Ee][Xx][Pp][Ll][Aa][Ii][Nn](?![A-Za-z0-9_$]|[^\x00-\x7f])")


def sqlite_verdict(stmt: str, conn: sqlite3.Connection | None = None):
    """(is_syntactically_valid, message) according to SQLite's parser.

    ``stmt`` is one statement (a trailing ';' is allowed)."""
    if "\0" in stmt:
        # SQLite's tokenizer ends the input at U+0000 (Python's sqlite3 refuses it)
        return False, "contains U+0000"
    own = conn is None
    if own:
        conn = sqlite3.connect(":memory:")
    try:
        body = _LEAD_RE.sub("", stmt)
        sql = stmt if _EXPLAIN_RE.match(body) else "EXPLAIN " + stmt
        try:
            conn.execute(sql)
            return True, "ok"
        except sqlite3.Warning as e:      # "You can only execute one statement at a time."
            return False, str(e)
        except (sqlite3.Error, ValueError, OverflowError) as e:
            msg = str(e)
            if any(m in msg for m in SYNTAX_MARKERS):
                return False, msg
            if "one statement at a time" in msg:
                return False, msg
            return True, msg
    finally:
        if own:
            conn.close()


def sqlite_accepts_script(text: str, conn: sqlite3.Connection | None = None) -> bool:
    """True when every statement of a ';'-separated script is valid."""
    stmts = [s for s in (strip_statement(x) for x in split_statements(text)) if s]
    if not stmts:
        return False
    # split_statements leaves an unterminated tail; it must be complete
    own = conn is None
    if own:
        conn = sqlite3.connect(":memory:")
    try:
        return all(sqlite_verdict(s, conn)[0] for s in stmts)
    finally:
        if own:
            conn.close()


# ---------------------------------------------------------------- tokens (for mutation tests)

_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+ | --[^\n]* | /\*.*?(?:\*/|\Z))
  | '(?:[^']|'')*'                       # string
  | "(?:[^"]|"")*" | `(?:[^`]|``)*` | \[[^\]]*\]   # quoted identifiers
  | [xX]'[0-9a-fA-F]*'                   # blob
  | 0[xX][0-9a-fA-F]+ | (?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?
  | \?\d* | [:@$][\w$]+                  # parameters
  | [A-Za-z_\x80-\U0010ffff][\w$\x80-\U0010ffff]*
  | ->> | -> | \|\| | << | >> | <= | >= | == | != | <>
  | .
""", re.S | re.X)


def sql_tokens(text: str):
    """SQLite-like tokens of ``text`` without whitespace and comments."""
    return [m.group(0) for m in _TOKEN_RE.finditer(text) if m.group("ws") is None]


# ---------------------------------------------------------------- main

def collect(use_doc: bool = True):
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = []
    test_dir = stdlib / "test" / "test_sqlite3"
    for p in sorted(test_dir.glob("*.py")):
        for s, line in strings_from_python(p):
            sources.append((s, f"cpython:Lib/test/test_sqlite3/{p.name}:{line}"))
    if use_doc and DOC_DIR.is_dir():
        for p in sorted(DOC_DIR.rglob("*.html")):
            for s, line in strings_from_html(p):
                sources.append((s, f"sqlite3-doc:{p.relative_to(DOC_DIR)}:{line}"))
    return sources


def harvest(outdir: Path, use_doc: bool = True, quiet: bool = False):
    sources = collect(use_doc)
    conn = sqlite3.connect(":memory:")
    seen = set()
    valid, invalid = [], []
    for text, origin in sources:
        if "\0" in text:
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            continue
        for raw in split_statements(text):
            stmt = strip_statement(raw)
            if not stmt:
                continue
            key = " ".join(stmt.split())
            if key in seen:
                continue
            seen.add(key)
            ok, msg = sqlite_verdict(stmt, conn)
            (valid if ok else invalid).append((stmt, origin, msg))
    conn.close()

    root = outdir / "sql"
    manifest = {"validity_rule": "EXPLAIN-prepare in an empty :memory: database; "
                                 "errors containing " + ", ".join(repr(m) for m in SYNTAX_MARKERS) +
                                 " are syntax errors, anything else is syntactically valid",
                "sqlite_version": sqlite3.sqlite_version}
    for kind, items in (("valid", valid), ("invalid", invalid)):
        d = root / kind
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.sql"):
            old.unlink()
        entries = []
        for i, (stmt, origin, msg) in enumerate(items):
            name = f"{i:04d}.sql"
            (d / name).write_text(stmt, encoding="utf-8")
            entries.append({"file": f"{kind}/{name}", "source": origin,
                            "bytes": len(stmt.encode()), "sha1": hashlib.sha1(stmt.encode()).hexdigest(),
                            "sqlite": msg})
        manifest[kind] = entries
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    if not quiet:
        by_src = {}
        for _, origin, _ in valid:
            k = origin.split(":")[0]
            by_src[k] = by_src.get(k, 0) + 1
        print(f"harvest_sql: {len(valid)} valid ({by_src}), {len(invalid)} syntax-invalid, "
              f"from {len(sources)} source strings -> {root}")
    return valid, invalid


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default=str(Path(__file__).resolve().parents[2] / ".cache" / "corpus"))
    ap.add_argument("--no-doc", action="store_true", help="skip the sqlite3-doc HTML pages")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    harvest(Path(a.outdir), use_doc=not a.no_doc, quiet=a.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
