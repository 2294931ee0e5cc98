"""What a logits-processor call costs beyond the engine's own work.

For each store (one per vocabulary: the strict grammar/lark/python.lark,
start file_input, with SmolLM2's 49,152 and Qwen2's 151,936 tokens), the
token streams of a few standard-library files (tokenize_forced from a fresh
matcher: every token is in its step's mask) are fed through
LlamaCppLogitsProcessor (numpy input_ids and the strided float32 view of a
token-data record array, as llama-cpp-python hands them; and, as
"llama-cpp attached", a contiguous float32 row, as
LlamaCppLogitsProcessor.attach hands it llama.cpp's own logits) and
the processor attached (LlamaCppLogitsProcessor.attach) to a stand-in
Llama with no model, as "llama-cpp hook": each call is the generate loop's
`llm.sample(idx=...)`, the hook reading the ids from the Llama's buffer and
masking its contiguous row (needs llama_cpp importable); and
HFLogitsProcessor (CPU torch tensors of shape (1, length) and (1, vocab), or
numpy arrays where torch is missing).  Per call it records the call's time
and, from the same call, the engine's accept, fill and masking-kernel times
(Session.step / BatchMatcher.step report them); the framework-side overhead
is the call minus those three.  Every row is given for all steps and again
for dense (at least half the vocabulary allowed), middle and sparse (at
most 1%) steps.  Fresh logits are written before each call,
outside the timing.

Steering: for a few generations (a file's first --steer-after tokens, then
steer_to_end until the stop token) the time of all the processor's calls,
the steered ones included (they make the one search for a shortest
completion), is spread over the generation's tokens.  The search's tables,
built once per store and then cached with it, are timed apart.

    python tests/bench/processor_bench.py --smollm2-store S.cfgm --qwen2-store Q.cfgm
    [--store Gemma4=G.cfgm ...] [--files 5] [--max-tokens 400] [--baseline OLD_PROCESSORS.py] [--json out.json]

--baseline times another processors module (e.g. `git show
REV:runtime/python/cfgmask/processors.py > old.py`) on the same streams, call
time only.  Not a test: it prints a table.  Tested by nothing; the
processors themselves by tests/py/test_package_processors.py and
tests/py/test_transformers.py.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import platform
import sys
import sysconfig
import time

import numpy as np

import cfgmask
from cfgmask import processors as current

STDLIB_FILES = ["bisect.py", "colorsys.py", "heapq.py", "textwrap.py", "shlex.py", "fnmatch.py",
                "keyword.py", "this.py"]


def streams(store, files, max_tokens):
    stdlib = sysconfig.get_paths()["stdlib"]
    out = []
    for name in files:
        text = open(os.path.join(stdlib, name), encoding="utf-8").read()
        toks = cfgmask.GrammarMatcher(store).tokenize_forced(text)[:max_tokens]
        out.append(toks)
    return out


def strided_view(vocab):
    rec = np.zeros(vocab, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)],
                                         align=True))
    return rec, rec["logit"]


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if xs else float("nan")


def allowed_count(bitmask):
    return int(np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8)).sum())


def run_llama(module, store, toks_list, logits, timed_engine, attached=False):
    """With `attached`, the processor is handed a contiguous float32 row, as
    LlamaCppLogitsProcessor.attach hands it llama.cpp's own logits."""
    calls, parts = [], {"accept": [], "fill": [], "mask": [], "allowed": []}
    prompt = np.array([1, 2, 3], dtype=np.intc)
    for toks in toks_list:
        proc = module.LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store))
        ids = np.concatenate([prompt, np.asarray(toks, dtype=np.intc)])
        rec, view = strided_view(store.vocab_size)
        if attached:
            rec = None
            view = np.empty(store.vocab_size, dtype=np.float32)
        for n in range(len(toks)):
            if attached:
                view[:] = logits  # what llama.cpp writes before each call
            else:
                rec["logit"] = logits
            cur = ids[:len(prompt) + n]
            t0 = time.perf_counter_ns()
            proc(cur, view)
            record(calls, parts, proc.bitmask, time.perf_counter_ns() - t0,
                   proc.matcher._session.step_times if timed_engine else None)
    return calls, parts


