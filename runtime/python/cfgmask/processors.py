"""Logits processors that put a cfgmask grammar in front of a model's sampler.

- :class:`LlamaCppLogitsProcessor` follows llama-cpp-python's protocol
  (``llama_cpp.LogitsProcessorList``): called with ``(input_ids, scores)``,
  numpy arrays of the whole sequence so far and the next token's logits.
- :class:`HFLogitsProcessor` follows Hugging Face transformers'
  ``LogitsProcessor``: called with ``(input_ids, scores)`` tensors of shape
  (batch, length) and (batch, vocab).

Both keep one :class:`~cfgmask.GrammarMatcher` per sequence.  The first call
marks where the prompt ends; every later call first accepts the tokens the
sampler added since, then masks the logits of the next step, in one engine
call (``Session.step`` / ``BatchMatcher.step``: accept, fill, mask in place,
without the GIL), so that a call costs little more than the engine's own
work.  Logits are masked where they lie, strided or not: a numpy array as
llama-cpp-python hands it, a CPU torch tensor by its address and strides
(float32, float16, bfloat16), anything else with ``numpy()`` through that view.
Neither package is imported here unless a tensor needs it.
"""
from __future__ import annotations

import ctypes
import inspect
import sys as _sys
import time
from typing import List, Optional, Sequence, Union

import numpy as np

from . import (BatchGrammarMatcher, Error, GrammarMatcher, Store, allocate_token_bitmask,
               check_logits_width)
from . import _core

try:  # subclass transformers' base class where it is importable (it needs torch)
    from transformers import LogitsProcessor as _HFBase  # type: ignore
except Exception:  # noqa: BLE001 - any import failure means "not available"
    _HFBase = object


class _Steering:
    """Where one sequence is being steered to its end: the tokens of the
    shortest completion still to come (searched once, then followed), or
    the fact that none was found."""

    __slots__ = ("forced", "failed")

    def __init__(self, forced=None, failed=False):
        self.forced: List[int] = list(forced or ())  # reversed: popped from the end
        self.failed = failed

    def copy(self) -> "_Steering":
        return _Steering(self.forced, self.failed)

    def next_tokens(self, matcher: GrammarMatcher) -> List[int]:
        """The only tokens allowed at this step, or [] to mask by the grammar alone."""
        if matcher.can_end():
            return matcher.stop_token_ids
        if not self.forced and not self.failed:
            # With a suffix a sampled text can wander where no completion
            # meets it; a smaller budget bounds the search's last resort.
            budget = 20_000 if matcher.suffix else 200_000
            completion = matcher.find_completion(budget, shortest=False)
            if completion is None:
                self.failed = True
            else:
                try:
                    self.forced = matcher.tokenize_forced(completion)[::-1]
                except Error:
                    self.failed = True
        if not self.forced:
            return _NO_TOKENS  # nothing to steer to: sample under the grammar alone
        return [self.forced.pop()]


