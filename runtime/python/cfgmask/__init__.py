"""cfgmask: grammar-constrained decoding with exact token masks.

A grammar (Lark syntax) and a tokenizer are compiled once into a mask store
(:func:`compile_grammar`, :meth:`Store.load`).  A :class:`GrammarMatcher`
follows one generated sequence: at every step it fills the bitmask of the
tokens that keep the text a prefix of the language, then accepts the token
the model picked.  The bitmask is the layout inference engines take: int32
words, bit ``t & 31`` of word ``t >> 5`` set iff token ``t`` is allowed.

The engine is the C++ extension ``cfgmask._core``; this package only names
things and adapts Python types.  Logits processors for llama-cpp-python and
Hugging Face transformers are in :mod:`cfgmask.processors`, vLLM's (V1
engine, batch-level) in :mod:`cfgmask.vllm`;
``python -m cfgmask generate`` runs a GGUF model under a grammar.
"""
from __future__ import annotations

import numbers
import os
import tempfile
import warnings
from typing import Callable, Iterable, Optional, Sequence, Union

import numpy as np

from . import _core
from ._core import Error, Store, Tokenizer

# Every default, as maskstore/defaults.h defines it (through the extension).
_DEFAULTS = _core.DEFAULTS

__all__ = [
    "Error",
    "Store",
    "Tokenizer",
    "GrammarMatcher",
    "BatchGrammarMatcher",
    "compile_grammar",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "allowed_token_ids",
    "check_logits_width",
]


def compile_grammar(grammar: Union[str, os.PathLike],
                    tokenizer: Union[str, os.PathLike, Tokenizer],
                    start: str = "", indenter: str = _DEFAULTS["indenter"],
                    max_lexer_states: int = _DEFAULTS["max_lexer_states"],
                    import_paths: Sequence[str] = (),
                    streamline: bool = _DEFAULTS["streamline"],
                    num_threads: int = _DEFAULTS["num_threads"],
                    prune_pairs: bool = _DEFAULTS["prune_pairs"],
                    max_roots: int = _DEFAULTS["max_roots"],
                    max_memory: int = _DEFAULTS["max_memory"],
                    eos: Union[str, int, None] = None,
                    progress: Optional[Callable[[str, float, float], None]] = None,
                    max_seconds: float = _DEFAULTS["max_seconds"],
                    lexer_modes: bool = _DEFAULTS["lexer_modes"]) -> Store:
    """Compiles a grammar and a tokenizer (HF tokenizer.json or GGUF) into a Store.

    `tokenizer` is a tokenizer file, or a :class:`Tokenizer` read once
    (``Tokenizer(path)``) for any number of grammars: each compile then skips
    reading the file and building the vocabulary trie.

    `grammar` is a path to a .lark file, or the grammar text itself (anything
    that is not an existing file and contains a newline or a colon); errors in
    a text grammar are reported against ``<string>``.  `%import` looks in
    `import_paths`, then cfgmask's own common.lark, then Lark's grammars
    folder ($CFGMASK_LARK_GRAMMARS, else the installed lark package's).
    `start` is the start
    rule ("" = ``start``); `indenter` is "auto", "python" or "none";
    `streamline=False` keeps the store unstreamlined (masks are identical
    either way; the streamlined store has fewer rows).  `num_threads` runs the
    vocabulary walk on that many threads (0: all cores); the store is the
    same for any count.  `prune_pairs=False` keeps every lexing of the
    terminal automaton in the store before streamlining, as the design's
    store does (``cfgmask compile --no-pair-pruning``): for measuring
    reductions from that starting point; the masks are the same.
    `lexer_modes=False` lexes every terminal after every boundary even where
    no parser state scans them together (an f-string's text and code,
    ``--no-lexer-modes``): the same masks from a larger automaton.
    `max_lexer_states` and `max_roots` bound the terminal automaton and its
    lexer states at token boundaries (``--max-lexer-states``,
    ``--max-roots``); `max_memory` is the heap the compile may add, in bytes
    (0: three quarters of the machine's memory; ``--max-memory``).  Going
    past any of them raises :class:`Error` naming the limit.  `eos` names the
    end-of-sequence token (an id, or the token's exact text) where the
    tokenizer names none (``--eos``); a store without one warns
    (:class:`UserWarning`), since generation under it can never end.
    `progress`, when given, is called as ``progress(phase, fraction, seconds)``
    when each phase of the compile begins ("grammar", "lalr", "automaton",
    "tokenizer", "walk", "store", then "streamline") and during the vocabulary
    walk: `fraction` is the share of the walk done (never decreasing, 1.0 once
    the walk is over), `seconds` the time since the compile began.  An
    exception it raises stops the compile and propagates, no store made.
    `max_seconds` is the compile's wall-time budget (default one hour; 0:
    none; ``--max-seconds``), checked in every phase.  The compile runs
    without the GIL and looks for signals at each progress report: Ctrl-C
    raises KeyboardInterrupt within a phase or a batch of the walk.
    """
    for name, value in (("max_lexer_states", max_lexer_states), ("max_roots", max_roots),
                        ("max_memory", max_memory), ("num_threads", num_threads)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, got {type(progress).__name__}")
    if indenter not in _DEFAULTS["indenter_choices"]:
        raise Error(f"indenter: expected 'auto', 'python' or 'none', got {indenter!r}")
    if eos is None:
        eos = ""
    elif isinstance(eos, bool) or not isinstance(eos, (str, numbers.Integral)):
        raise TypeError(f"eos must be a token id or a token's text, got {type(eos).__name__}")
    else:
        eos = str(eos)
        if eos == "":
            raise Error("eos: the empty string is no token")
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, numbers.Real):
        raise TypeError(f"max_seconds must be a number, got {type(max_seconds).__name__}")
    store = _compile(os.fspath(grammar), tokenizer, start, indenter, max_lexer_states,
                     import_paths, streamline, num_threads, prune_pairs, max_roots,
                     max_memory, eos, progress, float(max_seconds), bool(lexer_modes))
    if not store.eos_ids:
        warnings.warn("the tokenizer names no end-of-sequence token, so generation under this "
                      "store can never end; name one with eos=", UserWarning, stacklevel=2)
    return store


