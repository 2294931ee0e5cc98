"""The strict Python grammar (grammar/lark/python.lark) against CPython 3.11.

* snippets: the classes Lark's own python.lark lets through (keywords glued
  to names, indentation before the first statement, bad targets, argument
  order, ...) are refused; real code of each construct is accepted, and
  CPython compiles every accepted snippet;
* f-string fields: random fields glued from fragments, CPython compiles every
  one Lark accepts;
* completeness: standard-library files that CPython compiles and the grammar
  accepts (Lark, the contract's reference) pass `cfgmask check` with two
  tokenizers (LLaMA SentencePiece 32k: greedy and random segmentation;
  SmolLM2 49k: its own canonical encoding and random); the share the grammar
  accepts is printed with the reasons of the others and must not fall; the
  same (LLaMA greedy and random, SmolLM2 canonical) on the sources of popular
  PyPI packages fetched by tests/pycorpus/fetch.sh;
* soundness: random masked walks (`cfgmask sample`) that end with EOS are in
  Lark's language for the same grammar and CPython's compile() accepts them
  (the symbol-table checks included: the scope layer);
* scope checks: generated programs full of nonlocal, global, parameters,
  keywords and __debug__ targets are accepted by the engine exactly when
  CPython compiles them (tests/pycorpus/scope_programs.py);
* mutants: stdlib files with one character deleted, inserted or swapped;
  every mutant CPython rejects is refused by the teacher-forced mask.

Quick sizes by default; CFGMASK_FULL=1 takes the whole standard library,
1,000 walks per tokenizer (and Qwen2's 152k vocabulary as a third one) and
more mutants.  Run as a script (`python tests/py/test_python_strict.py
[STRIDE [EXAMPLES]]`), it prints Lark's acceptance of the standard library
and tallies the refused files by their first error.
"""
from __future__ import annotations

import io
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GRAMMAR = ROOT / "grammar" / "lark" / "python.lark"
BIN = os.environ.get("CFGMASK_BIN", str(ROOT / "build" / "cfgmask"))
PYTHON = os.environ.get("CFGMASK_PYTHON", sys.executable)
TOK_LLAMA = os.environ.get("CFGMASK_TOK_LLAMA_SPM", str(ROOT / ".cache/tokenizers/llama-spm.gguf"))
TOK_SMOL = os.environ.get("CFGMASK_TOK_SMOLLM2",
                          str(ROOT / ".cache/tokenizers/smollm2-135m-instruct-q4_1.gguf"))
TOK_QWEN2 = os.environ.get("CFGMASK_TOK_QWEN2", str(ROOT / ".cache/tokenizers/qwen2.gguf"))
FULL = os.environ.get("CFGMASK_FULL") == "1"

STDLIB_STRIDE = 1 if FULL else 60        # every n-th stdlib file (sorted paths)
STDLIB_MAX_BYTES = None if FULL else 16_000
WALKS = 1000 if FULL else 60
MUTANT_FILES = 20 if FULL else 3
MUTANTS_PER_FILE = 50 if FULL else 25
# Share of the stdlib files CPython compiles that the grammar accepts (measured
# 0.893 on the whole library, `python tests/py/test_python_strict.py`; see
# grammar/lark/README.md for what it leaves out).
MIN_COVERAGE = 0.75

# CPython's checks beyond the grammar (the symbol table, argument names) are
# the engine's scope layer (runtime/scope_layer.h): a walk CPython rejects for
# any reason fails the test; these messages are tallied apart in the output.
SEMANTIC = ("keyword argument repeated", "duplicate argument",
            "assigned to before global declaration", "used prior to global declaration",
            "is parameter and global", "annotated name", "cannot assign to __debug__",
            "cannot delete __debug__", "nonlocal", "is parameter and nonlocal")
# Generated programs that exercise the scope layer (tests/pycorpus/scope_programs.py)
# compared with CPython's compile(), teacher-forced through the LLaMA store.
SCOPE_PROGRAMS = 5000 if FULL else 300

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


def run(*args, timeout=1800):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=timeout)


def lark_parser():
    from lark import Lark
    from lark.indenter import PythonIndenter
    return Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                postlex=PythonIndenter(), start="file_input")


@pytest.fixture(scope="module")
def parser():
    return lark_parser()


def lark_ok(parser, text):
    from lark.exceptions import LarkError
    try:
        parser.parse(text)
        return True
    except LarkError:
        return False