class LlamaCppLogitsProcessor:
    """A llama-cpp-python logits processor constraining one sequence.

    Tokens past the store's vocabulary (a model padded beyond its tokenizer)
    are always refused; logits of any other width raise Error
    (:func:`cfgmask.check_logits_width` states the rule).  With
    ``steer_to_end`` set (e.g. when a token budget is reached) the text is
    driven to its end: the stop tokens whenever the
    grammar allows one, otherwise the tokens of a shortest completion
    (GrammarMatcher.find_completion with shortest=False, searched once and
    then followed one token per step; with a suffix, where the shortest one
    is not found within the budget, a completion of whole terminals).

    The scores are masked in place (llama-cpp-python's strided view of its
    token-data array included) and returned; scores of another dtype than
    float32 or float16 are masked in a float32 copy, which is returned.

    llama-cpp-python hands a logits processor the logit field of its
    (id, logit, p) records, 12 bytes apart: refusing a scattered part of the
    vocabulary there touches three times the memory of a float32 row.
    :meth:`attach` masks llama.cpp's own contiguous logits row instead, just
    before the sampler copies it into those records (give the processor to
    ``attach`` instead of ``logits_processor``).
    """

    def __init__(self, matcher: GrammarMatcher, suffix: Union[str, bytes, None] = None):
        self.matcher = matcher
        if suffix:  # the text after the cursor: the completion must fit it
            matcher.set_suffix(suffix)
        self.bitmask = allocate_token_bitmask(1, matcher.vocab_size)
        self._step = matcher._session.step
        self.prompt_len: Optional[int] = None
        self.accepted = 0
        self.steer_to_end = False
        self._steering = _Steering()
        self.mask_seconds = 0.0  # time spent accepting tokens and filling masks
        self.calls = 0
        self._width = -1  # the logits width last checked

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
        new = input_ids[self.prompt_len + self.accepted:]
        if not isinstance(new, np.ndarray):
            new = np.asarray(new, dtype=np.int64)
        out = scores
        if not (isinstance(scores, np.ndarray) and scores.dtype in _MASKABLE):
            out = np.ascontiguousarray(scores, dtype=np.float32)
        if out.shape[-1] != self._width:
            check_logits_width(out.shape[-1], self.matcher.vocab_size)
            self._width = out.shape[-1]
        only = _NO_TOKENS
        if self.steer_to_end:
            self._accept(new)
            new = _NO_IDS
            only = self._steering.next_tokens(self.matcher)
        refused = self._step(new, out, self.bitmask, only)
        if refused >= 0:
            self._refused(int(new[refused]), new[:refused])
        self.accepted += len(new)
        self.mask_seconds += time.perf_counter() - t0
        self.calls += 1
        return out

    def attach(self, llm) -> "LlamaCppLogitsProcessor":
        """Constrains every token ``llm`` (a ``llama_cpp.Llama``) samples
        from now on by masking the context's own logits row (contiguous
        float32, ``llama_get_logits_ith``) right before ``Llama.sample``
        builds its token-data records from it: ``generate``,
        ``create_completion`` and ``__call__`` all sample through it.  The
        processor is then not given as a ``logits_processor`` (other
        processors there see the masked logits).  Wraps ``llm.sample`` on
        this instance only; :meth:`detach` restores it.  Returns self.

        The wrapper is the engine's own callable (``_core._LlamaSampleHook``):
        between the model's forward pass and the sampler one call reads the
        new ids from ``llm.input_ids``, accepts them, fills the mask and
        masks the row, with no Python code in between (after a forward pass
        every line of Python runs from cold caches).  While
        ``steer_to_end`` is set, and for subclasses, the call goes through
        ``__call__`` instead."""
        import llama_cpp  # only where a model is attached
        if "sample" in vars(llm):
            raise Error("this Llama already has a processor attached (detach it first)")
        real = llm.sample
        names = list(inspect.signature(real).parameters)
        idx_at = names.index("idx") if "idx" in names else None
        n_vocab = llm.n_vocab()
        check_logits_width(n_vocab, self.matcher.vocab_size)
        get_logits = llama_cpp.llama_get_logits_ith
        addressof, row_type = ctypes.addressof, ctypes.c_float * n_vocab
        rows = {}  # the row's address -> a numpy view of it (np.ctypeslib.as_array
        #            costs tens of µs a call)

        def sample(*args, **kwargs):
            idx = kwargs.get("idx")
            if idx is None and idx_at is not None and len(args) > idx_at:
                idx = args[idx_at]
            # Llama.sample's own choice of row: the last one, or idx's.
            ridx = -1 if idx is None else idx - llm.n_tokens
            pointer = get_logits(llm._ctx.ctx, ridx)
            if not pointer:
                raise Error(f"llama.cpp has no logits for row {ridx}")
            at = addressof(pointer.contents)
            row = rows.get(at)
            if row is None:
                if len(rows) > 64:
                    rows.clear()
                row = rows[at] = np.frombuffer(row_type.from_address(at), dtype=np.float32)
            self(llm._input_ids, row)
            return real(*args, **kwargs)

        hook = sample
        ctx = llm._ctx.ctx
        if type(self) is LlamaCppLogitsProcessor and ctx is not None:
            hook = _core._LlamaSampleHook(
                self, self.matcher._session, self.bitmask, llm, real, sample,
                ctypes.cast(get_logits, ctypes.c_void_p).value, ctx,
                ctypes.cast(ctx, ctypes.c_void_p).value, n_vocab,
                -1 if idx_at is None else idx_at).function()
        llm.sample = hook
        self._attached = llm
        return self

    def detach(self) -> None:
        """Undoes :meth:`attach`."""
        llm = getattr(self, "_attached", None)
        if llm is not None:
            vars(llm).pop("sample", None)
            self._attached = None

    def _accept(self, new) -> None:
        for t in new:
            if not self.matcher.accept_token(int(t)):
                self._refused(int(t), ())
            self.accepted += 1

    def _refused(self, token: int, before) -> None:
        text = self.matcher.text + "".join(
            self.matcher.store.token_bytes(int(t)).decode("utf-8", "replace") for t in before)
        raise Error(f"the sampler picked token {token}, which the grammar refuses after {text!r}")

    @property
    def steer_failed(self) -> bool:
        """True once steering searched for a completion and found none."""
        return self._steering.failed


