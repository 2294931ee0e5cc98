"""A vLLM (V1 engine) logits processor that constrains requests with cfgmask.

Load it with ``vllm serve MODEL --logits-processors
cfgmask.vllm:CfgmaskLogitsProcessor`` (or ``LLM(...,
logits_processors=[CfgmaskLogitsProcessor])``).  A request opts in through
``SamplingParams.extra_args`` (``vllm_xargs`` in the OpenAI API's request
body), all values strings:

- ``cfgmask_store``: the path of a store compiled by ``cfgmask compile`` with
  the served model's tokenizer; or
- ``cfgmask_grammar`` (a ``.lark`` path or the grammar text) with
  ``cfgmask_tokenizer`` (the model's ``tokenizer.json`` or GGUF file), and
  optionally ``cfgmask_start`` (start rule).  The store is compiled once,
  when the request is validated, and kept in a cache folder
  (``$CFGMASK_VLLM_CACHE``, else ``~/.cache/cfgmask/vllm``) under a hash of
  the grammar, the tokenizer file and the start rule, so the engine process
  loads what the API server compiled;
- ``cfgmask_suffix`` (optional): the text after the cursor (the stop token is
  allowed only where the output followed by it is in the language).

Requests without these keys are not touched.  Only the generated tokens are
constrained, never the prompt.  The processor is batch-level: it keeps one
:class:`~cfgmask.GrammarMatcher` per constrained row of vLLM's persistent
batch, follows the batch's updates (added, removed, then moved or swapped
rows), accepts at every step the tokens vLLM appended to each
request's output list (rolling back where vLLM dropped some), fills the masks
of all constrained rows in one :class:`~cfgmask.BatchGrammarMatcher` call and
masks the logits (on the CPU through the engine or numpy, on a GPU with torch).

vLLM refuses custom logits processors when speculative decoding is enabled,
so there are no draft tokens to check here.
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from vllm.exceptions import VLLMValidationError
from vllm.logger import init_logger
from vllm.sampling_params import SamplingParams
from vllm.v1.sample.logits_processor import (BatchUpdate, LogitsProcessor,
                                             MoveDirectionality)

from . import (BatchGrammarMatcher, Error, GrammarMatcher, Store, _core, check_logits_width,
               compile_grammar)

__all__ = ["CfgmaskLogitsProcessor", "ARG_KEYS", "load_request_store"]

logger = init_logger(__name__)

PREFIX = "cfgmask_"
ARG_KEYS = ("cfgmask_store", "cfgmask_grammar", "cfgmask_tokenizer", "cfgmask_start",
            "cfgmask_suffix")

_lock = threading.Lock()
# (kind, key) -> loaded or compiled store, the most recently used last; the
# requests that use a store hold it, so dropping it here frees nothing in use.
_stores: "OrderedDict[tuple, Store]" = OrderedDict()
MAX_CACHED_STORES = 16


def _remember(key: tuple, store: Store) -> None:
    _stores[key] = store
    _stores.move_to_end(key)
    while len(_stores) > MAX_CACHED_STORES:
        _stores.popitem(last=False)


def _cache_dir() -> str:
    return os.environ.get("CFGMASK_VLLM_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "cfgmask", "vllm")


def _args(params: SamplingParams) -> Optional[Dict[str, str]]:
    """The request's cfgmask arguments, checked; None when it has none."""
    extra = params.extra_args or {}
    mine = {k: v for k, v in extra.items() if isinstance(k, str) and k.startswith(PREFIX)}
    if not mine:
        return None
    for k, v in mine.items():
        if k not in ARG_KEYS:
            raise ValueError(f"cfgmask: unknown request argument {k!r} "
                             f"(known: {', '.join(ARG_KEYS)})")
        if not isinstance(v, str):
            raise ValueError(f"cfgmask: {k} must be a string, got {type(v).__name__}")
    if ("cfgmask_store" in mine) == ("cfgmask_grammar" in mine):
        raise ValueError("cfgmask: give exactly one of cfgmask_store (a compiled store) "
                         "and cfgmask_grammar (with cfgmask_tokenizer)")
    if "cfgmask_store" in mine:
        extra_keys = [k for k in ("cfgmask_tokenizer", "cfgmask_start") if k in mine]
        if extra_keys:
            raise ValueError(f"cfgmask: {extra_keys[0]} goes with cfgmask_grammar; "
                             "a compiled store already has its tokenizer and start rule")
    elif "cfgmask_tokenizer" not in mine:
        raise ValueError("cfgmask: cfgmask_grammar needs cfgmask_tokenizer (the served "
                         "model's tokenizer.json or GGUF file)")
    return mine


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _load_store(path: str) -> Store:
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"cfgmask: cannot read store {path!r}: {e.strerror}") from None
    key = ("store", os.path.realpath(path), st.st_mtime_ns, st.st_size)
    with _lock:
        store = _stores.get(key)
        if store is None:
            try:
                store = Store.load(path)
            except Error as e:
                raise ValueError(f"cfgmask: {_one_line(e)}") from None
        _remember(key, store)
    return store


