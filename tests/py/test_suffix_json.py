"""Exact masks with a suffix (runtime/suffix_quotient.h) on a grammar without
the indenter: JSON (grammar/lark/json.lark) with the LLaMA tokenizer.

Random JSON documents are cut at random points (inside strings and numbers
too) and a random middle taken out; the prefix is read and the rest is the
suffix.  With exact suffix masks:

* every random masked middle ends (tokens drawn from each step's mask, the
  stop token taken with probability 1/4 when allowed, steered to a shortest
  completion after the budget): 0 find no end, where prefix masks let a
  middle close what the suffix closes;
* prefix + middle + suffix is accepted by json.loads and by Lark;
* the original middle, teacher-forced, is allowed token by token (each of
  its greedy tokens in the mask) and the stop token at its end.

Quick sizes by default; CFGMASK_FULL=1 takes more documents and cuts.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

import cfgmask
from test_suffix import random_middle

FULL = os.environ.get("CFGMASK_FULL") == "1"
ROOT = Path(__file__).resolve().parents[2]
GRAMMAR = ROOT / "grammar" / "lark" / "json.lark"
TOK_LLAMA = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "")
DOCS = 12 if FULL else 4
CUTS = 8 if FULL else 4
BUDGET = 32

pytestmark = pytest.mark.skipif(not os.path.exists(TOK_LLAMA), reason="no LLaMA tokenizer")

WORDS = "alpha beta gamma delta \u00e9t\u00e9 x_1 \\\\ \"q\" tab\tend".split(" ")


def random_value(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        k = rng.random()
        if k < 0.4:
            return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
        if k < 0.7:
            return round(rng.uniform(-1e4, 1e4), rng.randint(0, 3))
        if k < 0.8:
            return rng.choice([True, False, None])
        return rng.randint(-10, 10 ** 9)
    if r < 0.65:
        return {rng.choice(WORDS) + str(i): random_value(rng, depth + 1)
                for i in range(rng.randint(0, 4))}
    return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


@pytest.fixture(scope="module")
def store():
    return cfgmask.compile_grammar(str(GRAMMAR), TOK_LLAMA)


@pytest.fixture(scope="module")
def parser():
    import lark
    return lark.Lark(GRAMMAR.read_text(), parser="lalr", lexer="contextual", start="start")


def lark_ok(parser, text):
    try:
        parser.parse(text)
        return True
    except Exception:  # noqa: BLE001 - any refusal
        return False


@pytest.fixture(scope="module")
def cases():
    rng = random.Random(2027)
    out = []
    for _ in range(DOCS):
        doc = {"records": [random_value(rng) for _ in range(rng.randint(2, 6))]}
        text = json.dumps(doc, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.5)
        for _ in range(CUTS):
            a = rng.randrange(len(text))
            b = min(len(text) - 1, a + rng.randrange(60))
            out.append((text[:a], text[a:b], text[b:]))
    return out


def allowed(matcher, bitmask):
    matcher.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[:matcher.vocab_size]
    return np.nonzero(bits)[0]


def test_original_middle_is_allowed(store, cases):
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    eos = store.eos_ids[0]
    for prefix, middle, suffix in cases:
        m = cfgmask.GrammarMatcher(store, prefix=prefix, suffix=suffix)
        assert m.suffix_exact
        # Teacher-forced by greedy tokens (each one accepted in turn, with the
        # suffix's exact check): each must also be in its step's mask.
        for t in m.fork().tokenize_forced(middle):
            assert t in allowed(m, bitmask), (prefix, middle, suffix)
            assert m.accept_token(int(t))
        assert m.can_end(), (prefix, middle, suffix)
        assert eos in allowed(m, bitmask)


def test_random_middles_all_end(store, parser, cases):
    rng = random.Random(11)
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    in_budget = steered = no_end = 0
    for prefix, _, suffix in cases:
        m = cfgmask.GrammarMatcher(store, prefix=prefix, suffix=suffix)
        assert m.suffix_exact
        how = random_middle(m, bitmask, rng, BUDGET, (prefix, suffix))
        if how is None:
            no_end += 1
            continue
        in_budget += how == "budget"
        steered += how == "steered"
        text = m.text + suffix
        assert lark_ok(parser, text), (prefix, m.text[len(prefix):], suffix)
        json.loads(text)
    print(f"\nrandom middles: {in_budget} of {len(cases)} ended within {BUDGET} tokens, "
          f"{steered} more steered to a shortest completion, {no_end} found no end")
    assert no_end == 0
