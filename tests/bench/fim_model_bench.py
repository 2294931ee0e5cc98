"""Completion in the middle of a file with a real model: do the middles end?

Files of installed packages that no test corpus uses (by default h11, dotenv,
idna, certifi, filelock: the ones the store is not tuned on) are cut at
random points, a random stretch of up to 160 characters is taken out, and the
rest of the file is the suffix.  Each cut is filled twice, through the same
``GrammarMatcher(store, prefix=..., suffix=...)``:

- by the real model (a GGUF that llama-cpp-python runs on the CPU) through
  ``cfgmask.generate.generate`` with ``LlamaCppLogitsProcessor``: up to
  ``--max-tokens`` sampled tokens, then up to ``--steer-tokens`` steered to a
  shortest completion (the processor's steering, as a server uses it).  A
  model without FIM tokens reads the prefix's last ``--context`` characters
  and writes on; the grammar reads the whole prefix and the suffix;
- by random tokens drawn from each mask (the stop token taken with
  probability 1/4 where allowed), then the same steering: the stress case
  of tests/py/test_suffix.py, on the same cuts.

Per fill it records how it ended (a stop token within the budget, once
steered, or not at all), whether CPython compiles prefix + middle + suffix,
the processor's time per token and the steering's search time.  Not a test:
it prints a table (and writes --json).

    python tests/bench/fim_model_bench.py --model M.gguf --store S.cfgm
        [--package h11 ...] [--cuts 64] [--seed 2026] [--max-tokens 48]
        [--temperature 0.7] [--no-model] [--json out.json]

The store must be compiled with the model's own tokenizer (checked).
"""
import argparse
import json
import os
import random
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cfgmask  # noqa: E402
from cfgmask.generate import generate, load_model, vocabulary_mismatches  # noqa: E402
from generation_bench import package_files, pct  # noqa: E402

DEFAULT_PACKAGES = ("h11", "dotenv", "idna", "certifi", "filelock")
MAX_MIDDLE = 160
MAX_FILE = 12000


def cpython_compiles(text):
    try:
        warnings.simplefilter("ignore", SyntaxWarning)
        compile(text, "<fim>", "exec")
        return True
    except (SyntaxError, ValueError):
        return False


