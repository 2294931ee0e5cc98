"""`cfgmask check` and `cfgmask sample` on real grammars, tokenizers and corpora.

* python.lark (file_input) + Qwen2 (byte-level BPE, 151,936 tokens): stdlib
  files that both CPython and Lark accept are teacher-forced with the
  tokenizer's own encoding (`--segment canonical`, ids from
  tests/tools/canonical_ids.py, HF `tokenizers`), the greedy and a random
  segmentation: every token in its mask, EOS at the end, 0 failures.
  Samples all end with EOS and Lark accepts every one; the share CPython's
  compile() accepts is printed with the reasons of the others.
* sql.lark + LLaMA SentencePiece (32,000 tokens): every harvested statement
  Lark accepts passes `check`; every sample ends with EOS and SQLite's parser
  accepts it.

One store per grammar for the whole module (python.lark + Qwen2 compiles in
about 20 s, sql.lark + LLaMA in about a minute).  Quick sizes by default (CI);
CFGMASK_FULL=1 takes every corpus file and more samples.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import harvest_sql  # noqa: E402
import python_corpus  # noqa: E402

BIN = os.environ.get("CFGMASK_BIN", str(ROOT / "build" / "cfgmask"))
PYTHON = os.environ.get("CFGMASK_PYTHON", sys.executable)
TOK_QWEN2 = os.environ.get("CFGMASK_TOK_QWEN2", str(ROOT / ".cache/tokenizers/qwen2.gguf"))
TOK_LLAMA = os.environ.get("CFGMASK_TOK_LLAMA_SPM", str(ROOT / ".cache/tokenizers/llama-spm.gguf"))
TOK_TIKTOKEN = os.environ.get("CFGMASK_TOK_QWEN_TIKTOKEN",
                              str(ROOT / ".cache/tokenizers/qwen.tiktoken"))
FULL = os.environ.get("CFGMASK_FULL") == "1"

PY_FILES = None if FULL else 16          # stdlib files spread over the library
PY_MAX_BYTES = None if FULL else 12_000
PY_SAMPLES = 40 if FULL else 12
SQL_SAMPLES = 40 if FULL else 12
SQL_CHECK = None if FULL else 120        # harvested statements teacher-forced

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


def run(*args, timeout=900):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=timeout)


def compile_store(grammar, tok, out, start=None):
    if not os.path.exists(tok):
        pytest.skip(f"tokenizer {tok} not available")
    args = [BIN, "compile", grammar, "--tokenizer", tok, "-o", out, "--quiet"]
    if start:
        args += ["--start", start]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def py_store(tmp_path_factory):
    import lark
    grammar = Path(lark.__file__).parent / "grammars" / "python.lark"
    return compile_store(grammar, TOK_QWEN2, tmp_path_factory.mktemp("py") / "py.cfgm",
                         "file_input")


@pytest.fixture(scope="module")
def sql_store(tmp_path_factory):
    return compile_store(ROOT / "grammar" / "lark" / "sql.lark", TOK_LLAMA,
                         tmp_path_factory.mktemp("sql") / "sql.cfgm")


@pytest.fixture(scope="module")
def py_files(tmp_path_factory):
    """Copies of stdlib files accepted by compile() and Lark, with .ids files."""
    d = tmp_path_factory.mktemp("stdlib")
    m = python_corpus.build(d / "corpus", limit=PY_FILES, max_bytes=PY_MAX_BYTES, quiet=True)
    files = []
    for k, e in enumerate(m["files"]):
        dst = d / f"{k:04d}_{Path(e['rel']).name}"
        shutil.copyfile(e["path"], dst)
        files.append(dst)
    assert len(files) >= (PY_FILES or 1000) // 2, m["rejected"][:5]
    tool = ROOT / "tests" / "tools" / "canonical_ids.py"
    args = [PYTHON, tool, TOK_QWEN2, *files]
    if os.path.exists(TOK_TIKTOKEN):
        args += ["--tiktoken", TOK_TIKTOKEN]   # a second, independent encoder must agree
    r = run(*args)
    # Every file must round-trip: the ids decode to the exact file bytes.
    assert r.returncode == 0, r.stderr
    return files


def last_line(r):
    return r.stdout.strip().splitlines()[-1]


# ------------------------------------------------------------------ check


@pytest.mark.parametrize("segment", ["canonical", "greedy", "random"])
def test_check_stdlib(py_store, py_files, segment):
    r = run(BIN, "check", py_store, *py_files, "--segment", segment, "--seed", "11")
    print(f"\n{segment}: {last_line(r)}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert last_line(r) == f"{len(py_files)} passed, 0 failed"


def test_canonical_is_not_greedy(py_store, py_files):
    """The canonical encoding really is another segmentation (BPE merges are
    not longest-match): at least one file's ids differ from a greedy cut."""
    r = run(BIN, "bench", py_store, *py_files, "--segment", "canonical", "--json")
    assert r.returncode == 0, r.stderr
    import json
    canonical = json.loads(r.stdout)["steps"]
    greedy = json.loads(run(BIN, "bench", py_store, *py_files, "--json").stdout)["steps"]
    ids = sum(len(Path(str(f) + ".ids").read_text().split()) for f in py_files)
    assert canonical == ids
    assert canonical != greedy


