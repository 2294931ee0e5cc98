"""Random masked walks on real Lark grammars from PyPI packages: no dead ends.

The grammars (syncode 0.4.16's Go, Java and C; vyper 0.4.3's; beancount-parser
1.2.3's) are fetched by tests/realgrammars/fetch.sh from PyPI into
.cache/grammars (not committed).  Each is compiled with tokenizers of
different kinds and walked by `cfgmask sample`: at every step a token is drawn
at random from the mask, and after --max-tokens the sampler steers to the end
with the completion search (budget: 20,000 search nodes per attempt, stated in
runtime/cli/cfgmask_main.cc).  A dead end shows as a sample that stops on an empty
mask before EOS, or whose completion search fails; either fails the test.
Every sample must also be accepted in full by Lark (the exactness contract).

Quick size (CI): the 32k SentencePiece and SmolLM2's 49k BPE vocabularies,
30 walks of up to 60 tokens per pair.  CFGMASK_FULL=1: also Qwen2's 152k
byte-level BPE, 300 walks of up to 120 tokens.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("CFGMASK_BIN", str(ROOT / "build" / "cfgmask"))
FULL = os.environ.get("CFGMASK_FULL") == "1"
CACHE = Path(os.environ.get("CFGMASK_REAL_GRAMMARS", str(ROOT / ".cache" / "grammars")))

# (name, path under CACHE, start rule, indenter for Lark)
GRAMMARS = [
    ("go", "syncode/go.lark", "start", "none"),
    ("java", "syncode/java.lark", "start", "none"),
    ("c", "syncode/c.lark", "start", "none"),
    ("vyper", "vyper/grammar.lark", "module", "python"),
    ("beancount", "beancount/beancount.lark", "start", "none"),
]
TOKENIZERS = [("llama_spm", "CFGMASK_TOK_LLAMA_SPM"), ("smollm2", "CFGMASK_TOK_SMOLLM2")]
if FULL:
    TOKENIZERS.append(("qwen2", "CFGMASK_TOK_QWEN2"))
WALKS, MAX_TOKENS = (300, 120) if FULL else (30, 60)


@pytest.fixture(scope="module")
def grammars():
    proc = subprocess.run([str(ROOT / "tests" / "realgrammars" / "fetch.sh"), str(CACHE)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, "fetching the grammars from PyPI failed:\n" + proc.stderr
    return CACHE


def lark_verdicts(grammar: Path, start: str, indenter: str, texts):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "tools" / "lark_accepts.py"), str(grammar), start,
         indenter],
        input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [line == "1" for line in proc.stdout.split()]


@pytest.mark.parametrize("tok_name,tok_env", TOKENIZERS, ids=[t[0] for t in TOKENIZERS])
@pytest.mark.parametrize("name,rel,start,indenter", GRAMMARS, ids=[g[0] for g in GRAMMARS])
def test_random_walks_never_reach_a_dead_end(grammars, tmp_path, name, rel, start, indenter,
                                             tok_name, tok_env):
    tokenizer = os.environ.get(tok_env)
    if not tokenizer or not Path(tokenizer).exists():
        pytest.skip(tok_env + " is not set (run ./setup.sh)")
    grammar = grammars / rel
    store = tmp_path / "store.cfgm"
    proc = subprocess.run([BIN, "compile", str(grammar), "--start", start, "--tokenizer", tokenizer,
                           "-o", str(store), "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "samples"
    proc = subprocess.run([BIN, "sample", str(store), "-n", str(WALKS), "--seed", "20261125",
                           "--max-tokens", str(MAX_TOKENS), "-o", str(out)],
                          capture_output=True, text=True)
    headers = re.findall(r"^=== (.*) ===$", proc.stdout, flags=re.M)
    bad = [h for h in headers if not h.endswith("ended with EOS")]
    assert proc.returncode == 0 and not bad and len(headers) == WALKS, (
        "%s + %s: %d of %d walks did not end with EOS:\n%s\n%s" %
        (name, tok_name, len(bad), WALKS, "\n".join(bad[:10]), proc.stderr[-2000:]))
    texts = [(out / ("sample_%d.txt" % i)).read_bytes().decode("utf-8")
             for i in range(1, WALKS + 1)]
    verdicts = lark_verdicts(grammar, start, indenter, texts)
    rejected = [t for t, ok in zip(texts, verdicts) if not ok]
    assert not rejected, "%s + %s: Lark rejects %d samples, e.g. %r" % (
        name, tok_name, len(rejected), rejected[0][:300])