def record(calls, parts, bitmask, ns, step_times=None):
    """One call's figures: its time (µs), the mask's allowed count and, given
    the engine's (accept, fill, mask) ns of the step, those."""
    calls.append(ns / 1e3)
    parts["allowed"].append(allowed_count(bitmask))
    if step_times is not None:
        a, f, m = step_times
        parts["accept"].append(a / 1e3)
        parts["fill"].append(f / 1e3)
        parts["mask"].append(m / 1e3)


class StubLlama:
    """What LlamaCppLogitsProcessor.attach reads of a llama_cpp.Llama, with
    no model: `input_ids` and `n_tokens`, `_ctx.ctx` (here the address of a
    float32 row, which llama_get_logits_ith -- replaced by
    cfgmask._core._logits_row_stub while attach runs -- hands back as the
    logits) and a `sample` that returns 0."""

    def __init__(self, row, ids):
        import types
        self._row = row
        self.input_ids = ids
        self.n_tokens = 0
        self._ctx = types.SimpleNamespace(ctx=ctypes.c_void_p(row.ctypes.data))

    @property
    def _input_ids(self):
        return self.input_ids[:self.n_tokens]

    def n_vocab(self):
        return len(self._row)

    def sample(self, idx=None):
        return 0


def attach_stub(module, proc, llm):
    """module.LlamaCppLogitsProcessor.attach(proc, llm) with llama.cpp's
    llama_get_logits_ith replaced by the stub that reads the row."""
    import llama_cpp
    real = llama_cpp.llama_get_logits_ith
    stub = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_int32)(
        cfgmask._core._logits_row_stub)
    llama_cpp.llama_get_logits_ith = stub
    try:
        module.LlamaCppLogitsProcessor.attach(proc, llm)
    finally:
        llama_cpp.llama_get_logits_ith = real


def run_hook(module, store, toks_list, logits, timed_engine):
    """The processor attached to a StubLlama: each call is `llm.sample(idx=...)`
    as llama-cpp-python's generate loop makes it, the hook reading the ids
    from the Llama's buffer and masking its contiguous row."""
    calls, parts = [], {"accept": [], "fill": [], "mask": [], "allowed": []}
    prompt = np.array([1, 2, 3], dtype=np.intc)
    for toks in toks_list:
        proc = module.LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store))
        ids = np.zeros(len(prompt) + len(toks) + 1, dtype=np.intc)
        ids[:len(prompt)] = prompt
        ids[len(prompt):len(prompt) + len(toks)] = toks
        row = np.empty(store.vocab_size, dtype=np.float32)
        llm = StubLlama(row, ids)
        attach_stub(module, proc, llm)
        try:
            for n in range(len(toks)):
                row[:] = logits  # what llama.cpp writes before each call
                llm.n_tokens = len(prompt) + n
                t0 = time.perf_counter_ns()
                llm.sample(idx=llm.n_tokens - 1)
                record(calls, parts, proc.bitmask, time.perf_counter_ns() - t0,
                       proc.matcher._session.step_times if timed_engine else None)
        finally:
            proc.detach()
    return calls, parts


def run_hf(module, store, toks_list, logits, timed_engine, torch):
    calls, parts = [], {"accept": [], "fill": [], "mask": [], "allowed": []}
    for toks in toks_list:
        proc = module.HFLogitsProcessor(store=store, batch_size=1)
        prompt = [1, 2, 3]
        full = np.asarray([prompt + list(toks)], dtype=np.int64)
        src = np.asarray(logits, dtype=np.float32)[None, :]
        for n in range(len(toks)):
            if torch is not None:
                ids = torch.from_numpy(full[:, :len(prompt) + n].copy())
                scores = torch.from_numpy(src.copy())
            else:
                ids = full[:, :len(prompt) + n].copy()
                scores = src.copy()
            t0 = time.perf_counter_ns()
            proc(ids, scores)
            record(calls, parts, proc.bitmask, time.perf_counter_ns() - t0,
                   proc.batch._batch.step_times if timed_engine else None)
    return calls, parts


