"""sql.lark against SQLite's own parser: random masked walks and case folding.

* Random masked walks: `cfgmask sample` (no --ascii: any token of the mask may
  be drawn, non-ASCII ones included) on stores of grammar/lark/sql.lark
  compiled with tokenizers of three kinds: LLaMA's SentencePiece with byte
  fallback (32,000 tokens), SmolLM2's byte-level BPE (49,152) and Qwen2's
  byte-level BPE (151,936).  Every walk must end with EOS (a walk cut at
  --max-tokens is steered to a shortest completion), Lark must accept every
  text (the exactness contract: the same grammar file,
  `Lark(..., parser='lalr', lexer='contextual')`), and SQLite's parser must
  accept every statement of it: each is prepared as `EXPLAIN <statement>` in
  an empty in-memory database (harvest_sql.sqlite_verdict); only a syntax or
  token error ("syntax error", "unrecognized token", "incomplete input", a
  U+0000 in the text, more than one statement) is a rejection, missing tables
  or columns are not; where SQLite stops at a missing table or database
  before reading the rest of a statement, the judge creates it and judges
  again.  Zero rejections.
* Case folding: SQLite folds keywords by ASCII case only.  Keywords with a
  Unicode case variant (U+017F for s, U+212A for k, U+0130 and U+0131 for i)
  are refused where only the keyword fits, mixed ASCII case is accepted, and
  a variant stands as an identifier where one may; Lark, `cfgmask check` and
  SQLite give each text the same verdict.  Then harvested statements with one
  such letter replaced by its variant: `cfgmask check` agrees with Lark on
  every one, and SQLite accepts every one Lark accepts.

Sizes: CI (the default, and under CFGMASK_QUICK=1) takes the two vocabularies
of at most 50,000 tokens, 40 walks and 150 mutants each; CFGMASK_FULL=1 takes
all three tokenizers, 1,000 walks and 1,500 mutants each:

    CFGMASK_FULL=1 $CFGMASK_PYTHON -m pytest -q -s tests/py/test_sql_sqlite.py

Stores are cached under $CFGMASK_TEST_CACHE (keyed by the grammar's bytes,
the tokenizer file and the cfgmask binary) when it is set.
"""
from __future__ import annotations

import collections
import hashlib
import os
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import harvest_sql  # noqa: E402
from conftest import GRAMMAR_DIR, accepts  # noqa: E402

BIN = os.environ.get("CFGMASK_BIN", str(ROOT / "build" / "cfgmask"))
FULL = os.environ.get("CFGMASK_FULL") == "1"
SQL_GRAMMAR = GRAMMAR_DIR / "sql.lark"

# CI compiles only vocabularies of at most 50,000 tokens.
CI_MAX_VOCAB = 50_000
TOKENIZERS = [  # (id, environment variable, default file, vocabulary size, seed)
    ("llama-spm", "CFGMASK_TOK_LLAMA_SPM", ".cache/tokenizers/llama-spm.gguf", 32_000, 11),
    ("smollm2", "CFGMASK_TOK_SMOLLM2", ".cache/tokenizers/smollm2-135m-instruct-q4_1.gguf",
     49_152, 12),
    ("qwen2", "CFGMASK_TOK_QWEN2", ".cache/tokenizers/qwen2.gguf", 151_936, 13),
]
WALKS = 1000 if FULL else 40
FOLD_MUTANTS = 1500 if FULL else 150
MAX_TOKENS = 48

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


def _tok_params():
    out = []
    for name, env, default, vocab, seed in TOKENIZERS:
        marks = []
        if vocab > CI_MAX_VOCAB and not FULL:
            marks.append(pytest.mark.skip(reason=f"{vocab:,} tokens: only under CFGMASK_FULL=1"))
        out.append(pytest.param((name, os.environ.get(env, str(ROOT / default)), seed),
                                id=name, marks=marks))
    return out


def run(*args, timeout=1800):
    return subprocess.run([str(a) for a in args], capture_output=True, timeout=timeout)


def _file_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"


_stores: dict[str, Path] = {}


def sql_store(tok: str, tmp_path_factory) -> Path:
    """sql.lark compiled with `tok`; reused within the session and, when
    CFGMASK_TEST_CACHE is set, across sessions of the same build."""
    if not os.path.exists(tok):
        pytest.skip(f"tokenizer {tok} not available")
    key = hashlib.sha256("\n".join([
        hashlib.sha256(SQL_GRAMMAR.read_bytes()).hexdigest(),
        _file_key(Path(tok)), _file_key(Path(BIN))]).encode()).hexdigest()[:24]
    if key in _stores:
        return _stores[key]
    cache = os.environ.get("CFGMASK_TEST_CACHE")
    if cache:
        d = Path(cache) / "py-sql-sqlite"
        d.mkdir(parents=True, exist_ok=True)
    else:
        d = tmp_path_factory.mktemp("sql-store")
    out = d / f"sql-{key}.cfgm"
    if not out.exists():
        tmp = d / f"sql-{key}.{os.getpid()}.tmp.cfgm"
        r = run(BIN, "compile", SQL_GRAMMAR, "--tokenizer", tok, "-o", tmp, "--quiet")
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        os.replace(tmp, out)
    _stores[key] = out
    return out