def make_cuts(files, n, rng):
    texts = []
    for p in files:
        try:
            t = open(p, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        if 200 <= len(t) <= MAX_FILE and cpython_compiles(t):
            texts.append((p, t))
    cuts = []
    for _ in range(n):
        p, text = texts[rng.randrange(len(texts))]
        a = rng.randrange(len(text))
        b = min(len(text), a + rng.randrange(MAX_MIDDLE + 1))
        cuts.append((p, text[:a], text[a:b], text[b:]))
    return cuts


def allowed(matcher, bitmask):
    matcher.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[:matcher.vocab_size]
    return np.nonzero(bits)[0]


def random_fill(store, prefix, suffix, rng, budget, steer):
    """Random tokens from each mask, then the processors' steering."""
    m = cfgmask.GrammarMatcher(store, prefix=prefix, suffix=suffix)
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    stops = set(store.eos_ids)
    for _ in range(budget):
        ids = allowed(m, bitmask)
        can_stop = any(int(t) in stops for t in ids)
        text_ids = [int(t) for t in ids if int(t) not in stops]
        if can_stop and (not text_ids or rng.random() < 0.25):
            return "in budget", m.text[len(prefix):], 0.0
        m.accept_token(rng.choice(text_ids))
    t0 = time.perf_counter()
    completion = m.find_completion(20_000, shortest=False)  # as the processors steer
    searched = time.perf_counter() - t0
    if completion is None:
        return "no end", m.text[len(prefix):], searched
    forced = m.tokenize_forced(completion)
    if len(forced) > steer or not all(m.accept_token(t) for t in forced) or not m.can_end():
        return "no end", m.text[len(prefix):], searched
    return "steered", m.text[len(prefix):], searched


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--package", action="append")
    ap.add_argument("--cuts", type=int, default=64)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--steer-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--context", type=int, default=3000, help="prefix characters the model reads")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-model", action="store_true", help="the random fills alone")
    ap.add_argument("--json")
    args = ap.parse_args()

    store = cfgmask.Store.load(args.store)
    llm = load_model(args.model, n_ctx=2048, n_threads=args.threads, seed=args.seed)
    bad = vocabulary_mismatches(llm, store)
    if bad:
        sys.exit(f"the store was not compiled with this model's tokenizer: {bad}")
    files = [f for pkg in (args.package or DEFAULT_PACKAGES) for f in package_files(pkg)]
    rng = random.Random(args.seed)
    cuts = make_cuts(files, args.cuts, rng)
    rows = []
    for i, (path, prefix, middle, suffix) in enumerate(cuts):
        row = {"file": path.split("site-packages/")[-1],
               "cut": len(prefix), "middle_taken": len(middle), "suffix": len(suffix)}
        # The real model.
        if args.no_model:
            res = None
        else:
            res = generate(llm, prefix[-args.context:], store, max_tokens=args.max_tokens,
                       steer_tokens=args.steer_tokens, temperature=args.temperature,
                           seed=args.seed + i, suffix=suffix.encode(), prefix=prefix.encode())
        if res is None:
            how = "skipped"
            row["model"] = {"how": how, "tokens": 0, "mask_us_per_token": 0.0,
                            "compiles": False, "middle": ""}
        else:
            how = ("steered" if res.steered else "in budget") if res.ended else "no end"
            row["model"] = {"how": how, "tokens": len(res.tokens),
                            "mask_us_per_token": res.mask_us_per_token,
                            "compiles": res.ended and cpython_compiles(prefix + res.text + suffix),
                            "middle": res.text}
        # Random tokens on the same cut.
        how_r, mid_r, searched = random_fill(store, prefix, suffix, random.Random(args.seed + i),
                                             args.max_tokens, args.steer_tokens)
        row["random"] = {"how": how_r, "search_s": searched,
                         "compiles": how_r != "no end" and cpython_compiles(prefix + mid_r + suffix),
                         "middle": mid_r}
        rows.append(row)
        print(f"{i:3d} {row['file']}:{len(prefix)} model {how} ({row['model']['tokens']} tokens) "
              f"random {how_r}", flush=True)

    def table(kind):
        hows = [r[kind]["how"] for r in rows]
        ended = [r for r in rows if r[kind]["how"] != "no end"]
        return (hows.count("in budget"), hows.count("steered"), hows.count("no end"),
                sum(not r[kind]["compiles"] for r in ended))
    print(f"\n{len(rows)} cuts of {len(files)} files ({', '.join(args.package or DEFAULT_PACKAGES)}), "
          f"seed {args.seed}, {args.max_tokens} tokens then up to {args.steer_tokens} steered")
    print("| middle | ended within the budget | once steered | never ended | ended, CPython refuses |")
    print("|---|---:|---:|---:|---:|")
    for kind, label in (("model", "the model (T=%.1f)" % args.temperature), ("random", "random tokens")):
        if kind == "model" and args.no_model:
            continue
        a, b, c, d = table(kind)
        print(f"| {label} | {a} | {b} | {c} | {d} |")
    us = [r["model"]["mask_us_per_token"] for r in rows if r["model"]["tokens"]]
    if us:
        print(f"model: processor time per token (the steering's search included), mean per fill: p50 {pct(us, 50):.0f} µs, "
              f"p99 {pct(us, 99):.0f} µs, max {max(us):.0f} µs")
    ss = [r["random"]["search_s"] for r in rows if r["random"]["search_s"]]
    if ss:
        print(f"random: steering search p50 {pct(ss, 50):.2f} s, max {max(ss):.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
