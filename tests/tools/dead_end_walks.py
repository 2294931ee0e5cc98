#!/usr/bin/env python3
"""Biased random walks that look for dead ends: prefixes the mask let through
from which no text can end.

A walk draws each token from the mask with weights that favour what a sampler
at high temperature writes and uniform walks rarely reach: short tokens,
punctuation, comment starts and blanks (weight = bonus / bytes, bonus 4 for a
token with '#', 3 for one that is all punctuation or blanks, 1 otherwise).
Stop tokens get a small weight, so most walks run their full length.  A
dead end is absorbing (no extension of a dead prefix completes), so each walk
is judged once, at its end, by the completion search: "none" means every
configuration reachable from the final prefix was searched and none can end
(a proved dead end); "budget" means the search ran out of nodes (unknown).

Usage: dead_end_walks.py STORE --walks N --tokens T [--seed S] [--nodes B]
       [--retry-nodes B2] [--json OUT]
       dead_end_walks.py STORE --replay WALKS.json [--nodes B] [--retry-nodes B2]
A search that runs out of its B nodes is tried again with B2 (default 200,000).
Prints one line per dead end (the prefix's last 80 bytes) and a summary: the
searches' nodes and seconds (p50 / p99 / max, the retry's included) and the
share of the final prefixes whose shortest completion has at most 64 bytes
that the first search (B nodes) found; exit status 1 if any walk ended in a
proved dead end.  --json writes every walk's tokens and its search's outcome;
--replay runs the search again on those prefixes (another build, the same
store) and says where a completion's length differs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

try:
    import cfgmask  # the installed package
except ImportError:  # else this checkout's, with its built extension copied in
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runtime" / "python"))
    import cfgmask  # noqa: E402

PUNCT = set(b"!\"$%&'()*+,-./:;<=>?@[\\]^`{|}~ \t\n")


def token_weights(store) -> np.ndarray:

    w = np.zeros(store.vocab_size, dtype=np.float64)
    for i in range(store.vocab_size):
        b = store.token_bytes(i)
        if not b:
            continue
        bonus = 1.0
        if b"#" in b:
            bonus = 4.0
        elif all(c in PUNCT for c in b):
            bonus = 3.0
        w[i] = bonus / len(b)
    for e in store.eos_ids:
        w[e] = 0.02
    return w


def run(store_path: str, walks: int, tokens: int, seed: int, nodes: int, retry_nodes: int):
    store = cfgmask.Store.load(store_path)
    weights = token_weights(store)
    rng = np.random.default_rng(seed)
    words = (store.vocab_size + 31) // 32
    bitmask = np.zeros((1, words), dtype=np.int32)
    eos = set(store.eos_ids)
    paths = []
    for _ in range(walks):
        m = cfgmask.GrammarMatcher(store)
        path = []
        for _ in range(tokens):
            m.fill_next_token_bitmask(bitmask)
            bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:store.vocab_size]
            allowed = np.flatnonzero(bits)
            if allowed.size == 0:
                break
            p = weights[allowed]
            if p.sum() <= 0:
                p = np.ones(allowed.size)
            t = int(rng.choice(allowed, p=p / p.sum()))
            assert m.accept_token(t), "a token of the mask was refused"
            path.append(t)
            if t in eos:
                break
        paths.append(path)
    result = judge(store, paths, nodes, retry_nodes)
    result["tokens"] = tokens
    return result


def judge(store, paths, nodes: int, retry_nodes: int):
    """Runs the completion search at the end of each walk (token ids)."""
    result = {"walks": len(paths), "dead": [], "unknown": 0, "ended": 0,
              "found": 0, "retried": 0, "found_late": [], "search_nodes": [], "search_seconds": [],
              "searches": []}
    for path in paths:
        m = cfgmask.GrammarMatcher(store)
        for t in path:
            assert m.accept_token(t), "a token of the recorded walk was refused"
        entry = {"path": path}
        result["searches"].append(entry)
        if m.is_terminated():
            result["ended"] += 1
            entry["what"] = "ended"
            continue
        t0 = time.perf_counter()
        what, text, used = m.completion_search(nodes)
        entry["first"] = what
        if what == "budget" and retry_nodes > nodes:
            # Again with a larger budget: an unknown may hide a dead end, and
            # a completion found only then is reported with its length.
            what, text, used = m.completion_search(retry_nodes)
            result["retried"] += 1
            if what == "found":
                result["found_late"].append(len(text.encode("utf-8", "surrogateescape")))
        result["search_seconds"].append(time.perf_counter() - t0)
        result["search_nodes"].append(used)
        entry.update(what=what, nodes=used, seconds=result["search_seconds"][-1],
                     bytes=None if text is None else len(text.encode("utf-8", "surrogateescape")))
        if what == "none":
            result["dead"].append(m.text[-80:])
        elif what == "budget":
            result["unknown"] += 1
        else:
            result["found"] += 1
    return result


def walk_text(store, path) -> str:
    m = cfgmask.GrammarMatcher(store)
    for t in path:
        m.accept_token(t)
    return m.text


def share_within(r) -> tuple:
    """(found by the first search, all) over the final prefixes whose
    shortest completion has at most 64 bytes (found by either search)."""
    short = [e for e in r["searches"] if e.get("what") == "found" and e["bytes"] <= 64]
    return sum(e["first"] == "found" for e in short), len(short)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--walks", type=int, default=100)
    ap.add_argument("--tokens", type=int, default=80)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--retry-nodes", type=int, default=200000)
    ap.add_argument("--json")
    ap.add_argument("--replay", help="the --json of an earlier run: search its prefixes again")
    a = ap.parse_args()
    if a.replay:
        before = json.loads(Path(a.replay).read_text())
        store = cfgmask.Store.load(a.store)
        r = judge(store, [e["path"] for e in before["searches"]],
                  a.nodes, a.retry_nodes)
        r["tokens"] = before["tokens"]
        differ = 0
        for old, new in zip(before["searches"], r["searches"]):
            if old.get("what") == new.get("what") == "found" and old["bytes"] != new["bytes"]:
                differ += 1
                print("completion of %d bytes, before %d: after %r"
                      % (new["bytes"], old["bytes"], walk_text(store, new["path"])[-80:]))
        both = sum(o.get("what") == n.get("what") == "found"
                   for o, n in zip(before["searches"], r["searches"]))
        print("replayed %d prefixes: %d found by both, %d of them with a completion of another "
              "length" % (len(r["searches"]), both, differ))
    else:
        r = run(a.store, a.walks, a.tokens, a.seed, a.nodes, a.retry_nodes)
    for d in r["dead"]:
        print("dead end after: %r" % d)
    n = np.array(r["search_nodes"] or [0])
    s = np.array(r["search_seconds"] or [0.0])
    print("%d walks of %d tokens: %d dead ends, %d unknown (budget %d nodes, %d retried with "
          "%d), %d completed, "
          "%d ended with EOS; search nodes p50 %d p99 %d max %d, seconds p50 %.3f p99 %.3f max %.3f"
          % (r["walks"], r["tokens"], len(r["dead"]), r["unknown"], a.nodes, r["retried"], a.retry_nodes, r["found"],
             r["ended"], np.percentile(n, 50), np.percentile(n, 99), n.max(),
             np.percentile(s, 50), np.percentile(s, 99), s.max()))
    if r["found_late"]:
        print("completions found only with the larger budget: %d, their lengths %s"
              % (len(r["found_late"]), sorted(r["found_late"])))
    first, short = share_within(r)
    print("shortest completions of at most 64 bytes found within %d nodes: %d of %d (%.1f%%)"
          % (a.nodes, first, short, 100.0 * first / max(short, 1)))
    if a.json:
        Path(a.json).write_text(json.dumps(r))
    return 1 if r["dead"] else 0


if __name__ == "__main__":
    sys.exit(main())
