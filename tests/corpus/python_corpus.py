#!/usr/bin/env python3
"""The Python corpus: standard-library files that both CPython and Lark accept.

A file of the interpreter's standard library (``sysconfig.get_paths()['stdlib']``,
``*.py``, read as UTF-8 text exactly as stored -- no newline is appended) is
kept when

* ``compile(text, path, 'exec')`` succeeds, and
* Lark's own ``python.lark`` accepts it:
  ``Lark.open_from_package('lark', 'python.lark', ['grammars'], parser='lalr',
  postlex=PythonIndenter(), start='file_input')``.

Verdicts are cached by content hash in ``OUTDIR/python/cache.json``, so reruns
only parse new or changed files.  Output:

    OUTDIR/python/manifest.json   {"files": [{"path", "bytes", "sha1"}...], ...}

Usage: python_corpus.py [OUTDIR] [--limit N] [--max-bytes N] [--jobs N] [--show N]

``--limit N`` takes N files spread evenly over the sorted list (quick CI size);
``--max-bytes`` skips larger files before parsing.  The summary line says how
many files of how many were accepted, followed by the first rejection reasons.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import sysconfig
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

_PARSER = None
CACHE_VERSION = 1


def lark_parser():
    global _PARSER
    if _PARSER is None:
        from lark import Lark
        from lark.indenter import PythonIndenter
        _PARSER = Lark.open_from_package("lark", "python.lark", ["grammars"], parser="lalr",
                                         postlex=PythonIndenter(), start="file_input")
    return _PARSER


def stdlib_files():
    root = Path(sysconfig.get_paths()["stdlib"])
    skip_dirs = {"site-packages", "dist-packages", "__pycache__"}
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                out.append(Path(dirpath) / fn)
    return root, out


def judge(path_str: str):
    """(sha1, ok, reason) for one file."""
    data = Path(path_str).read_bytes()
    h = hashlib.sha1(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return h, False, f"not UTF-8: {e.reason}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path_str, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        return h, False, f"compile: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    try:
        lark_parser().parse(text)
    except Exception as e:  # lark.exceptions.* and RecursionError
        return h, False, f"lark: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return h, True, ""


def spread(items, n):
    if n is None or len(items) <= n:
        return list(items)
    return [items[(i * len(items)) // n] for i in range(n)]


def build(outdir: Path, limit=None, max_bytes=None, jobs=None, show=5, quiet=False):
    t0 = time.time()
    root, files = stdlib_files()
    if max_bytes is not None:
        files = [p for p in files if p.stat().st_size <= max_bytes]
    files = spread(files, limit)
    d = outdir / "python"
    d.mkdir(parents=True, exist_ok=True)
    cache_path = d / "cache.json"
    cache = {}
    if cache_path.exists():
        try:
            c = json.loads(cache_path.read_text())
            if c.get("version") == CACHE_VERSION:
                cache = c["verdicts"]
        except (ValueError, KeyError):
            cache = {}

    hashes = {}
    todo = []
    for p in files:
        h = hashlib.sha1(p.read_bytes()).hexdigest()
        hashes[p] = h
        if h not in cache:
            todo.append(p)
    if todo:
        jobs = jobs or min(len(todo), os.cpu_count() or 1)
        if jobs > 1 and len(todo) > 4:
            with ProcessPoolExecutor(jobs) as ex:
                results = list(ex.map(judge, [str(p) for p in todo], chunksize=4))
        else:
            results = [judge(str(p)) for p in todo]
        for h, ok, why in results:
            cache[h] = [ok, why]
    cache_path.write_text(json.dumps({"version": CACHE_VERSION, "verdicts": cache}))

    accepted, rejected = [], []
    for p in files:
        ok, why = cache[hashes[p]]
        rel = str(p.relative_to(root))
        if ok:
            accepted.append({"path": str(p), "rel": rel, "bytes": p.stat().st_size, "sha1": hashes[p]})
        else:
            rejected.append({"path": str(p), "rel": rel, "reason": why})
    manifest = {"stdlib": str(root), "python": sys.version.split()[0],
                "limit": limit, "max_bytes": max_bytes,
                "considered": len(files), "accepted": len(accepted),
                "files": accepted, "rejected": rejected}
    (d / "manifest.json").write_text(json.dumps(manifest, indent=1))
    if not quiet:
        print(f"python_corpus: {len(accepted)} of {len(files)} files accepted "
              f"({len(todo)} parsed, {len(files) - len(todo)} cached, {time.time() - t0:.1f}s) -> {d}")
        for r in rejected[:show]:
            print(f"  rejected {r['rel']}: {r['reason']}")
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default=str(Path(__file__).resolve().parents[2] / ".cache" / "corpus"))
    ap.add_argument("--limit", type=int, default=None, help="take N files spread over the stdlib")
    ap.add_argument("--max-bytes", type=int, default=None, help="skip files larger than this")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--show", type=int, default=5, help="rejection reasons to print")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    build(Path(a.outdir), a.limit, a.max_bytes, a.jobs, a.show, a.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