def test_canonical_ids_errors(py_store, py_files, tmp_path):
    src = py_files[0]
    f = tmp_path / "f.py"
    shutil.copyfile(src, f)
    ids = Path(str(src) + ".ids").read_text().split()
    cases = {
        "missing": None,
        "range": " ".join(ids[:3] + ["999999999"] + ids[3:]),
        "word": " ".join(ids[:2] + ["12x"] + ids[2:]),
        "spelling": " ".join(ids[1:]),
        "short": " ".join(ids[:-1]),
        "special": " ".join(ids[:1] + ["151643"] + ids[1:]),
    }
    for name, content in cases.items():
        p = Path(str(f) + ".ids")
        if p.exists():
            p.unlink()
        if content is not None:
            p.write_text(content)
        r = run(BIN, "check", py_store, f, "--segment", "canonical")
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cfgmask: "), (name, r.stderr)
        assert r.stdout == "", name
        if name in ("range", "word", "special"):
            assert f"{p}:1:" in lines[0], (name, lines[0])
        if name in ("spelling", "short"):
            assert f"{f}:" in lines[0], (name, lines[0])


# ------------------------------------------------------------------ sample


def sample(store, n, seed, max_tokens, out, ascii=True):
    args = [BIN, "sample", store, "-n", n, "--seed", seed, "--max-tokens", max_tokens, "-o", out]
    if ascii:
        args.append("--ascii")
    r = run(*args)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    headers = [line for line in r.stdout.splitlines() if line.startswith("=== ")]
    assert len(headers) == n
    for h in headers:
        assert h.endswith("ended with EOS ==="), h
    texts = [(out / f"sample_{k}.txt").read_bytes().decode("utf-8") for k in range(1, n + 1)]
    return headers, texts


def test_sample_python(py_store, tmp_path):
    from lark import Lark
    from lark.indenter import PythonIndenter
    parser = Lark.open_from_package("lark", "python.lark", ["grammars"], parser="lalr",
                                    lexer="contextual", postlex=PythonIndenter(),
                                    start="file_input")
    headers, texts = sample(py_store, PY_SAMPLES, 5, 48, tmp_path)
    completed = sum("completed with" in h for h in headers)
    compiled, reasons = 0, []
    for k, text in enumerate(texts, 1):
        parser.parse(text)          # every sample is in Lark's language
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(text, f"sample_{k}", "exec", dont_inherit=True)
            compiled += 1
        except (SyntaxError, ValueError) as e:
            reasons.append(f"sample_{k}: {type(e).__name__}: {e.msg if hasattr(e, 'msg') else e}")
    print(f"\npython.lark + Qwen2: {len(texts)} samples, all end with EOS and Lark accepts "
          f"them ({completed} completed after --max-tokens); compile() accepts "
          f"{compiled}/{len(texts)} = {compiled / len(texts):.0%}")
    for line in reasons:
        print("  " + line)
    assert completed > 0   # the shortest completion was exercised


def test_sample_completion_is_short(py_store, tmp_path):
    """Cut early, a walk is completed with a few tokens, not rolled back."""
    headers, texts = sample(py_store, 6, 9, 12, tmp_path)
    for h in headers:
        if "completed with" in h:
            assert "rolled back" not in h, h
            n = int(h.split("completed with ")[1].split(" ")[0])
            assert n <= 12, h


def sqlite_valid(text, conn):
    return harvest_sql.sqlite_accepts_script(text, conn)


def test_sample_sql(sql_store, tmp_path):
    headers, texts = sample(sql_store, SQL_SAMPLES, 3, 40, tmp_path)
    conn = sqlite3.connect(":memory:")
    bad = [(k, t) for k, t in enumerate(texts, 1) if not sqlite_valid(t, conn)]
    completed = sum("completed with" in h for h in headers)
    print(f"\nsql.lark + LLaMA: {len(texts)} samples end with EOS ({completed} completed after "
          f"--max-tokens); SQLite rejects {len(bad)}")
    assert not bad, bad[:3]
    assert completed > 0


# ------------------------------------------------------------------ SQL corpus


def test_check_sql_corpus(sql_store, sql_corpus, sql_parser, tmp_path):
    """Every harvested statement that sql.lark accepts passes `check`."""
    from conftest import accepts
    accepted = [(n, s) for n, s, _ in sql_corpus if accepts(sql_parser, s)]
    share = len(accepted) / len(sql_corpus)
    if SQL_CHECK is not None and len(accepted) > SQL_CHECK:
        accepted = [accepted[(i * len(accepted)) // SQL_CHECK] for i in range(SQL_CHECK)]
    files = []
    for k, (name, s) in enumerate(accepted):
        p = tmp_path / f"{k:04d}.sql"
        p.write_text(s, encoding="utf-8")
        files.append(p)
    for segment in ("greedy", "random"):
        r = run(BIN, "check", sql_store, *files, "--segment", segment, "--seed", "2")
        print(f"\nsql.lark accepts {share:.1%} of the corpus; check --segment {segment}: "
              f"{last_line(r)}")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr
        assert last_line(r) == f"{len(files)} passed, 0 failed"