@pytest.fixture(scope="module", params=_tok_params())
def store(request, tmp_path_factory):
    name, tok, seed = request.param
    return name, sql_store(tok, tmp_path_factory), seed


# ------------------------------------------------------------------ the judge


def sqlite_statements(text: str):
    """The statements of `text` as the sqlite3 shell splits them."""
    return [s for s in (harvest_sql.strip_statement(x) for x in harvest_sql.split_statements(text))
            if s]


_NO_TABLE = re.compile(r"no such table: (.+)\Z", re.S)
_NO_DATABASE = re.compile(r"unknown database (.+)\Z", re.S)
_NOT_A_VIEW = re.compile(r"cannot create INSTEAD OF trigger on table: (.+)\Z", re.S)
MAX_ROUNDS = 6


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _objects_for(msg: str):
    """Statements creating what SQLite found missing, or None."""
    if m := _NO_TABLE.match(msg):
        schema, dot, table = m.group(1).partition(".")
        if not dot:
            return [f"CREATE TABLE {_quote(schema)}(x)"]
        out = ([] if schema.lower() in ("main", "temp")
               else [f"ATTACH ':memory:' AS {_quote(schema)}"])
        return out + [f"CREATE TABLE {_quote(schema)}.{_quote(table)}(x)"]
    if m := _NO_DATABASE.match(msg):
        return [f"ATTACH ':memory:' AS {_quote(m.group(1))}"]
    if m := _NOT_A_VIEW.match(msg):
        return [f"DROP TABLE {_quote(m.group(1))}", f"CREATE VIEW {_quote(m.group(1))} AS SELECT 1"]
    return None


def sqlite_verdict(stmt: str):
    """harvest_sql.sqlite_verdict (EXPLAIN in an empty in-memory database),
    except that SQLite stops at a missing table or database before it has read
    the rest of some statements (ALTER TABLE t ADD ..., CREATE TRIGGER ... ON
    t ..., CREATE TABLE db.t ...): the missing objects are then created in a
    fresh database and the statement is judged again, so that its rest is
    parsed too.  Returns (accepted, message, rounds)."""
    setup: list[str] = []
    for rounds in range(1, MAX_ROUNDS + 1):
        conn = sqlite3.connect(":memory:")
        try:
            for s in setup:
                conn.execute(s)
        except sqlite3.Error:
            conn.close()
            return last + (rounds - 1,)     # the object cannot be made: keep the verdict
        ok, msg = harvest_sql.sqlite_verdict(stmt, conn)
        conn.close()
        last = (ok, msg)
        more = _objects_for(msg) if ok else None
        if not more or all(x in setup for x in more):
            return ok, msg, rounds
        setup += more
    return last + (MAX_ROUNDS,)


def sqlite_judge(text: str):
    """(accepted, messages, rounds): SQLite's verdict on a ';'-separated text."""
    stmts = sqlite_statements(text)
    if not stmts:
        return False, ["no statement"], 0
    verdicts = [sqlite_verdict(s) for s in stmts]
    return (all(ok for ok, _, _ in verdicts), [m for _, m, _ in verdicts],
            max(r for _, _, r in verdicts))