def cpython_error(text):
    """None if CPython compiles text (warnings are not errors), else the message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<text>", "exec", dont_inherit=True)
        return None
    except (SyntaxError, ValueError) as e:
        return getattr(e, "msg", None) or str(e)


def compile_store(tok, out):
    """The grammar compiled with `tok` into `out`; with CFGMASK_TEST_CACHE set,
    kept there (keyed by the grammar, tokenizer and binary) so that the
    modules that test this grammar (test_match.py) share one compile."""
    if not os.path.exists(tok):
        pytest.skip(f"tokenizer {tok} not available")
    cache = os.environ.get("CFGMASK_TEST_CACHE")
    if cache:
        import hashlib

        def key(path):
            st = os.stat(path)
            return f"{path}:{st.st_size}:{st.st_mtime_ns}"
        k = hashlib.sha256("\n".join([hashlib.sha256(GRAMMAR.read_bytes()).hexdigest(),
                                       key(tok), key(BIN)]).encode()).hexdigest()[:24]
        d = Path(cache) / "py-strict"
        d.mkdir(parents=True, exist_ok=True)
        cached = d / f"python-{k}.cfgm"
        if not cached.exists():
            tmp = d / f"python-{k}.{os.getpid()}.tmp.cfgm"
            r = run(BIN, "compile", GRAMMAR, "--tokenizer", tok, "--start", "file_input", "-o",
                    tmp, "--quiet")
            assert r.returncode == 0, r.stderr
            os.replace(tmp, cached)
        return cached
    r = run(BIN, "compile", GRAMMAR, "--tokenizer", tok, "--start", "file_input", "-o", out,
            "--quiet")
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def store_llama(tmp_path_factory):
    return compile_store(TOK_LLAMA, tmp_path_factory.mktemp("llama") / "py.cfgm")


@pytest.fixture(scope="module")
def store_smol(tmp_path_factory):
    return compile_store(TOK_SMOL, tmp_path_factory.mktemp("smol") / "py.cfgm")


# ------------------------------------------------------------------ grammar


def test_lark_reads_it_without_conflicts():
    from lark import Lark, logger
    from lark.indenter import PythonIndenter
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
             postlex=PythonIndenter(), start="file_input", debug=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert "conflict" not in buf.getvalue().lower(), buf.getvalue()[:2000]


# (text, accepted by the strict grammar).  Refused texts are either invalid
# Python (the classes Lark's python.lark accepts) or valid Python the grammar
# leaves out on purpose (marked "subset").
SNIPPETS = [
    ("x = 1\n", True),
    ("  x = 1\n", False),                       # indentation before the first statement
    ("  \nx = 1\n", True),
    ("# c\n  # d\nx = 1\n", True),
    ("3andef\n", False), ("for0in0:\n    pass\n", False), ("a = b infinity\n", False),
    ("a = b in finity\n", True),
    ("finally-finally\n", False), ("x = 1if 2else 3\n", False),
    ("f(a.b=1)\n", False), ("f() = 1\n", False), ("f(a=1, b)\n", False), ("f(**a, *b)\n", False),
    ("f(*a, b, k=1, *c, **d, e=2)\n", True),
    ("x \\ \ny\n", False), ("x = \\\n    1\n", True),
    ("code-snip: 1.0\n", False), ("x: int = 3\n", True), ("x.y: int\n", True), ("a, b: int\n", False),
    ("x\u00b2 = 1\n", True),  # the grammar takes any character above ASCII; the layer refuses it (PROBE)
    ("'\\N{foo}'\n", False), ("b'\u00e9'\n", False), ("ur''\n", False), ("x = '\\d'\n", True),
    ("x = r'\\d' + b'\\x41' + rb'\\d' + '\\u1234\\U0010ffff\\47\\n'\n", True),
    ("x = '\\477'\n", True),
    ("x = 'a' b'c'\n", False), ("x = '''a\n'b''' \"\"\"c\"\"\"\n", True), ("x = 'a\rb'\n", False),
    ("1 <> 2\n", False), ("1 != 2\n", True),
    # await anywhere in an expression; where it may stand is the scope
    # layer's (test_construct_probe)
    ("async def f():\n    await x\n    y = await z\n    return await w\n", True),
    ("async def f():\n    return (await f(k, e)) is not False and g(-await aw ** 2)\n", True),
    ("async def f():\n    await = 1\n", False), ("async def f():\n    x = await\n", False),
    ("def f(a, /, b, *, c, d=1, **k):\n    return a\n", True),
    ("def f(a=1, b):\n    pass\n", False), ("def f(*):\n    pass\n", False),
    ("def f(*, **k):\n    pass\n", False), ("def f(a,):\n    pass\n", True),
    ("def f(*a,):\n    pass\n", True), ("def f(a, /):\n    pass\n", True), ("def f(/, a):\n    pass\n", False),
    ("f = lambda a, *b, c=1, **d: 0\n", True),
    ("a, b = 1, 2\n", True), ("a, f() = 1, 2\n", False), ("a, b\n", True), ("a, f()\n", True),
    ("x.y[1], z = q\n", True), ("for a, b in c:\n    pass\n", True), ("for f() in c:\n    pass\n", False),
    ("del a, b.c, d[1]\n", True), ("del f()\n", False), ("with a as b, c:\n    pass\n", True),
    ("with a as f():\n    pass\n", False), ("x += 1, 2\n", True), ("f() += 1\n", False),
    ("while 1:\n    break\n", True), ("break\n", False), ("continue\n", False),
    ("while 1:\n    def f():\n        break\n", False),
    ("for x in y:\n    pass\nelse:\n    break\n", False),
    ("def f():\n    yield 1\n    x = yield\n    return 2\n", True), ("yield 1\n", False),
    ("return 1\n", False), ("class A:\n    return 1\n", False), ("class A:\n    yield\n", False),
    ("async def f():\n    yield 1\n    x = yield\n", True), ("def f():\n    x = yield y = 1\n", False),
    ("def f():\n    x = (yield).decode() + (yield from g())\n    y += yield z\n", True),
    ("def f():\n    x = f(yield)\n", False),
    ("async def f():\n    return [p async for p in s] + [q for q in r async for t in q]\n", True),
    ("x = [p async p in s]\n", False),
    # nonlocal: the grammar takes the statement; which names it may take is the
    # scope layer's (test_construct_probe, test_scope_checks_against_cpython)
    ("def f():\n    x = y = 1\n    def g():\n        nonlocal x, y\n", True),
    ("try:\n    pass\nexcept:\n    pass\nexcept E:\n    pass\n", False),
    ("try:\n    pass\nexcept E as e:\n    pass\nexcept:\n    pass\nelse:\n    pass\nfinally:\n    pass\n", True),
    ("from __future__ import annotations\nx = 1\n", True),
    ("x = 1\nfrom __future__ import annotations\n", False),
    ("from __future__ import braces\n", False),
    ("from x import *\n", True), ("def f():\n    from x import *\n", False),
    ("class A:\n    from x import *\n", False),
    ("if n := 10:\n    pass\n", True), ("n := 10\n", False), ("f(n := 1)\n", True),
    ("x = y := 1\n", False), ("f(a=b := 1)\n", False), ("lambda: x := 1\n", False), ("{a: b := 1}\n", False),
    ("x = (y := 1), [z := 2, 3], {w := 4}, a[b := 5], (c := 6, 7)\n", True),
    ("@d := null\ndef f():\n    pass\n", True), ("x[a := 1:2]\n", False), ("(a.b := 1)\n", False),
    ("if (m := f()) is not None and m.x:\n    pass\n", True), ("while (x := g()) != '':\n    pass\n", True),
    ("if (x.y := 1):\n    pass\n", False),
    ("import __future__\nx = __future__.all_feature_names\n", True),
    ("x = 1.5e3j + 0x_1 + 0o7 + 0b1 + 1_000 + 0_0 + .5 + 1. + 1e5\n", True),
    ("x = 01\n", False), ("x = 1_\n", False), ("x = 1.real\n", False), ("x = 1 .real\n", True),
    ("x = 0x\n", False), ("x = 1e\n", False),
    ("[x for x in y if z]\n", True), ("{a: b for a, b in c}\n", True), ("(x for x in y)\n", True),
    ("f(x for x in y)\n", True), ("f(x for x in y, 1)\n", False), ("f(1, x for x in y)\n", False),
    ("print(*a)\n", True), ("[*a, b]\n", True), ("(*a)\n", False), ("(*a,)\n", True), ("*a\n", False),
    ("x = a if b else c\n", True), ("x = not a == b\n", True), ("a < b < c\n", True),
    ("a is not b\n", True), ("a not in b\n", True), ("x = -a ** -b\n", True), ("x = ~a @ b\n", True),
    ("x = ...\n", True), ("x[1:2, ::3]\n", True), ("x = {}, {1}, {**a}, {'a': 1, **b}\n", True),
    ("@dec\ndef f():\n    pass\n", True), ("@a.b(c)\nclass C(B, metaclass=M):\n    pass\n", True),
    ("import a.b as c, d\n", True), ("from . import (a as b, c,)\n", True),
    ("from .... import x\n", True), ("import a.b()\n", False), ("from x import (a)b\n", False),
    ("global x\n", True), ("assert x, 'm'\n", True), ("raise E from e\n", True),
    ("x = 1;\n", True), ("x = 1; y = 2\n", True), ("x = 1\n# c", True),
    ("if x:\n\ty\n", False),            # subset: a tab in the indentation
    ("x = f'{x}' + F\"{a.b!r:>10} {{}}\" + f'''{c}\n'''\n", True),
    ("f'{}'\n", False), ("f'{if}'\n", False), ("f'{x'\n", False), ("f'}'\n", False),
    ("rf'{x}\\d\\{y}'\n", True), ("rf'\\{{x}'\n", False),
    ("x = f'{a.b()} {c(d.e)!r:>3} {f[0]} {g[-1].h} {type(self).__name__}'\n", True),
    ("f'{a(b, c)}'\n", True), ("f'{a(if)}'\n", False), ("f'{a[01]}'\n", False), ("f'{a[]}'\n", False),
    ("f'{x + 1}'\n", True),
    # f-string fields: operators, several call arguments, string keys of the
    # other quote kind, slices, self-documenting "="; CPython 3.11's limits
    ("x = f'{type_ref}[{\",\".join(arg_refs)}]' + f'{choice[\"type\"]!r}' + f\"{d['k']:>3}\"\n", True),
    ("x = f'{m.group(1)}_{m.group(2)}' + f'{round(x, 2)})' + f\"c{i + 1}\" + f'{a[1:-1]}'\n", True),
    ("x = f'{x=}' + f'{x = !r:>10}' + f'{ a or b }' + f'{a not in b}' + f'{-a ** 2 // 3}'\n", True),
    # (the enclosing quote inside a field, `f'{d['k']}'`, is the scope layer's: test_fstrings.py)
    ("f'{a\\n}'\n", False), ("f'{a#}'\n", False), ("f'{a+}'\n", False),
    ("f'{a b}'\n", False), ("f'{1.real}'\n", False), ("f'{a()b}'\n", False), ("f'{a!r=}'\n", False),
    ("f'{a!r }'\n", False), ("f'{a or}'\n", False), ("f'{a.if}'\n", False), ("f'{lambda x: 1}'\n", False),
    ("f'{a if b else c}'\n", True), ("f'{x:{w}}'\n", True), ("f'{[y for y in z]}'\n", True),
    ("x = *a, b\n", True), ("(x): int\n", True), ("*a, *b = x\n", False), ("*a = x\n", False),
    ("*a\n", False), ("*a, b = x\n", True), ("for a, *b in x:\n    pass\n", True),
    ("(a, b) = x\n", True), ("[a, (b, c)] = x\n", True), ("(a, b): int\n", False),
    ("[a] += 1\n", False), ("(a) += 1\n", True), ("del (a, b), [c]\n", True),
    ("for (a, b) in x:\n    pass\n", True), ("[v for (k, v) in d]\n", True),
    ("(a, f()) = 1\n", False), ("(a + b) = 1\n", False), ("(a, *b) = x\n", True), ("(*a) = x\n", False),
    # module heads: a docstring, comments and blank lines before future imports
    ('"""doc"""\n# c\n\nfrom __future__ import annotations\nx = 1\n', True),
    ('# c\nr"doc"  # d\nfrom __future__ import (division,\n    generators)\n'
     'from __future__ import annotations\n', True),
    ('"a"\n"b"\nfrom __future__ import annotations\n', False),
    ('b"doc"\nfrom __future__ import annotations\n', False),
    ('f"doc"\nfrom __future__ import annotations\n', False),
    ('"doc".x\nfrom __future__ import annotations\n', False),
    ('"doc"\nx = 1\nfrom __future__ import annotations\n', False),
    ('"doc".upper()\n"a" "b"\n', True),
    # except*, starred subscripts
    ("try:\n    pass\nexcept* E as e:\n    pass\nexcept *(A, B):\n    x = 1\nelse:\n    pass\n", True),
    ("try:\n    pass\nexcept* E:\n    pass\nexcept E:\n    pass\n", False),
    ("try:\n    pass\nexcept*:\n    pass\n", False),
    ("def f():\n    try:\n        pass\n    except* E:\n        return 1\n", False),
    ("for x in y:\n    try:\n        pass\n    except* E:\n        continue\n", False),
    ("for x in y:\n    try:\n        pass\n    except* E:\n        for z in w:\n            break\n", True),
    ("x = tuple[*Ts]\na[*b, c] = a[1:2, *d]\n", True),
    # a generator expression is not a class's only base; no continuation at EOF
    ("class A(x for x in y):\n    pass\n", False), ("class A(B, *c, m=M, **k):\n    pass\n", True),
    ("x = 1\n\\\n", False), ("x = 1\n\\\n  ", True),
]


def test_snippets(parser):
    wrong = []
    for text, expected in SNIPPETS:
        got = lark_ok(parser, text)
        if got != expected:
            wrong.append((text, got))
        if got and not NAME_CHARS.search(text):
            assert cpython_error(text) is None, (text, cpython_error(text))
    assert not wrong, wrong


# Text the grammar takes where CPython refuses a name's character (the scope
# layer's check, tested through the engine in PROBE).
NAME_CHARS = re.compile(r"\A[^'\"#]*[^\x00-\x7f]")


def test_refused_invalid_python_is_invalid():
    """The texts the grammar refuses in the list above are invalid Python,
    apart from the marked subset cases (so the list tests the grammar, not
    typos)."""
    subset = {"if x:\n\ty\n", "  \nx = 1\n",
              "f'{a if b else c}'\n", "f'{x:{w}}'\n", "f'{[y for y in z]}'\n",
              "a = b in finity\n", "def f(a, /):\n    pass\n",
              # CPython 3.11 compiles it with a warning only; the grammar refuses
              # it (a number glued to a keyword)
              "x = 1if 2else 3\n",
              # subset: yield in an async function, walrus as an argument
              }
    for text, expected in SNIPPETS:
        if not expected and text not in subset:
            assert cpython_error(text) is not None, text


FSTRING_POOL = ["a", "b", "bc", "if", "or", "and", "not", "in", "is", "f", "None", "0", "1", "01", "10",
                "1.5", "1e3", "1e", "1.", ".5", '"a"', '""', '"#"', "'a'", "''", '"', "'", "+", "-", "*", "**", "/", "//", "%",
                "<", ">", "==", "!=", "=", "!", "!r", "!x", ":", ":>3", ",", ".", "(", ")", "[", "]",
                " ", " ", "  ", "{", "}", "\\", "#", "\n", "@", "|", "&", "^", "<<", ">>", "~",
                "lambda", "yield", "await", ":=", "\t"]


def test_fstring_fields_compile(store_llama, tmp_path):
    """Random f-string fields glued from expression fragments, quotes,
    backslashes, comments and newlines, in `x = <f-string>`: of those Lark
    accepts, the engine (grammar and scope layer, teacher-forced through the
    LLaMA store) accepts exactly the ones CPython compiles.  Lark alone also
    accepts the texts that only CPython 3.11's lexical limits refuse (a
    backslash, `#` or the enclosing quote in a field, a newline in a
    single-quoted f-string): the scope layer's."""
    p = lark_parser()
    rng = random.Random(31)
    n = 200_000 if FULL else 5_000  # (each accepted text is one file on the check command line)
    texts = []
    for _ in range(n):
        q = rng.choice(["'", '"', "'''", '"""'])
        body = "".join(rng.choice(FSTRING_POOL) for _ in range(rng.randint(1, 7)))
        lit = (rng.choice(["f", "F", "rf", "fr", "Rf"]) + q + rng.choice(["", "x", " "]) + "{" + body
               + "}" + rng.choice(["", "y", "{z}", "{{", "}}"]) + q)
        text = "x = " + lit + "\n"
        if lark_ok(p, text):
            texts.append(text)
    files = []
    for i, text in enumerate(texts):
        f = tmp_path / f"f{i}.py"
        f.write_text(text, encoding="utf-8")
        files.append(f)
    r = run(BIN, "check", store_llama, *map(str, files), "--segment", "greedy")
    passed = {line.split(":", 1)[0] for line in r.stdout.splitlines() if ": ok (" in line}
    bad, lexical = [], 0
    for f, text in zip(files, texts):
        cpy = cpython_error(text) is None
        eng = str(f) in passed
        lexical += not cpy
        if cpy != eng:
            bad.append((text, cpy, eng))
    print(f"\n{n} random f-string fields: Lark accepts {len(texts)}, CPython compiles "
          f"{len(texts) - lexical}, the scope layer refuses the other {lexical}; "
          f"engine != CPython: {len(bad)}")
    assert len(texts) > n // 100 and lexical > 0
    assert not bad, bad[:5]


