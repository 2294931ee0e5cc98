"""match statements in the strict Python grammar against CPython 3.11.

* probe: one row per construct (soft keywords, every pattern form, each of
  CPython's checks beyond the grammar), accepted / refused by the engine
  (`cfgmask check`, scope layer on), Lark and CPython's compile(); the engine
  must accept exactly what both accept, and the rows marked "refused by
  design" (grammar/lark/README.md, "match statements") are the only valid
  Python it refuses;
* differential: seeded random match statements whose patterns collide on
  purpose (names bound twice, or-patterns, stars, keywords, literal keys of
  equal value, irrefutable cases, complex literals), all in Lark's language
  for the grammar; the engine accepts each exactly when compile() does;
* mutants: valid match statements with one character deleted, inserted or
  swapped; every mutant CPython rejects is refused.

The LLaMA store is shared with tests/py/test_python_strict.py (compile_store
caches it under CFGMASK_TEST_CACHE).  CFGMASK_FULL=1 runs 3,000 generated
statements instead of 150 and 400 mutants instead of 40.
"""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_python_strict import (BIN, FULL, TOK_LLAMA, compile_store, cpython_error,  # noqa: E402
                                engine_verdicts, lark_ok, lark_parser, mutate, probe_row)

PROGRAMS = 3000 if FULL else 150
MUTANTS = 400 if FULL else 40

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


@pytest.fixture(scope="module")
def parser():
    return lark_parser()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return compile_store(TOK_LLAMA, tmp_path_factory.mktemp("llama") / "py.cfgm")


def m(*cases, subject="x"):
    """A match statement with the given case headers (each body `pass`)."""
    return f"match {subject}:\n" + "".join(f"    case {c}:\n        pass\n" for c in cases)


