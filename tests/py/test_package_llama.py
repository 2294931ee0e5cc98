"""A real model end to end: SmolLM2-135M-Instruct (GGUF, $CFGMASK_TOK_SMOLLM2)
on CPU through llama-cpp-python, constrained at every step by python.lark
(file_input) compiled with the same GGUF as tokenizer.

Checks that the store's token ids are llama.cpp's (same bytes for every
non-special id), and that constrained greedy completions of a few prompts
end and are in the grammar's language as Lark defines it (the engine's
contract).  Lark's python.lark is looser than CPython (it takes, e.g.,
`way: use androme.The`), so CPython's verdict is measured by
tests/tools/validity_table.py rather than asserted here.  Skipped only where
llama-cpp-python is not installed and CFGMASK_REQUIRE_LLAMA is not 1
(setup.sh installs it and sets it).
"""
import os
import subprocess
import sys

import pytest

import cfgmask
from cfgmask import generate as gen

MODEL = os.environ.get("CFGMASK_TOK_SMOLLM2",
                       "/work/main/.cache/tokenizers/smollm2-135m-instruct-q4_1.gguf")
LARK = os.environ.get("CFGMASK_LARK_GRAMMARS", "")

if os.environ.get("CFGMASK_REQUIRE_LLAMA") != "1":
    pytest.importorskip("llama_cpp")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "python-smollm2.cfgm"
    s = cfgmask.compile_grammar(os.path.join(LARK, "python.lark"), MODEL, start="file_input")
    s.save(str(path))
    return s, path


@pytest.fixture(scope="module")
def lark_python():
    from lark import Lark
    from lark.indenter import PythonIndenter
    return Lark.open(os.path.join(LARK, "python.lark"), parser="lalr", lexer="contextual",
                     postlex=PythonIndenter(), start="file_input")


@pytest.fixture(scope="module")
def llm():
    return gen.load_model(MODEL, n_ctx=1024, n_threads=2)


def test_token_ids_match_llama_cpp(store, llm):
    s, _ = store
    assert llm.n_vocab() == s.vocab_size == 49152
    assert gen.vocabulary_mismatches(llm, s) == []
    assert set(s.eos_ids) <= set(gen.stop_token_ids(llm))


