"""Tests of the `cfgmask` command line (runtime/cli/cfgmask_main.cc).

Runs the built binary ($CFGMASK_BIN, else /work/main/build/cfgmask) on a
small JSON grammar compiled with the llama SentencePiece tokenizer
($CFGMASK_TOK_LLAMA_SPM): usage errors, malformed inputs (one-line error,
exit status 2, no output file), teacher forcing with `check`, `stats --json`,
`sample` and `bench --json`.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

BIN = os.environ.get("CFGMASK_BIN", "/work/main/build/cfgmask")
TOK = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "/work/main/.cache/tokenizers/llama-spm.gguf")

# Strict JSON (a subset: no lone CR), so that every complete sample parses
# with json.loads; the whitespace comes through %import.
JSON_GRAMMAR = r"""
?start: value

?value: object
      | array
      | STRING             -> string
      | NUMBER             -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null

array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : STRING ":" value

STRING : /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
NUMBER : /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/

%import common.WS_INLINE
%import common.NEWLINE
%ignore WS_INLINE
%ignore NEWLINE
"""

VALID = [
    '{"a": [1, 2.5, -3e4], "b": {"c": null, "d": true}, "e": "x\\"y"}\n',
    "[]",
    '  [ {"k": false}, "tail", 0 ]  \n',
    '"just a string"',
    '{"\\u00e9t\\u00e9": "caf\u00e9 \u2615", "n": [0.5, 1E+2]}',
]
INVALID = '{"a": [1, 2,], "b": }'

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


def run(*args, **kw):
    # A sampled prefix may end inside a multi-byte character: decode leniently.
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=120, **kw)


def assert_one_line_error(r):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("cfgmask: "), r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    if not os.path.exists(TOK):
        pytest.skip("llama-spm tokenizer not available")
    d = tmp_path_factory.mktemp("json")
    grammar = d / "json.lark"
    grammar.write_text(JSON_GRAMMAR)
    out = d / "json.cfgm"
    r = run("compile", grammar, "--tokenizer", TOK, "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.exists()
    # Not a terminal: no progress, only the summary block.
    assert r.stderr == ""
    assert "LALR states" in r.stdout
    return out


# ------------------------------------------------------------------ usage


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["compile"],
        ["compile", "g.lark", "--tokenizer", "t"],  # no -o
        ["compile", "g.lark", "-o", "x.cfgm"],  # no --tokenizer
        ["compile", "g.lark", "--tokenizer", "t", "-o", "x", "--bogus"],
        ["compile", "g.lark", "--tokenizer", "t", "-o", "x", "--indenter", "java"],
        ["compile", "g.lark", "--tokenizer", "t", "-o", "x", "--max-lexer-states", "many"],
        ["stats"],
        ["stats", "a", "b"],
        ["check", "x.cfgm"],
        ["check", "x.cfgm", "f", "--segment", "words"],
        ["sample", "x.cfgm", "-o", "d"],  # no -n
        ["sample", "x.cfgm", "-n", "0", "-o", "d"],
        ["sample", "x.cfgm", "-n", "2", "-o", "d", "--eos-bias", "2"],
        ["bench", "x.cfgm"],
        ["stats", "x.cfgm", "--tokenizer"],
    ],
)
def test_usage_errors_exit_2(args, tmp_path):
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "usage: cfgmask" in r.stderr
    assert r.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_help():
    r = run("--help")
    assert r.returncode == 0
    for c in ["compile", "stats", "check", "sample", "bench"]:
        assert f"cfgmask {c}" in r.stdout
    r = run("check", "--help")
    assert r.returncode == 0 and "--verify-masks" in r.stdout


# ------------------------------------------------------------------ bad input


def test_malformed_grammar(tmp_path):
    if not os.path.exists(TOK):
        pytest.skip("llama-spm tokenizer not available")
    g = tmp_path / "bad.lark"
    g.write_text('start: "a" b\nb: "(" start\n  | ) oops\n')
    out = tmp_path / "bad.cfgm"
    r = run("compile", g, "--tokenizer", TOK, "-o", out)
    line = assert_one_line_error(r)
    assert line.startswith(f"cfgmask: {g}:"), line
    # FILE:LINE:COL
    rest = line[len(f"cfgmask: {g}:"):]
    lineno, col = rest.split(":")[:2]
    assert lineno.isdigit() and col.isdigit(), line
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.lark"]


def test_undefined_rule(tmp_path):
    if not os.path.exists(TOK):
        pytest.skip("llama-spm tokenizer not available")
    g = tmp_path / "undef.lark"
    g.write_text('start: "a" missing_rule\n')
    out = tmp_path / "undef.cfgm"
    r = run("compile", g, "--tokenizer", TOK, "-o", out)
    line = assert_one_line_error(r)
    assert "missing_rule" in line
    assert not out.exists()


def test_missing_grammar_file(tmp_path):
    r = run("compile", tmp_path / "nope.lark", "--tokenizer", TOK, "-o", tmp_path / "o.cfgm")
    assert_one_line_error(r)
    assert list(tmp_path.iterdir()) == []


def test_missing_tokenizer(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    out = tmp_path / "g.cfgm"
    r = run("compile", g, "--tokenizer", tmp_path / "no-such-tokenizer.json", "-o", out)
    line = assert_one_line_error(r)
    assert "no-such-tokenizer.json" in line
    assert not out.exists()


def test_bad_tokenizer_content(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    tok = tmp_path / "tok.json"
    tok.write_text("this is not a tokenizer\n\x00\x01")
    out = tmp_path / "g.cfgm"
    r = run("compile", g, "--tokenizer", tok, "-o", out)
    assert_one_line_error(r)
    assert not out.exists()


def test_corrupted_store(store, tmp_path):
    data = store.read_bytes()
    truncated = tmp_path / "truncated.cfgm"
    truncated.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run("stats", truncated))
    flipped = tmp_path / "flipped.cfgm"
    b = bytearray(data)
    index_bytes = int.from_bytes(data[40:48], "little")  # header: the index part's size
    b[56 + index_bytes * 2 // 3] ^= 0x40                  # in the index part: checked on open
    flipped.write_bytes(bytes(b))
    assert_one_line_error(run("stats", flipped))
    f = tmp_path / "a.json"
    f.write_text("[]")
    assert_one_line_error(run("check", flipped, f))
    assert_one_line_error(run("bench", truncated, f))
    assert_one_line_error(run("sample", flipped, "-n", "1", "-o", tmp_path / "s"))
    assert not (tmp_path / "s").exists()
    garbage = tmp_path / "garbage.cfgm"
    garbage.write_bytes(b"hello")
    assert_one_line_error(run("stats", garbage))
    assert_one_line_error(run("stats", tmp_path / "absent.cfgm"))


def test_store_faults(store, tmp_path):
    """Truncation at every 1 % of the file, flipped bytes across it and a wrong
    format version: each gives one clear line naming the store, exit status 2,
    and nothing on stdout, for every command that reads a store."""
    data = store.read_bytes()
    f = tmp_path / "a.json"
    f.write_text("[]")
    bad = tmp_path / "bad.cfgm"
    for pct in range(100):
        bad.write_bytes(data[: len(data) * pct // 100])
        r = run("stats", bad)
        line = assert_one_line_error(r)
        assert r.stdout == "" and str(bad) in line, (pct, line)
        if pct == 0:
            assert "not a cfgmask store" in line, line
        elif len(data) * pct // 100 >= 64:
            assert "truncated" in line, (pct, line)
    reasons = set()
    index_end = 56 + int.from_bytes(data[40:48], "little")  # header + index part
    for k in range(40):
        b = bytearray(data)
        pos = 8 + (len(b) - 8) * k // 40       # past the magic, spread over the file
        b[pos] ^= 1 << (k % 8)
        bad.write_bytes(bytes(b))
        # --verify checks the whole payload: every flip is refused.
        r = run("stats", bad, "--verify")
        line = assert_one_line_error(r)
        assert r.stdout == "" and str(bad) in line, (pos, line)
        reasons.add(line.split(": ", 2)[-1].split(" (")[0].split(";")[0][:40])
        # Opening checks the header and the index part; a flip in the rows is
        # found when a session meets its root (tests/store_file_test.cc).
        if pos < index_end and not 24 <= pos < 32:  # 24..31: the whole payload's checksum
            line = assert_one_line_error(run("stats", bad))
            assert str(bad) in line, (pos, line)
    # Flips in the payload are caught by the checksum.
    assert any("checksum" in x for x in reasons), reasons
    b = bytearray(data)
    b[8] += 1                                   # the format version (u32 after the magic)
    bad.write_bytes(bytes(b))
    for args in (["stats", bad], ["check", bad, f], ["bench", bad, f],
                 ["sample", bad, "-n", "1", "-o", tmp_path / "s"]):
        line = assert_one_line_error(run(*args))
        assert f"{bad}:8: store format" in line, line
    assert not (tmp_path / "s").exists()


def test_check_missing_input_file(store, tmp_path):
    assert_one_line_error(run("check", store, tmp_path / "absent.json"))


# ------------------------------------------------------------------ stats


def test_stats_json(store):
    r = run("stats", store, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    for key in [
        "grammar", "start", "tokenizer", "terminals", "rules", "lalr_states", "lexer_states",
        "roots", "nfa_transition_entries", "rows", "row_kinds", "file_bytes", "memory_bytes",
        "seconds",
    ]:
        assert key in s, key
    assert s["tokenizer"]["vocab_size"] == 32000
    assert s["tokenizer"]["eos_ids"]
    assert s["terminals"] > 5 and s["lalr_states"] > 5 and s["rows"] > 0
    assert sum(s["row_kinds"].values()) == s["rows"]
    assert s["file_bytes"] == store.stat().st_size
    assert set(s["seconds"]) >= {"grammar", "lalr", "automaton", "store", "total"}
    r = run("stats", store)
    assert r.returncode == 0 and "LALR states" in r.stdout


def test_stats_streamlining_steps(store, tmp_path):
    """Rows after each streamlining step; --no-streamline records none."""
    s = json.loads(run("stats", store, "--json").stdout)
    sl = s["streamlining"]
    assert sl["applied"] is True
    names = [step["step"] for step in sl["steps"]]
    assert names == ["nfa_transition", "delete_never_legal", "fold_always_legal"]
    rows = [step["rows"] for step in sl["steps"]]
    assert rows[0] == s["rows_before_streamlining"] > rows[1] >= rows[2] == s["rows"]
    plain = tmp_path / "plain.cfgm"
    grammar = tmp_path / "json.lark"
    grammar.write_text(JSON_GRAMMAR)
    r = run("compile", grammar, "--tokenizer", TOK, "--no-streamline", "--quiet", "-o", plain)
    assert r.returncode == 0, r.stderr
    p = json.loads(run("stats", plain, "--json").stdout)
    assert p["streamlining"]["applied"] is False
    assert [st["step"] for st in p["streamlining"]["steps"]] == ["nfa_transition"]
    assert p["rows"] == rows[0]


def test_no_pair_pruning_streamlines_to_the_same_masks(store, tmp_path):
    """--no-pair-pruning keeps every lexing (more rows before streamlining);
    the never-legal step deletes them, and masks stay the same."""
    s = json.loads(run("stats", store, "--json").stdout)
    grammar = tmp_path / "json.lark"
    grammar.write_text(JSON_GRAMMAR)
    out = tmp_path / "np.cfgm"
    r = run("compile", grammar, "--tokenizer", TOK, "--no-pair-pruning", "--quiet", "-o", out)
    assert r.returncode == 0, r.stderr
    n = json.loads(run("stats", out, "--json").stdout)
    assert n["rows_before_streamlining"] > s["rows_before_streamlining"]
    steps = {st["step"]: st for st in n["streamlining"]["steps"]}
    assert steps["delete_never_legal"]["rows_deleted"] > (
        s["rows_before_streamlining"] - s["streamlining"]["steps"][1]["rows"])
    # Keyed by terminals alone a store has at most as many rows as it has.
    for x in (s, n):
        assert 0 < x["terminal_sequence_keys"] <= x["rows"]
    doc = tmp_path / "doc.json"
    doc.write_text('{"a": [1, 2.5e3, true, null, "x\\"y"], "b": {}}')
    for path in (store, out):
        r = run("check", path, doc, "--verify-masks", "1000")
        assert r.returncode == 0, r.stdout + r.stderr


def run_on_pty(*args):
    """Runs the binary with stderr on a pseudo-terminal; returns (status,
    stdout, what the terminal received)."""
    import pty
    import select
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE,
                             stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        slave = -1
        seen = b""
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer closed
                break
            if not chunk:
                break
            seen += chunk
        out = p.stdout.read()
        p.wait(timeout=120)
        return p.returncode, out.decode(errors="replace"), seen.decode(errors="replace")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def test_compile_progress_on_a_terminal(tmp_path):
    """On a terminal, compile shows its phases on one line rewritten in place
    and clears it at the end; --quiet shows nothing and prints no summary."""
    grammar = tmp_path / "json.lark"
    grammar.write_text(JSON_GRAMMAR)
    code, out, tty = run_on_pty("compile", grammar, "--tokenizer", TOK, "-o", tmp_path / "a.cfgm")
    assert code == 0, tty
    assert "LALR states" in out
    lines = [l for l in tty.split("\r") if l.strip("\x1b[K")]
    assert lines and all(l.startswith("\x1b[Kcfgmask: compile: ") for l in lines), tty
    phases = [l.split()[2] for l in lines]
    assert phases[0] == "grammar" and "walk" in phases, phases
    assert tty.endswith("\r\x1b[K")  # cleared
    code, out, tty = run_on_pty("compile", grammar, "--tokenizer", TOK, "--quiet",
                                "-o", tmp_path / "b.cfgm")
    assert code == 0 and tty == "" and out == ""


def test_compile_quiet_not_a_terminal(tmp_path):
    grammar = tmp_path / "json.lark"
    grammar.write_text(JSON_GRAMMAR)
    r = run("compile", grammar, "--tokenizer", TOK, "--quiet", "-o", tmp_path / "q.cfgm")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""


def test_compile_threads_same_store(store, tmp_path):
    """The walk's thread count does not change the store."""
    grammar = tmp_path / "json.lark"
    grammar.write_text(JSON_GRAMMAR)
    outs = []
    for n in ("1", "2"):
        out = tmp_path / f"t{n}.cfgm"
        r = run("compile", grammar, "--tokenizer", TOK, "--threads", n, "--quiet", "-o", out)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(run("stats", out, "--json").stdout))
    for key in ("rows", "lexer_states", "nfa_transition_entries", "row_kinds", "sequences"):
        assert outs[0][key] == outs[1][key], key
    r = run("compile", grammar, "--tokenizer", TOK, "--threads", "x", "-o", tmp_path / "x.cfgm")
    assert r.returncode == 2 and "option --threads" in r.stderr and r.stdout == ""
    assert not (tmp_path / "x.cfgm").exists()