# One row per construct of "Python as people write it": what the engine (the
# mask, teacher-forced), Lark and CPython say.  CPython must compile every row
# the engine accepts; the engine must agree with Lark on every row where they
# differ from CPython only by the grammar, and with CPython where the grammar
# accepts and the scope layer (runtime/scope_layer.h) decides.  Rows that
# CPython compiles and the grammar refuses are the documented subset.
PROBE = [
    ("an invalid escape in a string (a warning in 3.11)", 'x = "\\(" + """\\q""" + "\\\u00e9"\n'),
    ("an invalid escape in bytes, \\N and \\u there", 'x = b"\\(" + b"\\N{a}" + b"\\u12"\n'),
    ("an invalid escape in an f-string's text and spec", 'x = f"\\(a{1:\\(}"\n'),
    ("a truncated \\x escape", 'x = "\\x4"\n'),
    # Hex escapes: the grammar takes any character after a backslash, the
    # scope layer counts the digits (both ways, per kind of literal).
    ("hex escapes in str, bytes, f-string text and spec",
     'x = "\\x41\\u00e9\\U0010ffff" + b"\\x4f\\xFF" + f"\\x41{1:\\x3e3}\\u00e9"\n'),
    ("a truncated \\x escape in bytes", "x = b'\\x4'\n"),
    ("a \\x escape with a non-hex digit", "x = '\\xg0'\n"),
    ("a truncated \\x escape in an f-string's text", 'x = f"\\x4{1}"\n'),
    ("a truncated \\x escape in an f-string's spec", 'x = f"{1:\\x4}"\n'),
    ("a truncated \\u escape", 'x = "\\u00e"\n'),
    ("a truncated \\U escape", 'x = "\\U0000004"\n'),
    ("a \\U escape past U+10FFFF", "x = '\\U00110000'\n"),
    ("a \\U escape far past U+10FFFF", "x = '\\U0100000'\n"),
    ("\\x, \\u, \\U in raw strings and \\u, \\U in bytes", 'x = r"\\x4" + rf"\\u1{2}" + b"\\u12\\U1" + rb"\\x"\n'),
    ("octal escapes of any value", 'x = "\\777\\0\\1234" + b"\\400"\n'),
    ("backslash before a field in an f-string", 'x = f"\\{6}" + f"\\}}" + f"{1:\\{2}}" + f"{1:\\}"\n'),
    ("backslash before a single } in an f-string", 'x = f"\\}"\n'),
    ("newline in a single-quoted f-string's text", "x = f'a\nb'\n"),
    ("newline in a single-quoted f-string's spec", "x = f'{1:\n}'\n"),
    ("carriage return in a single-quoted f-string", "x = f'a\rb' + (f'{1:\r}')\n"),
    ("carriage return in a triple-quoted f-string", "x = f'''a\rb{1:\r}'''\n"),
    ("a \\N without its name", 'x = "\\N"\n'),
    ("docstring, comments, blank lines before future imports",
     '"""Doc."""\n# c\n\nfrom __future__ import annotations\nfrom __future__ import (division,\n'
     '    generators)\nx = 1\n'),
    ("future import after two strings", '"a"\n"b"\nfrom __future__ import annotations\n'),
    ("future import after code", 'x = 1\nfrom __future__ import annotations\n'),
    ("f-string: join with a string of the other quote", "x = f'{type_ref}[{\",\".join(arg_refs)}]'\n"),
    ("f-string: string key and conversion", "x = f'{choice[\"type\"]!r}'\n"),
    ("f-string: calls with arguments", "x = f'{m.group(1)}_{m.group(2)} {round(x, 2)})'\n"),
    ("f-string: operators, '=' and spec", "x = f\"c{i + 1} {x = !r:>10} {dt * 1e3:.3f}\"\n"),
    ("f-string: own quote inside a field", "x = f'{d['k']}'\n"),
    ("f-string: backslash inside a field", "x = f'{a\\n}'\n"),
    ("f-string: comment inside a field", "x = f\"\"\"{a # c\n}\"\"\"\n"),
    ("f-string: conditional expression", "x = f'{a if b else c}'\n"),
    ("f-string: nested format spec", "x = f'{x:>{w}}'\n"),
    ("f-string: comprehension, display, lambda in parentheses",
     "x = f'{[y for y in z]} { {1: 2} } {(lambda: 1)()}'\n"),
    ("f-string: bare generator, tuple, yield", "def f():\n    x = f'{y for y in z}{a, *b}{yield c}'\n"),
    ("f-string: nested f-string of the other quote", "x = f'{f\"{a!r:>{w}}\"}'\n"),
    ("f-string: newline in a single-quoted one, inside brackets", "x = (f'{a\n}')\n"),
    ("f-string: lambda at a field's top", "x = f'{lambda: 1}'\n"),
    ("f-string: newline in a triple-quoted field outside brackets", "x = f\"\"\"{a\n}\"\"\"\n"),
    ("yield as an assignment's value", "def f():\n    response = yield request\n"),
    ("yield in parentheses", "def f():\n    x = (yield).decode()\n"),
    ("yield in an async function", "async def f():\n    yield 1\n"),
    ("await at a statement's top", "async def f():\n    x = await g()\n    return await h()\n"),
    ("await inside an expression", "async def f():\n    return g(await aw)\n"),
    ("await outside an async function", "def f():\n    await x\n"),
    ("walrus in an if condition", "if (t := type(a)) is not None and t.x:\n    pass\n"),
    ("walrus in a call argument", "f(n := 1)\n"),
    ("walrus in a comprehension iterable", "[x for x in (y := z)]\n"),
    ("walrus in parentheses at statement level", "(a := 10)\n"),
    ("walrus as a decorator", "@d := null\ndef f():\n    pass\n"),
    ("walrus in a generator expression's element", "T = sum((d := x - c) * d for x in data)\n"),
    ("walrus in a comprehension condition", "[y for x in z if (y := f(x))]\n"),
    ("walrus rebinding an iteration variable", "[x for x in z if (x := f(x))]\n"),
    ("iteration variable bound by a walrus before it", "[(y := 1) for y in z]\n"),
    ("walrus in a comprehension in a class body", "class A:\n    x = [y := 1 for z in w]\n"),
    ("walrus in a class body", "class A:\n    x = (y := 1)\n"),
    ("async comprehension", "async def f():\n    return [p async for p in s]\n"),
    ("await at module level", "await x\n"),
    ("await in a lambda inside an async function", "async def f():\n    g = lambda: await x\n"),
    ("await in a class body inside an async function", "async def f():\n    class A:\n        x = await y\n"),
    ("await in a default of a nested def", "async def f():\n    def g(x=await y):\n        pass\n"),
    ("await in a generator expression at module level", "g = (await x for x in y)\n"),
    ("await in a call argument at module level", "f(await x)\n"),
    ("await in a tuple at module level", "t = (await x, 1)\n"),
    ("await in a list comprehension of a plain function", "def f():\n    return [await x for x in y]\n"),
    ("await in a comprehension's first iterable", "def f():\n    return (x for x in await y)\n"),
    ("async comprehension in a plain function", "def f():\n    return [x async for x in y]\n"),
    ("async generator expression in a plain function", "def f():\n    return (x async for x in y)\n"),
    ("async comprehension inside a generator expression",
     "def f():\n    return ([x async for x in y] for z in w)\n"),
    ("async comprehension inside a list comprehension",
     "def f():\n    return [[x async for x in y] for z in w]\n"),
    ("await under future annotations", "from __future__ import annotations\nasync def f():\n    x: await y = 1\n"),
    ("yield in a lambda at module level", "f = lambda: (yield)\n"),
    ("yield at module level in parentheses", "x = (yield)\n"),
    ("yield in a class body", "def f():\n    class A:\n        x = (yield)\n"),
    ("yield in a comprehension", "def f():\n    return [(yield) for x in y]\n"),
    ("yield in a comprehension's first iterable", "def f():\n    return [x for x in (yield)]\n"),
    ("yield in a generator expression's element", "def f():\n    return ((yield) for x in y)\n"),
    ("yield in an augmented assignment", "def f():\n    x += yield y\n"),
    ("yield from in an async function", "async def f():\n    x = yield from y\n"),
    ("yield from in a lambda inside an async function", "async def f():\n    g = lambda: (yield from y)\n"),
    ("return value in an async generator", "async def f():\n    yield 1\n    return 2\n"),
    ("return value, then yield, in an async function", "async def f():\n    return None\n    yield\n"),
    ("bare return in an async generator", "async def f():\n    yield 1\n    return\n"),
    ("nonlocal with a binding", "def f():\n    x = 1\n    def g():\n        nonlocal x\n"),
    ("nonlocal with a later binding", "def f():\n    def g():\n        nonlocal x\n    x = 1\n"),
    ("nonlocal without a binding", "def f():\n    nonlocal x\n"),
    ("nonlocal, binding only in a comprehension",
     "def f():\n    [x for x in y]\n    def g():\n        nonlocal x\n"),
    ("nonlocal at module level", "nonlocal x\n"),
    ("nonlocal __class__ in a method", "class C:\n    def f(self):\n        nonlocal __class__\n"),
    ("global after a use", "def f():\n    print(x)\n    global x\n"),
    ("global after a use in a lambda body", "def f():\n    g = lambda: x\n    global x\n"),
    ("global of a parameter", "def f(x):\n    global x\n"),
    ("global, then an annotation", "def f():\n    global x\n    x: int = 1\n"),
    ("duplicate parameter", "def f(a, *, a):\n    pass\n"),
    ("duplicate lambda parameter", "f = lambda a, a: 1\n"),
    ("repeated keyword argument", "f(a=1, b=2, a=3)\n"),
    ("assignment to __debug__", "__debug__ = 1\n"),
    ("attribute __debug__ as a target", "for x.__debug__ in y:\n    pass\n"),
    ("__debug__ read", "if __debug__:\n    pass\n"),
    ("except*", "try:\n    pass\nexcept* E as e:\n    pass\n"),
    ("except* with return", "def f():\n    try:\n        pass\n    except* E:\n        return 1\n"),
    ("except and except* mixed", "try:\n    pass\nexcept* E:\n    pass\nexcept F:\n    pass\n"),
    ("parenthesised with items", "with (open(a) as f, open(b) as g):\n    pass\n"),
    ("starred subscript", "x = tuple[*Ts]\n"),
    ("starred target in brackets", "[a, *b] = x\n"),
    ("\\N{...} escape", "x = '\\N{EMPTY SET}'\n"),
    ("\\N{...} escape, unknown name", "x = '\\N{NO SUCH NAME}'\n"),
    ("match statement", "match x:\n    case 1:\n        pass\n"),
    ("match as a name", "match = 1\nmatch(x)\n"),
    ("generator expression as the only class base", "class A(x for x in y):\n    pass\n"),
    ("line continuation at the end of the file", "x = 1\n\\\n"),
    ("\\N{...} escapes: CJK, in an f-string", 'x = "\\N{CJK UNIFIED IDEOGRAPH-4E00}" + f"\\N{BULLET}{y}"\n'),
    ("\\N{...} escape, lower case (subset: refused)", 'x = "\\N{em dash}"\n'),
    ("starred target in parentheses, across lines", "(a,\n b,\n *c.d) = x\n"),
    ("nested starred targets", "((*_, a),) = x\nfor (k, *v) in y:\n    pass\n"),
    ("starred target after with-as", "with f() as (a, *b, c):\n    pass\n"),
    ("starred target in a comprehension", "z = [k for (k, *_) in y]\n"),
    ("two starred targets", "[a, *b, *c] = x\n"),
    ("starred target alone in parentheses", "(*a) = x\n"),
    ("starred target alone in brackets", "[*a] = x\n"),
    ("two starred elements in an expression", "x = (*a, *b)\n"),
    ("empty target lists", "[] = x\n() = y\ndel ()\ndel []\n"),
    ("del of a starred target", "del (a, *b)\n"),
    ("del of a nested starred target", "del [a, [*b]]\n"),
    ("del of a starred subscript", "del x[*a]\n"),
    ("parenthesised with items across lines", "with (\n    a() as b,\n    c(),\n):\n    pass\n"),
    ("parenthesised tuple as a with item", "with (a, b):\n    pass\n"),
    ("parenthesised with items, then as", "with (a, b as c) as d:\n    pass\n"),
    ("parenthesised with items, starred", "with (a as b, *c):\n    pass\n"),
    ("parenthesised with items, walrus", "with (a := b, c as d):\n    pass\n"),
    ("parenthesised with item, then another item", "with (a as b), c:\n    pass\n"),
    ("async with parenthesised items", "async def f():\n    async with (a as b, c as d):\n        pass\n"),
    ("future imports sharing a line", "from __future__ import annotations; from __future__ import division; import os\n"),
    ("future import after another statement on its line", "import os; from __future__ import annotations\n"),
    ("future import after a docstring and a semicolon", "'doc'; from __future__ import annotations\n"),
    ("attribute of a float literal", "x = 1.5e100.__format__('e') + 1..real + 1j.imag\n"),
    ("attribute of a hex literal", "x = 0x1.real\n"),
    ("attribute of a decimal integer literal", "x = 1.real\n"),
    ("starred *args annotation", "def f(*args: *Ts):\n    pass\n"),
    ("starred annotation of a plain parameter", "def f(a: *Ts):\n    pass\n"),
    ("match as a call and a subscript target", "match(x)\nmatch[x] = 1\nmatch.y = 2\n"),
    ("non-ASCII name", "\u00e4 = 1\n"),
    ("global of an unused name after uses", "def f():\n    x = y + z\n    global w\n"),
    ("global __debug__", "def f():\n    global __debug__\n"),
]

