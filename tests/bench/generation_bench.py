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
masked before llama.cpp builds its records), timed from the entry of the
wrapped ``Llama.sample`` to the start of the original one (everything the
processor puts between the forward pass and the sampler) and compared the
same way; with ``--baseline`` another processors module's attach runs on the
same steps (before/after in one run), and each prompt is run once more with
no processor through the same timing wrapper (the timing's own floor).

    python tests/bench/generation_bench.py --model M.gguf --store S.cfgm
        [--package jinja2 --package packaging ...] [--functions 12]
        [--max-tokens 120] [--threads 1] [--baseline OLD_PROCESSORS.py]
        [--json out.json]

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
from cfgmask import processors as processors_module
from cfgmask.processors import LlamaCppLogitsProcessor

# Packages installed beside the test tools that no test corpus reads
# (tests/pycorpus fetches attrs, click, rich, httpx, anyio, starlette,
# fastapi, pydantic and typer; the standard library is the other corpus).
DEFAULT_PACKAGES = ("jinja2", "packaging", "dateutil", "mistune")


def package_files(name):
    """The .py files of an installed package (a single module: its file)."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        return []
    if not spec.submodule_search_locations:
        return [spec.origin] if spec.origin and spec.origin.endswith(".py") else []
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


class TimedHook:
    """An attached processor (LlamaCppLogitsProcessor.attach) timed as
    llama-cpp-python's generate loop meets it: from the entry of the
    `Llama.sample` call the attach wrapped to the moment the original
    `sample` starts, i.e. everything the processor adds between the forward
    pass and the sampler (reading the row, the ids, the accept, fill and
    masking, and its Python or C++ wrapper).  The original method is timed
    through a class-level wrapper set only while attach captures it."""

    def __init__(self, llm, proc, module):
        import functools
        self.p = proc
        self.rows = []
        self._end = None
        self._real_start = None
        cls = type(llm)
        orig = cls.sample

        @functools.wraps(orig)
        def timed_real(this, *args, **kwargs):
            self._real_start = time.perf_counter()
            return orig(this, *args, **kwargs)

        if module is None:  # no processor: the floor of this way of timing
            hook = timed_real.__get__(llm)
        else:
            cls.sample = timed_real
            try:
                module.LlamaCppLogitsProcessor.attach(proc, llm)
            finally:
                cls.sample = orig
            hook = llm.sample

        def outer(*args, **kwargs):
            start = time.perf_counter()
            tok = hook(*args, **kwargs)
            if proc is None:
                accept = fill = mask = allowed = 0
            else:
                accept, fill, mask = proc.matcher._session.step_times
                allowed = int(np.unpackbits(proc.bitmask.view(np.uint8)).sum())
            model = (start - self._end) if self._end is not None else float("nan")
            row = {"call_us": (self._real_start - start) * 1e6,
                   "accept_us": accept / 1e3, "fill_us": fill / 1e3,
                   "mask_us": mask / 1e3, "allowed": allowed, "model_ms": model * 1e3}
            # the engine's hook (a builtin function of the hook object): its parts
            parts = getattr(getattr(hook, "__self__", None), "times", None)
            if parts is not None:
                row["hook_before_us"], row["hook_engine_us"], row["hook_after_us"] = (
                    x / 1e3 for x in parts)
            self.rows.append(row)
            self._end = time.perf_counter()
            return tok

        llm.sample = outer


def generate_one(llm, store, prefix, max_tokens, stops, contiguous=False, attach=None):
    """One greedy generation.  With `attach` (a processors module), the
    processor masks the context's own contiguous logits row before llama.cpp
    builds its records (that module's LlamaCppLogitsProcessor.attach, timed
    by TimedHook) instead of being a logits_processor."""
    import llama_cpp
    matcher = cfgmask.GrammarMatcher(store, prefix=prefix.encode("utf-8"))
    prompt = llm.tokenize(prefix.encode("utf-8"), add_bos=True, special=False)
    tokens = []
    llm.reset()  # no reuse of the last prompt's cache: the same logits on a rerun
    raw = None
    if attach == "floor":  # no processor: what the timing itself costs
        proc = TimedHook(llm, None, None)
        kwargs = {}
    elif attach is not None:
        raw = attach.LlamaCppLogitsProcessor(matcher)
        proc = TimedHook(llm, raw, attach)
        kwargs = {}
    else:
        proc = TimedProcessor(LlamaCppLogitsProcessor(matcher), contiguous)
        kwargs = {"logits_processor": llama_cpp.LogitsProcessorList([proc])}
    try:
        for tok in llm.generate(prompt, temp=0.0, repeat_penalty=1.0, reset=True, **kwargs):
            if tok in stops:
                break
            tokens.append(tok)
            if len(tokens) >= max_tokens:
                break
    finally:
        if raw is not None:
            raw.detach()
        vars(llm).pop("sample", None)
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
    ap.add_argument("--baseline", help="another processors.py whose attach is timed too "
                    "(e.g. `git show REV:runtime/python/cfgmask/processors.py > old.py`)")
    ap.add_argument("--json")
    args = ap.parse_args()
    baseline = None
    if args.baseline:
        import importlib.util as iu
        spec = iu.spec_from_file_location("cfgmask._baseline_processors", args.baseline)
        baseline = iu.module_from_spec(spec)
        baseline.__package__ = "cfgmask"
        spec.loader.exec_module(baseline)

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

    steps, gens, floor_rows = [], [], []
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
        # attached: this tree's processor and the baseline's, alternating
        # which goes first
        order = [("", processors_module)] + ([("base_", baseline)] if baseline else [])
        if i % 2:
            order.reverse()
        att = {}
        for key, module in order:
            third, att[key] = generate_one(llm, store, prefix, args.max_tokens, stops,
                                           attach=module)
            if third != tokens:
                raise SystemExit(f"{label}: the attached run ({key or 'this tree'}) sampled "
                                 "other tokens")
        attached = att[""]
        # the same prompt with no processor (other tokens): the timing's floor
        floor_rows += generate_one(llm, store, prefix, args.max_tokens, stops, attach="floor")[1]
        rep = replay(store, prefix, tokens, len(rows))
        for k, (r, c, q, a) in enumerate(zip(rows, flat, rep, attached)):
            r["attached_call_us"] = a["call_us"]
            r["attached_mask_us"] = a["mask_us"]
            r["attached_engine_us"] = a["accept_us"] + a["fill_us"] + a["mask_us"]
            for part in ("hook_before_us", "hook_engine_us", "hook_after_us"):
                if part in a:
                    r[part] = a[part]
            if baseline:
                b = att["base_"][k]
                r["base_attached_call_us"] = b["call_us"]
                r["base_attached_engine_us"] = b["accept_us"] + b["fill_us"] + b["mask_us"]
                r["ratio_base_attached"] = b["call_us"] / max(c["accept_us"] + c["fill_us"] +
                                                              c["mask_us"], 1e-3)
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
              "tokens": sum(g["tokens"] for g in gens), "groups": {},
              "floor_us": stats([r["call_us"] for r in floor_rows])}
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
            "attached_engine_us": stats([r["attached_engine_us"] for r in rows]),
            **{part: stats([r[part] for r in rows if part in r])
               for part in ("hook_before_us", "hook_engine_us", "hook_after_us")},
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
    if baseline:
        for name, rows in groups.items():
            if rows:
                report["groups"][name].update({
                    "base_attached_call_us": stats([r["base_attached_call_us"] for r in rows]),
                    "base_attached_engine_us": stats([r["base_attached_engine_us"] for r in rows]),
                    "ratio_base_attached": stats([r["ratio_base_attached"] for r in rows]),
                    "base_attached_steps_over_1.5x": sum(r["ratio_base_attached"] > 1.5
                                                         for r in rows)})
        fl = report["floor_us"]
        print()
        print(f"The timing's floor (the same wrapper and prompts, no processor; {fl['n']} calls): "
              f"p50 {fl['p50']:.1f} µs, p99 {fl['p99']:.1f}, max {fl['max']:.1f}")
        print(f"Attached, before ({args.baseline}) and after (this tree), the same steps; "
              "call = the wrapped Llama.sample's entry to the original sample's start; "
              "÷ the contiguous-copy run's engine time of the step:")
        print("| steps | n | contiguous engine p50 / p99 | before: call p50 / p99 / max | "
              "engine in it p50 | ÷ p50 / p99 | over 1.5× | after: call p50 / p99 / max | "
              "engine in it p50 | ÷ p50 / p99 | over 1.5× |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, g in report["groups"].items():
            ce, b, be, rb = (g["contiguous_engine_us"], g["base_attached_call_us"],
                             g["base_attached_engine_us"], g["ratio_base_attached"])
            a, ae, ra = g["attached_call_us"], g["attached_engine_us"], g["ratio_attached"]
            print(f"| {name} | {g['steps']:,} | {ce['p50']:.1f} / {ce['p99']:.1f} | "
                  f"{b['p50']:.1f} / {b['p99']:.1f} / {b['max']:.1f} | {be['p50']:.1f} | "
                  f"{rb['p50']:.2f} / {rb['p99']:.2f} | {g['base_attached_steps_over_1.5x']} | "
                  f"{a['p50']:.1f} / {a['p99']:.1f} / {a['max']:.1f} | {ae['p50']:.1f} | "
                  f"{ra['p50']:.2f} / {ra['p99']:.2f} | {g['attached_steps_over_1.5x']} |")
    print()
    print("The engine's hook, its parts (µs p50 / p99): before the engine (the Llama's and "
          "the processor's state), the engine's part (accept + fill + masking, the row, the "
          "hold and the GIL around them), after it (the processor's counters):")
    for name, g in report["groups"].items():
        hb, he, ha = g["hook_before_us"], g["hook_engine_us"], g["hook_after_us"]
        if hb["n"]:
            print(f"  {name}: before {hb['p50']:.1f} / {hb['p99']:.1f}, engine part "
                  f"{he['p50']:.1f} / {he['p99']:.1f} (accept + fill + masking "
                  f"{g['attached_engine_us']['p50']:.1f}), after {ha['p50']:.1f} / {ha['p99']:.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"report": report, "generations": gens, "steps": steps}, fh, indent=1)


if __name__ == "__main__":
    main()
