"""Logits processors that put a cfgmask grammar in front of a model's sampler.

- :class:`LlamaCppLogitsProcessor` follows llama-cpp-python's protocol
  (``llama_cpp.LogitsProcessorList``): called with ``(input_ids, scores)``,
  numpy arrays of the whole sequence so far and the next token's logits.
- :class:`HFLogitsProcessor` follows Hugging Face transformers'
  ``LogitsProcessor``: called with ``(input_ids, scores)`` tensors of shape
  (batch, length) and (batch, vocab).

Both keep one :class:`~cfgmask.GrammarMatcher` per sequence.  The first call
marks where the prompt ends; every later call first accepts the tokens the
sampler added since, then masks the logits of the next step.  Neither package
is imported here: the processors only use the arrays they are handed.
"""
from __future__ import annotations

import time
from typing import List, Optional, Sequence, Union

import numpy as np

from . import BatchGrammarMatcher, Error, GrammarMatcher, Store, allocate_token_bitmask
from . import _core

try:  # subclass transformers' base class where it is importable (it needs torch)
    from transformers import LogitsProcessor as _HFBase  # type: ignore
except Exception:  # noqa: BLE001 - any import failure means "not available"
    _HFBase = object


class LlamaCppLogitsProcessor:
    """A llama-cpp-python logits processor constraining one sequence.

    Tokens past the store's vocabulary (a model padded beyond its tokenizer)
    are always refused.  With ``steer_to_end`` set (e.g. when a token budget
    is reached) the text is driven to its end: the stop tokens whenever the
    grammar allows one, otherwise the tokens of a shortest completion
    (GrammarMatcher.find_completion), one per step.
    """

    def __init__(self, matcher: GrammarMatcher, suffix: Union[str, bytes, None] = None):
        self.matcher = matcher
        if suffix:  # the text after the cursor: the completion must fit it
            matcher.set_suffix(suffix)
        self.bitmask = allocate_token_bitmask(1, matcher.vocab_size)
        self.prompt_len: Optional[int] = None
        self.accepted = 0
        self.steer_to_end = False
        self.forced: List[int] = []  # tokens of the completion still to come
        self.steer_failed = False    # no completion was found
        self.mask_seconds = 0.0  # time spent accepting tokens and filling masks
        self.calls = 0

    def _sync(self, input_ids: Sequence[int]) -> None:
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
        new = input_ids[self.prompt_len + self.accepted:]
        for t in new:
            if not self.matcher.accept_token(int(t)):
                raise Error(f"the sampler picked token {int(t)}, which the grammar refuses "
                            f"after {self.matcher.text!r}")
            self.accepted += 1

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        if scores.shape[-1] < self.matcher.vocab_size:
            raise Error(f"logits have {scores.shape[-1]} entries, fewer than the grammar "
                        f"store's vocabulary of {self.matcher.vocab_size}: wrong tokenizer?")
        self._sync(input_ids)
        self.matcher.fill_next_token_bitmask(self.bitmask)
        if self.steer_to_end:
            self._steer()
        # llama-cpp-python hands a strided view of its token-data array; the
        # engine masks contiguous buffers, and the caller takes the result.
        out = scores if scores.flags.c_contiguous and scores.dtype == np.float32 \
            else np.ascontiguousarray(scores, dtype=np.float32)
        _core.apply_token_bitmask_inplace(out, self.bitmask[0])
        self.mask_seconds += time.perf_counter() - t0
        self.calls += 1
        return out


    def _steer(self) -> None:
        if self.matcher.can_end():
            only = self.matcher.stop_token_ids
        else:
            if not self.forced and not self.steer_failed:
                # With a suffix a sampled text can wander where no completion
                # meets it; a smaller budget bounds the search's last resort.
                budget = 20_000 if self.matcher.suffix else 200_000
                completion = self.matcher.find_completion(budget)
                if completion is None:
                    self.steer_failed = True
                else:
                    try:
                        self.forced = self.matcher.tokenize_forced(completion)
                    except Error:
                        self.steer_failed = True
            if not self.forced:
                return  # nothing to steer to: sample under the grammar alone
            only = [self.forced.pop(0)]
        self.bitmask[:] = 0
        for t in only:
            self.bitmask[0, t >> 5] |= np.uint32(1 << (t & 31)).view(np.int32)