def run_steering(store, toks_list, steer_after, logits):
    """Per generation: µs of the steered calls spread over all its tokens."""
    per_token, searches = [], []
    # The completion search's tables are built once per store (then cached
    # with it): timed apart, not spread over one generation.
    t0 = time.perf_counter_ns()
    cfgmask.GrammarMatcher(store).completion_search(1)
    build_ms = (time.perf_counter_ns() - t0) / 1e6
    prompt = [1, 2, 3]
    rng = np.random.default_rng(0)
    eos = set(store.eos_ids)
    for toks in toks_list:
        proc = current.LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store))
        ids = list(prompt)
        total_ns = steer_ns = 0
        for t in toks[:steer_after]:
            scores = logits.copy()
            t0 = time.perf_counter_ns()
            proc(np.asarray(ids, dtype=np.intc), scores)
            total_ns += time.perf_counter_ns() - t0
            ids.append(t)
        proc.steer_to_end = True
        for _ in range(2000):
            scores = (logits + rng.standard_normal(len(logits)).astype(np.float32))
            t0 = time.perf_counter_ns()
            out = proc(np.asarray(ids, dtype=np.intc), scores)
            dt = time.perf_counter_ns() - t0
            total_ns += dt
            steer_ns += dt
            tok = int(np.argmax(out))
            if tok in eos:
                break
            ids.append(tok)
        else:
            raise SystemExit("steering did not end")
        n = len(ids) - len(prompt) + 1
        per_token.append(total_ns / 1e3 / n)
        searches.append(steer_ns / 1e3)
    return per_token, searches, build_ms


DENSITY = (("all", lambda a, v: True), ("dense", lambda a, v: a >= v / 2),
           ("middle", lambda a, v: v / 100 < a < v / 2), ("sparse", lambda a, v: a <= v / 100))


def split_by_density(calls, parts, vocab):
    """(class, calls, parts) for all steps, then dense (at least half the
    vocabulary allowed), middle and sparse (at most 1%) steps."""
    out = []
    for name, keep in DENSITY:
        idx = [i for i, a in enumerate(parts["allowed"]) if keep(a, vocab)]
        if idx:
            out.append((name, [calls[i] for i in idx],
                        {k: [v[i] for i in idx] if v else [] for k, v in parts.items()}))
    return out


