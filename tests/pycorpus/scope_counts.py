"""How often the scope layer's checks meet real code: per corpus, the
statements and lists each check reads (nonlocal and global declarations, the
nonlocals whose binding comes later in the text, parameter lists, calls with
keyword arguments, __debug__), counted with Python's ast on the files given.

  python tests/pycorpus/scope_counts.py FILE_LIST...   (one path a line, e.g. coverage.py --list)
"""
from __future__ import annotations

import ast
import sys
from collections import Counter


def count(tree: ast.AST, c: Counter) -> None:
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for f in funcs:
        for n in ast.walk(f):
            if isinstance(n, ast.Nonlocal) and n.lineno:
                c["nonlocal statements"] += 1
                for name in n.names:
                    # a binding of the name in an enclosing function after the declaration
                    later = any(isinstance(b, ast.Name) and b.id == name and isinstance(b.ctx, ast.Store)
                                and b.lineno > n.lineno for g in funcs if g is not f
                                for b in ast.walk(g))
                    earlier = any(isinstance(b, (ast.Name, ast.arg)) and getattr(b, "id", getattr(b, "arg", None)) == name
                                  and getattr(b, "lineno", 0) < n.lineno for g in funcs if g is not f
                                  for b in ast.walk(g))
                    if later and not earlier:
                        c["nonlocal names bound only later (EOS waits)"] += 1
    for n in ast.walk(tree):
        if isinstance(n, ast.Global):
            c["global statements"] += 1
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            k = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
            if k >= 2:
                c["parameter lists of 2+ names (duplicate check)"] += 1
        elif isinstance(n, (ast.Call, ast.ClassDef)):
            if len([k for k in n.keywords if k.arg]) >= 2:
                c["calls/classes with 2+ keywords (repeat check)"] += 1
        elif isinstance(n, ast.Name) and n.id == "__debug__":
            c["__debug__ read"] += 1


def main() -> None:
    for lst in sys.argv[1:]:
        c: Counter = Counter()
        files = [p for p in open(lst).read().split("\n") if p]
        for p in files:
            count(ast.parse(open(p, encoding="utf-8").read()), c)
        print(f"{lst}: {len(files)} files")
        for k, v in sorted(c.items()):
            print(f"  {v:7d}  {k}")


if __name__ == "__main__":
    main()
