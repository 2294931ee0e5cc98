"""Tests of cfgmask.processors with fixed logits sources instead of models:
the llama-cpp-python protocol (input_ids + scores numpy arrays, strided
scores as llama-cpp-python hands them) and the Hugging Face protocol
(batched tensors; a minimal tensor stand-in, since torch is not installed in
CI).  Greedy decoding of random logits under the processor must give
JSON that json.loads accepts, and steering must end a text at the budget.
With a suffix (completion in the middle of a document), prefix + generated
middle + suffix must be JSON.
"""
import json
import os

import numpy as np
import pytest

import cfgmask
from cfgmask.processors import HFLogitsProcessor, LlamaCppLogitsProcessor

from test_package import JSON_GRAMMAR, TOK


@pytest.fixture(scope="module")
def store():
    return cfgmask.compile_grammar(JSON_GRAMMAR, TOK)


def strided(scores):
    """scores as a view with a 12-byte stride, like llama-cpp-python's token-data array."""
    rec = np.zeros(scores.shape[0], dtype=[("id", np.intc), ("logit", np.single), ("p", np.single)])
    rec["logit"] = scores
    return rec["logit"]


def run_llama_protocol(store, max_tokens, steer, seed, matcher=None, suffix=None):
    rng = np.random.default_rng(seed)
    proc = LlamaCppLogitsProcessor(matcher or cfgmask.GrammarMatcher(store), suffix=suffix)
    prompt = [1, 415, 2245]
    ids = list(prompt)
    eos = set(store.eos_ids)
    for step in range(max_tokens + 64):
        scores = rng.standard_normal(store.vocab_size).astype(np.float32)
        scores[list(eos)] -= 3.0  # a model that rather goes on
        view = strided(scores) if step % 2 else scores
        out = proc(np.array(ids, dtype=np.intc), view)
        tok = int(np.argmax(out))
        assert np.isfinite(out[tok])
        if tok in eos:
            return proc, ids[len(prompt):], True
        ids.append(tok)
        if steer and step + 1 >= max_tokens:
            proc.steer_to_end = True
    return proc, ids[len(prompt):], False


def text_of(store, toks):
    return b"".join(store.token_bytes(t) for t in toks).decode("utf-8")


def test_llama_cpp_protocol_gives_valid_json(store):
    ended = 0
    for seed in range(4):
        proc, toks, done = run_llama_protocol(store, max_tokens=200, steer=True, seed=seed)
        assert done, "steering must end the text"
        ended += 1
        json.loads(text_of(store, toks))
        assert proc.calls == len(toks) + 1
    assert ended == 4


def test_llama_cpp_steering_ends_early(store):
    proc, toks, done = run_llama_protocol(store, max_tokens=8, steer=True, seed=7)
    assert done and proc.steer_to_end
    json.loads(text_of(store, toks))
    assert len(toks) < 8 + 64


def test_llama_cpp_refused_token_raises(store):
    proc = LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store))
    scores = np.zeros(store.vocab_size, np.float32)
    proc(np.array([1], np.intc), scores)
    bad = [t for t in range(store.vocab_size) if store.token_bytes(t) == b"]"][0]
    with pytest.raises(cfgmask.Error, match="refuses"):
        proc(np.array([1, bad], np.intc), scores)


@pytest.mark.parametrize("prefix,suffix", [('{"a": [', '], "b": {"c": null}}'),
                                           ('[{"k": ', '}, 2]'), ('{"x": "ab', 'c"}'),
                                           ('[1, ', ']')])
def test_llama_cpp_suffix_fits_the_document(store, prefix, suffix):
    # Random logits can close what the suffix closes (`[1, "a"]` before a
    # suffix `]`): no completion meets the suffix then, and the text does not
    # end.  Every text that ends fits the suffix.
    ended = 0
    for seed in range(4):
        m = cfgmask.GrammarMatcher(store)
        assert m.accept_string(prefix)
        proc, toks, done = run_llama_protocol(store, max_tokens=12, steer=True, seed=seed,
                                              matcher=m, suffix=suffix)
        assert proc.matcher.suffix == suffix.encode()
        if done:
            ended += 1
            json.loads(prefix + text_of(store, toks) + suffix)
        else:
            assert proc.steer_failed
    assert ended >= 1


class FakeTensor:
    """What HFLogitsProcessor needs of a CPU torch tensor: shape, device, detach(), numpy()."""

    def __init__(self, array):
        self.array = array
        self.shape = array.shape
        self.device = "cpu"

    def detach(self):
        return self

    def numpy(self):
        return self.array