def summary(calls, parts):
    row = {"calls": len(calls), "call_p50": pct(calls, 50), "call_p99": pct(calls, 99),
           "call_max": float(np.max(calls))}
    if parts["fill"]:
        engine = [a + f + m for a, f, m in zip(parts["accept"], parts["fill"], parts["mask"])]
        over = [c - e for c, e in zip(calls, engine)]
        for k in ("accept", "fill", "mask"):
            row[k + "_p50"] = pct(parts[k], 50)
            row[k + "_p99"] = pct(parts[k], 99)
        row["overhead_p50"] = pct(over, 50)
        row["overhead_p99"] = pct(over, 99)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smollm2-store")
    ap.add_argument("--qwen2-store")
    ap.add_argument("--store", action="append", default=[], metavar="LABEL=PATH",
                    help="another store (e.g. Gemma4=py-gemma4.cfgm), repeatable")
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--steer-after", type=int, default=128,
                    help="tokens before steering (the validity table's budget)")
    ap.add_argument("--baseline", help="another processors.py to time on the same streams")
    ap.add_argument("--no-torch", action="store_true", help="numpy arrays for the HF protocol")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch = None
    if not args.no_torch:
        try:
            import torch  # noqa: F811
            torch.set_num_threads(1)
        except ImportError:
            torch = None
    baseline = None
    if args.baseline:
        spec = importlib.util.spec_from_file_location("cfgmask._baseline_processors", args.baseline,
                                                      submodule_search_locations=None)
        baseline = importlib.util.module_from_spec(spec)
        baseline.__package__ = "cfgmask"
        spec.loader.exec_module(baseline)
    rows = []
    stores = [("SmolLM2", args.smollm2_store), ("Qwen2", args.qwen2_store)]
    stores += [tuple(x.split("=", 1)) for x in args.store]
    for label, path in stores:
        if not path:
            continue
        store = cfgmask.Store.load(path)
        toks_list = streams(store, STDLIB_FILES[:args.files], args.max_tokens)
        rng = np.random.default_rng(1)
        logits = rng.standard_normal(store.vocab_size).astype(np.float32)
        protocols = ["llama-cpp", "llama-cpp attached", "hf"]
        if importlib.util.find_spec("llama_cpp") is not None:
            protocols.insert(2, "llama-cpp hook")
        for proto in protocols:
            for name, module in (("cfgmask", current), ("baseline", baseline)):
                if module is None:
                    continue
                timed = module is current
                if proto == "llama-cpp hook":
                    calls, parts = run_hook(module, store, toks_list, logits, timed)
                elif proto.startswith("llama-cpp"):
                    calls, parts = run_llama(module, store, toks_list, logits, timed,
                                             attached=proto != "llama-cpp")
                else:
                    calls, parts = run_hf(module, store, toks_list, logits, timed, torch)
                for density, c, p in split_by_density(calls, parts, store.vocab_size):
                    row = {"vocab": store.vocab_size, "tokenizer": label, "protocol": proto,
                           "processors": name, "steps": density, **summary(c, p)}
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr)
        per_token, searches, build_ms = run_steering(store, toks_list, args.steer_after, logits)
        rows.append({"vocab": store.vocab_size, "tokenizer": label, "protocol": "steering",
                     "steer_after": args.steer_after, "search_tables_ms": build_ms,
                     "generations": len(per_token), "us_per_token_mean": float(np.mean(per_token)),
                     "us_per_token_max": float(np.max(per_token)),
                     "steered_calls_ms_max": float(np.max(searches)) / 1e3})
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"HF tensors: {'torch ' + torch.__version__ if torch is not None else 'numpy'}")
    print("| vocab | protocol | processors | steps | calls | call p50 | p99 | max | accept p50 | "
          "fill p50 | mask p50 | p99 | overhead p50 | p99 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    f = lambda r, k: f"{r[k]:.1f}" if k in r else "—"  # noqa: E731
    for r in rows:
        if r["protocol"] == "steering":
            continue
        print(f"| {r['tokenizer']} {r['vocab']:,} | {r['protocol']} | {r['processors']} | "
              f"{r['steps']} | {r['calls']:,} | {f(r, 'call_p50')} | {f(r, 'call_p99')} | "
              f"{f(r, 'call_max')} | {f(r, 'accept_p50')} | "
              f"{f(r, 'fill_p50')} | {f(r, 'mask_p50')} | {f(r, 'mask_p99')} | "
              f"{f(r, 'overhead_p50')} | {f(r, 'overhead_p99')} |")
    for r in rows:
        if r["protocol"] == "steering":
            print(f"steering, {r['tokenizer']} {r['vocab']:,}: {r['generations']} generations "
                  f"steered after {r['steer_after']} tokens, the processor's calls cost "
                  f"{r['us_per_token_mean']:.1f} µs per token on average over each generation "
                  f"(worst {r['us_per_token_max']:.1f}); steered calls at most "
                  f"{r['steered_calls_ms_max']:.1f} ms per generation; the search's tables, "
                  f"once per store: {r['search_tables_ms']:.1f} ms")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
