"""`cfgmask reduction` (runtime/tools/reduction.h): figures checked against independent counts.

On json.lark with the llama SentencePiece tokenizer: the rows of "every lexing" are
those of a store compiled with --no-streamline --no-pair-pruning, the last step's rows
those of a store compiled with --no-pair-pruning (both read back with `cfgmask stats
--json`), the seed's keys of the first step that store's terminal_sequence_keys; the
walks compare both stores' masks at every step (mask_mismatches) and count fewer
parser checks with streamlining; --corpus teacher-forces files; the plot is drawn by
matplotlib through `python -m cfgmask plot-reduction`; bad input is one line with
exit status 2.  Quick size over two grammars of tests/realgrammars/fetch.sh
(commentjson, syncode's Prover9), fetched from PyPI.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("CFGMASK_BIN", str(ROOT / "build" / "cfgmask"))
TOK = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "")
JSON_LARK = ROOT / "grammar" / "lark" / "json.lark"
CACHE = Path(os.environ.get("CFGMASK_REAL_GRAMMARS", str(ROOT / ".cache" / "grammars")))

pytestmark = [pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built"),
              pytest.mark.skipif(not TOK or not os.path.exists(TOK),
                                 reason="CFGMASK_TOK_LLAMA_SPM is not set (run ./setup.sh)")]


def run(*args, **kw):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def report():
    r = run("reduction", JSON_LARK, "--tokenizer", TOK, "--walks", 30, "--max-tokens", 40,
            "--seed", 3, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def stats(tmp_path, *flags):
    store = tmp_path / ("s%d.cfgm" % len(flags))
    r = run("compile", JSON_LARK, "--tokenizer", TOK, "--quiet", "-o", store, *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(run("stats", store, "--json").stdout)


def test_rows_per_step_match_independent_compiles(report, tmp_path):
    steps = {s["step"]: s for s in report["steps"]}
    assert list(steps) == ["every lexing", "lexing conditions", "never legal", "always legal",
                           "shared row groups", "interchangeable"]
    plain = stats(tmp_path, "--no-streamline", "--no-pair-pruning")
    lean = stats(tmp_path, "--no-pair-pruning")
    assert steps["every lexing"]["rows"] == plain["rows"]
    assert steps["every lexing"]["seed_keys"] == plain["terminal_sequence_keys"]
    assert steps["every lexing"]["row_groups"] == plain["roots"]
    assert report["boundary_lexer_states"] == plain["roots"]
    assert steps["shared row groups"]["rows"] == lean["rows"]
    assert steps["shared row groups"]["row_groups"] == lean["roots"]
    fold = [s for s in lean["streamlining"]["steps"] if s["step"] == "fold_always_legal"][0]
    assert steps["every lexing"]["rows"] / steps["shared row groups"]["rows"] == pytest.approx(
        steps["shared row groups"]["reduction"], abs=1e-3)
    rows = [s["rows"] for s in report["steps"]]
    assert rows == sorted(rows, reverse=True) and rows[-1] < rows[0]
    assert fold["rows"] >= lean["rows"]
    # Rows are references: each distinct token set is stored once.
    for s in report["steps"]:
        assert 0 < s["payloads"] <= s["rows"], s
    assert sum(len(c) for c in report["interchangeable"]) == 4  # true, false, null, NUMBER


def test_walk_costs(report):
    a, b = report["no_streamline"], report["streamlined"]
    assert report["mask_mismatches"] == 0
    assert a["steps"] == b["steps"] > 30 and a["boundary_steps"] == b["boundary_steps"] > 0
    for k in ("parser_checks", "parser_checks_boundary", "rows_ored"):
        assert 0 < b[k]["mean"] <= a[k]["mean"], k
        assert b[k]["p99"] <= b[k]["max"]
    assert report["checks_ratio"] == pytest.approx(
        a["parser_checks"]["mean"] / b["parser_checks"]["mean"], rel=1e-2)
    assert report["workload"]["texts"] == 30


def test_corpus_and_text(tmp_path):
    f = tmp_path / "a.json"
    f.write_text('{"a": [1, 2.5e3, true, null], "b": {"c": "d"}}\n')
    r = run("reduction", JSON_LARK, "--tokenizer", TOK, "--corpus", f, f)
    assert r.returncode == 0, r.stderr
    assert "2 files, greedy segmentation" in r.stdout
    assert "masks identical at every step" in r.stdout
    for step in ("every lexing", "never legal", "always legal", "shared row groups"):
        assert step in r.stdout


def test_plot(report, tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("cfgmask")
    src = tmp_path / "r.json"
    src.write_text(json.dumps(report))
    out = tmp_path / "r.svg"
    r = subprocess.run([sys.executable, "-m", "cfgmask", "plot-reduction", src, "-o", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.read_text().lstrip().startswith("<?xml") and "<svg" in out.read_text()
    out2 = tmp_path / "direct.svg"
    r = run("reduction", JSON_LARK, "--tokenizer", TOK, "--walks", 2, "--plot", out2,
            env=dict(os.environ, CFGMASK_PYTHON=sys.executable))
    assert r.returncode == 0, r.stderr
    assert "<svg" in out2.read_text()


@pytest.mark.parametrize("args,needle", [
    (["--tokenizer", TOK, "--corpus"], "--corpus needs files"),
    (["--tokenizer", TOK, "--walks", "0"], "--walks"),
    (["--tokenizer", TOK, "--walks", "3", "--corpus", "x.json"], "not both"),
    (["--tokenizer", TOK, "extra.json"], "corpus files follow --corpus"),
    (["--tokenizer", TOK, "--plot", "out.txt"], "--plot"),
    ([], "missing --tokenizer"),
])
def test_usage_errors(args, needle):
    r = run("reduction", JSON_LARK, *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_bad_grammar_is_one_line_with_position(tmp_path):
    g = tmp_path / "bad.lark"
    g.write_text('start: "a" b\n')
    r = run("reduction", g, "--tokenizer", TOK, "--walks", 1)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cfgmask: " + str(g) + ":1:"), r.stderr


def test_missing_corpus_file(tmp_path):
    r = run("reduction", JSON_LARK, "--tokenizer", TOK, "--corpus", tmp_path / "none.json")
    assert r.returncode == 2 and "none.json" in r.stderr and len(r.stderr.splitlines()) == 1


@pytest.fixture(scope="module")
def real_grammars():
    proc = subprocess.run([str(ROOT / "tests" / "realgrammars" / "fetch.sh"), str(CACHE)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, "fetching the grammars from PyPI failed:\n" + proc.stderr
    return CACHE


@pytest.mark.parametrize("rel,start", [("commentjson/commentjson.lark", "start"),
                                       ("syncode/prover9.lark", "start")],
                         ids=["commentjson", "prover9"])
def test_real_grammar_quick(real_grammars, rel, start):
    r = run("reduction", real_grammars / rel, "--tokenizer", TOK, "--start", start, "--walks", 5,
            "--max-tokens", 24, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["mask_mismatches"] == 0
    assert rep["steps"][-1]["rows"] < rep["steps"][0]["rows"]
    assert rep["streamlined"]["parser_checks"]["mean"] <= rep["no_streamline"]["parser_checks"]["mean"]
