#!/usr/bin/env python3
"""One engine, one workload, in a fresh process: compile, then teacher-force id streams.

    engines.py ENGINE GRAMMAR STREAMS.txt TOKENIZER.json OUT.json

ENGINE is ``llguidance`` (the grammar is Lark text, given to ``LLMatcher``),
``xgrammar`` (the grammar is XGrammar EBNF, given to ``GrammarCompiler``),
``xgrammar-builtin`` (XGrammar's own built-in JSON grammar; the file is not
read) or
``syncode`` (the grammar is the Lark file of one of SynCode's built-in
grammars, e.g. its ``json.lark``, given as ``Grammar('json')`` to
``SyncodeLogitsProcessor``).  All get the same vocabulary:
``TOKENIZER.json`` (qwen2_tokenizer.py) with 151,936 ids and EOS 151,643.

Per stream, every step is timed the same way as cfgmask_peer_driver.cc:
the engine fills an int32 bitmask of ceil(V/32) words for the step (timed as
``fill``), the forced token's bit is read (untimed), then the engine advances
on it (timed as ``advance``); after the last token one more mask is filled and
its EOS bit read.  Single thread.  Times come from ``time.perf_counter_ns``
around the binding call, so they include the Python-to-native call (well
under a microsecond); cfgmask's driver times in C++.

SynCode has no bitmask and no advance call: its logits processor takes the
whole id prefix and a row of scores each step, re-decodes and re-lexes the
prefix, and sets the scores of refused tokens to -inf.  Its ``fill`` is that
call (a (1, k) id tensor and a (1, V) float row); a token is allowed when its
score is still finite; its ``advance`` appends the id to the prefix buffer and
resets the scores row to zeros (what a model's next logits would be).

The output has the driver's schema plus compile times (cold and repeated) and
memory: RSS after imports and tokenizer load, after compile, and the peak.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

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


class BitmaskEngine:
    """An engine that fills an int32 bitmask (``self.view``: ceil(V/32) words)."""

    def allowed(self, tok):
        return bool((int(self.view[tok >> 5]) >> (tok & 31)) & 1)


class LLGuidance(BitmaskEngine):
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


class XGrammar(BitmaskEngine):
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


class XGrammarBuiltinJSON(XGrammar):
    """XGrammar's best configuration for JSON: its own built-in JSON grammar
    (``GrammarCompiler.compile_builtin_json_grammar``), hand-written for its
    engine, instead of the EBNF translation of json.lark.  The grammar file
    is not read.  Its language is XGrammar's JSON, judged like every
    engine's by Lark on json.lark."""
    name = "xgrammar-builtin"

    def compile(self, grammar_text):
        self.compiled = self.compiler.compile_builtin_json_grammar()
        self.grammar = "builtin JSON"