# ------------------------------------------------------------------ check


@pytest.fixture(scope="module")
def json_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("files")
    paths = []
    for i, text in enumerate(VALID):
        p = d / f"valid_{i}.json"
        p.write_text(text, encoding="utf-8")
        json.loads(text)
        paths.append(p)
    bad = d / "invalid.json"
    bad.write_text(INVALID)
    return paths, bad


@pytest.mark.parametrize("segment", ["greedy", "random", "bytes"])
def test_check_valid(store, json_files, segment):
    valid, _ = json_files
    r = run("check", store, *valid, "--segment", segment, "--seed", "7")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == f"{len(valid)} passed, 0 failed"


def test_check_verify_masks(store, json_files):
    valid, _ = json_files
    r = run("check", store, valid[0], valid[2], "--verify-masks", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mismatch" not in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "2 passed, 0 failed"


def test_check_invalid(store, json_files):
    valid, bad = json_files
    r = run("check", store, valid[0], bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "1 passed, 1 failed"
    # The first token that cannot continue a valid prefix: "]" after "2,".
    # Greedy segmentation ends "2" with the token ",]", which no valid
    # document can contain here: the error is reported at its start.
    assert f"{bad}:1:12: token " in r.stdout, r.stdout


# The first token that cannot continue a valid prefix is reported: "true"
# after "{", and "2" after "[1 " (the space itself is still a valid prefix).
@pytest.mark.parametrize("text,col", [("{true}", 2), ("[1 2]", 4)])
def test_check_reports_first_bad_token(store, tmp_path, text, col):
    p = tmp_path / "bad.json"
    p.write_text(text)
    r = run("check", store, p)
    assert r.returncode == 1
    assert f"{p}:1:{col}: token " in r.stdout, r.stdout


def test_check_incomplete_file(store, tmp_path):
    p = tmp_path / "prefix.json"
    p.write_text('{"a": [1, 2')
    r = run("check", store, p)
    assert r.returncode == 1
    assert "EOS is not allowed" in r.stdout


# ------------------------------------------------------------------ sample


@pytest.mark.parametrize("max_tokens,eos_bias", [("60", "0.5"), ("8", "0.05"), ("1", "0")])
def test_sample(store, tmp_path, max_tokens, eos_bias):
    """Every sample is a complete document ended by EOS: walks that reach
    --max-tokens are finished with a shortest completion."""
    out = tmp_path / "samples"
    r = run("sample", store, "-n", "6", "--seed", "3", "--max-tokens", max_tokens, "--eos-bias",
            eos_bias, "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"sample_{k}.txt" for k in range(1, 7)]
    headers = [l for l in r.stdout.splitlines() if l.startswith("=== ")]
    assert len(headers) == 6
    completed = 0
    for k, h in enumerate(headers, 1):
        data = (out / f"sample_{k}.txt").read_bytes()
        assert h.endswith("ended with EOS ==="), h
        json.loads(data.decode("utf-8"))
        completed += "completed with" in h
    if max_tokens != "60":
        assert completed > 0


# ------------------------------------------------------------------ bench


def test_bench_json(store, json_files):
    valid, _ = json_files
    r = run("bench", store, *valid, "--json")
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)
    assert b["steps"] > 0
    assert set(b["mask_us"]) >= {"p50", "p90", "p99", "max"}
    assert b["mask_us"]["p50"] <= b["mask_us"]["max"]
    assert b["peak_rss_bytes"] > 0 and b["advance_tokens_per_s"] > 0
    assert b["files_not_finished"] == 0
    # the first step of each file, and the steps with and without a row-memo miss
    assert b["first_step_us"]["steps"] == len(valid)
    assert b["mask_cpu_us"]["steps"] == b["steps"] and b["preempted_steps"] >= 0
    assert b["first_step_us"]["p50"] <= b["first_step_us"]["max"]
    memo = b["memo"]
    if memo["mb"] > 0:
        assert memo["without_miss_us"]["steps"] + memo["with_miss_us"]["steps"] == b["steps"]
        for part in ("without_miss_us", "with_miss_us"):
            q = memo[part]
            assert q["steps"] == 0 or q["p50"] <= q["p99"] <= q["max"]
    # the slowest steps (thread CPU time, slowest first) with their position,
    # and the row walk's counts
    slow = b["slowest_steps"]
    assert len(slow) == min(5, b["steps"])
    assert [s["cpu_us"] for s in slow] == sorted((s["cpu_us"] for s in slow), reverse=True)
    assert slow[0]["cpu_us"] == b["mask_cpu_us"]["max"]
    assert all(s["where"].count(":") >= 2 and s["allowed"] > 0 for s in slow)
    assert b["parser_checks"] >= 0 and b["rows_visited"] >= 0 and b["filter_seconds"] >= 0
    # the parser reductions of the row checks, and the most in one step
    assert 0 <= b["max_step_reductions"] <= b["reductions"]
    assert all(0 <= s["reductions"] <= b["max_step_reductions"] for s in slow)