def _to_numpy(tensor):
    """A numpy view of a CPU tensor (torch or anything with .numpy()), or the array."""
    if isinstance(tensor, np.ndarray):
        return tensor
    if hasattr(tensor, "detach"):
        tensor = tensor.detach()
    return tensor.numpy()


class HFLogitsProcessor(_HFBase):
    """A transformers LogitsProcessor constraining a batch of sequences.

    Give one matcher per sequence of the batch (``num_return_sequences`` and
    beams included), or a store and a batch size.  Rows whose matcher has
    accepted a stop token are left unmasked (transformers pads them).
    Float32 CPU logits are masked in place by the engine; any other tensor is
    masked with the tensor's own ``masked_fill_``.
    """

    def __init__(self, matchers: Optional[List[GrammarMatcher]] = None,
                 store: Optional[Store] = None, batch_size: int = 1,
                 suffix: Union[str, bytes, Sequence[Union[str, bytes]], None] = None):
        if matchers is None:
            if store is None:
                raise ValueError("give matchers or a store")
            matchers = [GrammarMatcher(store) for _ in range(batch_size)]
        self.matchers = list(matchers)
        # The text after the cursor, one for the batch or one per row.
        if suffix is not None and not isinstance(suffix, (str, bytes)):
            suffix = list(suffix)
            if len(suffix) != len(self.matchers):
                raise ValueError(f"{len(suffix)} suffixes for {len(self.matchers)} sequences")
            for m, s in zip(self.matchers, suffix):
                m.set_suffix(s)
        elif suffix:
            for m in self.matchers:
                m.set_suffix(suffix)
        vocab = max(m.vocab_size for m in self.matchers)
        self.bitmask = allocate_token_bitmask(len(self.matchers), vocab)
        self.batch = BatchGrammarMatcher()
        self.prompt_len: Optional[int] = None

    def __call__(self, input_ids, scores):
        ids = np.asarray(_to_numpy(input_ids))
        need = max(m.vocab_size for m in self.matchers)
        if scores.shape[-1] < need:
            raise Error(f"logits have {scores.shape[-1]} entries, fewer than the grammar "
                        f"store's vocabulary of {need}: wrong tokenizer?")
        if ids.shape[0] != len(self.matchers):
            raise Error(f"{ids.shape[0]} sequences but {len(self.matchers)} matchers")
        if self.prompt_len is None:
            self.prompt_len = ids.shape[1]
        elif ids.shape[1] > self.prompt_len:
            for b, m in enumerate(self.matchers):
                if not m.is_terminated() and not m.accept_token(int(ids[b, -1])):
                    raise Error(f"sequence {b}: the sampler picked token {int(ids[b, -1])}, "
                                f"which the grammar refuses after {m.text!r}")
        live = [b for b, m in enumerate(self.matchers) if not m.is_terminated()]
        if not live:
            return scores
        self.bitmask[:] = -1  # finished rows stay unmasked
        if len(live) == len(self.matchers):
            self.batch.batch_fill_next_token_bitmask(self.matchers, self.bitmask)
        else:
            sub = np.zeros((len(live), self.bitmask.shape[1]), dtype=np.int32)
            self.batch.batch_fill_next_token_bitmask([self.matchers[b] for b in live], sub)
            self.bitmask[live] = sub
        vocab = scores.shape[-1]
        on_cpu = str(getattr(scores, "device", "cpu")) == "cpu"
        arr = _to_numpy(scores) if on_cpu else None
        if arr is not None and arr.dtype == np.float32 and arr.flags.c_contiguous:
            _core.apply_token_bitmask_inplace(arr, self.bitmask)
            return scores
        import torch  # a non-numpy path only exists for real tensors
        bits = np.unpackbits(self.bitmask.view(np.uint8), axis=1, bitorder="little")
        allowed = np.zeros((len(self.matchers), vocab), dtype=bool)
        width = min(vocab, bits.shape[1])
        allowed[:, :width] = bits[:, :width].astype(bool)
        refused = torch.from_numpy(~allowed).to(scores.device)
        return scores.masked_fill_(refused, float("-inf"))