class SynCode:
    """SynCode's public HF logits processor, ``SyncodeLogitsProcessor``.

    The tokenizer is the same ``tokenizers.Tokenizer`` wrapped as a
    ``PreTrainedTokenizerFast`` with Qwen2's special tokens (EOS
    <|endoftext|>; <|im_start|>, <|im_end|> as additional special tokens, as
    in Qwen2's tokenizer_config.json).  SynCode's mask store and Lark parser
    are pickled under ``SYNCODE_CACHE``, which this driver points at
    ``syncode-cache/`` next to OUT.json (out/raw/syncode-cache), emptied first
    so that the first compile is cold.

    Verdicts are the mask's (a forced token whose score is -inf is refused;
    EOS likewise), as for the other engines.  Two differences, both recorded
    per stream:

    - ``force_through``: after a refusal the stream goes on to its end (the
      refusal still counts), so that fill times cover whole documents.  Its
      mask refuses the first token of most documents (``{\n``: a token that
      spans two terminals, where nothing has been parsed yet), which would
      otherwise leave one timed step per document.
    - SynCode's own generation loop (``syncode.language_model``) asks
      ``is_valid(prefix, token)`` before masking and masks only when that
      fails.  On every mask refusal the driver asks ``is_valid`` of a second
      processor (the cold-built one with its own parser state, sharing the
      timed processor's mask store; untimed) and records that verdict too
      (``opportunistic_*``).
    """
    name = "syncode"
    force_through = True
    # the built-in grammars SynCode knows by name (syncode/parsers/grammars)
    BUILTIN = ("json", "sql", "python", "go", "c", "java", "calc", "tiny")

    def __init__(self, tokenizer_json, work_dir):
        self.cache_dir = Path(work_dir) / "syncode-cache"
        shutil.rmtree(self.cache_dir, ignore_errors=True)  # the first compile is cold
        # read by syncode.common at import time; SynCode's default is ./cache/
        os.environ["SYNCODE_CACHE"] = str(self.cache_dir) + "/"
        os.environ.setdefault("LOG_LEVEL", "WARNING")  # SynCode logs to stdout
        os.environ.setdefault("TQDM_DISABLE", "1")     # its store build has a progress bar
        import torch
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast
        from syncode.mask_store.byte_tokenizer import ByteTokenizer
        torch.set_num_threads(1)
        self.torch = torch
        t0 = time.perf_counter()
        hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(tokenizer_json),
                                     eos_token="<|endoftext|>",
                                     additional_special_tokens=["<|im_start|>", "<|im_end|>"])
        if len(hf) != VOCAB or hf.eos_token_id != EOS:
            raise RuntimeError(f"HF tokenizer: {len(hf)} ids, EOS {hf.eos_token_id}")
        # SynCode's own tokenizer preparation: token strings to bytes (cached
        # per token string, so the ByteTokenizers the processor and its mask
        # store build afterwards reuse this work)
        ByteTokenizer(hf)
        self.hf = hf
        self.tokenizer_s = time.perf_counter() - t0
        self.version = _dist_version("syncode")
        self.processor = self.checker = None

    def compile(self, grammar_text):
        from syncode.grammar_mask.logits_processor import SyncodeLogitsProcessor
        from syncode.parsers.grammars import Grammar
        name = next((n for n in self.BUILTIN if _builtin_text(n) == grammar_text), None)
        grammar = Grammar(name) if name else Grammar(grammar_text)
        self.checker = self.processor  # the second compile (cache hit) does the masks
        self.processor = SyncodeLogitsProcessor(grammar=grammar, tokenizer=self.hf,
                                                parse_output_only=True)
        self.grammar = grammar.name

    def new_session(self):
        torch = self.torch
        self.processor.reset()
        if not hasattr(self, "ids"):
            self.ids = torch.zeros((1, 4096), dtype=torch.long)
            self.scores = torch.zeros((1, VOCAB), dtype=torch.float32)
            self.spare = torch.zeros((1, VOCAB), dtype=torch.float32)
        self.n = 0
        self.scores.zero_()
        self.view = self.scores[0]
        self.refusals, self.opp_first_reject, self.opp_eos = [], -1, None
        if self.checker is not None:
            # is_valid only reads the mask store: share the second one, so that the
            # first (and its 1.7 million cached build tuples) does not stay in
            # memory and in the garbage collector's way
            self.checker.grammar_engine.dfa_mask_store = self.processor.grammar_engine.dfa_mask_store
            # parse_output_only: the first call's prefix length (0) marks where
            # the output starts; is_valid would take it from its own first call
            self.checker.reset()
            self.checker(self.ids[:, :0], self.spare)

    def fill(self):
        self.processor(self.ids[:, :self.n], self.scores)

    def allowed(self, tok):
        ok = bool(self.view[tok] != float("-inf"))
        if tok == EOS:
            self.opp_eos = ok or self._is_valid(tok)
        elif not ok:
            self.refusals.append(self.n)
            if self.opp_first_reject < 0 and not self._is_valid(tok):
                self.opp_first_reject = self.n
        return ok

    def _is_valid(self, tok):
        if self.checker is None:
            return False
        t = self.torch.tensor([tok], dtype=self.torch.long)
        return bool(self.checker.is_valid(self.ids[:, :self.n], t))

    def advance(self, tok):
        if self.n == self.ids.shape[1]:
            self.ids = self.torch.cat([self.ids, self.torch.zeros_like(self.ids)], dim=1)
        self.ids[0, self.n] = tok
        self.n += 1
        self.scores.zero_()  # the next step's logits
        return True

    def extra(self):
        return {
            "mask_refusals": self.refusals,  # every step whose forced token the mask refused
            # SynCode's own loop: is_valid first, the mask only when it says no
            "opportunistic_first_reject": self.opp_first_reject,
            "opportunistic_eos": self.opp_eos,
            # a parse error before the last lexer token: SynCode then falls back
            # to unconstrained decoding (its later masks leave every score)
            "parse_failed_fallback": bool(self.processor.grammar_engine.parse_failed),
        }


def _builtin_text(name):
    from importlib.util import find_spec
    path = Path(find_spec("syncode").origin).parent / "parsers" / "grammars" / f"{name}.lark"
    return path.read_text(encoding="utf-8") if path.exists() else None


def _dist_version(name):
    from importlib.metadata import version
    return version(name)


ENGINES = {"llguidance": LLGuidance, "xgrammar": XGrammar,
           "xgrammar-builtin": XGrammarBuiltinJSON, "syncode": SynCode}


def run(engine_name, grammar_path, streams_path, tokenizer_json, out_path):
    t_imp = time.perf_counter()
    if engine_name == "syncode":  # its on-disk cache goes next to OUT.json
        eng = SynCode(tokenizer_json, Path(out_path).resolve().parent)
    else:
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
    eng.compile(grammar_text)  # xgrammar: its compiler cache; llguidance: no cache;
    # syncode: its mask store and Lark parser loaded from the on-disk cache
    result["compile_repeat_s"] = time.perf_counter() - t0
    result["rss_after_compile_bytes"] = rss_bytes()
    clock = time.perf_counter_ns
    force_through = getattr(eng, "force_through", False)  # syncode: see its class
    streams_out = []
    for name, ids in read_streams(streams_path):
        t_new = clock()
        eng.new_session()
        new_us = (clock() - t_new) / 1e3
        fill_us, adv_us = [], []
        first_reject, reason = -1, ""
        for i, tok in enumerate(ids):
            t0 = clock()
            eng.fill()
            t1 = clock()
            fill_us.append((t1 - t0) / 1e3)
            if not eng.allowed(tok):
                if first_reject < 0:
                    first_reject, reason = i, "not in mask"
                if not force_through:
                    break
            t2 = clock()
            ok = eng.advance(tok)
            adv_us.append((clock() - t2) / 1e3)
            if not ok:
                first_reject, reason = i, "advance refused"
                break
        eos = False
        if first_reject < 0 or (force_through and reason != "advance refused"):
            t0 = clock()
            eng.fill()
            fill_us.append((clock() - t0) / 1e3)
            eos = eng.allowed(EOS)
        rec = {"name": name, "tokens": len(ids),
               "accepted": len(ids) if first_reject < 0 else first_reject,
               "first_reject": first_reject, "reason": reason, "eos": eos,
               "session_us": new_us, "fill_us": fill_us, "advance_us": adv_us}
        if hasattr(eng, "extra"):
            rec.update(eng.extra())
        streams_out.append(rec)
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