def _compile(grammar, tokenizer, start, indenter, max_lexer_states, import_paths, streamline,
             num_threads, prune_pairs, max_roots, max_memory, eos, progress, max_seconds,
             lexer_modes):
    if not isinstance(tokenizer, Tokenizer):
        tokenizer = os.fspath(tokenizer)
    if os.path.exists(grammar) or ("\n" not in grammar and ":" not in grammar):
        return Store.compile(grammar, tokenizer, start, indenter, max_lexer_states,
                             list(import_paths), streamline, num_threads, prune_pairs,
                             max_roots, max_memory, eos, progress, max_seconds, lexer_modes)
    fd, path = tempfile.mkstemp(suffix=".lark", prefix="cfgmask-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(grammar)
        try:
            return Store.compile(path, tokenizer, start, indenter, max_lexer_states,
                                 list(import_paths), streamline, num_threads, prune_pairs,
                                 max_roots, max_memory, eos, progress, max_seconds, lexer_modes)
        except Error as e:
            raise Error(str(e).replace(path, "<string>")) from None
    finally:
        os.unlink(path)


# The logits-width rule of the processors (check_logits_width).
LOGITS_PAD_MULTIPLE = 64
LOGITS_PAD_MAX = 1024


def check_logits_width(width: int, vocab_size: int) -> None:
    """Raises Error unless logits `width` entries wide can belong to a model
    whose tokenizer is the store's (`vocab_size` tokens).

    The rule: the width equals the vocabulary, or it is wider only by a
    model's padding of its embedding matrix past the tokenizer, which is a
    width that is a multiple of 64 (models pad to 64, 128 or 256) and fewer
    than 1,024 columns past the vocabulary (real models pad by 0 to about
    300: Phi-3 32,011 -> 32,064, DeepSeek-Coder 32,022 -> 32,256, Qwen2/3
    151,665 -> 151,936).  Padding columns are always masked.  Anything else
    is logits of another vocabulary (49,152-wide logits for a 32,000-token
    store) and masking them would constrain the wrong tokens."""
    if width == vocab_size:
        return
    if width < vocab_size:
        raise Error(f"logits have {width} entries, fewer than the grammar store's vocabulary of "
                    f"{vocab_size}: wrong tokenizer?")
    if width % LOGITS_PAD_MULTIPLE != 0 or width - vocab_size >= LOGITS_PAD_MAX:
        raise Error(f"logits have {width} entries for a grammar store of {vocab_size} tokens: "
                    f"not a model's padding (a multiple of {LOGITS_PAD_MULTIPLE} fewer than "
                    f"{LOGITS_PAD_MAX} past the vocabulary); wrong tokenizer?")


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """A zeroed (batch_size, ceil(vocab_size / 32)) int32 bitmask."""
    return np.zeros((batch_size, (vocab_size + 31) // 32), dtype=np.int32)


def apply_token_bitmask_inplace(logits: np.ndarray, bitmask: np.ndarray) -> None:
    """Sets logits to -inf wherever the bitmask refuses the token.

    `logits` is a float32 or float16 numpy array of shape (vocab,) or
    (batch, vocab); `bitmask` has one row per logits row (a 1-row bitmask
    serves 1-D logits).  Tokens past the bitmask's width are refused.
    """
    if logits.ndim == 1 and bitmask.ndim == 2 and bitmask.shape[0] == 1:
        bitmask = bitmask[0]
    _core.apply_token_bitmask_inplace(logits, bitmask)


def allowed_token_ids(bitmask_row: np.ndarray, vocab_size: int) -> np.ndarray:
    """The token ids whose bit is set in one bitmask row, ascending."""
    bits = np.unpackbits(np.ascontiguousarray(bitmask_row, dtype="<i4").view(np.uint8),
                         bitorder="little")
    return np.flatnonzero(bits[:vocab_size]).astype(np.int32)


def _int_arg(name: str, value, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi]; one-line TypeError / Error otherwise
    (pybind11's own messages for these span several lines)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise Error(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _as_bytes(text: Union[str, bytes]) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")


def _refusal_position(what: str, store: Store, data: bytes) -> str:
    """Where the grammar first refuses `data` from the start: the longest
    accepted prefix, by bisection (each probe a fresh session)."""
    lo, hi = 0, len(data)  # data[:lo] accepted, data[:hi] refused
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _core.Session(store, _DEFAULTS["max_live_states"]).advance_bytes(data[:mid]):
            lo = mid
        else:
            hi = mid
    line = data[:lo].count(b"\n") + 1
    col = lo - (data[:lo].rfind(b"\n") + 1) + 1
    return (f"{what}:{line}:{col}: the grammar refuses the text from byte {lo} on "
            f"({data[lo:lo + 20]!r}): it is not the start of a text in the grammar's language")


class GrammarMatcher:
    """Follows one generated sequence under a compiled grammar.

    The method names are those of XGrammar's GrammarMatcher, so that serving
    code written against it carries over.
    """

    def __init__(self, store: Store, max_live_states: int = _DEFAULTS["max_live_states"], *,
                 prefix: Union[str, bytes, None] = None,
                 suffix: Union[str, bytes, None] = None, _session=None):
        """`prefix`: text before the cursor, already written (accepted as by
        accept_string; Error, with its position, if the grammar refuses it).
        `suffix`: text after the cursor (see set_suffix).  Together they make
        completion in the middle of a file:

            m = GrammarMatcher(store, prefix="def f(x):\n    return ", suffix="\n")
        """
        if _session is None:
            _session = _core.Session(store, _int_arg("max_live_states", max_live_states, 1,
                                                     _INT32_MAX))
        self._session = _session
        self.store = self._session.store
        if prefix:
            data = _as_bytes(prefix)
            if not self._session.advance_bytes(data):
                raise Error(_refusal_position("prefix", store, data))
        if suffix:
            self.set_suffix(suffix)

    def set_suffix(self, suffix: Union[str, bytes, None]) -> None:
        """Completion in the middle of a file: `suffix` is the text after the
        cursor.  From now on a stop token is allowed (mask, can_end) only where
        the text so far followed by the suffix is in the language, and, where
        suffix_exact, a token only if some middle after it meets the suffix
        (the quotient by the suffix is built here, once); the suffix itself is
        never generated.  None or empty: no suffix.  Forks share it.
        At most ``_core.MAX_SUFFIX_BYTES`` (64 KiB) bytes: the suffix is read
        again at every step, so a longer one raises Error."""
        self._session.set_suffix(_as_bytes(suffix or b""))

    @property
    def suffix(self) -> bytes:
        return self._session.suffix

    @property
    def suffix_exact(self) -> bool:
        """True when the masks are exact for the suffix: a token is allowed
        only if some middle after it meets the suffix (grammars without the
        indenter or a semantic layer); otherwise they are prefix masks and
        only the end is checked against the suffix."""
        return self._session.suffix_exact

    @property
    def vocab_size(self) -> int:
        return self.store.vocab_size

    @property
    def stop_token_ids(self) -> list:
        return list(self.store.eos_ids)

    def fill_next_token_bitmask(self, bitmask: np.ndarray, index: int = 0) -> None:
        """Writes the next-token mask into row `index` of an int32 bitmask."""
        self._session.fill_mask(bitmask, _int_arg("index", index, 0, _INT64_MAX))

    def accept_token(self, token_id: int) -> bool:
        """Advances by a token; False (and no change) if the grammar refuses it.
        Every other error raises Error, "in use by another thread" included."""
        if isinstance(token_id, bool) or not isinstance(token_id, numbers.Integral):
            raise TypeError(f"token id must be an int, got {type(token_id).__name__} {token_id!r}")
        token_id = int(token_id)
        if not 0 <= token_id < self.store.vocab_size:
            raise Error(f"token id {token_id} is out of range [0, {self.store.vocab_size})")
        # False only for a refusal; a busy matcher (another thread), a damaged
        # store or a limit raises Error.
        return self._session.advance(token_id)

    def accept_string(self, text: Union[str, bytes]) -> bool:
        """Advances by raw text, not aligned to tokens; False if refused (and
        no change); every other error raises."""
        return self._session.advance_bytes(_as_bytes(text))

    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last `num_tokens` accepted tokens or strings."""
        self._session.rollback(_int_arg("num_tokens", num_tokens, 0, _INT32_MAX))

    def fork(self) -> "GrammarMatcher":
        """An independent copy at the same position (beam search, sampling n)."""
        return GrammarMatcher(self.store, _session=self._session.fork())

    def find_jump_forward_string(self, max_bytes: int = 256) -> str:
        """The text the grammar forces from here ('' if there is a choice)."""
        max_bytes = _int_arg("max_bytes", max_bytes, 0, _INT32_MAX)
        return self._session.jump_forward_string(max_bytes).decode("utf-8", "surrogateescape")

    def find_completion(self, max_expansions: int = 200_000, *, shortest: bool = True):
        """A shortest text that makes the text so far complete, or None if the
        search gives up after `max_expansions` nodes.

        With ``shortest=False`` (what steering uses): where that search runs
        out of its budget and a suffix is set, a second one, over whole
        terminals at their shortest spellings and, with the Python indenter,
        line breaks to the indentation of a level open or of a line of the
        suffix, finds a completion with the fewest such pieces (not
        necessarily the fewest bytes; the same budget again).  It finds the
        middles that must open what the suffix goes on in (``try:`` before
        an ``except``), which the byte-level search cannot reach."""
        # The same argument rule as completion_search.
        if isinstance(max_expansions, numbers.Integral) and not isinstance(max_expansions, bool) \
                and max_expansions < 0:
            raise ValueError("max_expansions must be >= 0")
        max_expansions = _int_arg("max_expansions", max_expansions, 0, _INT64_MAX)
        c = self._session.shortest_completion(max_expansions, bool(not shortest))
        return None if c is None else c.decode("utf-8", "surrogateescape")

    def completion_search(self, max_expansions: int = 200_000, *, shortest: bool = True):
        """Like find_completion, but says why nothing was found.

        Returns ``(outcome, text, nodes)``: outcome "found" with the shortest
        completion in `text`; "none" when every configuration reachable from
        here was searched and no text can end (a dead end; `text` is None);
        "budget" when `max_expansions` search nodes ran out first.  Time and
        memory are linear in `max_expansions`; `nodes` is the count used.
        ``shortest=False``: find_completion's steering search (a completion,
        not necessarily a shortest one; `nodes` counts both searches).
        """
        if isinstance(max_expansions, numbers.Integral) and not isinstance(max_expansions, bool) \
                and max_expansions < 0:
            raise ValueError("max_expansions must be >= 0")
        max_expansions = _int_arg("max_expansions", max_expansions, 0, _INT64_MAX)
        what, text, nodes = self._session.completion_search(max_expansions, bool(not shortest))
        if text is not None:
            text = text.decode("utf-8", "surrogateescape")
        return what, text, nodes

    def tokenize_forced(self, text: Union[str, bytes]) -> list:
        """Tokens spelling `text` from here (greedy longest match, each one
        accepted in turn); raises Error if they cannot spell all of it."""
        data = _as_bytes(text)
        tokens, covered = self._session.tokenize_forced(data)
        if covered != len(data):
            raise Error(f"no token sequence from here spells {data[covered:covered + 20]!r}")
        return list(tokens)

    def can_end(self) -> bool:
        """True if the text so far is a complete program (EOS is allowed)."""
        return self._session.can_end()

    def is_terminated(self) -> bool:
        """True once a stop token has been accepted."""
        return self._session.is_terminated()

    def reset(self) -> None:
        self._session.reset()

    @property
    def text(self) -> str:
        """The text accepted so far."""
        return self._session.text.decode("utf-8", "replace")

    @property
    def num_live(self) -> int:
        """Live lexer hypotheses (more than one where a token ends ambiguously)."""
        return self._session.num_live


class BatchGrammarMatcher:
    """Fills and advances the masks of many matchers in one call each.

    Matchers may read different stores; each appears at most once per call.
    The sessions run in parallel inside the engine, without the GIL.
    """

    def __init__(self):
        self._batch = _core.BatchMatcher()
        self._stores = {}  # the engine caches per store: keep each one alive

    def _sessions(self, matchers: Iterable[GrammarMatcher]):
        sessions = []
        for m in matchers:
            self._stores.setdefault(id(m.store), m.store)
            sessions.append(m._session)
        return sessions

    def batch_fill_next_token_bitmask(self, matchers: Sequence[GrammarMatcher],
                                      bitmask: np.ndarray) -> None:
        """Row b of `bitmask` (B x words, int32) gets matchers[b]'s mask."""
        self._batch.fill_next_token_bitmask(self._sessions(matchers), bitmask)

    def batch_accept_token(self, matchers: Sequence[GrammarMatcher],
                           tokens: Sequence[int]) -> None:
        """Advances matchers[b] by tokens[b]; all or nothing: when one refuses,
        raises Error naming the first refusal and no matcher moves."""
        ids = []
        for t in tokens:
            if isinstance(t, bool) or not isinstance(t, numbers.Integral):
                raise TypeError(f"token ids must be ints, got {type(t).__name__} {t!r}")
            ids.append(int(t))
        self._batch.advance(self._sessions(matchers), ids)
