"""Completion in the middle of a file: GrammarMatcher(store, suffix=...).

Standard-library files that CPython compiles and the strict Python grammar
accepts are cut at random points, a random middle taken out; the prefix is
read, the rest of the file is the suffix.

* can_end() with an empty middle agrees with Lark on prefix + suffix (the
  exactness contract, at the places a suffix can make it end);
* the original middle is always reachable: teacher-forced, every byte is
  accepted and the stop token is in the mask at its end;
* random masked middles (tokens drawn from each step's mask, the stop token
  taken with probability 1/4 when allowed, steered as the processors steer
  after the budget) that end: prefix + middle + suffix is in Lark's language
  and CPython compiles it (apart from the checks beyond any context-free
  grammar, test_python_strict.SEMANTIC).  The share that ends within the
  budget is printed.

The processors take the same suffix= (tested in test_package_processors.py).
Quick sizes by default; CFGMASK_FULL=1 takes more files and cuts.
"""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

import cfgmask
from test_python_strict import (FULL, GRAMMAR, SEMANTIC, TOK_LLAMA, compile_store, cpython_error,
                                lark_ok, lark_parser, stdlib_files)

FILES = 16 if FULL else 3
CUTS = 8 if FULL else 3
BUDGET = 48          # sampled tokens before steering to a shortest completion
MAX_MIDDLE = 160     # characters taken out
MAX_FILE = 6000      # characters: the suffix is read once per step

pytestmark = pytest.mark.skipif(not os.path.exists(TOK_LLAMA), reason="no LLaMA tokenizer")


@pytest.fixture(scope="module")
def parser():
    return lark_parser()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    # The store test_python_strict.py and test_match.py use: one compile for
    # all of them where CFGMASK_TEST_CACHE is set (as in CI).
    path = compile_store(TOK_LLAMA, tmp_path_factory.mktemp("llama") / "py.cfgm")
    return cfgmask.Store.load(str(path))


@pytest.fixture(scope="module")
def cases(parser):
    rng = random.Random(2026)
    files = [(p, t) for p, t in stdlib_files() if 200 <= len(t) <= MAX_FILE and t.isascii()]
    files = [(p, t) for p, t in files if lark_ok(parser, t)]
    assert len(files) >= FILES
    out = []
    for p, text in rng.sample(files, FILES):
        for _ in range(CUTS):
            a = rng.randrange(len(text))
            b = min(len(text), a + rng.randrange(MAX_MIDDLE + 1))
            out.append((p.name, text[:a], text[a:b], text[b:]))
    return out


def allowed(matcher, bitmask):
    matcher.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[:matcher.vocab_size]
    return np.nonzero(bits)[0]


def random_middle(m, bitmask, rng, budget, label):
    """A random middle from matcher `m` (its suffix set): up to `budget`
    tokens drawn from each mask, the stop token taken with probability 1/4
    where allowed, then steered to a completion as the processors steer.  "budget" (ended
    in it), "steered", or None (no completion ended it)."""
    eos_ids = set(m.store.eos_ids)
    for _ in range(budget):
        ids = allowed(m, bitmask)
        can_stop = any(int(t) in eos_ids for t in ids)
        text_ids = [int(t) for t in ids if int(t) not in eos_ids]
        assert can_stop or text_ids, (label, "a step with nothing allowed")
        if can_stop and (not text_ids or rng.random() < 0.25):
            return "budget"
        assert m.accept_token(rng.choice(text_ids))
    # As the processors steer with a suffix: 20,000 nodes, then the search
    # over whole terminals (shortest=False).
    completion = m.find_completion(20_000, shortest=False)
    if completion is None or not m.accept_string(completion) or not m.can_end():
        return None
    return "steered"


def test_can_end_agrees_with_lark(store, parser, cases):
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    eos = store.eos_ids[0]
    ends = 0
    for name, prefix, middle, suffix in cases:
        m = cfgmask.GrammarMatcher(store, suffix=suffix)
        assert m.suffix == suffix.encode()
        assert m.accept_string(prefix), (name, len(prefix))
        want = lark_ok(parser, prefix + suffix)
        assert m.can_end() == want, (name, len(prefix), middle)
        assert (eos in allowed(m, bitmask)) == want
        ends += want
    print(f"\n{ends} of {len(cases)} cuts can end with an empty middle")


def test_original_middle_is_reachable(store, cases):
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    eos = store.eos_ids[0]
    for name, prefix, middle, suffix in cases:
        m = cfgmask.GrammarMatcher(store, suffix=suffix)
        assert m.accept_string(prefix)
        for k in range(0, len(middle), 7):  # the middle in pieces, as a model would
            assert m.accept_string(middle[k:k + 7]), (name, len(prefix), k)
        assert m.can_end(), (name, len(prefix), middle)
        assert eos in allowed(m, bitmask)
        assert m.accept_token(eos)