# Names above ASCII: CPython 3.11 takes a name that is str.isidentifier()
# and compares names after NFKC; keywords and soft keywords are ASCII only.
PROBE += [
    ("names above ASCII", "\u00e4 = 1\nprint(\u00e4, \u4e2d\u6587)\n"),
    ("a keyword and a letter above ASCII: one name", "if\u00e4 = 1\nx = if\u00e4\n"),
    ("a keyword and a letter above ASCII where no name may stand", "x = 1 if\u00e4 else 2\n"),
    ("a match subject: a keyword and a letter above ASCII", "match in\u00e4:\n    case 1:\n        pass\n"),
    ("fullwidth `if`: a name (NFKC `if`)", "\uff49\uff46 = 1\nx = \uff49\uff46\n"),
    ("fullwidth `None`: a name", "\uff2e\uff4f\uff4e\uff45 = 1\n"),
    ("fullwidth `match`: a name", "\uff4d\uff41\uff54\uff43\uff48 = 1\n"),
    ("fullwidth `match`: no soft keyword", "\uff4d\uff41\uff54\uff43\uff48 x:\n    case 1:\n        pass\n"),
    ("a middle dot goes on a name", "a\u00b7b = 1\n"),
    ("a middle dot cannot begin a name", "\u00b7a = 1\n"),
    ("U+309B goes on no name", "x\u309b = 1\n"),
    ("superscript two goes on no name", "x\u00b2 = 1\n"),
    ("fullwidth comma in code (one NAME to the grammar)", "x = a\uff0cb\n"),
    ("a no-break space in code", "x =\u00a01\n"),
    ("fullwidth low line", "\uff3f\uff3fdebug\uff3f\uff3f = 1\n"),
    ("NFKC: duplicate parameter (ligature fi)", "def f(\ufb01le, file):\n    pass\n"),
    ("NFKC: assignment to __debug__", "__\uff44ebug__ = 1\n"),
    ("NFKC: global after an assignment", "def f():\n    x = 1\n    global \uff58\n"),
    ("NFKC: keyword argument repeated", "f(\uff58=1, x=2)\n"),
    ("NFKC: nonlocal bound by a fullwidth name", "def f():\n    \uff58 = 1\n    def g():\n        nonlocal x\n"),
    ("NFKC: a composed and a decomposed name", "def f(e\u0301, \u00e9):\n    pass\n"),
    ("a letter above ASCII after a number", "x = 1\u00e4\n"),
    ("a name above ASCII in an f-string field", "x = f'{\u00e4!r:>{\u00fc}}'\n"),
    ("a match subject and capture above ASCII", "match \u00e4:\n    case \u00fc:\n        pass\n"),
    ("any character in strings and comments", "x = '\u00b7\uff0c\u309b'  # \u00b7\uff0c\u00a0\n"),
]