# (row, text, refused by design: valid Python the grammar leaves out)
PROBE = [
    ("match/case/_ as names", "match = 1\nmatch(x)\nmatch.y = 2\nmatch[0] = 3\nmatch -= 1\n"
     "case = match\n_ = case\nx = match in y\nmatch if a else b\nmatch and c\n", False),
    ("soft keywords as subject and capture", "def f(match, case):\n    match match:\n"
     "        case case:\n            return case\n", False),
    ("literal numbers", m("1", "-1", "1.5", "-1.5e-3", ".5", "0x1F", "1_000"), False),
    ("complex literals", m("2j", "-2j", "1+2j", "-1-2.5j", "1e3-0j"), False),
    ("strings, bytes, concatenation", m("'a'", "\"b\" 'c'", "b'x'", "r'\\d'", "u'x' 'y'",
                                        "'''t'''"), False),
    ("None True False", m("None", "True", "False"), False),
    ("capture and wildcard", m("[a, _]", "a"), False),
    ("value patterns", m("Color.RED", "a.b.c"), False),
    ("group and sequence patterns", m("(1)", "(1, 2)", "(1,)", "()", "[]", "[1, [2, (3,)]]",
                                      "1, 2", "*a, b", "[1, *_]", "(x, *rest)"), False),
    ("mapping patterns", m("{}", "{'a': 1, 2: [b]}", "{'k': v, **rest}", "{**rest}",
                           "{Color.RED: 1, _.x: 2}", "{1: a, '1': b, b'1': c, None: d}"), False),
    ("class patterns", m("C()", "C(1, 2)", "C(x=1, y=2)", "C(1, y=2,)", "a.B(c, d=[e])",
                         "C(_=1, x=_)"), False),
    ("or-patterns", m("1 | 2 | 3", "[a, b] | [b, a]", "(1 | 2) | 3", "C(x=a) | D(y=a)"), False),
    ("as-patterns", m("1 | 2 as z", "[a, b] as c", "(a as b) as c", "(_ as y)"), False),
    ("guards", m("a if a > 1", "[a] if (y := a)", "_ if True") + "x = y\n", False),
    ("irrefutable last", m("1", "a"), False),
    ("guarded irrefutable not last", m("a if a", "1"), False),
    ("nested match", "match x:\n    case 1:\n        match y:\n            case z:\n"
     "                pass\n    case _:\n        pass\n", False),
    ("match in a loop, function, class", "for i in y:\n    match i:\n        case 1:\n"
     "            break\n        case _:\n            continue\nclass A:\n    match x:\n"
     "        case _:\n            pass\nasync def f():\n    match await g():\n"
     "        case [*_]:\n            return\n", False),
    ("subject forms", "match a, *b:\n    case _:\n        pass\nmatch (a, b):\n    case _:\n"
     "        pass\nmatch -x:\n    case _:\n        pass\nmatch {1: 2}:\n    case _:\n"
     "        pass\nmatch [a]:\n    case _:\n        pass\nmatch (y := f()):\n    case _:\n"
     "        pass\n", False),
    ("capture binds for nonlocal", "def f():\n    def g():\n        nonlocal y\n"
     "    match x:\n        case [y]:\n            pass\n", False),
    # CPython's checks beyond its grammar
    ("irrefutable case not last", m("a", "1"), False),
    ("wildcard case not last", m("_", "1"), False),
    ("irrefutable group/as case not last", m("(_) as y", "1"), False),
    ("name bound twice", m("[a, a]"), False),
    ("name bound twice by as", m("a as a"), False),
    ("alternatives bind different names", m("[a] | (b)"), False),
    ("alternative binds fewer names", m("[a, b] | [a]"), False),
    ("irrefutable alternative not last", m("a | 1"), False),
    ("duplicate literal keys", m("{1: a, True: b}"), False),
    ("duplicate keys of equal value", m("{'a' 'b': 1, 'ab': 2}"), False),
    ("duplicate float keys", m("{0.0: a, -0.0: b}"), False),
    ("equal keys by escape", m("{'\\x41': 1, 'A': 2}"), False),
    ("an unknown escape keeps its backslash", m("{'\\d': 1, 'd': 2}"), False),
    ("equal keys: an unknown escape and its backslash", m("{'\\d': 1, '\\\\d': 2}"), False),
    ("no \\u escape in bytes", m("{b'\\u0041': 1, b'A': 2}"), False),
    ("equal bytes keys: \\u and its backslash", m("{b'\\u0041': 1, b'\\\\u0041': 2}"), False),
    ("equal keys by a named escape", m("{'\\N{LATIN CAPITAL LETTER A}': 1, 'A': 2}"), False),
    ("keys differ by a named escape", m("{'\\N{LATIN CAPITAL LETTER A}': 1, 'B': 2}"), False),
    ("equal keys by a CJK name", m("{'\\N{CJK UNIFIED IDEOGRAPH-4E00}': 1, '\\u4e00': 2}"),
     False),
    ("dotted keys may repeat", m("{a.b: 1, a.b: 2}"), False),
    ("_ as an as-target", m("1 as _"), False),
    ("**_ in a mapping", m("{**_}"), False),
    ("two starred names", m("[*a, *b]"), False),
    ("two starred wildcards", m("*_, *_"), False),
    ("keyword repeated in a class pattern", m("C(a=1, a=2)"), False),
    ("positional after keyword", m("C(a=1, 2)"), False),
    ("keyword _= after a positional", m("C(c, _=1)"), False),
    ("**rest then a positional name", m("{**b}, [b]"), False),
    ("f-string pattern", m("f'x'"), False),
    ("imaginary first in complex literal", m("1j + 2"), False),
    ("real second in complex literal", m("1 + 2"), False),
    ("__debug__ capture", m("__debug__"), False),
    ("bytes and str mixed", m("'x' b'y'"), False),
    ("_ as class or value name", m("_()", "_.x"), False),
    ("as chain", m("a as b as c"), False),
    ("no case", "match x:\n    pass\n", False),
    ("no colon", "match x\n", False),
    # left out on purpose (the MATCH look-ahead; README)
    ("match not x: (refused by design)", "match not x:\n    case _:\n        pass\n", True),
    ("match ...: (refused by design)", "match ...:\n    case _:\n        pass\n", True),
    ("match(x): without a blank (refused by design)", "match(x):\n    case _:\n        pass\n",
     True),
    ("match (x) as a call statement (refused by design)", "match (x)\n", True),
    ("match [0] = 1 (refused by design)", "match [0] = 1\n", True),
    ("match - 1 (refused by design)", "match - 1\n", True),
]


def test_match_probe(store, parser, tmp_path):
    engine = engine_verdicts(store, [t for _, t, _ in PROBE], tmp_path, "probe")
    rows, wrong = [], []
    for k, (name, text, by_design) in enumerate(PROBE):
        lark, cpy = lark_ok(parser, text), cpython_error(text) is None
        rows.append(probe_row(name, engine[k], lark, cpy))
        if engine[k] != (lark and cpy):
            wrong.append(rows[-1])
        # valid Python is refused only where the row says so
        if cpy and not engine[k] and not by_design:
            wrong.append("refused valid: " + rows[-1])
        if by_design and (engine[k] or not cpy):
            wrong.append("not as designed: " + rows[-1])
    print("\n" + "\n".join(rows))
    assert not wrong, wrong


