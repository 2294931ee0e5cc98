"""What an HFLogitsProcessor call costs beyond the engine's own work, by
batch size and history length, against another processors module.

For each store (the strict grammar/lark/python.lark, start file_input, one
per vocabulary), B rows of teacher-forced token streams (row b: the tokens
of standard-library file b mod --files, tokenize_forced from a fresh
matcher, so that every token is in its step's mask) follow a prompt of
--history ids (random ids: the processor never accepts the prompt, but
compares it every call, as it does any history).  Each step hands the
processor CPU torch tensors of shape (B, prompt + n) and (B, vocab), made
outside the timing, as transformers' generate() does; per call the call's
time and, from the same call, the engine's accept + fill + masking times
(BatchMatcher.step_times) are recorded, and the overhead is their
difference.  With --baseline, the other module's processor is fed the same
tensors in the same step, the two alternating which goes first.

    python tests/bench/hf_overhead_bench.py --store SmolLM2=S.cfgm --store Qwen2=Q.cfgm
        [--batch 1 --batch 16] [--history 3 --history 2000] [--steps 200] [--files 4]
        [--baseline OLD_PROCESSORS.py] [--json out.json]

Not a test: it prints a table.  The processor itself is tested by
tests/py/test_package_processors.py and tests/py/test_transformers.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import sysconfig
import time

import numpy as np

import cfgmask
from cfgmask import processors as current

STDLIB_FILES = ["bisect.py", "colorsys.py", "heapq.py", "textwrap.py", "shlex.py", "fnmatch.py"]


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def load_module(path):
    spec = importlib.util.spec_from_file_location("cfgmask._baseline_processors", path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "cfgmask"
    spec.loader.exec_module(module)
    return module


def run(modules, store, batch, history, steps, files, torch):
    stdlib = sysconfig.get_paths()["stdlib"]
    streams = []
    for name in STDLIB_FILES[:files]:
        text = open(os.path.join(stdlib, name), encoding="utf-8").read()
        streams.append(cfgmask.GrammarMatcher(store).tokenize_forced(text))
    steps = min(steps, min(len(s) for s in streams))
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, store.vocab_size, size=history)
    full = np.stack([np.concatenate([prompt, streams[b % files][:steps]]) for b in range(batch)])
    full = full.astype(np.int64)
    logits = rng.standard_normal((batch, store.vocab_size)).astype(np.float32)
    procs = {name: m.HFLogitsProcessor(store=store, batch_size=batch) for name, m in modules}
    out = {name: {"call": [], "over": []} for name, _ in modules}
    for n in range(steps):
        order = list(procs.items()) if n % 2 == 0 else list(procs.items())[::-1]
        for name, proc in order:
            ids = torch.from_numpy(full[:, :history + n].copy())
            scores = torch.from_numpy(logits.copy())
            t0 = time.perf_counter_ns()
            proc(ids, scores)
            ns = time.perf_counter_ns() - t0
            engine = sum(proc.batch._batch.step_times)
            out[name]["call"].append(ns / 1e3)
            out[name]["over"].append((ns - engine) / 1e3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", action="append", required=True, metavar="LABEL=PATH")
    ap.add_argument("--batch", type=int, action="append")
    ap.add_argument("--history", type=int, action="append",
                    help="prompt ids before the generated ones")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--baseline", help="another processors.py, timed on the same tensors")
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    modules = [("cfgmask", current)]
    if args.baseline:
        modules.append(("baseline", load_module(args.baseline)))
    rows = []
    for label, path in (x.split("=", 1) for x in args.store):
        store = cfgmask.Store.load(path)
        for batch in args.batch or [1, 16]:
            for history in args.history or [3, 2000]:
                res = run(modules, store, batch, history, args.steps, args.files, torch)
                for name, r in res.items():
                    row = {"tokenizer": label, "vocab": store.vocab_size, "batch": batch,
                           "history": history, "processors": name, "calls": len(r["call"]),
                           "call_p50": pct(r["call"], 50), "call_p99": pct(r["call"], 99),
                           "overhead_p50": pct(r["over"], 50),
                           "overhead_p99": pct(r["over"], 99)}
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr)
    print(f"torch {torch.__version__}, load {os.getloadavg()[0]:.1f} at the end")
    print("| vocab | B | history | processors | calls | call p50 | call p99 | overhead p50 "
          "| overhead p99 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['tokenizer']} {r['vocab']:,} | {r['batch']} | {r['history']:,} | "
              f"{r['processors']} | {r['calls']} | {r['call_p50']:.1f} | {r['call_p99']:.1f} | "
              f"{r['overhead_p50']:.1f} | {r['overhead_p99']:.1f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