def engine_verdicts(store, texts, tmp_path, stem):
    """{index: whether `cfgmask check` accepts texts[index]} (one command line)."""
    files = []
    for k, text in enumerate(texts):
        p = tmp_path / f"{stem}_{k:05d}.py"
        p.write_text(text, encoding="utf-8", newline="")
        files.append(p)
    r = run(BIN, "check", store, *files)
    engine = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\S*" + stem + r"_(\d+)\.py(?::\S*)?: (.*)", line)
        if m:
            engine[int(m.group(1))] = m.group(2).startswith("ok")
    assert sorted(engine) == list(range(len(texts))), r.stdout[-2000:] + r.stderr[-2000:]
    return engine


def probe_row(name, engine, lark, cpy):
    """One row of a construct probe: the engine's, Lark's and CPython's verdicts."""
    return (f"{name:52s} engine {'accepts' if engine else 'refuses':8s} "
            f"Lark {'accepts' if lark else 'refuses':8s} "
            f"CPython {'compiles' if cpy else 'rejects'}")


def test_construct_probe(store_llama, parser, tmp_path):
    engine = engine_verdicts(store_llama, [text for _, text in PROBE], tmp_path, "probe")
    rows, wrong = [], []
    for k, (name, text) in enumerate(PROBE):
        lark, cpy = lark_ok(parser, text), cpython_error(text) is None
        rows.append(probe_row(name, engine[k], lark, cpy))
        if engine[k] != (lark and cpy):
            wrong.append(rows[-1])
    print("\n" + "\n".join(rows))
    assert not wrong, wrong


