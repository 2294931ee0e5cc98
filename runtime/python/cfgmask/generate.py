"""Text generation with a GGUF model (llama-cpp-python) under a cfgmask grammar.

:func:`load_model` opens the model and checks that a store was compiled for
its vocabulary (same size, same bytes for every token); :func:`generate` runs
one prompt, constrained by a :class:`~cfgmask.GrammarMatcher` through
:class:`~cfgmask.processors.LlamaCppLogitsProcessor`, or unconstrained.

A completion must end.  When the token budget is spent the processor steers
to the end: for up to `steer_tokens` more tokens, a stop token is the only
choice wherever the grammar allows one.  A text that still has not ended is
reported incomplete.  Unconstrained runs cannot be steered and simply stop at
the budget.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, List, Optional

from . import Error, GrammarMatcher, Store
from .processors import LlamaCppLogitsProcessor

CHATML = ("<|im_start|>system\n{system}<|im_end|>\n"
          "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")


@dataclasses.dataclass
class Completion:
    text: str
    tokens: List[int]
    ended: bool             # a stop token was sampled
    steered: bool           # the budget was spent and steering was needed
    prompt_tokens: int
    seconds: float          # prompt evaluation + generation
    mask_seconds: float     # inside the processor: accepting tokens + masks

    @property
    def tokens_per_second(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else 0.0

    @property
    def mask_us_per_token(self) -> float:
        return 1e6 * self.mask_seconds / max(1, len(self.tokens))


def load_model(model_path: str, n_ctx: int = 2048, n_threads: Optional[int] = None, seed: int = 0):
    """A llama_cpp.Llama on CPU, quiet."""
    import llama_cpp  # an optional dependency: pip install llama-cpp-python
    return llama_cpp.Llama(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads,
                           n_gpu_layers=0, seed=seed, verbose=False)


def token_piece(llm, token: int) -> bytes:
    """A token's bytes as llama.cpp spells it.  (Llama.detokenize reads at most
    32 bytes a token, and returns b'' for longer tokens such as runs of
    spaces.)"""
    import ctypes
    import llama_cpp
    buf = ctypes.create_string_buffer(512)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n = llama_cpp.llama_token_to_piece(vocab, int(token), buf, len(buf), 0, False)
    if n < 0:
        raise Error(f"token {token}: piece longer than {len(buf)} bytes")
    return buf.raw[:n]


def vocabulary_mismatches(llm, store: Store, limit: int = 5) -> List[str]:
    """Tokens whose bytes differ between the model and the store (empty = same)."""
    out = []
    if llm.n_vocab() != store.vocab_size:
        return [f"vocabulary sizes differ: model {llm.n_vocab()}, store {store.vocab_size}"]
    for t in range(store.vocab_size):
        if store.is_special(t):
            continue
        model = token_piece(llm, t)
        if model != store.token_bytes(t):
            out.append(f"token {t}: model {model!r}, store {store.token_bytes(t)!r}")
            if len(out) >= limit:
                break
    return out


def stop_token_ids(llm) -> List[int]:
    ids = {llm.token_eos()}
    for text in (b"<|im_end|>", b"<|endoftext|>", b"<|eot_id|>"):
        toks = llm.tokenize(text, add_bos=False, special=True)
        if len(toks) == 1:
            ids.add(toks[0])
    return sorted(i for i in ids if i >= 0)


def format_prompt(prompt: str, template: str = "chatml",
                  system: str = "You are a helpful programming assistant. Answer with code only, "
                                "no explanations.",
                  answer_prefix: str = "") -> str:
    """The model's input.  `answer_prefix` opens the assistant's answer (e.g.
    a ``` fence): the model reads it, the grammar constrains what follows."""
    if template == "raw":
        return prompt + answer_prefix
    if template == "chatml":
        return CHATML.format(system=system, prompt=prompt) + answer_prefix
    raise ValueError(f"unknown template {template!r} (chatml or raw)")


def generate(llm, prompt_text: str, store: Optional[Store] = None, max_tokens: int = 128,
             steer_tokens: int = 32, temperature: float = 0.0, seed: int = 0,
             on_token: Optional[Callable[[int, bytes, "Completion"], None]] = None,
             suffix: Optional[bytes] = None, prefix: Optional[bytes] = None,
             prompt_tokens: Optional[List[int]] = None) -> Completion:
    """Generates from `prompt_text` (already formatted; or from `prompt_tokens`
    when given); constrained if `store` is given.

    `on_token(token, token_bytes, partial)` is called after every token.  With
    `prefix` (the text before the cursor) the grammar reads it first (the
    model reads it in its prompt); with `suffix` (the text after the cursor),
    the text may end only where it followed by the suffix is in the grammar's
    language.  The result's text is what was generated (the middle).
    """
    import llama_cpp
    prompt = list(prompt_tokens) if prompt_tokens is not None else \
        llm.tokenize(prompt_text.encode("utf-8"), add_bos=False, special=True)
    processor = LlamaCppLogitsProcessor(GrammarMatcher(store, prefix=prefix), suffix=suffix) \
        if store is not None else None
    stops = set(processor.matcher.stop_token_ids if processor else stop_token_ids(llm))
    llm.set_seed(seed)
    tokens: List[int] = []
    result = Completion("", tokens, False, False, len(prompt), 0.0, 0.0)
    start = time.perf_counter()
    procs = llama_cpp.LogitsProcessorList([processor]) if processor else None
    out = bytearray()
    for tok in llm.generate(prompt, temp=temperature, top_k=40, top_p=0.95, min_p=0.05,
                            repeat_penalty=1.0, reset=True, logits_processor=procs):
        if tok in stops:
            result.ended = True
            if processor and not processor.matcher.accept_token(tok):
                raise Error(f"stop token {tok} sampled where the grammar cannot end")
            break
        tokens.append(tok)
        piece = token_piece(llm, tok)
        out += piece
        result.seconds = time.perf_counter() - start
        result.mask_seconds = processor.mask_seconds if processor else 0.0
        if on_token:
            on_token(tok, piece, result)
        if len(tokens) >= max_tokens:
            if processor is None or len(tokens) >= max_tokens + steer_tokens:
                break
            processor.steer_to_end = True
            result.steered = True
    result.seconds = time.perf_counter() - start
    result.mask_seconds = processor.mask_seconds if processor else 0.0
    result.text = out.decode("utf-8", "replace")
    return result


def python_compiles(text: str) -> bool:
    """CPython's own compile() accepts the text as a module."""
    try:
        compile(text, "<generated>", "exec")
        return True
    except (SyntaxError, ValueError):
        return False


_SQLITE_SYNTAX = ("syntax error", "incomplete input", "unrecognized token")


def _strip_leading_comments(sql: str) -> str:
    """The statement without the whitespace and comments that open it."""
    while True:
        sql = sql.lstrip()
        if sql.startswith("--"):
            end = sql.find("\n")
            sql = "" if end < 0 else sql[end + 1:]
        elif sql.startswith("/*"):
            end = sql.find("*/")
            if end < 0:
                return sql  # an unterminated comment: SQLite's to judge
            sql = sql[end + 2:]
        else:
            return sql


def sqlite_parses(text: str) -> bool:
    """SQLite's parser accepts every statement of the text.

    Each statement is prepared (under EXPLAIN, so nothing runs) on an empty
    in-memory database; only syntax errors count, not missing tables.
    Comments count as text; a text of comments alone is no answer.
    """
    import sqlite3
    conn = sqlite3.connect(":memory:")
    try:
        statements, current = [], ""
        for ch in text:
            current += ch
            if ch == ";" and sqlite3.complete_statement(current):
                statements.append(current)
                current = ""
        if current.strip():
            statements.append(current)
        if not statements:
            return False
        code = 0
        for stmt in statements:
            body = _strip_leading_comments(stmt).rstrip(";").strip()
            if not body:
                continue  # a lone ';' or only comments: SQLite accepts it
            code += 1
            sql = body if body[:7].lower() == "explain" else "EXPLAIN " + body
            try:
                conn.execute(sql)
            except sqlite3.Warning:
                return False
            except sqlite3.Error as e:
                if any(s in str(e) for s in _SQLITE_SYNTAX):
                    return False
        return code > 0  # comments alone are no answer
    finally:
        conn.close()
