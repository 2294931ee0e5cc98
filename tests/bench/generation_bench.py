"""What a real constrained generation pays per token, through llama-cpp-python.

A real model (a GGUF that llama-cpp-python runs on the CPU) completes the
bodies of functions from installed packages that no test corpus uses: the
file up to and including a function's `def` line (and its docstring) is the
prompt and the grammar's prefix (``GrammarMatcher(store, prefix=...)``), and
the model writes on, greedy, through ``LlamaCppLogitsProcessor`` -- which
llama-cpp-python calls with the strided float32 view of its token-data
records.  Per step it records:

- the processor's call (wall clock, as the model's loop sees it);
- inside that call, the engine's own accept, fill and masking times
  (``Session.step_times``);
- how many tokens the mask allows (dense and sparse steps apart);
- the model's own time for the token (between two calls, this script's
  bookkeeping taken out).

Then each generation is replayed step by step on a fresh matcher with a
contiguous float32 array (``Session.step``: the engine's fill and masking with
nothing of the framework around it), and each step's processor call is
compared with that step's replay: the ratio's p50, p99 and max, and the
steps over 1.5x, are what the performance page's processor target reads.
A third run of each generation attaches the processor instead
(``LlamaCppLogitsProcessor.attach``: the context's contiguous logits row is
masked before llama.cpp builds its records), timed and compared the same way.

    python tests/bench/generation_bench.py --model M.gguf --store S.cfgm
        [--package jinja2 --package packaging ...] [--functions 12]
        [--max-tokens 120] [--threads 1] [--json out.json]

The store must be compiled with the model's own tokenizer (checked).  Not a
test: it prints a table.  Tested by nothing; the processor by
tests/py/test_package_processors.py and tests/py/test_package_llama.py.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import platform
import sys
import time

import numpy as np

import cfgmask
from cfgmask.generate import load_model, stop_token_ids, vocabulary_mismatches
from cfgmask.processors import LlamaCppLogitsProcessor

# Packages installed beside the test tools that no test corpus reads
# (tests/pycorpus fetches attrs, click, rich, httpx, anyio, starlette,
# fastapi, pydantic and typer; the standard library is the other corpus).
DEFAULT_PACKAGES = ("jinja2", "packaging", "dateutil", "mistune")


def package_files(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return []
    root = list(spec.submodule_search_locations)[0]
    out = []
    for base, _, files in sorted(os.walk(root)):
        out += [os.path.join(base, f) for f in sorted(files) if f.endswith(".py")]
    return out


def function_cuts(path, limit):
    """(prefix text, name) for the first `limit` functions of a file with a
    body of two statements or more: the prefix ends at the start of the
    first statement after the docstring (its indentation included)."""
    text = open(path, encoding="utf-8").read()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines(keepends=True)
    offsets = np.cumsum([0] + [len(line) for line in lines])
    cuts = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if len(body) < 2 or body[0].lineno == node.lineno:
            continue
        first = body[0]
        if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                and isinstance(first.value.value, str):
            first = body[1]
        # the model writes the first statement after the docstring, its
        # indentation already written (a small model cut at the line's
        # start mostly writes comments)
        cut = int(offsets[first.lineno - 1]) + first.col_offset
        cuts.append((text[:cut], node.name))
        if len(cuts) >= limit:
            break
    return cuts


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else float("nan")


def stats(xs):
    return {"n": len(xs), "mean": float(np.mean(xs)) if len(xs) else float("nan"),
            "p50": pct(xs, 50), "p99": pct(xs, 99), "max": float(np.max(xs)) if len(xs) else
            float("nan")}


class TimedProcessor:
    """The processor as llama-cpp-python calls it, timed per call; what this
    wrapper does after the call (reading the engine's times, counting the
    mask) is timed too and taken out of the model's time.

    With `contiguous`, the scores are copied into a contiguous float32 row
    before the call and back after it, both outside the timed window: the
    same call on the layout the engine masks fastest."""

    def __init__(self, processor, contiguous=False):
        self.p = processor
        self.contiguous = contiguous
        self.rows = []
        self._end = None        # when the last call (and its bookkeeping) ended
        self._row = None

    def __call__(self, input_ids, scores):
        start = time.perf_counter()
        target = scores
        if self.contiguous:
            if self._row is None or self._row.shape != scores.shape:
                self._row = np.empty(scores.shape, dtype=np.float32)
            self._row[:] = scores
            target = self._row
        t0 = time.perf_counter()
        out = self.p(input_ids, target)
        t1 = time.perf_counter()
        if self.contiguous:
            scores[:] = out
            out = scores
        accept, fill, mask = self.p.matcher._session.step_times
        allowed = int(np.unpackbits(self.p.bitmask.view(np.uint8)).sum())
        model = (start - self._end) if self._end is not None else float("nan")
        self.rows.append({"call_us": (t1 - t0) * 1e6, "accept_us": accept / 1e3,
                          "fill_us": fill / 1e3, "mask_us": mask / 1e3, "allowed": allowed,
                          "model_ms": model * 1e3})
        self._end = time.perf_counter()
        return out


def generate_one(llm, store, prefix, max_tokens, stops, contiguous=False, attach=False):
    """One greedy generation.  With `attach`, the processor masks the
    context's own contiguous logits row before llama.cpp builds its records
    (LlamaCppLogitsProcessor.attach, through this timing wrapper) instead of
    being a logits_processor."""
    import llama_cpp
    matcher = cfgmask.GrammarMatcher(store, prefix=prefix.encode("utf-8"))
    proc = TimedProcessor(LlamaCppLogitsProcessor(matcher), contiguous)
    prompt = llm.tokenize(prefix.encode("utf-8"), add_bos=True, special=False)
    tokens = []
    llm.reset()  # no reuse of the last prompt's cache: the same logits on a rerun
    kwargs = {"logits_processor": llama_cpp.LogitsProcessorList([proc])}
    if attach:
        LlamaCppLogitsProcessor.attach(proc, llm)  # it calls proc(input_ids, row)
        kwargs = {}
    try:
        for tok in llm.generate(prompt, temp=0.0, repeat_penalty=1.0, reset=True, **kwargs):
            if tok in stops:
                break
            tokens.append(tok)
            if len(tokens) >= max_tokens:
                break
    finally:
        if attach:
            LlamaCppLogitsProcessor.detach(proc)
    return tokens, proc.rows


def replay(store, prefix, tokens, steps):
    """Each generation step again on a fresh matcher: the tokens the call
    accepted, then fill + masking of a contiguous float32 row."""
    matcher = cfgmask.GrammarMatcher(store, prefix=prefix.encode("utf-8"))
    session = matcher._session
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    logits = np.zeros(store.vocab_size, dtype=np.float32)
    none = np.zeros(0, dtype=np.int32)
    out = []
    for i in range(steps):
        ids = none if i == 0 else np.asarray([tokens[i - 1]], dtype=np.int32)
        logits[:] = 0.0
        t0 = time.perf_counter()
        refused = session.step(ids, logits, bitmask)
        t1 = time.perf_counter()
        if refused >= 0:
            raise SystemExit(f"replay refused token {tokens[i - 1]} at step {i}")
        a, f, m = session.step_times
        out.append({"call_us": (t1 - t0) * 1e6, "engine_us": (a + f + m) / 1e3})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF model llama-cpp-python runs")
    ap.add_argument("--store", required=True, help="a store compiled with the model's tokenizer")
    ap.add_argument("--package", action="append", help="held-out package (repeatable)")
    ap.add_argument("--functions", type=int, default=12, help="generations in all")
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()

    store = cfgmask.Store.load(args.store)
    llm = load_model(args.model, n_ctx=4096, n_threads=args.threads)
    bad = vocabulary_mismatches(llm, store)
    if bad:
        raise SystemExit("the store's tokenizer is not the model's: " + "; ".join(bad))
    stops = set(store.eos_ids) | set(stop_token_ids(llm))

    cuts = []
    per_file = 2
    for pkg in args.package or DEFAULT_PACKAGES:
        for path in package_files(pkg):
            for prefix, name in function_cuts(path, per_file):
                if len(prefix) > 6000:       # keep the prompt inside the context
                    continue
                try:
                    cfgmask.GrammarMatcher(store, prefix=prefix.encode("utf-8"))
                except cfgmask.Error:
                    continue                  # the grammar refuses the file's start
                cuts.append((f"{pkg}:{os.path.basename(path)}:{name}", prefix))
                break
            if len(cuts) >= args.functions:
                break
        if len(cuts) >= args.functions:
            break

    steps, gens = [], []
    for i, (label, prefix) in enumerate(cuts):
        # strided and contiguous runs alternate which goes first (the second
        # finds the process warmer: the store's pages, the allocator)
        if i % 2:
            again, flat = generate_one(llm, store, prefix, args.max_tokens, stops, contiguous=True)
        t0 = time.perf_counter()
        tokens, rows = generate_one(llm, store, prefix, args.max_tokens, stops)
        wall = time.perf_counter() - t0
        if i % 2 == 0:
            again, flat = generate_one(llm, store, prefix, args.max_tokens, stops, contiguous=True)
        if again != tokens:   # greedy: the same tokens, so the steps pair up
            raise SystemExit(f"{label}: the contiguous rerun sampled other tokens")
        third, attached = generate_one(llm, store, prefix, args.max_tokens, stops, attach=True)
        if third != tokens:
            raise SystemExit(f"{label}: the attached run sampled other tokens")
        rep = replay(store, prefix, tokens, len(rows))
        for r, c, q, a in zip(rows, flat, rep, attached):
            r["attached_call_us"] = a["call_us"]
            r["attached_mask_us"] = a["mask_us"]
            r["contiguous_call_us"] = c["call_us"]
            r["contiguous_engine_us"] = c["accept_us"] + c["fill_us"] + c["mask_us"]
            r["contiguous_mask_us"] = c["mask_us"]
            r["replay_engine_us"] = q["engine_us"]
            r["ratio"] = r["call_us"] / max(r["contiguous_engine_us"], 1e-3)
            r["ratio_warm"] = r["call_us"] / max(q["engine_us"], 1e-3)
            r["ratio_attached"] = a["call_us"] / max(r["contiguous_engine_us"], 1e-3)
        steps += rows
        text = b"".join(store.token_bytes(t) for t in tokens).decode("utf-8", "replace")
        gens.append({"function": label, "tokens": len(tokens), "seconds": wall,
                     "call_us_mean": float(np.mean([r["call_us"] for r in rows])) if rows else 0.0,
                     "text": text})
        print(json.dumps({k: v for k, v in gens[-1].items() if k != "text"}), file=sys.stderr)

    vocab = store.vocab_size
    groups = {"all": steps,
              "dense (>= 50% allowed)": [r for r in steps if r["allowed"] >= vocab / 2],
              "middle": [r for r in steps if vocab / 100 < r["allowed"] < vocab / 2],
              "sparse (<= 1% allowed)": [r for r in steps if r["allowed"] <= vocab / 100]}
    report = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
              "load": os.getloadavg(), "vocab": vocab, "generations": len(gens),
              "tokens": sum(g["tokens"] for g in gens), "groups": {}}
    for name, rows in groups.items():
        if not rows:
            continue
        report["groups"][name] = {
            "steps": len(rows),
            "call_us": stats([r["call_us"] for r in rows]),
            "engine_in_call_us": stats([r["accept_us"] + r["fill_us"] + r["mask_us"] for r in rows]),
            "mask_us": stats([r["mask_us"] for r in rows]),
            "contiguous_call_us": stats([r["contiguous_call_us"] for r in rows]),
            "contiguous_engine_us": stats([r["contiguous_engine_us"] for r in rows]),
            "contiguous_mask_us": stats([r["contiguous_mask_us"] for r in rows]),
            "replay_engine_us": stats([r["replay_engine_us"] for r in rows]),
            "ratio": stats([r["ratio"] for r in rows]),
            "ratio_warm": stats([r["ratio_warm"] for r in rows]),
            "steps_over_1.5x": sum(r["ratio"] > 1.5 for r in rows),
            "attached_call_us": stats([r["attached_call_us"] for r in rows]),
            "attached_mask_us": stats([r["attached_mask_us"] for r in rows]),
            "ratio_attached": stats([r["ratio_attached"] for r in rows]),
            "attached_steps_over_1.5x": sum(r["ratio_attached"] > 1.5 for r in rows),
            "model_ms": stats([r["model_ms"] for r in rows if r["model_ms"] == r["model_ms"]]),
        }
    print(f"{report['machine']}, load {report['load'][0]:.1f}; vocabulary {vocab:,}; "
          f"{report['generations']} generations, {report['tokens']} tokens")
    print("| steps | n | strided call µs mean / p50 / p99 / max | engine in it p50 | masking p50 / "
          "p99 | contiguous call p50 / p99 | engine in it p50 / p99 | masking p50 / p99 | strided call ÷ contiguous "
          "engine p50 / p99 / max | over 1.5× | warm replay engine p50 | model ms/token p50 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, g in report["groups"].items():
        c, e, m, cc, ce, cm, r, x, md = (
            g["call_us"], g["engine_in_call_us"], g["mask_us"], g["contiguous_call_us"],
            g["contiguous_engine_us"], g["contiguous_mask_us"], g["replay_engine_us"], g["ratio"],
            g["model_ms"])
        print(f"| {name} | {g['steps']:,} | {c['mean']:.1f} / {c['p50']:.1f} / {c['p99']:.1f} / "
              f"{c['max']:.1f} | {e['p50']:.1f} | {m['p50']:.1f} / {m['p99']:.1f} | "
              f"{cc['p50']:.1f} / {cc['p99']:.1f} | {ce['p50']:.1f} / {ce['p99']:.1f} | "
              f"{cm['p50']:.1f} / {cm['p99']:.1f} | "
              f"{x['p50']:.2f} / {x['p99']:.2f} / {x['max']:.2f} | {g['steps_over_1.5x']} | "
              f"{r['p50']:.1f} | {md['p50']:.1f} |")
    print()
    print("Attached (LlamaCppLogitsProcessor.attach: llama.cpp's contiguous logits row):")
    print("| steps | n | attached call µs mean / p50 / p99 / max | masking p50 / p99 | "
          "attached call ÷ contiguous engine p50 / p99 / max | over 1.5× |")
    print("|---|---|---|---|---|---|")
    for name, g in report["groups"].items():
        a, am, ra = g["attached_call_us"], g["attached_mask_us"], g["ratio_attached"]
        print(f"| {name} | {g['steps']:,} | {a['mean']:.1f} / {a['p50']:.1f} / {a['p99']:.1f} / "
              f"{a['max']:.1f} | {am['p50']:.1f} / {am['p99']:.1f} | {ra['p50']:.2f} / "
              f"{ra['p99']:.2f} / {ra['max']:.2f} | {g['attached_steps_over_1.5x']} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"report": report, "generations": gens, "steps": steps}, fh, indent=1)


if __name__ == "__main__":
    main()