def test_judge_rejects_what_sqlite_rejects():
    """The judge itself: syntax and token errors, NUL and Unicode keyword
    variants are rejections; name-resolution errors are not."""
    for text in ["SELECT", "SELECT 1 FROM", "SELEC 1", "SELECT 1e", "SELECT 'a", "SELECT 1;;x",
                 "SELECT 'a\x00'", "SELECT 1 -- \x00", "\u017fELECT 1", "ROLLBAC\u212a",
                 "\u0130NSERT INTO t VALUES (1)", "expla\u0131n SELECT 1", "SELECT 1\u00a0",
                 "SELECT 1;\x0b", "EXPLAIN\u00e9 SELECT 1"]:
        assert not sqlite_judge(text)[0], repr(text)
    for text in ["SELECT x FROM t", "sElEcT 1; ExPlAiN QUERY PLAN select 2;", "ROLLBACK",
                 "SELECT \u017felect FROM \u212aelvin", "-- note\nSELECT 1; /* end */"]:
        assert sqlite_judge(text)[0], repr(text)
    # SQLite stops at the missing table before the rest of these statements;
    # the judge creates it and reads on.
    for text, rest_ok in [("ALTER TABLE t ADD COLUMN c INTEGER", True),
                          ("ALTER TABLE t ADD COLUMN c INTEGER NOT NULL NOT", False),
                          ("ALTER TABLE s.t ADD c", True),
                          ("ALTER TABLE s.t ADD c c c (", False),
                          ("CREATE TABLE s.t(a, b)", True),
                          ("CREATE TABLE s.t(a, b, ,)", False),
                          ("CREATE TRIGGER r AFTER INSERT ON t BEGIN SELECT 1; END", True),
                          ("CREATE TRIGGER r AFTER INSERT ON t BEGIN SELECT 1 1; END", False),
                          ("CREATE TRIGGER r INSTEAD OF INSERT ON v BEGIN SELECT 1; END", True),
                          ("CREATE TRIGGER r INSTEAD OF INSERT ON v BEGIN SELECT FROM; END",
                           False)]:
        assert harvest_sql.sqlite_verdict(text)[0], repr(text)    # the lenient single round
        assert sqlite_judge(text)[0] == rest_ok, repr(text)


# ------------------------------------------------------------------ random walks


def walk(store_path: Path, n: int, seed: int, out: Path):
    r = run(BIN, "sample", store_path, "-n", n, "--seed", seed, "--max-tokens", MAX_TOKENS,
            "-o", out)
    stdout = r.stdout.decode("utf-8", errors="replace")
    assert r.returncode == 0, stdout[-3000:] + r.stderr.decode(errors="replace")
    headers = [line for line in stdout.splitlines() if line.startswith("=== ")]
    assert len(headers) == n
    for h in headers:
        assert h.endswith("ended with EOS ==="), h
    return headers, [(out / f"sample_{k}.txt").read_bytes().decode("utf-8")
                     for k in range(1, n + 1)]


# A keyword spelled with a non-ASCII letter that Unicode case folding (Python's
# re.IGNORECASE) would map onto an ASCII one: the letters the grammar used to
# let through.
UNICODE_FOLDS = "\u017f\u212a\u0130\u0131"


def test_random_walks_sqlite_accepts(store, sql_parser, tmp_path):
    name, store_path, seed = store
    headers, texts = walk(store_path, WALKS, seed, tmp_path)
    lark_rejects, sqlite_rejects = [], []
    messages = collections.Counter()
    statements = non_ascii = folds = read_on = 0
    for k, text in enumerate(texts, 1):
        assert "\x00" not in text, f"sample_{k}"
        if not accepts(sql_parser, text):
            lark_rejects.append((k, text))
        ok, msgs, rounds = sqlite_judge(text)
        statements += len(msgs)
        read_on += rounds > 1
        messages.update(re.sub(r":.*", "", m) for m in msgs)
        if not ok:
            sqlite_rejects.append((k, [m for m in msgs if m != "ok"][:2], text[:200]))
        non_ascii += any(ord(c) > 0x7F for c in text)
        folds += any(c in UNICODE_FOLDS for c in text)
    completed = sum("completed with" in h for h in headers)
    print(f"\nsql.lark + {name}: {len(texts)} walks ({completed} completed after "
          f"--max-tokens {MAX_TOKENS}), {statements} statements, {non_ascii} texts with "
          f"non-ASCII characters ({folds} with {UNICODE_FOLDS}), {read_on} judged again "
          f"with the missing tables or databases created; Lark rejects "
          f"{len(lark_rejects)}, SQLite rejects {len(sqlite_rejects)}; SQLite's messages: "
          f"{dict(messages.most_common(8))}")
    assert not lark_rejects, lark_rejects[:3]
    assert not sqlite_rejects, sqlite_rejects[:5]
    assert completed > 0          # the shortest completion was exercised
    assert non_ascii > 0          # the walks drew non-ASCII tokens


# ------------------------------------------------------------------ case folding