def _compiled_store(grammar: str, tokenizer: str, start: str) -> Store:
    if os.path.isfile(grammar):
        with open(grammar, "rb") as f:
            grammar_bytes = f.read()
    elif "\n" in grammar or ":" in grammar:
        grammar_bytes = grammar.encode("utf-8")
    else:
        raise ValueError(f"cfgmask: grammar file {grammar!r} does not exist")
    try:
        tst = os.stat(tokenizer)
    except OSError as e:
        raise ValueError(f"cfgmask: cannot read tokenizer {tokenizer!r}: {e.strerror}") from None
    h = hashlib.sha256()
    for part in (grammar_bytes, os.path.realpath(tokenizer).encode(),
                 f"{tst.st_size}:{tst.st_mtime_ns}".encode(), start.encode(),
                 str(_core.STORE_FORMAT_VERSION).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    digest = h.hexdigest()[:32]
    key = ("grammar", digest)
    with _lock:
        store = _stores.get(key)
        if store is not None:
            _remember(key, store)
            return store
        path = os.path.join(_cache_dir(), digest + ".cfgm")
        if os.path.isfile(path):
            try:
                store = Store.load(path)
            except Error:
                store = None  # a damaged cache entry: compile again
        if store is None:
            # Relative %imports of a grammar file resolve from its folder.
            imports = [os.path.dirname(os.path.abspath(grammar))] if os.path.isfile(grammar) else []
            try:
                store = compile_grammar(grammar, tokenizer, start=start, import_paths=imports)
            except Error as e:
                raise ValueError(f"cfgmask: {_one_line(e)}") from None
            try:
                os.makedirs(_cache_dir(), exist_ok=True)
                tmp = f"{path}.{os.getpid()}.tmp"
                store.save(tmp)
                os.replace(tmp, path)
            except (OSError, Error) as e:  # the cache is an optimisation only
                logger.warning("cfgmask: cannot keep the compiled store in %s: %s",
                               _cache_dir(), _one_line(e))
        _remember(key, store)
    return store


def load_request_store(params: SamplingParams) -> Optional[Store]:
    """The store a request asks for (loaded or compiled, cached), or None if
    it asks for none.  Bad arguments raise ValueError with a one-line message."""
    args = _args(params)
    if args is None:
        return None
    if "cfgmask_store" in args:
        return _load_store(args["cfgmask_store"])
    return _compiled_store(args["cfgmask_grammar"], args["cfgmask_tokenizer"],
                           args.get("cfgmask_start", ""))


class _Request:
    """One constrained row: its matcher and vLLM's live output-token list."""

    __slots__ = ("matcher", "output", "tokens", "accepted", "failed")

    def __init__(self, matcher: GrammarMatcher, output: List[int]):
        self.matcher = matcher
        self.output = output       # vLLM's list, appended to by the engine
        self.tokens: List[int] = []  # the output tokens read so far
        self.accepted = 0  # how many of them the matcher took (stop tokens past the end: not)
        self.failed: Optional[str] = None


class CfgmaskLogitsProcessor(LogitsProcessor):
    """Masks the logits of every request that names a cfgmask grammar.

    Not argmax-invariant (the mask changes greedy picks), so vLLM applies it
    to greedy and random sampling alike.  A request whose sampled token the
    grammar refuses (possible only where something else changed the logits
    after the mask, e.g. ``min_tokens`` refusing the only token the grammar
    allows) is logged and from then on only allowed its stop tokens; the
    engine keeps serving the others.  ``failures`` maps the batch row of such
    a request to the reason.
    """

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams):
        """Loads (or compiles) the request's store; a bad request raises
        vLLM's VLLMValidationError (HTTP 400) with a one-line message."""
        try:
            load_request_store(sampling_params)
        except ValueError as e:
            raise VLLMValidationError(str(e)) from None

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool):
        self.device = torch.device(device)
        self.model_vocab = None
        model_config = getattr(vllm_config, "model_config", None)
        if model_config is not None:
            try:
                self.model_vocab = int(model_config.get_vocab_size())
            except Exception:  # noqa: BLE001 - a config without one: check at apply
                self.model_vocab = None
        self.requests: Dict[int, _Request] = {}
        self.failures: Dict[int, str] = {}
        self.batch = BatchGrammarMatcher()
        self._shifts: Dict[torch.device, torch.Tensor] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    # -- batch updates ---------------------------------------------------

    def update_state(self, batch_update: Optional[BatchUpdate]) -> None:
        if not batch_update:
            return
        # Added first, then removed, then moved, as vLLM's own processors
        # (process_dict_updates): an addition takes the lowest removed row
        # and so leaves `removed`, hence a row in both was added, then removed
        # before this update (a request that came and went in one step).
        for index, params, _prompt, output in batch_update.added:
            self._drop(index)  # an added request replaces the row's occupant
            self._add(index, params, output)
        for index in batch_update.removed:
            self._drop(index)
        for a, b, direction in batch_update.moved:
            ra, rb = self.requests.pop(a, None), self.requests.pop(b, None)
            fa, fb = self.failures.pop(a, None), self.failures.pop(b, None)
            if ra is not None:
                self.requests[b] = ra
            if fa is not None:
                self.failures[b] = fa
            if direction == MoveDirectionality.SWAP:
                if rb is not None:
                    self.requests[a] = rb
                if fb is not None:
                    self.failures[a] = fb

    def _drop(self, index: int) -> None:
        self.requests.pop(index, None)
        self.failures.pop(index, None)

    def _add(self, index: int, params: SamplingParams, output: List[int]) -> None:
        try:
            store = load_request_store(params)
        except ValueError as e:  # validate_params let it through: e.g. the file went away
            logger.error("%s (batch row %d: left unconstrained)", e, index)
            return
        if store is None:
            return
        if self.model_vocab is not None and store.vocab_size > self.model_vocab:
            logger.error("cfgmask: the store's vocabulary (%d tokens) is larger than the "
                         "model's (%d): compiled with another tokenizer? (batch row %d: "
                         "left unconstrained)", store.vocab_size, self.model_vocab, index)
            return
        matcher = GrammarMatcher(store)
        suffix = (params.extra_args or {}).get("cfgmask_suffix")
        if suffix:
            matcher.set_suffix(suffix)
        self.requests[index] = _Request(matcher, output)

    # -- per step --------------------------------------------------------

    def _fail(self, index: int, req: _Request, why: str) -> None:
        req.failed = why
        self.failures[index] = why
        logger.error("cfgmask: batch row %d: %s; only its stop tokens are allowed from now on",
                     index, why)

    def _sync(self, index: int, req: _Request) -> None:
        """Brings the matcher to the request's output list."""
        out, mine = req.output, req.tokens
        n = len(mine)
        if len(out) < n or (n and out[n - 1] != mine[n - 1]):
            # vLLM dropped tokens (e.g. after a KV-cache load failure): roll back
            # to the longest common prefix.
            k = 0
            limit = min(n, len(out))
            while k < limit and out[k] == mine[k]:
                k += 1
            if req.accepted > k:
                req.matcher.rollback(req.accepted - k)
                req.accepted = k
            del mine[k:]
            n = k
        if req.failed is not None:
            return
        m = req.matcher
        for t in out[n:]:
            t = int(t)
            if t < 0:
                self._fail(index, req, "the output list holds a placeholder token (-1) at "
                           "masking time: load the processor with --logits-processors "
                           "(vLLM then resolves asynchronously scheduled tokens first)")
                return
            if m.is_terminated():
                if t in m.store.eos_ids:
                    mine.append(t)
                    continue
                self._fail(index, req, f"token {t} after the grammar's end")
                return
            if t >= m.vocab_size or not m.accept_token(t):
                self._fail(index, req, f"the sampler picked token {t}, which the grammar "
                           f"refuses after {m.text[-60:]!r}")
                return
            mine.append(t)
            req.accepted += 1

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.requests:
            return logits
        num_rows, vocab = logits.shape[0], logits.shape[-1]
        rows = sorted(i for i in self.requests if i < num_rows)
        if not rows:
            return logits
        live: List[int] = []      # positions in `rows` filled by the batch call
        only_stop: List[int] = []
        for pos, index in enumerate(rows):
            req = self.requests[index]
            self._sync(index, req)
            if req.failed is not None or req.matcher.is_terminated():
                only_stop.append(pos)
            else:
                live.append(pos)
        words = (vocab + 31) // 32
        bitmask = np.zeros((len(rows), words), dtype=np.int32)
        if live:
            for pos in live:
                # Exactly the store's width, or a model's padding past it.
                check_logits_width(vocab, self.requests[rows[pos]].matcher.vocab_size)
            matchers = [self.requests[rows[p]].matcher for p in live]
            if len(live) == len(rows):
                self.batch.batch_fill_next_token_bitmask(matchers, bitmask)
            else:
                sub = np.zeros((len(live), words), dtype=np.int32)
                self.batch.batch_fill_next_token_bitmask(matchers, sub)
                bitmask[live] = sub
        for pos in only_stop:
            for t in self.requests[rows[pos]].matcher.store.eos_ids:
                if t < vocab:
                    bitmask[pos, t >> 5] |= np.uint32(1 << (t & 31)).view(np.int32)
        self._mask(logits, rows, bitmask)
        return logits

    def _mask(self, logits: torch.Tensor, rows: Sequence[int], bitmask: np.ndarray) -> None:
        vocab = logits.shape[-1]
        if (logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float16)
                and logits.is_contiguous()):
            if len(rows) == logits.shape[0]:
                _core.apply_token_bitmask_inplace(logits.numpy(), bitmask)
            else:
                full = np.full((logits.shape[0], bitmask.shape[1]), -1, dtype=np.int32)
                full[list(rows)] = bitmask
                _core.apply_token_bitmask_inplace(logits.numpy(), full)
            return
        dev = logits.device
        n = len(rows)
        if dev.type == "cpu":  # bf16, or not contiguous: numpy expands the bits
            allowed = torch.from_numpy(np.unpackbits(
                bitmask.view(np.uint8), axis=1, bitorder="little")[:, :vocab].astype(bool))
        else:
            allowed = self._expand_on(dev, bitmask, vocab)
        if n == logits.shape[0]:
            logits.masked_fill_(~allowed, float("-inf"))
        else:
            idx = torch.tensor(list(rows), dtype=torch.long, device=dev)
            logits[idx] = logits[idx].masked_fill(~allowed, float("-inf"))

    def _expand_on(self, dev: torch.device, bitmask: np.ndarray, vocab: int) -> torch.Tensor:
        """The allowed tokens as a bool (rows, vocab) tensor on `dev`: the
        B x V/32 words are copied there and expanded by the device (bit j of
        byte k of word w is token 32 w + 8 k + j, little-endian)."""
        bytes_ = torch.from_numpy(bitmask.view(np.uint8)).to(dev)
        shifts = self._shifts.get(dev)
        if shifts is None:
            shifts = torch.arange(8, dtype=torch.uint8, device=dev)
            self._shifts[dev] = shifts
        bits = (bytes_.unsqueeze(-1) >> shifts) & 1
        return bits.bool().reshape(bitmask.shape[0], -1)[:, :vocab]