def run_hf_greedy(store, proc, ids, rng, steps, bias):
    """Greedy decoding of random logits (plus bias(step, scores)) through the
    processor, rows padded after EOS as transformers does; the texts."""
    batch = ids.shape[0]
    done = [False] * batch
    out = [[] for _ in range(batch)]
    eos = store.eos_ids[0]
    for step in range(steps):
        scores = rng.standard_normal((batch, store.vocab_size)).astype(np.float32)
        bias(step, scores)
        res = proc(FakeTensor(ids), FakeTensor(scores))
        assert res.array is scores  # masked in place
        nxt = np.argmax(scores, axis=1)
        for b in range(batch):
            if done[b]:
                nxt[b] = 0  # padding, as transformers does after EOS
            elif nxt[b] == eos:
                done[b] = True
            else:
                out[b].append(int(nxt[b]))
        ids = np.concatenate([ids, nxt[:, None]], axis=1)
        if all(done):
            break
    assert all(done)
    return [text_of(store, toks) for toks in out]


def test_hf_protocol_batch(store):
    batch = 3
    proc = HFLogitsProcessor(store=store, batch_size=batch)
    ids = np.tile(np.array([[1, 415, 2245]], dtype=np.int64), (batch, 1))
    eos = store.eos_ids[0]
    closers = [t for t in range(store.vocab_size) if store.token_bytes(t) in (b'"', b"]", b"}", b"1")]

    def bias(step, scores):
        scores[:, closers] += 3.0  # a model that likes to close what it opened
        scores[:, eos] += 1.0 + step / 20  # and is more and more willing to stop
    texts = run_hf_greedy(store, proc, ids, np.random.default_rng(3), 600, bias)
    for b in range(batch):
        json.loads(texts[b])
        assert proc.matchers[b].is_terminated() or proc.matchers[b].can_end()


def test_hf_wrong_batch_size(store):
    proc = HFLogitsProcessor(store=store, batch_size=2)
    with pytest.raises(cfgmask.Error, match="3 sequences but 2 matchers"):
        proc(FakeTensor(np.zeros((3, 4), np.int64)),
             FakeTensor(np.zeros((3, store.vocab_size), np.float32)))


def test_hf_suffix_per_row(store):
    rows = [('{"a": [', '], "b": 1}'), ('[', ']'), ('{"s": "x', '"}')]
    matchers = []
    for prefix, _ in rows:
        m = cfgmask.GrammarMatcher(store)
        assert m.accept_string(prefix)
        matchers.append(m)
    proc = HFLogitsProcessor(matchers=matchers, suffix=[s for _, s in rows])
    eos = store.eos_ids[0]

    def bias(step, scores):
        scores[:, eos] += step / 10  # more and more willing to stop
    texts = run_hf_greedy(store, proc, np.ones((len(rows), 2), dtype=np.int64),
                          np.random.default_rng(5), 400, bias)
    for (prefix, suffix), middle in zip(rows, texts):
        json.loads(prefix + middle + suffix)
    with pytest.raises(ValueError, match="2 suffixes for 3 sequences"):
        HFLogitsProcessor(matchers=matchers, suffix=["]", "]"])


def test_llama_cpp_refusal_leaves_the_matcher_unchanged(store):
    proc = LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store))
    scores = np.zeros(store.vocab_size, np.float32)  # copied: each call masks its own
    proc(np.array([1], np.intc), scores.copy())
    tok = {store.token_bytes(t): t for t in range(store.vocab_size)}
    ok1, ok2, bad = tok[b"["], tok[b"1"], tok[b"}"]
    with pytest.raises(cfgmask.Error, match=f"token {bad}, which the grammar refuses after '\\[1'"):
        proc(np.array([1, ok1, ok2, bad], np.intc), scores.copy())
    assert proc.matcher.text == ""  # the call's two good tokens were rolled back too
    out = proc(np.array([1, ok1, ok2], np.intc), scores.copy())
    assert proc.matcher.text == "[1"
    assert np.isfinite(out[tok[b"]"]]) and np.isneginf(out[tok[b"["]])