_MASKABLE = (np.dtype(np.float32), np.dtype(np.float16))

try:  # the CUDA masking kernel, where the package was built with it (docs/gpu.md)
    from . import _cuda as _CUDA  # type: ignore
except ImportError:
    _CUDA = None
# LogitsDType's codes (runtime/mask_kernels.h), by torch dtype name.
_KERNEL_DTYPES = {"torch.float32": 0, "torch.float16": 1, "torch.bfloat16": 2}
_NO_IDS = np.zeros(0, dtype=np.int64)
_NO_TOKENS: List[int] = []


def _to_numpy(tensor):
    """A numpy view of a CPU tensor (torch or anything with .numpy()), a CPU
    copy of a tensor on another device, or the array itself."""
    if isinstance(tensor, np.ndarray):
        return tensor
    try:  # the common case, a CPU tensor that needs no grad: one call
        return tensor.numpy()
    except (RuntimeError, TypeError):
        pass
    if hasattr(tensor, "detach"):
        tensor = tensor.detach()
    device = getattr(tensor, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        tensor = tensor.cpu()
    return tensor.numpy()


class HFLogitsProcessor(_HFBase):
    """A transformers LogitsProcessor constraining a batch of sequences.

    Give one matcher per row of the batch (``num_return_sequences`` and
    beams included), or a store (and optionally a batch size; by default the
    first call's number of rows).  Rows whose matcher has accepted a stop
    token are left unmasked (transformers pads them).

    Beam search reorders rows between steps: each call finds, for every row,
    the row of the previous call that its ids extend (the same row when it
    still matches) and forks that row's matcher, so that matchers follow the
    beams.  Ids that extend no row of the previous call are an error (a new
    generation needs a new processor).

    With ``steer_after=n``, once n tokens have been generated each row is
    driven to its end as LlamaCppLogitsProcessor's ``steer_to_end`` does (the
    stop tokens where the grammar allows one, else the tokens of a shortest
    completion): give ``max_new_tokens`` some room past n for it, and
    ``eos_token_id=list(store.eos_ids)`` so that generate() stops a row on
    the stop tokens the grammar allows.

    A beam search never hands back a refused token: every running beam has
    an allowed token (the grammar has no dead ends), so at least num_beams
    of the 2 * num_beams candidates are finite, and transformers keeps a
    candidate that ends its beam at a score lowered by 1e9, above -inf.

    CPU logits (float32, float16, bfloat16) are masked in place by the
    engine, through the tensor's own memory.  Logits on a GPU are masked
    there: the engine fills the bitmask on the CPU (into pinned memory), its
    int32 words are copied to the device asynchronously, and cfgmask's CUDA
    kernel masks the logits in place (``cfgmask._cuda``, where the package
    was built with it), else the bits are expanded into the tensor's
    ``masked_fill_`` by torch operations (tests/gpu/test_hf_device.py;
    docs/gpu.md has the per-step costs of both).
    """

    def __init__(self, matchers: Optional[List[GrammarMatcher]] = None,
                 store: Optional[Store] = None, batch_size: Optional[int] = None,
                 suffix: Union[str, bytes, Sequence[Union[str, bytes]], None] = None,
                 steer_after: Optional[int] = None):
        self.steer_after = steer_after
        if matchers is None:
            if store is None:
                raise ValueError("give matchers or a store")
            self.store = store
            self.matchers: List[GrammarMatcher] = []
            if batch_size is not None:
                self._open(batch_size)
        else:
            self.store = None
            self.matchers = list(matchers)
        self.suffix = suffix
        if suffix is not None and not isinstance(suffix, (str, bytes)):
            self.suffix = list(suffix)
            if self.matchers and len(self.suffix) != len(self.matchers):
                raise ValueError(f"{len(self.suffix)} suffixes for {len(self.matchers)} sequences")
        if self.matchers:
            self._set_suffixes()
        self.batch = BatchGrammarMatcher()
        # The ids of the calls so far, one row per sequence, in a buffer of the
        # processor's own that grows by doubling: each call compares its rows'
        # first `_known` ids with it and appends only the new columns.
        self._hist: Optional[np.ndarray] = None
        self._known = 0  # columns of _hist the engine has accepted (the last call's ids)
        self._width = -1  # the logits width last checked (check_logits_width)
        self.reorders = 0  # calls that found rows moved (beam search)
        self._kind = None  # the dtype of the scores the masking path was chosen for
        self._raw = None  # see _classify
        self._host_words = None  # device path: the bitmask as a (pinned) tensor
        self._shifts = None  # device path: 0..31 on the logits' device
        self._copied = None  # device path: event of the last bitmask copy
        # Device path: cfgmask._cuda's kernel where it is built, else torch ops.
        self.use_cuda_kernel = _CUDA is not None
        self._sync_matchers()

    @property
    def steer_failed(self) -> List[bool]:
        """Per row: True once steering searched for a completion and found none."""
        return [st.failed for st in self._steering]

    def _open(self, batch_size: int) -> None:
        self.matchers = [GrammarMatcher(self.store) for _ in range(batch_size)]

    def _set_suffixes(self) -> None:
        if isinstance(self.suffix, list):
            if len(self.suffix) != len(self.matchers):
                raise ValueError(f"{len(self.suffix)} suffixes for {len(self.matchers)} sequences")
            for m, s in zip(self.matchers, self.suffix):
                m.set_suffix(s)
        elif self.suffix:
            for m in self.matchers:
                m.set_suffix(self.suffix)

    def _sync_matchers(self, steering=None) -> None:
        self._sessions = [m._session for m in self.matchers]
        self._width = -1  # new matchers: the logits width is checked again
        self._steering = steering or [_Steering() for _ in self.matchers]
        for m in self.matchers:
            self.batch._stores.setdefault(id(m.store), m.store)
        if self.matchers:
            vocab = max(m.vocab_size for m in self.matchers)
            if self._copied is not None:
                self._wait_for_copy()
            self.bitmask = allocate_token_bitmask(len(self.matchers), vocab)
            self._host_words = None

    def __call__(self, input_ids, scores):
        torch = _sys.modules.get("torch")
        if torch is not None and type(input_ids) is torch.Tensor and \
                input_ids.dtype is torch.int64 and input_ids.is_cpu and input_ids.dim() == 2 and \
                input_ids.layout is torch.strided:
            # Read where it lies (no numpy view: the engine copies what it needs).
            src, tensor = input_ids, True
            rows, cols = input_ids.shape
            s0, s1 = input_ids.stride()
            ptr = input_ids.data_ptr()
        else:
            src = input_ids if isinstance(input_ids, np.ndarray) else _to_numpy(input_ids)
            tensor = False
            if src.ndim != 2:
                raise Error(f"input_ids must be (batch, length), got shape {tuple(src.shape)}")
            if src.dtype != np.int64 and src.dtype != np.int32:
                fmt = src.dtype.str if src.dtype.byteorder == ">" else src.dtype.char
                raise TypeError(f"token ids must be an int32 or int64 array, got format '{fmt}'")
            src = np.ascontiguousarray(src, dtype=np.int64)
            rows, cols = src.shape
            s0, s1 = cols, 1
            ptr = src.ctypes.data
        if not self.matchers and self.store is not None:
            self._open(rows)
            self._set_suffixes()
            self._sync_matchers()
        if rows != len(self.matchers):
            raise Error(f"{rows} sequences but {len(self.matchers)} matchers")
        hist = self._hist
        first = hist is None
        if first:
            known = cols  # the prompt: nothing to accept
            hist = np.empty((rows, max(2 * cols, 256)), dtype=np.int64)
            _core._hf_track_ids(ptr, rows, cols, s0, s1, hist, 0)
        else:
            known = self._known
            if cols < known:
                raise Error(f"input_ids have {cols} columns, fewer than the "
                            f"previous call's {known}: a new generation needs a new processor")
            if cols > hist.shape[1]:
                grown = np.empty((rows, max(2 * hist.shape[1], cols)), dtype=np.int64)
                grown[:, :known] = hist[:, :known]
                hist = grown
        moved = None
        if not first and _core._hf_track_ids(ptr, rows, cols, s0, s1, hist, known) >= 0:
            # A row's ids differ from its previous ones: beam search moved rows.
            moved = src.numpy() if tensor else src
            self._follow_beams(moved[:, :known], hist[:, :known])
            new = moved[:, known:]
        else:
            new = hist[:, known:cols]
        width = int(scores.shape[-1])
        if width != self._width:
            for m in self.matchers:
                check_logits_width(width, m.vocab_size)
            self._width = width
        if self._kind is None or getattr(scores, "dtype", None) is not self._kind:
            self._classify(scores)
        arr = None
        if self._raw is not None and type(scores) is torch.Tensor and scores.is_cpu and \
                scores.dim() == 2 and scores.layout is torch.strided:
            # The tensor's own memory, by address (a numpy view costs more than the rest).
            arr = (scores.data_ptr(), *scores.shape, *scores.stride(), self._raw)
        elif self._on_cpu:
            arr = scores if isinstance(scores, np.ndarray) else \
                (scores.view(self._int16).numpy() if self._bf16 else _to_numpy(scores))
        if self._copied is not None:
            self._wait_for_copy()
        step = self.batch._batch.step
        only = None
        if first:
            self._prompt_cols = cols
        if self.steer_after is not None and cols - self._prompt_cols >= self.steer_after:
            self._check(step(self._sessions, new, self.bitmask, None), new)
            new = new[:, :0]
            only = [_NO_TOKENS if m.is_terminated() else st.next_tokens(m)
                    for m, st in zip(self.matchers, self._steering)]
        self._check(step(self._sessions, new, self.bitmask, arr, self._bf16, only), new)
        if moved is not None:
            hist[:, :cols] = moved
        self._hist, self._known = hist, cols
        if not self._on_cpu:
            self._mask_on_device(scores)
        return scores

    def _check(self, refused: int, new: np.ndarray) -> None:
        if refused >= 0:
            b, i = divmod(refused, new.shape[1])
            m = self.matchers[b]
            raise Error(f"sequence {b}: the sampler picked token {int(new[b, i])}, which the "
                        f"grammar refuses after {m.text!r}")

    def _classify(self, scores) -> None:
        """Picks, once per dtype and device, how the logits are masked."""
        self._kind = getattr(scores, "dtype", None)
        self._on_cpu = str(getattr(scores, "device", "cpu")) == "cpu"
        self._bf16 = False
        self._raw = None  # the LogitsDType code where a CPU tensor is masked by address
        if isinstance(scores, np.ndarray):
            if scores.dtype not in _MASKABLE:
                raise Error(f"logits must be float32 or float16, got {scores.dtype}")
            return
        if not self._on_cpu:
            return
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(scores, torch.Tensor):
            if scores.dtype == torch.bfloat16:
                self._bf16, self._int16 = True, torch.int16
            elif scores.dtype not in (torch.float32, torch.float16):
                self._on_cpu = False  # masked by the tensor's own masked_fill_
            if self._on_cpu:
                self._raw = _KERNEL_DTYPES[str(scores.dtype)]

    def _follow_beams(self, prefix: np.ndarray, prev: np.ndarray) -> None:
        """Reorders the matchers after beam search moved rows: row b's
        matcher becomes a fork of the matcher of the previous row (of `prev`,
        the previous call's ids) its ids extend (itself when it still
        matches)."""
        first = {}
        for p in range(prev.shape[0]):
            first.setdefault(prev[p].tobytes(), p)
        moved = []
        for b in range(prefix.shape[0]):
            key = prefix[b].tobytes()
            p = b if prev[b].tobytes() == key else first.get(key)
            if p is None:
                raise Error(f"sequence {b}: input_ids extend no sequence of the previous call "
                            "(a new generation needs a new processor)")
            moved.append(p)
        self.reorders += 1
        self.matchers = [self.matchers[p].fork() for p in moved]
        self._sync_matchers([self._steering[p].copy() for p in moved])

    def _mask_on_device(self, scores) -> None:
        """Masks logits that live on a GPU (or any other device) from the
        engine's bitmask: only the B x ceil(V / 32) int32 words cross the bus
        (B x V / 8 bytes, against B x V for a boolean mask), from pinned
        memory that the engine fills directly, and the bits are expanded on
        the device.  The copy is asynchronous; the next call waits for it
        before the engine writes the buffer again."""
        import torch  # a non-numpy path only exists for real tensors
        batch, vocab = scores.shape[0], scores.shape[-1]
        dev = scores.device
        if self._host_words is None:
            # The engine writes this step's bitmask into pinned memory from now on.
            pinned = torch.from_numpy(self.bitmask).pin_memory() if dev.type == "cuda" \
                else torch.from_numpy(self.bitmask)
            self._host_words = pinned
            self.bitmask = pinned.numpy()
        if self._shifts is None or self._shifts.device != dev:
            self._shifts = torch.arange(32, dtype=torch.int32, device=dev)
        words = self._host_words.to(dev, non_blocking=True)
        if dev.type == "cuda":
            self._copied = torch.cuda.Event()
            self._copied.record()
            code = _KERNEL_DTYPES.get(str(scores.dtype))
            if self.use_cuda_kernel and code is not None and scores.is_contiguous() and \
                    scores.dim() == 2:
                # One kernel on the current stream, after the copy queued on it.
                _CUDA.apply_token_bitmask_inplace(
                    scores.data_ptr(), code, batch, vocab, words.data_ptr(), words.shape[1],
                    torch.cuda.current_stream(dev).cuda_stream, dev.index or 0)
                return
        refused = ((words.unsqueeze(-1) >> self._shifts) & 1).view(batch, -1) == 0
        width = refused.shape[1]
        if width >= vocab:
            scores.masked_fill_(refused[:, :vocab], float("-inf"))
        else:  # logits padded past the tokenizer's vocabulary: the padding is refused
            scores[:, :width].masked_fill_(refused, float("-inf"))
            scores[:, width:] = float("-inf")

    def _wait_for_copy(self) -> None:
        """The previous call's bitmask copy to the device has finished, so the
        engine may overwrite the pinned buffer."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None
