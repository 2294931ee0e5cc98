#!/usr/bin/env python3
"""One engine, one workload, in a fresh process: compile, then teacher-force id streams.

    engines.py ENGINE GRAMMAR STREAMS.txt TOKENIZER.json OUT.json

ENGINE is ``llguidance`` (the grammar is Lark text, given to ``LLMatcher``) or
``xgrammar`` (the grammar is XGrammar EBNF, given to ``GrammarCompiler``).
Both get the same vocabulary: ``TOKENIZER.json`` (qwen2_tokenizer.py) with
151,936 ids and EOS 151,643.

Per stream, every step is timed the same way as cfgmask_peer_driver.cc:
the engine fills an int32 bitmask of ceil(V/32) words for the step (timed as
``fill``), the forced token's bit is read (untimed), then the engine advances
on it (timed as ``advance``); after the last token one more mask is filled and
its EOS bit read.  Single thread.  Times come from ``time.perf_counter_ns``
around the binding call, so they include the Python-to-native call (well
under a microsecond); cfgmask's driver times in C++.

The output has the driver's schema plus compile times (cold and repeated) and
memory: RSS after imports and tokenizer load, after compile, and the peak.
"""
from __future__ import annotations

import json
import resource
import sys
import time

VOCAB = 151936
EOS = 151643


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def peak_rss_bytes():
    """VmHWM: getrusage's maxrss survives exec and would count the parent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return -1


def read_streams(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, _, ids = line.partition("\t")
            out.append((name, [int(x) for x in ids.split()]))
    return out


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer_json):
        import llguidance
        import llguidance.numpy as lln
        import numpy as np
        self.llg, self.lln, self.np = llguidance, lln, np
        t0 = time.perf_counter()
        with open(tokenizer_json) as f:
            self.tok = llguidance.LLTokenizer(f.read(), n_vocab=VOCAB, eos_token=EOS)
        self.tokenizer_s = time.perf_counter() - t0
        self.version = getattr(llguidance, "__version__", None) or _dist_version("llguidance")

    def compile(self, grammar_text):
        err = self.llg.LLMatcher.validate_grammar(grammar_text, self.tok)
        if err:
            raise RuntimeError(f"llguidance refused the grammar: {err}")
        self.grammar = grammar_text
        m = self.llg.LLMatcher(self.tok, grammar_text, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        self.matcher = m

    def new_session(self):
        self.matcher.reset()
        self.mask = self.lln.allocate_token_bitmask(1, VOCAB)
        self.view = self.mask[0]

    def fill(self):
        self.lln.fill_next_token_bitmask(self.matcher, self.mask, 0)

    def advance(self, tok):
        return self.matcher.consume_token(tok) and not self.matcher.is_error()


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer_json):
        import xgrammar as xgr
        from transformers import PreTrainedTokenizerFast
        self.xgr = xgr
        t0 = time.perf_counter()
        hf = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)
        self.info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=VOCAB, stop_token_ids=[EOS])
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=True)
        self.tokenizer_s = time.perf_counter() - t0
        self.version = xgr.__version__ if hasattr(xgr, "__version__") else _dist_version("xgrammar")

    def compile(self, grammar_text):
        self.compiled = self.compiler.compile_grammar(grammar_text)
        self.grammar = grammar_text

    def new_session(self):
        self.matcher = self.xgr.GrammarMatcher(self.compiled, terminate_without_stop_token=False)
        self.mask = self.xgr.allocate_token_bitmask(1, VOCAB)
        self.view = self.mask.numpy()[0]

    def fill(self):
        self.matcher.fill_next_token_bitmask(self.mask, 0)

    def advance(self, tok):
        return self.matcher.accept_token(tok)


def _dist_version(name):
    from importlib.metadata import version
    return version(name)


ENGINES = {"llguidance": LLGuidance, "xgrammar": XGrammar}


def run(engine_name, grammar_path, streams_path, tokenizer_json, out_path):
    t_imp = time.perf_counter()
    eng = ENGINES[engine_name](tokenizer_json)
    result = {"engine": engine_name, "version": eng.version,
              "import_and_tokenizer_s": time.perf_counter() - t_imp,
              "tokenizer_s": eng.tokenizer_s, "rss_after_tokenizer_bytes": rss_bytes()}
    with open(grammar_path, encoding="utf-8") as f:
        grammar_text = f.read()
    t0 = time.perf_counter()
    try:
        eng.compile(grammar_text)
    except Exception as e:  # the grammar is refused: report, do not time
        result["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        with open(out_path, "w") as f:
            json.dump(result, f)
        return 0
    result["compile_cold_s"] = time.perf_counter() - t0
    print(f"[peers]   {engine_name}: grammar compiled in {result['compile_cold_s']:.2f} s",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    eng.compile(grammar_text)  # xgrammar: its compiler cache; llguidance: no cache
    result["compile_repeat_s"] = time.perf_counter() - t0
    result["rss_after_compile_bytes"] = rss_bytes()
    clock = time.perf_counter_ns
    streams_out = []
    for name, ids in read_streams(streams_path):
        t_new = clock()
        eng.new_session()
        new_us = (clock() - t_new) / 1e3
        fill_us, adv_us = [], []
        first_reject, reason = -1, ""
        view = eng.view
        for i, tok in enumerate(ids):
            t0 = clock()
            eng.fill()
            t1 = clock()
            fill_us.append((t1 - t0) / 1e3)
            if not (int(view[tok >> 5]) >> (tok & 31)) & 1:
                first_reject, reason = i, "not in mask"
                break
            t2 = clock()
            ok = eng.advance(tok)
            adv_us.append((clock() - t2) / 1e3)
            if not ok:
                first_reject, reason = i, "advance refused"
                break
        eos = False
        if first_reject < 0:
            t0 = clock()
            eng.fill()
            fill_us.append((clock() - t0) / 1e3)
            eos = bool((int(view[EOS >> 5]) >> (EOS & 31)) & 1)
        streams_out.append({"name": name, "tokens": len(ids),
                            "accepted": len(ids) if first_reject < 0 else first_reject,
                            "first_reject": first_reject, "reason": reason, "eos": eos,
                            "session_us": new_us, "fill_us": fill_us, "advance_us": adv_us})
    result["streams"] = streams_out
    result["peak_rss_bytes"] = peak_rss_bytes()
    with open(out_path, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(run(*sys.argv[1:]))