# (text, verdict): the same for Lark, cfgmask and SQLite.
CASE_FOLDING = [
    ("SELECT 1", True),
    ("sElEcT 1", True),
    ("\u017fELECT 1", False),                       # LATIN SMALL LETTER LONG S
    ("\u017felect 1", False),
    ("sELECT \u017felect FROM t", True),           # an identifier where one may stand
    ("InSeRt INTO t VALUES (1)", True),
    ("\u0130NSERT INTO t VALUES (1)", False),       # LATIN CAPITAL LETTER I WITH DOT ABOVE
    ("\u0130nsert INTO t VALUES (1)", False),
    ("expLAin SELECT 1", True),
    ("expLA\u0131n SELECT 1", False),               # LATIN SMALL LETTER DOTLESS I
    ("RollbaCK", True),
    ("Rollba\u212a", False),                        # KELVIN SIGN
    ("RollbaC\u212a", False),
    ("BEGIN tranSAction", True),
    ("BEGIN tran\u017fAction", False),
    ("SELECT a FROM t WHERE a LI\u212aE 'x'", False),
    ("SELECT a FROM t WHERE a LiKe 'x'", True),
    ("SELECT \u212aey, \u0131d FROM t", True),
    ("SELECT 1 \u0130S NULL", False),
    ("SELECT 1 iS NULL", True),
    ("SELECT X'aB', 0XfF, 1E5, 2e-3", True),
    ("SELECT x'0\u212a'", False),
    ("SELECT 'it''s' AS \u017f", True),
]


def test_case_folding_ascii_only(store, sql_parser, tmp_path):
    name, store_path, _ = store
    files = []
    for k, (text, expected) in enumerate(CASE_FOLDING):
        assert accepts(sql_parser, text) == expected, f"Lark: {text!r}"
        assert sqlite_judge(text)[0] == expected, f"SQLite: {text!r}"
        p = tmp_path / f"case_{k:02d}.sql"
        p.write_bytes(text.encode("utf-8"))
        files.append(p)
    for segment in ("greedy", "bytes"):
        r = run(BIN, "check", store_path, *files, "--segment", segment, "--verify-masks", "4")
        out = r.stdout.decode("utf-8", errors="replace")
        for p, (text, expected) in zip(files, CASE_FOLDING):
            lines = [ln for ln in out.splitlines() if ln.startswith(str(p) + ":")]
            assert len(lines) == 1, (text, out[-2000:])
            ok = lines[0].startswith(f"{p}: ok (")
            assert ok == expected, \
                f"cfgmask check --segment {segment} ({name}): {text!r}: {lines[0]}"
            if not expected:
                assert "mask mismatch" not in lines[0] and "differ" not in lines[0], lines[0]
        passed = sum(e for _, e in CASE_FOLDING)
        assert out.strip().splitlines()[-1] == f"{passed} passed, {len(files) - passed} failed"


# The letters Python's re.IGNORECASE maps onto an ASCII one, by that letter.
FOLD_VARIANT = {"s": "\u017f", "S": "\u017f", "k": "\u212a", "K": "\u212a",
                "i": "\u0131", "I": "\u0130"}


def test_fold_variant_mutants(store, sql_parser, sql_corpus, tmp_path):
    """Harvested statements with one s, k or i (in a keyword, a name, a string
    or a comment) replaced by its Unicode variant."""
    name, store_path, seed = store
    originals = [t for _, t, _ in sql_corpus
                 if any(c in FOLD_VARIANT for c in t) and accepts(sql_parser, t)]
    rng = random.Random(seed)
    mutants = []
    for _ in range(FOLD_MUTANTS):
        t = rng.choice(originals)
        k = rng.choice([i for i, c in enumerate(t) if c in FOLD_VARIANT])
        mutants.append(t[:k] + FOLD_VARIANT[t[k]] + t[k + 1:])
    files = []
    for k, t in enumerate(mutants):
        p = tmp_path / f"m{k:04d}.sql"
        p.write_bytes(t.encode("utf-8"))
        files.append(p)
    r = run(BIN, "check", store_path, *files, "--segment", "greedy")
    out = r.stdout.decode("utf-8", errors="replace")
    lark_ok = sqlite_ok = 0
    disagree, unsound = [], []
    for p, t in zip(files, mutants):
        lines = [ln for ln in out.splitlines() if ln.startswith(str(p) + ":")]
        assert len(lines) == 1, (t, out[-2000:])
        engine = lines[0].startswith(f"{p}: ok (")
        lark = accepts(sql_parser, t)
        sqlite = sqlite_judge(t)[0]
        lark_ok += lark
        sqlite_ok += sqlite
        if engine != lark:
            disagree.append((t, lines[0]))
        if lark and not sqlite:
            unsound.append(t)
    print(f"\nsql.lark + {name}: {len(mutants)} one-letter fold mutants of {len(originals)} "
          f"statements: Lark accepts {lark_ok}, SQLite {sqlite_ok}; cfgmask differs from Lark "
          f"on {len(disagree)}, Lark accepts what SQLite rejects on {len(unsound)}")
    assert not disagree, disagree[:3]
    assert not unsound, unsound[:3]
    assert 0 < lark_ok < len(mutants)   # both verdicts occur