def test_llama_cpp_masks_the_strided_view_in_place(store):
    proc = LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store))
    rng = np.random.default_rng(1)
    raw = rng.standard_normal(store.vocab_size).astype(np.float32)
    view = strided(raw)
    out = proc(np.array([1], np.intc), view)
    assert out is view  # no copy: llama-cpp-python's own buffer
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    cfgmask.GrammarMatcher(store).fill_next_token_bitmask(bitmask)
    allowed = np.zeros(store.vocab_size, bool)
    allowed[cfgmask.allowed_token_ids(bitmask[0], store.vocab_size)] = True
    assert (np.isneginf(view) == ~allowed).all()
    assert (view[allowed] == raw[allowed]).all()
    # float64 scores are masked in a float32 copy, which is returned
    out = proc(np.array([1], np.intc), raw.astype(np.float64))
    assert out.dtype == np.float32 and (np.isneginf(out) == ~allowed).all()


def test_hf_matchers_follow_reordered_rows(store):
    """Beam search moves rows between calls: each row's matcher must be the
    one of the sequence its ids extend (forked where two rows share one)."""
    tok = {store.token_bytes(t): t for t in range(store.vocab_size)}
    proc = HFLogitsProcessor(store=store)  # batch size from the first call
    V = store.vocab_size
    prompt = np.array([[7, 8], [7, 9], [7, 10]], dtype=np.int64)
    proc(FakeTensor(prompt), FakeTensor(np.zeros((3, V), np.float32)))
    step1 = np.concatenate([prompt, [[tok[b"["]], [tok[b"{"]], [tok[b'"']]]], axis=1)
    proc(FakeTensor(step1), FakeTensor(np.zeros((3, V), np.float32)))
    assert [m.text for m in proc.matchers] == ["[", "{", '"']
    # rows 0 and 2 now both extend old row 1, row 1 extends old row 0
    step2 = np.stack([np.append(step1[1], tok[b'"']), np.append(step1[0], tok[b"1"]),
                      np.append(step1[1], tok[b"}"])])
    scores = np.zeros((3, V), np.float32)
    proc(FakeTensor(step2), FakeTensor(scores))
    assert [m.text for m in proc.matchers] == ['{"', "[1", "{}"]
    assert proc.reorders == 1
    assert np.isneginf(scores[2, tok[b"1"]]) and np.isfinite(scores[2, store.eos_ids[0]])
    assert np.isfinite(scores[1, tok[b"]"]]) and np.isneginf(scores[1, tok[b"a"]])
    assert np.isfinite(scores[0, tok[b"a"]])  # inside a string
    stray = np.concatenate([step2[:, :1] + 1, step2[:, 1:], step2[:, :1]], axis=1)
    with pytest.raises(cfgmask.Error, match="extend no sequence of the previous call"):
        proc(FakeTensor(stray), FakeTensor(np.zeros((3, V), np.float32)))


def test_hf_refusal_leaves_every_row_unchanged(store):
    tok = {store.token_bytes(t): t for t in range(store.vocab_size)}
    proc = HFLogitsProcessor(store=store, batch_size=2)
    V = store.vocab_size
    ids = np.ones((2, 1), np.int64)
    proc(FakeTensor(ids), FakeTensor(np.zeros((2, V), np.float32)))
    bad = np.concatenate([ids, [[tok[b"["]], [tok[b"]"]]]], axis=1)
    with pytest.raises(cfgmask.Error, match="sequence 1: the sampler picked token"):
        proc(FakeTensor(bad), FakeTensor(np.zeros((2, V), np.float32)))
    assert [m.text for m in proc.matchers] == ["", ""]  # row 0's token rolled back


def hf_inputs(kind, ids, V):
    """(input_ids, scores) as the HF protocol hands them: the tensor stand-in,
    or real CPU torch tensors (ids contiguous, or every other column of a
    wider tensor: strided rows)."""
    scores = np.zeros((ids.shape[0], V), np.float32)
    if kind == "fake":
        return FakeTensor(ids), FakeTensor(scores)
    torch = pytest.importorskip("torch")
    if kind == "torch":
        return torch.from_numpy(ids.copy()), torch.from_numpy(scores)
    wide = torch.zeros((ids.shape[0], 2 * ids.shape[1]), dtype=torch.int64)
    wide[:, ::2] = torch.from_numpy(ids)
    return wide[:, ::2], torch.from_numpy(scores)