def above_ascii_programs(rng, n):
    """Seeded programs whose names hold characters above ASCII: letters that
    begin a name, characters that only go on one, characters that go on none,
    characters whose NFKC differs (fullwidth letters, ligatures, compatibility
    letters, a combining mark), in the places where CPython compares names
    (parameters, keywords, global, nonlocal, `__debug__`)."""
    start = "\u00e4\u00e9\u4e2d\u6587\u2118\U0001d431\uff58\uff41\ufb01\u2168\u00aa\u1d43\u01c5\u2126\u212a\u0391"
    cont = "\u00b7\u0300\u0301\u3099\ufe33\u0663\uff9e\u0e31"
    bad = "\u00a0\uff0c\u309b\u20ac\uff3f\u201c\u200b\u00d7"
    letters = "abxyz_"

    def name():
        s = rng.choice(start + letters + (bad + cont if rng.random() < 0.15 else ""))
        for _ in range(rng.randrange(3)):
            pool = rng.choice([start, cont, letters, letters] + ([bad] if rng.random() < 0.1 else []))
            s += rng.choice(pool)
        return s

    def variant(a):  # often a name equal to `a` after NFKC, or `a` itself
        r = rng.random()
        if r < 0.3:
            return a
        if r < 0.7:
            return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalpha() and rng.random() < 0.5
                           else c for c in unicodedata.normalize("NFKC", a))
        return name()

    forms = ["{a} = 1\n", "def f({a}, {b}):\n    pass\n", "f({a}=1, {b}=2)\n",
             "def f():\n    {a} = 1\n    global {b}\n",
             "def f():\n    {a} = 1\n    def g():\n        nonlocal {b}\n",
             "{a} = [{b} for {b} in y]\n", "x = {a}.{b}\n", "__{a}__ = 1\n",
             "class {a}:\n    {b}: int\n", "lambda {a}, {b}: 0\n"]
    import unicodedata
    out = []
    for _ in range(n):
        a = name()
        if rng.random() < 0.1:
            a = rng.choice(["\uff44ebug", "d\uff45bug", "debug"])
        out.append(rng.choice(forms).format(a=a, b=variant(a)))
    return out


def test_names_above_ascii_against_cpython(store_llama, parser, tmp_path):
    """Generated programs with names above ASCII (above_ascii_programs),
    teacher-forced through the LLaMA store: the engine accepts exactly what
    Lark accepts and CPython compiles (the grammar's NAME takes any character
    above ASCII, the scope layer judges them); both verdicts occur."""
    rng = random.Random(43)
    n = 2000 if FULL else 200
    texts = above_ascii_programs(rng, n)
    engine = engine_verdicts(store_llama, texts, tmp_path, "aa")
    wrong, counts = [], [0, 0]
    for k, text in enumerate(texts):
        want = lark_ok(parser, text) and cpython_error(text) is None
        counts[want] += 1
        if engine[k] != want:
            wrong.append((text, engine[k], cpython_error(text)))
    print(f"\n{n} programs: {counts[1]} compile, {counts[0]} rejected; {len(wrong)} differences")
    assert not wrong, wrong[:10]
    assert min(counts) > n // 10, counts


