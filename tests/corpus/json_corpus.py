#!/usr/bin/env python3
"""Collect a JSON corpus from files already on this machine.

Roots searched (nothing is downloaded): the interpreter's site-packages and
standard library, ``/usr/lib/python3/dist-packages`` and ``/usr/share``.
Every ``*.json`` file of at most ``--max-bytes`` bytes that decodes as UTF-8 is
judged by ``json.loads`` with the non-RFC constants ``NaN``/``Infinity``
refused; identical contents are kept once.  A deterministic, evenly spread
selection of at most ``--max-docs`` accepted documents is copied to

    OUTDIR/json/valid/NNNN.json     (byte-identical copies)
    OUTDIR/json/invalid/NNNN.json   (files json.loads rejects; handy negatives)
    OUTDIR/json/manifest.json       source path, bytes, sha1 per document

Usage: json_corpus.py [OUTDIR] [--max-bytes N] [--max-docs N] [--min-docs N]
Exit status 1 when fewer than --min-docs (default 200) documents are found.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path


def roots():
    paths = sysconfig.get_paths()
    out = []
    for key in ("purelib", "platlib", "stdlib"):
        p = paths.get(key)
        if p and p not in out:
            out.append(p)
    for p in ("/usr/lib/python3/dist-packages", "/usr/share"):
        if p not in out:
            out.append(p)
    return [Path(p) for p in out if os.path.isdir(p)]


def _no_constants(name):
    raise ValueError(f"non-RFC constant {name}")


def json_verdict(text: str) -> bool:
    """True when Python's json module accepts ``text`` as an RFC 8259 document."""
    try:
        json.loads(text, parse_constant=_no_constants)
        return True
    except (ValueError, RecursionError):
        return False


def find_files(max_bytes: int):
    seen_real = set()
    for root in roots():
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(".json"):
                    continue
                p = Path(dirpath) / fn
                try:
                    if not p.is_file() or p.is_symlink():
                        continue
                    rp = p.resolve()
                    if rp in seen_real:
                        continue
                    seen_real.add(rp)
                    size = p.stat().st_size
                except OSError:
                    continue
                if 0 < size <= max_bytes:
                    yield p


def spread(items, n):
    """n items evenly spread over a list (deterministic)."""
    if len(items) <= n:
        return list(items)
    return [items[(i * len(items)) // n] for i in range(n)]


def build(outdir: Path, max_bytes: int, max_docs: int, quiet: bool = False):
    valid, invalid, seen = [], [], set()
    for p in find_files(max_bytes):
        try:
            data = p.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        h = hashlib.sha1(data).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        (valid if json_verdict(text) else invalid).append((p, data, h))
    chosen = spread(valid, max_docs)
    bad = spread(invalid, max(1, max_docs // 10))
    root = outdir / "json"
    manifest = {"max_bytes": max_bytes, "found_valid": len(valid), "found_invalid": len(invalid)}
    for kind, items in (("valid", chosen), ("invalid", bad)):
        d = root / kind
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.json"):
            old.unlink()
        entries = []
        for i, (p, data, h) in enumerate(items):
            name = f"{i:04d}.json"
            (d / name).write_bytes(data)
            entries.append({"file": f"{kind}/{name}", "source": str(p), "bytes": len(data), "sha1": h})
        manifest[kind] = entries
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    if not quiet:
        print(f"json_corpus: {len(chosen)} documents kept of {len(valid)} valid "
              f"({len(invalid)} rejected by json.loads, {len(bad)} kept as negatives), "
              f"max {max_bytes} bytes -> {root}")
    return chosen, bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default=str(Path(__file__).resolve().parents[2] / ".cache" / "corpus"))
    ap.add_argument("--max-bytes", type=int, default=64 * 1024)
    ap.add_argument("--max-docs", type=int, default=600)
    ap.add_argument("--min-docs", type=int, default=200)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    chosen, _ = build(Path(a.outdir), a.max_bytes, a.max_docs, a.quiet)
    if len(chosen) < a.min_docs:
        print(f"json_corpus: only {len(chosen)} documents (< {a.min_docs})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