PROMPTS = [
    "Write a Python function that returns the factorial of n.",
    "Write a Python class Stack with push and pop methods.",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_constrained_generation_in_language(store, llm, lark_python, prompt):
    s, _ = store
    res = gen.generate(llm, gen.format_prompt(prompt), s, max_tokens=32, steer_tokens=48)
    assert res.tokens, "nothing generated"
    assert res.ended, f"did not end: {res.text!r}"
    lark_python.parse(res.text)  # raises if outside the language
    assert res.mask_seconds > 0


def test_cli_generate(store):
    _, path = store
    r = subprocess.run([sys.executable, "-m", "cfgmask", "generate", "--store", str(path),
                        "--model", MODEL, "--prompt", "Write a function add(a, b).",
                        "--max-tokens", "32", "--check", "python", "--threads", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "tokens/s" in r.stderr and "µs/token" in r.stderr
    assert "compile(): ok" in r.stderr or "compile(): rejected" in r.stderr
    assert "ended" in r.stderr


def test_cli_generate_fill_in_the_middle(store, lark_python, tmp_path):
    # --prefix-file / --suffix-file: the middle goes to stdout, and when it
    # ended, prefix + middle + suffix is in the language.
    _, path = store
    prefix, suffix = "def mean(xs):\n    total = 0\n    for x in xs:\n", "\n    return total\n"
    (tmp_path / "pre.py").write_text(prefix)
    (tmp_path / "suf.py").write_text(suffix)
    r = subprocess.run([sys.executable, "-m", "cfgmask", "generate", "--store", str(path),
                        "--model", MODEL, "--prefix-file", str(tmp_path / "pre.py"),
                        "--suffix-file", str(tmp_path / "suf.py"), "--max-tokens", "16",
                        "--threads", "2", "--quiet", "-o", str(tmp_path / "mid.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "fill-in-the-middle with" in r.stderr
    middle = (tmp_path / "mid.py").read_text()
    if "incomplete" not in r.stderr:
        lark_python.parse(prefix + middle + suffix)
    # A prefix the grammar refuses: one line with its position, status 2.
    (tmp_path / "bad.py").write_text("x = (]\n")
    r = subprocess.run([sys.executable, "-m", "cfgmask", "generate", "--store", str(path),
                        "--model", MODEL, "--prefix-file", str(tmp_path / "bad.py")],
                       capture_output=True, text=True, timeout=300)
    last = r.stderr.rstrip("\n").split("\n")[-1]
    assert r.returncode == 2 and last.startswith(f"cfgmask: {tmp_path / 'bad.py'}:1:6: "), r.stderr
    assert "fill-in-the-middle" not in r.stderr  # refused before the model is loaded


def test_cli_errors_are_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "cfgmask", "generate", "--store",
                        str(tmp_path / "none.cfgm"), "--model", MODEL, "--prompt", "x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith("cfgmask: ") and r.stderr.count("\n") == 1
    r = subprocess.run([sys.executable, "-m", "cfgmask", "generate", "--model", MODEL],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--grammar" in r.stderr


def test_answer_prefix_opens_the_answer():
    assert gen.format_prompt("p", answer_prefix="```python\n").endswith(
        "<|im_start|>assistant\n```python\n")
    assert gen.format_prompt("p", template="raw", answer_prefix="> ") == "p> "


def test_readme_main_job_compiles(store):
    # The README's main job (setup.sh demo): CPython compiles the output.
    _, path = store
    r = subprocess.run([sys.executable, "-m", "cfgmask", "generate", "--store", str(path),
                        "--model", MODEL, "--prompt",
                        "Write a Python function that returns the n-th Fibonacci number.",
                        "--answer-prefix", "```python\\n", "--max-tokens", "160",
                        "--check", "python", "--threads", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "def fibonacci" in r.stdout
    assert "compile(): ok" in r.stderr, r.stdout + r.stderr


def _greedy(llm, store, prefix, attach, max_tokens=24):
    import llama_cpp
    from cfgmask.processors import LlamaCppLogitsProcessor
    proc = LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store, prefix=prefix.encode()))
    stops = set(store.eos_ids) | set(gen.stop_token_ids(llm))
    prompt = llm.tokenize(prefix.encode(), add_bos=True, special=False)
    kwargs = {}
    if attach:
        proc.attach(llm)
    else:
        kwargs["logits_processor"] = llama_cpp.LogitsProcessorList([proc])
    tokens = []
    llm.reset()
    try:
        for tok in llm.generate(prompt, temp=0.0, repeat_penalty=1.0, reset=True, **kwargs):
            if tok in stops:
                break
            tokens.append(tok)
            if len(tokens) >= max_tokens:
                break
    finally:
        proc.detach()
    return tokens, proc


def test_attach_masks_llama_cpp_logits_row(store, llm):
    """LlamaCppLogitsProcessor.attach masks the context's contiguous logits
    row before llama.cpp builds its records: the same greedy tokens as the
    processor on the record view, every one in its step's mask, and the
    model's sample method restored afterwards."""
    s, _ = store
    prefix = "def mean(values):\n    "
    strided, p1 = _greedy(llm, s, prefix, attach=False)
    attached, p2 = _greedy(llm, s, prefix, attach=True)
    assert len(strided) > 4
    assert attached == strided
    assert p2.calls == p1.calls
    assert "sample" not in vars(llm)
    m = cfgmask.GrammarMatcher(s, prefix=prefix.encode())
    for t in attached:
        assert m.accept_token(int(t))
    from cfgmask.processors import LlamaCppLogitsProcessor
    p = LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(s)).attach(llm)
    try:
        with pytest.raises(cfgmask.Error):
            LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(s)).attach(llm)
    finally:
        p.detach()
    assert "sample" not in vars(llm)


class _StubLlama:
    """What LlamaCppLogitsProcessor.attach reads of a llama_cpp.Llama, with no
    model: the id buffer, n_tokens, `_ctx.ctx` (the address of a float32 row
    that the stand-in for llama_get_logits_ith hands back) and a sample that
    returns the argmax of the row it finds (the masked one)."""

    def __init__(self, vocab, n_ctx=512):
        import ctypes
        import types

        import numpy as np
        self.row = np.zeros(vocab, dtype=np.float32)
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.n_tokens = 0
        self._ctx = types.SimpleNamespace(ctx=ctypes.c_void_p(self.row.ctypes.data))
        self.sampled = []

    @property
    def _input_ids(self):
        return self.input_ids[:self.n_tokens]

    def n_vocab(self):
        return len(self.row)

    def sample(self, top_k=40, temp=0.8, idx=None):
        self.sampled.append(idx)
        return int(self.row.argmax())


def _attach_stub(proc, llm):
    import ctypes

    import llama_cpp
    real = llama_cpp.llama_get_logits_ith
    llama_cpp.llama_get_logits_ith = ctypes.CFUNCTYPE(
        ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_int32)(
        cfgmask._core._logits_row_stub)
    try:
        return proc.attach(llm)
    finally:
        llama_cpp.llama_get_logits_ith = real


def test_attached_hook_matches_session_step(store):
    """The engine's hook (attach's fast path: ids read from the Llama's
    buffer, accept, fill and masking in one call) against Session.step on a
    contiguous row, on seeded walks: the same masked row and bitmask at every
    step, one to three ids added between calls, the processor's counters as
    its Python path keeps them; steer_to_end goes through __call__ and back;
    a refused id raises and leaves the matcher and the row untouched."""
    import gc
    import weakref

    import numpy as np
    from cfgmask.processors import LlamaCppLogitsProcessor
    s, _ = store
    prefix = "def f(a, b):\n    "
    prompt = [1, 2, 3, 4]
    steered_steps = 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        llm = _StubLlama(s.vocab_size)
        proc = LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(s, prefix=prefix.encode()))
        _attach_stub(proc, llm)
        assert type(vars(llm)["sample"]).__name__ == "builtin_function_or_method"
        ref = cfgmask.GrammarMatcher(s, prefix=prefix.encode())._session
        ref_mask = cfgmask.allocate_token_bitmask(1, s.vocab_size)
        llm.input_ids[:len(prompt)] = prompt
        llm.n_tokens = len(prompt)
        new = []
        steps = 0
        while steps < 40:
            logits = rng.standard_normal(s.vocab_size).astype(np.float32)
            llm.row[:] = logits
            expect = logits.copy()
            if seed == 3 and steps == 10:
                proc.steer_to_end = True  # the Python path, then back
            if seed == 3 and steps == 12:
                proc.steer_to_end = False
                proc._steering = type(proc._steering)()
            steered = proc.steer_to_end
            tok = llm.sample(top_k=1, idx=llm.n_tokens - 1)
            assert llm.sampled[-1] == llm.n_tokens - 1
            if not steered:
                assert ref.step(np.asarray(new, dtype=np.int32), expect, ref_mask) == -1
                np.testing.assert_array_equal(llm.row, expect)
                np.testing.assert_array_equal(proc.bitmask, ref_mask)
            else:
                steered_steps += 1
                for t in new:
                    assert ref.advance(int(t))
                new = []
            steps += 1
            assert proc.calls == steps
            assert proc.prompt_len == len(prompt)
            assert proc.accepted == llm.n_tokens - len(prompt)
            if not np.isfinite(llm.row[tok]) or tok in s.eos_ids:
                break
            # one to three ids before the next call: the sampled one, then
            # ids of the mask that follow it (the reference walks them too)
            new = [tok]
            probe = ref.fork()
            assert probe.advance(tok)
            for _ in range(int(rng.integers(0, 3))):
                m = cfgmask.allocate_token_bitmask(1, s.vocab_size)
                probe.fill_mask(m)
                allowed = np.flatnonzero(np.unpackbits(m.view(np.uint8), bitorder="little"))
                allowed = [t for t in allowed[allowed < s.vocab_size] if t not in s.eos_ids]
                if not allowed:
                    break
                t = int(rng.choice(allowed))
                assert probe.advance(t)
                new.append(t)
            llm.input_ids[llm.n_tokens:llm.n_tokens + len(new)] = new
            llm.n_tokens += len(new)
        assert steps > 5
        # a refused id: an Error, the matcher and the row as they were
        text = proc.matcher.text
        m = cfgmask.allocate_token_bitmask(1, s.vocab_size)
        ref.fill_mask(m)
        bits = np.unpackbits(m.view(np.uint8), bitorder="little")[:s.vocab_size]
        bad = int(np.flatnonzero(bits == 0)[0])
        llm.input_ids[llm.n_tokens] = bad
        llm.n_tokens += 1
        llm.row[:] = 1.0
        with pytest.raises(cfgmask.Error, match="refuses"):
            llm.sample(idx=llm.n_tokens - 1)
        assert proc.matcher.text == text
        assert (llm.row == 1.0).all()
        proc.detach()
        assert "sample" not in vars(llm)
    assert steered_steps == 2
    # Attached and dropped without detach: the garbage collector frees the
    # Llama (the hook's references are visible to it).
    llm = _StubLlama(s.vocab_size)
    _attach_stub(LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(s)), llm)
    gone = weakref.ref(llm)
    del llm
    gc.collect()
    assert gone() is None

    class Sub(LlamaCppLogitsProcessor):  # subclasses keep the Python hook
        pass
    llm = _StubLlama(s.vocab_size)
    p = _attach_stub(Sub(cfgmask.GrammarMatcher(s)), llm)
    assert type(vars(llm)["sample"]).__name__ == "function"
    p.detach()
