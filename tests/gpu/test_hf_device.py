"""HFLogitsProcessor with logits on a GPU, inside ``model.generate``.

The model is Qwen2's architecture built from a small config with the real
151,936-token Qwen2 vocabulary and seeded random weights (no weights travel:
masks do not depend on what the model knows), on the device under test.
The store is cfgmask's strict grammar/lark/python.lark (file_input) compiled
with Qwen2's GGUF, so the model's ids are the store's.  Greedy decoding,
sampling, a left-padded batch, num_return_sequences and beam search, each
steered to its end after a budget; every row's text must be in the grammar's
language (Lark) and compile under CPython.  The device masking path is also
compared, dtype by dtype, with the CPU path on the same logits, padded
logits included.

The device is $CFGMASK_TEST_DEVICE (default: cuda when torch sees a GPU,
else cpu, which is how tests/gpu/run.sh --cpu dry-runs this file in CI);
with CFGMASK_REQUIRE_GPU=1 a missing GPU is a failure, not a skip.  The store
is $CFGMASK_GPU_STORE (run.sh compiles it) or compiled here from
$CFGMASK_TOK_QWEN2.  Tested code: runtime/python/cfgmask/processors.py.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "py"))

import cfgmask  # noqa: E402
from cfgmask.processors import HFLogitsProcessor  # noqa: E402
from test_python_strict import SEMANTIC, compile_store, cpython_error, lark_ok, lark_parser  # noqa: E402

DEVICE = os.environ.get("CFGMASK_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
if os.environ.get("CFGMASK_REQUIRE_GPU") == "1" and not torch.cuda.is_available():
    raise RuntimeError("CFGMASK_REQUIRE_GPU=1 but torch sees no GPU")
if DEVICE.startswith("cuda") and not torch.cuda.is_available():
    pytest.skip("no GPU", allow_module_level=True)

QWEN2 = os.environ.get("CFGMASK_TOK_QWEN2", "")
BUDGET = 12  # sampled tokens before steering to a shortest completion
ROOM = 64    # further tokens for the completion and the stop token


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = os.environ.get("CFGMASK_GPU_STORE")
    if not path:
        if not os.path.exists(QWEN2):
            pytest.skip("no Qwen2 GGUF ($CFGMASK_TOK_QWEN2) and no $CFGMASK_GPU_STORE")
        path = str(compile_store(QWEN2, tmp_path_factory.mktemp("gpu") / "py-qwen2.cfgm"))
    return cfgmask.Store.load(path)


@pytest.fixture(scope="module")
def model(store):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=151936, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=True)
    m = Qwen2ForCausalLM(config).to(DEVICE).eval()
    # Random weights give flat logits: widen them so that greedy and beam
    # choices are decided by the model, not by ties.
    with torch.no_grad():
        m.model.embed_tokens.weight.mul_(40.0)
    return m


@pytest.fixture(scope="module")
def parser():
    return lark_parser()


def prompts(lengths, seed=3):
    """Left-padded random prompts of the given lengths (ids of text tokens)."""
    rng = np.random.default_rng(seed)
    width = max(lengths)
    ids = np.zeros((len(lengths), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for b, n in enumerate(lengths):
        ids[b, width - n:] = rng.integers(0, 151643, size=n)
        mask[b, width - n:] = 1
    return (torch.from_numpy(ids).to(DEVICE), torch.from_numpy(mask).to(DEVICE))


def generate(model, store, lengths, **kwargs):
    ids, mask = prompts(lengths)
    proc = HFLogitsProcessor(store=store, steer_after=BUDGET)
    eos = list(store.eos_ids)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, logits_processor=[proc],
                             max_new_tokens=BUDGET + ROOM, eos_token_id=eos, pad_token_id=eos[0],
                             **kwargs)
    texts = []
    for row in out[:, ids.shape[1]:].tolist():
        toks = []
        for t in row:
            if t in eos:
                break
            toks.append(t)
        else:
            raise AssertionError(f"row did not reach a stop token: {row}")
        texts.append(b"".join(store.token_bytes(t) for t in toks).decode("utf-8"))
    return texts, proc


def check_python(parser, texts):
    assert texts
    for text in texts:
        assert lark_ok(parser, text), f"outside the grammar's language: {text!r}"
        err = cpython_error(text)
        assert err is None or err.startswith(SEMANTIC), f"CPython: {err}: {text!r}"


def test_model_vocabulary_is_the_stores(model, store):
    assert store.vocab_size == 151936
    assert model.get_output_embeddings().weight.shape[0] == store.vocab_size
    assert str(next(model.parameters()).device).startswith(DEVICE.split(":")[0])


def test_greedy(model, store, parser):
    texts, proc = generate(model, store, [7], do_sample=False)
    check_python(parser, texts)
    assert proc.matchers[0].can_end()


def test_sampling(model, store, parser):
    torch.manual_seed(7)
    texts, _ = generate(model, store, [5], do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    check_python(parser, texts)


def test_batch_left_padded(model, store, parser):
    lengths = [5, 9, 13, 17]
    texts, proc = generate(model, store, lengths, do_sample=False)
    assert len(texts) == len(lengths) == len(proc.matchers)
    check_python(parser, texts)


def test_num_return_sequences(model, store, parser):
    torch.manual_seed(11)
    texts, proc = generate(model, store, [6, 8], do_sample=True, num_return_sequences=3,
                           temperature=1.3, top_k=0, top_p=1.0)
    assert len(texts) == 6 and len(proc.matchers) == 6
    check_python(parser, texts)
    assert len(set(texts)) > 1  # sampled, not copies


def test_beam_search_follows_the_beams(model, store, parser):
    texts, proc = generate(model, store, [6, 8], do_sample=False, num_beams=3,
                           num_return_sequences=3)
    assert len(texts) == 6
    check_python(parser, texts)
    assert proc.reorders > 0  # the beams really moved between rows


def reference_refused(matchers, vocab, width):
    """Per row, the tokens each matcher's own bitmask refuses, as a bool
    tensor (columns past the vocabulary refused)."""
    out = torch.ones((len(matchers), width), dtype=torch.bool)
    bitmask = cfgmask.allocate_token_bitmask(1, vocab)
    for b, m in enumerate(matchers):
        m.fill_next_token_bitmask(bitmask)
        allowed = cfgmask.allowed_token_ids(bitmask[0], vocab).astype(np.int64)
        out[b, torch.from_numpy(allowed)] = False
    return out


# float64 is masked by the tensor path on every device, the CPU included, so
# the dry run (tests/gpu/run.sh --cpu) exercises the bit expansion too.
def test_cuda_kernel_module_where_required():
    """run.sh builds cfgmask._cuda on the GPU machine: there the processor
    must find it (CFGMASK_REQUIRE_CUDA_KERNEL=1), not fall back silently."""
    from cfgmask import processors
    if os.environ.get("CFGMASK_REQUIRE_CUDA_KERNEL") != "1":
        pytest.skip("cfgmask._cuda not required here")
    assert processors._CUDA is not None
    ok, why = processors._CUDA.device_available()
    assert ok, why


@pytest.mark.parametrize("kernel", [True, False])  # cfgmask._cuda's kernel, or torch ops
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("width", [151936, 152064])  # the store's vocabulary; padded past it
def test_device_mask_equals_engine_mask(store, dtype, width, kernel):
    """On the device, the processor refuses exactly the tokens the engine's
    bitmask refuses, keeps the other logits unchanged, and refuses the
    columns past the store's vocabulary."""
    dt = getattr(torch, dtype)
    rng = np.random.default_rng(1)
    base = torch.from_numpy(rng.standard_normal((3, width)).astype(np.float32)).to(dt)
    # Three rows in three states: fresh, inside a def, after an operator.
    matchers = []
    for text in ["", "def f(x):\n    return x", "y = 1 +"]:
        m = cfgmask.GrammarMatcher(store)
        assert m.accept_string(text)
        matchers.append(m)
    want = reference_refused(matchers, store.vocab_size, width)
    assert 0 < want[:, :151936].sum() < want[:, :151936].numel()
    ids = torch.zeros((3, 1), dtype=torch.int64, device=DEVICE)
    dev = base.clone().to(DEVICE)
    proc = HFLogitsProcessor(matchers=[m.fork() for m in matchers])
    proc.use_cuda_kernel = proc.use_cuda_kernel and kernel
    out = proc(ids, dev)
    assert out is dev
    got = dev.cpu()
    refused = torch.isneginf(got)
    assert torch.equal(refused, want)
    assert torch.equal(got[~refused], base[~refused])


def test_device_path_across_steps_reuses_its_buffers(store):
    """Ten steps of one processor on device logits: each step's refusals are
    the fresh CPU mask of that step (the pinned buffer is not overwritten
    while a copy is in flight)."""
    text = "def area(w, h):\n    return w * h\n"
    m = cfgmask.GrammarMatcher(store)
    toks = m.tokenize_forced(text)
    assert len(toks) >= 10
    proc = HFLogitsProcessor(store=store)
    ref = cfgmask.GrammarMatcher(store)
    bitmask = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    ids = torch.zeros((1, 1), dtype=torch.int64, device=DEVICE)
    for k in range(10):
        scores = torch.zeros((1, store.vocab_size), device=DEVICE)
        proc(ids, scores)
        ref.fill_next_token_bitmask(bitmask)
        allowed = cfgmask.allowed_token_ids(bitmask[0], store.vocab_size)
        want = torch.ones(store.vocab_size, dtype=torch.bool)
        want[torch.from_numpy(allowed.astype(np.int64))] = False
        assert torch.equal(torch.isneginf(scores[0]).cpu(), want), f"step {k}"
        ids = torch.cat([ids, torch.tensor([[toks[k]]], device=DEVICE)], dim=1)
        assert ref.accept_token(toks[k])
