"""No dead ends in the strict Python grammar: biased random walks
(tests/tools/dead_end_walks.py) draw tokens from each mask, favouring short,
punctuation-heavy tokens and comment starts as a sampler at high temperature
would, and the completion search then judges each walk's final prefix: a
proved dead end ("none": no configuration reachable from it can end) fails
the test.  Searches that run out of their budget are retried with a ten times
larger one; they are counted and printed, with the search's nodes and time
(p50 / p99 / max).  Every shortest completion of at most 64 bytes must be
found within the first budget of 10,000 nodes.

Quick size (CI): the 32k SentencePiece (byte fallback) and SmolLM2's 49k BPE,
100 walks of 120 tokens each.  CFGMASK_FULL=1: also Qwen2's 152k byte-level
BPE, 1,000 walks of 300 tokens per tokenizer.
"""
from __future__ import annotations

import sys
from pathlib import Path

import cfgmask
import numpy as np
import pytest

from test_python_strict import FULL, TOK_LLAMA, TOK_QWEN2, TOK_SMOL, compile_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import dead_end_walks  # noqa: E402

TOKENIZERS = [("llama_spm", TOK_LLAMA), ("smollm2", TOK_SMOL)]
if FULL:
    TOKENIZERS.append(("qwen2", TOK_QWEN2))
WALKS, TOKENS = (1000, 300) if FULL else (100, 120)


@pytest.mark.parametrize("name,tok", TOKENIZERS, ids=[t[0] for t in TOKENIZERS])
def test_biased_walks_reach_no_dead_end(tmp_path, name, tok):
    store = compile_store(tok, tmp_path / "py.cfgm")
    r = dead_end_walks.run(str(store), WALKS, TOKENS, seed=20261126, nodes=10000,
                           retry_nodes=100000)
    nodes = np.array(r["search_nodes"] or [0])
    secs = np.array(r["search_seconds"] or [0.0])
    print(f"\n{name}: {WALKS} walks of {TOKENS} tokens: {len(r['dead'])} dead ends, "
          f"{r['unknown']} unknown after {r['retried']} retries, {r['found']} completed, "
          f"{r['ended']} ended with EOS; search nodes p50 {np.percentile(nodes, 50):.0f} "
          f"p99 {np.percentile(nodes, 99):.0f} max {nodes.max()}, seconds p50 "
          f"{np.percentile(secs, 50):.3f} p99 {np.percentile(secs, 99):.3f} max {secs.max():.3f}")
    first, short = dead_end_walks.share_within(r)
    print(f"shortest completions of at most 64 bytes found within 10,000 nodes: {first} of {short}")
    assert not r["dead"], r["dead"][:5]
    assert first == short, (first, short)
    assert r["found"] + r["ended"] + r["unknown"] == WALKS
    # An unknown may hide a dead end: it must stay rare.
    assert r["unknown"] * 50 <= WALKS, r["unknown"]


def test_comment_where_an_operand_must_follow_with_names_above_ascii(tmp_path):
    """After `/` a comment leaves only its newline, which the parser cannot
    take there: refused at once, also now that a name may start with a byte
    above ASCII (what may follow a comment is judged on whole characters, not
    on a lead byte the comment's class takes too).  A comment and names
    above ASCII where they fit are taken."""
    store = cfgmask.Store.load(str(compile_store(TOK_LLAMA, tmp_path / "py.cfgm")))
    for text in ["x = a / #c", "x = a / # c", "x = a / #\u00e9", "x = a / # \u03c0",
                 "x = a /\t#\U0001d518"]:
        assert not cfgmask.GrammarMatcher(store).accept_string(text), text
    for text in ["x = a / \u00e9\n", "x = a  # \u00e9\n", "\u00e9 = \uff58 / \U0001d518  # \u00fc\n",
                 "x = (a /  # c\n     \u03c0)\n"]:
        m = cfgmask.GrammarMatcher(store)
        assert m.accept_string(text) and m.can_end(), text


def _closed(text: str) -> str:
    """`text` with its open brackets closed (innermost first)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for c in text:
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")]}":
            stack.pop()
    return text + "".join(reversed(stack))


def test_words_that_can_only_become_a_refused_async(tmp_path):
    """After an operand in a list, set or dict outside an async function, a
    word `as`, `asy` or `asyn` can only become `async` (the parser takes no
    `as` there), and CPython refuses that asynchronous comprehension: the
    engine refuses the word (a dead end otherwise: the walks met `[x as`).
    Where the word has another way on (an async function, a generator
    expression, `as` of a with item, an import or a pattern, `a` -> `and`)
    it stands, and CPython compiles the completion the search finds."""
    store = cfgmask.Store.load(str(compile_store(TOK_LLAMA, tmp_path / "py.cfgm")))
    dead = ["[x as", "[x asy", "[x asyn", "{x asy", "{x: y as", "x = [... as",
            "def f():\n    return [x as", "[x for y in z as"]
    for text in dead:
        assert not cfgmask.GrammarMatcher(store).accept_string(text), text
        word = text.rsplit(" ", 1)[1]
        assert cfgmask.GrammarMatcher(store).accept_string(text[:-len(word)]), text
        with pytest.raises(SyntaxError, match="asynchronous comprehension outside"):
            compile(_closed(text + "async"[len(word):] + " for x in y") + "\n", "<dead>", "exec")
    live = ["async def f():\n    return [x as", "(x as", "f(x as", "def f():\n    return (x asy",
            "with (x as", "from m import (x as", "[x a", "{x: y a", "x = [... a",
            "match z:\n    case [x as", "async def f():\n    [[x as"]
    for text in live:
        m = cfgmask.GrammarMatcher(store)
        assert m.accept_string(text), text
        what, completion, _ = m.completion_search(10000)
        assert what == "found", (text, what)
        compile(text + completion, "<live>", "exec")