def test_unicode_name_escapes(store_llama, tmp_path):
    """`\\N{NAME}` escapes teacher-forced through the LLaMA store: real names,
    CJK unified ideographs, names with one character changed, inserted or
    deleted, and cut short; the engine accepts exactly what CPython compiles,
    apart from the names CPython reads that the layer leaves out (aliases, a
    CJK name with a leading zero), which it must refuse."""
    import unicodedata
    rng = random.Random(41)
    names = [n for n in (unicodedata.name(chr(c), "") for c in range(0x110000)) if n]
    cases = rng.sample(names, 150)
    cases += ["CJK UNIFIED IDEOGRAPH-%04X" % rng.randrange(0x3000, 0x32000) for _ in range(60)]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -"
    for n in rng.sample(names, 150):
        i = rng.randrange(len(n))
        op = rng.randrange(4)
        if op == 0:
            n = n[:i] + rng.choice(alphabet) + n[i + 1:]
        elif op == 1:
            n = n[:i] + rng.choice(alphabet) + n[i:]
        elif op == 2:
            n = n[:i] + n[i + 1:]
        else:
            n = n[:max(1, i)]
        cases.append(n)
    cases += ["LATIN CAPITAL LETTER GHA", "CJK UNIFIED IDEOGRAPH-04E00", "BYTE ORDER MARK"]
    files = []
    for k, n in enumerate(cases):
        p = tmp_path / f"n_{k:03d}.py"
        p.write_text(f'x = "\\N{{{n}}}"\n', encoding="utf-8")
        files.append(p)
    r = run(BIN, "check", store_llama, *files)
    engine = {int(m.group(1)): m.group(2).startswith("ok")
              for m in re.finditer(r"n_(\d+)\.py(?::\S*)?: (\S*)", r.stdout)}
    assert sorted(engine) == list(range(len(cases))), r.stdout[-2000:]
    wrong, counts = [], [0, 0, 0]
    for k, n in enumerate(cases):
        cpy = cpython_error(f'x = "\\N{{{n}}}"\n') is None
        try:
            listed = unicodedata.name(unicodedata.lookup(n)) == n
        except KeyError:
            listed = False
        expected = cpy and listed and re.fullmatch(r"[A-Z0-9][A-Z0-9 \-]*", n) is not None
        counts[0 if expected else 1 if not cpy else 2] += 1
        if engine[k] != expected:
            wrong.append((n, engine[k], cpy))
    print(f"\n\\N{{...}}: {len(cases)} names, {counts[0]} accepted, {counts[1]} rejected by "
          f"CPython, {counts[2]} CPython reads and the layer leaves out")
    assert not wrong, wrong[:10]


# ------------------------------------------------------------------ completeness


def stdlib_files():
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    files = files[::STDLIB_STRIDE]
    out = []
    for p in files:
        try:
            data = p.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if STDLIB_MAX_BYTES and len(data) > STDLIB_MAX_BYTES:
            continue
        if cpython_error(text) is None:
            out.append((p, text))
    return out


@pytest.fixture(scope="module")
def accepted_files(parser, tmp_path_factory):
    d = tmp_path_factory.mktemp("stdlib")
    files = stdlib_files()
    accepted, refused = [], []
    for k, (p, text) in enumerate(files):
        if lark_ok(parser, text):
            dst = d / f"{k:04d}_{p.name}"
            shutil.copyfile(p, dst)
            accepted.append(dst)
        else:
            refused.append(p)
    share = len(accepted) / len(files)
    print(f"\nstrict python.lark: {len(accepted)} of {len(files)} stdlib files that CPython "
          f"compiles are accepted ({share:.0%}); refused e.g. {[p.name for p in refused[:8]]}")
    assert share >= MIN_COVERAGE
    return accepted


def last_line(r):
    return r.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("segment", ["greedy", "random"])
def test_check_stdlib_llama(store_llama, accepted_files, segment):
    r = run(BIN, "check", store_llama, *accepted_files, "--segment", segment, "--seed", "7")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert last_line(r) == f"{len(accepted_files)} passed, 0 failed"


@pytest.mark.parametrize("segment", ["canonical", "random"])
def test_check_stdlib_smollm2(store_smol, accepted_files, segment):
    if segment == "canonical":
        r = run(PYTHON, ROOT / "tests" / "tools" / "canonical_ids.py", TOK_SMOL, *accepted_files)
        assert r.returncode == 0, r.stderr
    r = run(BIN, "check", store_smol, *accepted_files, "--segment", segment, "--seed", "7")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert last_line(r) == f"{len(accepted_files)} passed, 0 failed"


# Popular PyPI packages written for Python 3.8+ (attrs, click, rich, httpx,
# anyio, starlette, fastapi, pydantic, typer: async code, type hints,
# dataclasses, f-strings), fetched by tests/pycorpus/fetch.sh into
# .cache/pypkgs (not committed): every n-th file (all with CFGMASK_FULL=1).
PKG_CACHE = Path(os.environ.get("CFGMASK_PYKGS", str(ROOT / ".cache" / "pypkgs")))
PKG_STRIDE = 1 if FULL else 8
# Measured 0.85 on all 363 files that CPython compiles (`python
# tests/pycorpus/coverage.py .cache/pypkgs/*`; grammar/lark/README.md).
PKG_MIN_COVERAGE = 0.75