def long_rows(tok, n):
    """Two JSON arrays of n elements, "[1,1,...," and the same with a 2 in the
    middle: their last ids agree, their histories do not."""
    a = [tok[b"["]] + [tok[b"1"], tok[b","]] * n
    b = list(a)
    b[1 + 2 * (n // 2)] = tok[b"2"]  # an element's "1"
    assert a[-4:] == b[-4:] and a != b
    return np.array([[5] + a, [5] + b], dtype=np.int64)


@pytest.mark.parametrize("kind", ["fake", "torch", "torch-strided"])
def test_hf_beam_swap_with_equal_last_ids(store, kind):
    """Beam search swaps two rows whose last ids agree but whose histories
    differ in the middle (past the history buffer's first size): the
    matchers must swap too."""
    tok = {store.token_bytes(t): t for t in range(store.vocab_size)}
    V = store.vocab_size
    proc = HFLogitsProcessor(store=store)
    rows = long_rows(tok, 300)
    proc(*hf_inputs(kind, rows[:, :1], V))  # the prompt
    proc(*hf_inputs(kind, rows, V))  # 600 ids at once
    texts = [m.text for m in proc.matchers]
    assert texts[0] != texts[1] and texts[0][-4:] == texts[1][-4:]
    for step in range(3):  # ordinary steps, then the swap, then one more
        if step == 1:
            rows = rows[::-1].copy()
            texts = texts[::-1]
        more = tok[b"1"] if rows[0, -1] == tok[b","] else tok[b","]
        rows = np.concatenate([rows, [[more], [more]]], axis=1)
        ids, scores = hf_inputs(kind, rows, V)
        proc(ids, scores)
        texts = [t + store.token_bytes(more).decode() for t in texts]
        assert [m.text for m in proc.matchers] == texts
    assert proc.reorders == 1


@pytest.mark.parametrize("kind", ["fake", "torch", "torch-strided"])
def test_hf_history_edited_raises(store, kind):
    """A history edited in the middle extends no row of the previous call:
    the same error as any stray ids, every matcher left as it was, and the
    true ids still accepted after it."""
    tok = {store.token_bytes(t): t for t in range(store.vocab_size)}
    V = store.vocab_size
    proc = HFLogitsProcessor(store=store)
    rows = long_rows(tok, 300)
    proc(*hf_inputs(kind, rows[:, :1], V))
    proc(*hf_inputs(kind, rows, V))
    texts = [m.text for m in proc.matchers]
    nxt = np.concatenate([rows, [[tok[b"1"]], [tok[b"1"]]]], axis=1)
    edited = nxt.copy()
    edited[1, 301] = tok[b"3"]  # the middle of row 1's history, row 0 untouched
    with pytest.raises(cfgmask.Error, match="sequence 1: input_ids extend no sequence of the "
                                            "previous call"):
        proc(*hf_inputs(kind, edited, V))
    assert [m.text for m in proc.matchers] == texts and proc.reorders == 0
    proc(*hf_inputs(kind, nxt, V))
    assert [m.text for m in proc.matchers] == [t + "1" for t in texts]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_hf_cpu_tensor_masked_by_address(store, dtype):
    """A CPU torch tensor is masked through its address and strides: here
    every other column of a wider tensor, padded past the vocabulary.  Each
    row as a matcher fed the same ids decides, the padding refused, the kept
    logits and the columns between untouched."""
    torch = pytest.importorskip("torch")
    tok = {store.token_bytes(t): t for t in range(store.vocab_size)}
    V = store.vocab_size
    proc = HFLogitsProcessor(store=store)
    ids = np.array([[1, tok[b"["]], [1, tok[b"{"]]], dtype=np.int64)
    rng = np.random.default_rng(2)
    width = (V // 64 + 1) * 64  # a model's padding
    for cols in (1, 2):  # the prompt, then one id per row
        ref = rng.standard_normal((2, 2 * width)).astype(np.float32)
        wide = torch.from_numpy(ref).to(getattr(torch, dtype))
        before = wide.clone()
        scores = wide[:, ::2]
        assert proc(torch.from_numpy(ids[:, :cols].copy()), scores) is scores
        for b in range(2):
            m = cfgmask.GrammarMatcher(store)
            assert all(m.accept_token(int(t)) for t in ids[b, 1:cols])
            bitmask = cfgmask.allocate_token_bitmask(1, V)
            m.fill_next_token_bitmask(bitmask)
            allowed = np.zeros(V, bool)
            allowed[cfgmask.allowed_token_ids(bitmask[0], V)] = True
            row = scores[b].float().numpy()
            assert (np.isneginf(row[:V]) == ~allowed).all() and np.isneginf(row[V:]).all()
            assert (row[:V][allowed] == before[b, ::2].float().numpy()[:V][allowed]).all()
        assert torch.equal(wide[:, 1::2], before[:, 1::2])