# ------------------------------------------------------------ generated statements

NAMES = ["a", "b", "c", "_"]
KEYS = ["1", "1.0", "True", "-0", "0.0", "'a'", "'a' ''", "b'a'", "None", "1+0j", "2j",
        "C.x", "_.y", "'\\x61'", "0x1", "'\\d'", "'\\\\d'", "'d'", "b'\\u0061'",
        "b'\\\\u0061'", "'\\N{LATIN SMALL LETTER A}'"]
LITERALS = ["1", "-1", "1.5", "2j", "1+2j", "1j+2", "1+2", "'s'", "b's'", "f's'", "None", "True",
            "'s' b't'", "-0.0"]


def gen_pattern(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.3:
        return rng.choice(NAMES + NAMES + LITERALS + ["C.x", "a.b"])
    if r < 0.42:
        return "(" + gen_pattern(rng, depth + 1) + ")"
    if r < 0.55:
        items = [gen_pattern(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        for _ in range(rng.choice([0, 0, 1, 2])):
            items.insert(rng.randint(0, len(items)), "*" + rng.choice(NAMES))
        if rng.random() < 0.5:
            return "[" + ", ".join(items) + "]"
        if len(items) == 1:
            return "(" + items[0] + ",)"
        return "(" + ", ".join(items) + ")"
    if r < 0.67:
        items = [f"{rng.choice(KEYS)}: {gen_pattern(rng, depth + 1)}"
                 for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.3:
            items.append("**" + rng.choice(NAMES))
        return "{" + ", ".join(items) + "}"
    if r < 0.79:
        pos = [gen_pattern(rng, depth + 1) for _ in range(rng.randint(0, 2))]
        kws = [f"{rng.choice(['x', 'y', '_'])}={gen_pattern(rng, depth + 1)}"
               for _ in range(rng.randint(0, 2))]
        return rng.choice(["C", "a.B"]) + "(" + ", ".join(pos + kws) + ")"
    if r < 0.92:
        alts = [gen_pattern(rng, depth + 1) for _ in range(rng.randint(2, 3))]
        return " | ".join(p if "|" not in p and " as " not in p else f"({p})" for p in alts)
    p = gen_pattern(rng, depth + 1)
    if " as " in p:
        p = f"({p})"
    return f"{p} as {rng.choice(NAMES)}"


def gen_statement(rng):
    cases = []
    for _ in range(rng.randint(1, 3)):
        p = gen_pattern(rng)
        if rng.random() < 0.15:
            p = p + ", " + gen_pattern(rng, 2)
        if rng.random() < 0.2:
            p += " if " + rng.choice(["a", "x", "(y := 1)"])
        cases.append(p)
    return m(*cases)


def test_match_statements_against_cpython(store, parser, tmp_path):
    """The engine accepts a generated match statement exactly when CPython
    compiles it (about half are rejected, over every check)."""
    from collections import Counter
    rng = random.Random(35)
    texts = []
    while len(texts) < PROGRAMS:
        t = gen_statement(rng)
        if lark_ok(parser, t):  # the grammar's language; what Lark refuses CPython must too
            texts.append(t)
        else:
            assert cpython_error(t) is not None, t
    engine = engine_verdicts(store, texts, tmp_path, "gen")
    wrong, reasons = [], Counter()
    for k, text in enumerate(texts):
        err = cpython_error(text)
        reasons[(err or "compiles").split("(")[0].split("'")[0].strip()] += 1
        if engine[k] != (err is None):
            wrong.append((engine[k], err, text))
    print(f"\n{len(texts)} statements: " + ", ".join(f"{v} {k}" for k, v in reasons.most_common()))
    assert reasons["compiles"] > len(texts) // 5
    assert len(reasons) >= 8
    assert not wrong, wrong[:3]


def test_match_mutants_are_refused(store, tmp_path):
    """Mutants of valid match statements: every one CPython rejects is
    refused by the engine."""
    rng = random.Random(36)
    base = [t for _, t, by_design in PROBE if not by_design and cpython_error(t) is None]
    mutants = []
    while len(mutants) < MUTANTS:
        t = mutate(rng.choice(base), rng)
        if cpython_error(t) is not None:
            mutants.append(t)
    engine = engine_verdicts(store, mutants, tmp_path, "mut")
    wrong = [mutants[k] for k in range(len(mutants)) if engine[k]]
    assert not wrong, wrong[:3]