def test_random_middles_fit_the_suffix(store, parser, cases):
    rng = random.Random(7)
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    in_budget = steered = no_end = 0
    semantic = []
    for name, prefix, _, suffix in cases:
        m = cfgmask.GrammarMatcher(store, suffix=suffix)
        assert m.accept_string(prefix)
        how = random_middle(m, bitmask, rng, BUDGET, name)
        if how is None:
            no_end += 1
            continue
        in_budget += how == "budget"
        steered += how == "steered"
        middle = m.text[len(prefix):]
        text = prefix + middle + suffix
        assert lark_ok(parser, text), (name, middle)
        err = cpython_error(text)
        if err is not None:
            assert any(s in err for s in SEMANTIC), (name, middle, err)
            semantic.append(err)
    print(f"\nrandom middles: {in_budget} of {len(cases)} ended within {BUDGET} tokens, "
          f"{steered} more steered (as the processors steer), {no_end} found no end; "
          f"CPython's checks beyond the grammar: {semantic}")
    assert in_budget + steered > 0


def test_prefix_and_suffix_in_the_constructor(store, cases):
    # GrammarMatcher(store, prefix=, suffix=) is accept_string + set_suffix.
    for name, prefix, middle, suffix in cases[:3]:
        m = cfgmask.GrammarMatcher(store, prefix=prefix, suffix=suffix)
        assert m.text == prefix and m.suffix == suffix.encode()
        # The indenter is not in the suffix's quotient: prefix masks here.
        assert not m.suffix_exact
        assert m.accept_string(middle) and m.can_end(), name
    # A prefix the grammar refuses: Error naming the line and column.
    with pytest.raises(cfgmask.Error, match=r"prefix:2:5: .*byte 10 "):
        cfgmask.GrammarMatcher(store, prefix="x = 1\nif x)")
    m = cfgmask.GrammarMatcher(store, prefix=b"")
    assert m.text == ""


def test_indentation_and_brackets_move_with_the_parser_stack(parser):
    """What exact suffix masks for Python would build on (docs/exactness.md,
    "Exact masks with a suffix"): in the strict grammar every rule closes the
    brackets it opens (at most one open at a time), _INDENT and _DEDENT occur
    only in the blocks (the suites and a match statement's block of cases),
    each opened by `_NEWLINE _INDENT` and closed by its rule's last symbol
    `_DEDENT`, and the state after a _DEDENT only reduces its block, so the
    indentation and bracket stacks move in step with the LR stack."""
    blocks = ("suite", "case_suite", "match_stmt")
    opens, closes = {"LPAR", "LSQB", "LBRACE"}, {"RPAR", "RSQB", "RBRACE"}
    nesting = 0
    for rule in parser.rules:
        depth = 0
        for sym in rule.expansion:
            depth += (sym.name in opens) - (sym.name in closes)
            assert depth >= 0, rule
            nesting = max(nesting, depth)
        assert depth == 0, rule
        names = [sym.name for sym in rule.expansion]
        if "_INDENT" in names or "_DEDENT" in names:
            assert rule.origin.name.startswith(blocks), rule
            i = names.index("_INDENT")
            assert names[i - 1:i + 1] == ["_NEWLINE", "_INDENT"] and names[-1] == "_DEDENT", rule
            assert names.count("_INDENT") == 1 and names.count("_DEDENT") == 1, rule
    assert nesting == 1
    table = parser.parser.parser.parser.parse_table
    after_dedent = {arg for acts in table.states.values() for tok, (act, arg) in acts.items()
                    if tok == "_DEDENT" and act.name == "Shift"}
    assert after_dedent
    for state in after_dedent:
        actions = {(act.name, str(arg)) for act, arg in table.states[state].values()}
        assert len(actions) == 1 and next(iter(actions))[0] == "Reduce", actions
        assert next(iter(actions))[1].startswith(tuple("<" + b for b in blocks)), actions


# A middle that must open what the suffix goes on in: the suffix's `except`
# needs a `try` the middle writes.  The byte-level search has no bound there
# (the suffix may pay for anything) and runs out of a small budget; steering's
# search over whole terminals (find_completion with shortest=False) finds a
# middle, which the matcher takes, which ends the text, and which Lark and
# CPython accept with the prefix and suffix.  (It reaches only a few
# terminals deep: an `if x:` and a line break before a deeper suffix is past
# 20,000 nodes; docs/serving.md has its figures.)
def test_steering_opens_what_the_suffix_goes_on_in(store, parser):
    prefix, suffix = "def f(x):\n    y = 1\n    ", "v = g(x)\n    except OSError:\n        pass\n"
    m = cfgmask.GrammarMatcher(store, prefix=prefix, suffix=suffix)
    assert not m.can_end()
    what, text, nodes = m.completion_search(2000)
    assert what == "budget", (what, text)  # what this search is for
    what, text, nodes = m.completion_search(2000, shortest=False)
    assert what == "found", (what, nodes)
    assert nodes > 2000  # both searches counted
    assert m.find_completion(2000, shortest=False) == text
    assert m.accept_string(text) and m.can_end(), text
    whole = prefix + text + suffix
    assert lark_ok(parser, whole), whole
    assert cpython_error(whole) is None, whole
