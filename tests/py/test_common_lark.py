"""cfgmask's own common.lark (grammar/lark/common.lark, compiled into the
reader): `%import common.X` needs neither Python nor Lark, and means what it
means in Lark; Lark's other grammars are read only from the folder the caller
names (--lark-grammars DIR or $CFGMASK_LARK_GRAMMARS).

Runs the built binary ($CFGMASK_BIN) with a PATH that holds no Python and
without $CFGMASK_LARK_GRAMMARS.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

BIN = os.environ.get("CFGMASK_BIN", "/work/main/build/cfgmask")
TOK = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "/work/main/.cache/tokenizers/llama-spm.gguf")
LARK = os.environ.get("CFGMASK_LARK_GRAMMARS", "")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not (os.path.exists(BIN) and os.path.exists(TOK)),
                                reason="cfgmask binary or tokenizer missing")


def run_bare(args, tmp_path):
    """The command with no Python on PATH and no $CFGMASK_LARK_GRAMMARS."""
    env = {k: v for k, v in os.environ.items() if k != "CFGMASK_LARK_GRAMMARS"}
    env["PATH"] = "/nonexistent"
    return subprocess.run([BIN] + args, env=env, cwd=tmp_path, capture_output=True, text=True)


def test_common_imports_without_python(tmp_path):
    grammar = tmp_path / "g.lark"
    grammar.write_text("start: item+\n"
                       "item: NUMBER | SIGNED_NUMBER | ESCAPED_STRING | CNAME | HEXDIGIT\n"
                       "%import common (NUMBER, SIGNED_NUMBER, ESCAPED_STRING, CNAME, HEXDIGIT)\n"
                       "%import common.WS\n%ignore WS\n"
                       "%import common.C_COMMENT\n%ignore C_COMMENT\n")
    out = tmp_path / "g.cfgm"
    r = run_bare(["compile", str(grammar), "--tokenizer", TOK, "--quiet", "-o", str(out)], tmp_path)
    assert r.returncode == 0, r.stderr
    text = tmp_path / "ok.txt"
    text.write_text('-1.5e3 "a\\"b" x_1 /* c */ 42')
    r = run_bare(["check", str(out), str(text)], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_lark_grammar_import_needs_the_option(tmp_path):
    grammar = tmp_path / "g.lark"
    grammar.write_text("start: NAME\n%import python.NAME\n")
    out = tmp_path / "g.cfgm"
    r = run_bare(["compile", str(grammar), "--tokenizer", TOK, "--quiet", "-o", str(out)], tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert re.match(r"cfgmask: .*g\.lark:2:1: cannot find grammar 'python\.lark'", r.stderr), r.stderr
    assert "--lark-grammars" in r.stderr and "CFGMASK_LARK_GRAMMARS" in r.stderr
    assert not out.exists()
    if LARK:
        r = run_bare(["compile", str(grammar), "--tokenizer", TOK, "--lark-grammars", LARK,
                      "--quiet", "-o", str(out)], tmp_path)
        assert r.returncode == 0, r.stderr


def test_same_terminals_as_lark():
    """Every terminal of Lark's common.lark is defined here, with the same text."""
    if not LARK:
        pytest.skip("CFGMASK_LARK_GRAMMARS not set")

    def definitions(path):
        defs = {}
        for line in Path(path).read_text().splitlines():
            m = re.match(r"^([A-Z_]+)\s*:\s*(.*)$", line)
            if m:
                defs[m.group(1)] = " ".join(m.group(2).split())
        return defs

    ours = definitions(ROOT / "grammar" / "lark" / "common.lark")
    theirs = definitions(os.path.join(LARK, "common.lark"))
    assert ours == theirs