@pytest.fixture(scope="module")
def package_files(parser, tmp_path_factory):
    proc = subprocess.run([str(ROOT / "tests" / "pycorpus" / "fetch.sh"), str(PKG_CACHE)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, "fetching the packages from PyPI failed:\n" + proc.stderr
    d = tmp_path_factory.mktemp("pkgs")
    files = sorted(PKG_CACHE.rglob("*.py"))[::PKG_STRIDE]
    compiled, accepted = 0, []
    for k, p in enumerate(files):
        try:
            text = p.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if (not FULL and len(text) > STDLIB_MAX_BYTES) or cpython_error(text) is not None:
            continue
        compiled += 1
        if lark_ok(parser, text):
            dst = d / f"{k:04d}_{p.name}"
            shutil.copyfile(p, dst)
            accepted.append(dst)
    share = len(accepted) / compiled
    print(f"\nstrict python.lark: {len(accepted)} of {compiled} package files that CPython "
          f"compiles are accepted ({share:.0%})")
    assert share >= PKG_MIN_COVERAGE
    return accepted


@pytest.mark.parametrize("segment", ["greedy", "random"])
def test_check_packages_llama(store_llama, package_files, segment):
    r = run(BIN, "check", store_llama, *package_files, "--segment", segment, "--seed", "7")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert last_line(r) == f"{len(package_files)} passed, 0 failed"


def test_check_packages_smollm2(store_smol, package_files):
    r = run(PYTHON, ROOT / "tests" / "tools" / "canonical_ids.py", TOK_SMOL, *package_files)
    assert r.returncode == 0, r.stderr
    r = run(BIN, "check", store_smol, *package_files, "--segment", "canonical")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert last_line(r) == f"{len(package_files)} passed, 0 failed"


# ------------------------------------------------------------------ soundness


def walks(store, parser, tmp_path, n, seed):
    r = run(BIN, "sample", store, "-n", n, "--seed", seed, "--max-tokens", 64, "-o", tmp_path)
    # Status 1: some walks could not be completed within the search budget
    # (they are not claimed to be in the language and are skipped below).
    assert r.returncode == 0 or (r.returncode == 1 and "samples are not complete" in r.stdout), \
        r.stdout[-3000:] + r.stderr
    # A sample's text need not end with a newline: its header may follow it on
    # the same line.
    headers = re.findall(r"=== \S*sample_(\d+)\.txt: ([^\n]*?) ===", r.stdout)
    assert [int(k) for k, _ in headers] == list(range(1, n + 1))
    ended = semantic = 0
    bad = []
    for k, h in enumerate((h for _, h in headers), 1):
        if not h.endswith("ended with EOS"):
            continue            # the completion search gave up; nothing was claimed
        ended += 1
        text = (tmp_path / f"sample_{k}.txt").read_bytes().decode("utf-8")
        assert lark_ok(parser, text), (k, text)          # the exactness contract
        err = cpython_error(text)
        if err is None:
            continue
        semantic += any(s in err for s in SEMANTIC)
        bad.append((k, err, text[:300]))
    print(f"\n{Path(store).parent.name}: {ended} of {n} walks end with EOS; CPython rejects "
          f"{len(bad)} ({semantic} of them for a symbol-table reason)")
    assert ended >= n * 0.9
    assert not bad, bad[:5]


def test_walks_llama(store_llama, parser, tmp_path):
    walks(store_llama, parser, tmp_path, WALKS, 1)


def test_walks_smollm2(store_smol, parser, tmp_path):
    walks(store_smol, parser, tmp_path, WALKS, 2)


@pytest.mark.skipif(not FULL, reason="Qwen2's 152k vocabulary only with CFGMASK_FULL=1")
def test_walks_qwen2(parser, tmp_path_factory, tmp_path):
    store = compile_store(TOK_QWEN2, tmp_path_factory.mktemp("qwen2") / "py.cfgm")
    walks(store, parser, tmp_path, WALKS, 3)


# ------------------------------------------------------------------ scope checks


@pytest.mark.parametrize("kind", ["names", "contexts"])
def test_scope_checks_against_cpython(store_llama, parser, tmp_path, kind):
    """The scope layer against CPython's compile(), both ways, on programs
    where names collide on purpose (about 70% hit a symbol-table check), and
    on programs that put await, yield, async comprehensions, return values
    and assignment expressions in every kind of place (about 55% rejected)."""
    from collections import Counter
    sys.path.insert(0, str(ROOT / "tests" / "pycorpus"))
    from scope_programs import context_programs, programs
    texts = (programs(31, SCOPE_PROGRAMS) if kind == "names"
             else context_programs(32, SCOPE_PROGRAMS))
    files = []
    for k, text in enumerate(texts):
        assert lark_ok(parser, text), text      # the generator stays in the grammar
        p = tmp_path / f"scope_{k:05d}.py"
        p.write_text(text, encoding="utf-8", newline="")
        files.append(p)
    r = run(BIN, "check", store_llama, *files)
    engine = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\S*scope_(\d+)\.py(?::\S*)?: (.*)", line)
        if m:
            engine[int(m.group(1))] = m.group(2).startswith("ok")
    assert sorted(engine) == list(range(len(texts))), r.stdout[-2000:]
    wrong, reasons = [], Counter()
    for k, text in enumerate(texts):
        err = cpython_error(text)
        reasons[(err or "compiles").lstrip("'").split("'")[0].split(":")[0].strip()] += 1
        if engine[k] != (err is None):
            wrong.append((engine[k], err, text))
    print(f"\n{len(texts)} programs: " + ", ".join(f"{v} {k}" for k, v in reasons.most_common()))
    assert reasons["compiles"] > len(texts) // 10
    assert len(reasons) >= 6                   # several checks are exercised
    assert not wrong, wrong[:3]


# ------------------------------------------------------------------ mutants


def mutate(text, rng):
    i = rng.randrange(len(text))
    kind = rng.choice("dis")
    if kind == "d":
        return text[:i] + text[i + 1:]
    if kind == "i":
        return text[:i] + rng.choice("()[]{}:=,.'\"#\\ \t\nabx01+*") + text[i:]
    j = min(i + 1, len(text) - 1)
    return text[:i] + text[j] + text[i] + text[j + 1:]


def test_mutants_cpython_rejects_are_refused(store_llama, accepted_files, tmp_path):
    rng = random.Random(19)
    files = rng.sample(accepted_files, min(MUTANT_FILES, len(accepted_files)))
    rejected = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        for m in range(MUTANTS_PER_FILE):
            t = mutate(text, rng)
            if cpython_error(t) is not None:
                p = tmp_path / f"{f.stem}_{m}.py"
                p.write_text(t, encoding="utf-8", newline="")
                rejected.append(p)
    assert rejected
    r = run(BIN, "check", store_llama, *rejected)
    print(f"\n{len(rejected)} mutants CPython rejects: {last_line(r)}")
    assert last_line(r) == f"0 passed, {len(rejected)} failed", r.stdout[-3000:]


# ------------------------------------------------------------------ coverage report


def coverage_report(stride=1, examples=3):
    """Lark's acceptance of the standard library, with the refused files
    tallied by the first error (the terminal Lark did not expect, or the
    character it could not lex) and a few example lines of each class."""
    from collections import Counter
    from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedToken
    global STDLIB_STRIDE, STDLIB_MAX_BYTES
    STDLIB_STRIDE, STDLIB_MAX_BYTES = stride, None
    p = lark_parser()
    files = stdlib_files()
    root = Path(sysconfig.get_paths()["stdlib"])
    tally, where = Counter(), {}
    for path, text in files:
        try:
            p.parse(text)
            continue
        except LarkError as e:
            err = e
        if isinstance(err, UnexpectedToken):
            key = f"unexpected {err.token.type}"
        elif isinstance(err, UnexpectedCharacters):
            key = f"cannot lex {text[err.pos_in_stream]!r}"
        else:
            key = type(err).__name__
        tally[key] += 1
        line = getattr(err, "line", 0) or 0
        src = text.splitlines()[line - 1].strip()[:80] if 0 < line <= len(text.splitlines()) else ""
        where.setdefault(key, []).append(f"{path.relative_to(root)}:{line}: {src}")
    refused = sum(tally.values())
    print(f"{len(files) - refused} of {len(files)} stdlib files that CPython compiles are "
          f"accepted ({(len(files) - refused) / len(files):.1%})")
    for key, n in tally.most_common():
        print(f"{n:5d}  {key}")
        for w in where[key][:examples]:
            print(f"         {w}")


if __name__ == "__main__":
    coverage_report(*(int(a) for a in sys.argv[1:3]))
