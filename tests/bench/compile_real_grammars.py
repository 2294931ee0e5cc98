#!/usr/bin/env python3
"""Compile benchmark on real Lark grammars from PyPI packages: wall seconds, peak RSS and
store size of ``cfgmask compile`` for every grammar that tests/realgrammars/fetch.sh
fetches (the grammars are not copied into the project: their packages are fetched from
PyPI, pinned), with a 128k vocabulary (Qwen2's first 128,000 ids, as in
compile_scaling.py) or any vocabulary compile_scaling.py knows.

Usage:
  compile_real_grammars.py [--vocab 128k] [--threads 2] [--timeout 300] [--out DIR]
Writes DIR/real_grammars.json and prints a Markdown table; a grammar cfgmask refuses
(a conflict, a back-reference, a resource limit) is listed with its one-line reason.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "realgrammars"))
import compile_scaling  # noqa: E402  the vocabularies
import table  # noqa: E402  the grammar list (name, file, start, indenter, ...)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", default="128k")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--only", default="", help="comma-separated grammar names (default: all)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "compile_scaling"))
    args = ap.parse_args()
    cfgmask = os.environ.get("CFGMASK_BIN", os.path.join(ROOT, "build", "cfgmask"))
    subprocess.run([os.path.join(ROOT, "tests", "realgrammars", "fetch.sh"), str(table.CACHE)],
                   check=True)
    os.makedirs(args.out, exist_ok=True)
    tok = compile_scaling.tokenizer_path(args.vocab, args.out)
    rows = []
    only = set(filter(None, args.only.split(",")))
    for name, rel, start, indenter, kind, package, _parser in table.GRAMMARS:
        if only and name not in only:
            continue
        store = os.path.join(args.out, f"real-{name}.cfgm")
        cmd = ["/usr/bin/time", "-f", "%e %M", cfgmask, "compile", str(table.CACHE / rel),
               "--start", start, "--indenter", indenter, "--tokenizer", tok,
               "--threads", str(args.threads), "--quiet", "-o", store]
        row = {"name": name, "package": package, "kind": kind, "vocab": args.vocab,
               "threads": args.threads, "when": time.strftime("%Y-%m-%d %H:%M")}
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            row["error"] = f"over {args.timeout:.0f} s"
            row["seconds"] = time.perf_counter() - t0
        else:
            # /usr/bin/time adds "Command exited with non-zero status N" on failure.
            lines = [x for x in p.stderr.strip().splitlines()
                     if not x.startswith("Command exited with")]
            wall, rss_kb = lines[-1].split()
            row["seconds"], row["peak_mib"] = float(wall), int(rss_kb) / 1024
            if p.returncode != 0:
                msgs = [x for x in lines[:-1] if "warning" not in x]
                row["error"] = msgs[-1] if msgs else f"exit {p.returncode}"
            else:
                row["store_mib"] = os.path.getsize(store) / 1048576
                os.remove(store)
        rows.append(row)
        print(name, {k: v for k, v in row.items() if k not in ("package", "kind")},
              file=sys.stderr, flush=True)
    json.dump(rows, open(os.path.join(args.out, "real_grammars.json"), "w"), indent=1)
    print("| grammar | package | seconds | peak MiB | store MiB | outcome |")
    print("|---|---|---:|---:|---:|---|")
    for r in rows:
        outcome = r.get("error", "compiled")
        print(f"| {r['name']} | {r['package']} | {r['seconds']:.1f} | {r.get('peak_mib', float('nan')):.0f} | "
              f"{r.get('store_mib', float('nan')):.1f} | {outcome} |")


if __name__ == "__main__":
    main()
