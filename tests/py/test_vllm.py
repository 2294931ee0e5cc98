"""cfgmask.vllm against vLLM's own logits-processor interface (CPU tensors, no GPU).

The persistent batch is driven the way vLLM's GPU input batch drives it: with
vLLM's BatchUpdateBuilder (removals registered first, additions reusing the
lowest removed rows, condensing moves, SWAP moves) and vLLM's SamplingParams;
update_state and apply are called as vLLM's sampler calls them.  At every step
the allowed set of each constrained row (its finite logits) must equal what a
GrammarMatcher fed the same tokens allows, unconstrained rows must be left
alone, removed requests must leave the processor and moved ones must keep
their own matcher and output list.

Skips (with the reason) only where vLLM is not installed: setup.sh installs it
in .venv-vllm and runs this file there (CFGMASK_REQUIRE_VLLM=1 makes a
missing vLLM a failure).  CFGMASK_FULL=1 runs more steps.
"""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

if os.environ.get("CFGMASK_REQUIRE_VLLM") != "1":
    pytest.importorskip("vllm", reason="vLLM is not installed (setup.sh installs it in .venv-vllm)")
torch = pytest.importorskip("torch", reason="torch is not installed")

import cfgmask  # noqa: E402
from cfgmask.vllm import CfgmaskLogitsProcessor, load_request_store  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.v1.sample.logits_processor import (BatchUpdateBuilder,  # noqa: E402
                                             LogitsProcessor, MoveDirectionality)

from test_package import JSON_GRAMMAR, TOK  # noqa: E402

FULL = os.environ.get("CFGMASK_FULL") == "1"
FQCN = "cfgmask.vllm:CfgmaskLogitsProcessor"

ARITH_GRAMMAR = r"""
?start: sum
?sum: product | sum ("+" | "-") product
?product: atom | product ("*" | "/") atom
?atom: NUMBER | "-" atom | "(" sum ")"
NUMBER: /[0-9]+/
%ignore " "
"""

PAD = 77  # widths that do not fill the last word (the bit expansion)


def padded(vocab):
    """Logits wider than the tokenizer, as a model pads its vocabulary: the
    next multiple of 64 past it (cfgmask.check_logits_width)."""
    return (vocab // 64 + 1) * 64


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("vllm-cache")
    old = os.environ.get("CFGMASK_VLLM_CACHE")
    os.environ["CFGMASK_VLLM_CACHE"] = str(d)
    yield d
    if old is None:
        del os.environ["CFGMASK_VLLM_CACHE"]
    else:
        os.environ["CFGMASK_VLLM_CACHE"] = old


@pytest.fixture(scope="module")
def json_store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("stores") / "json.cfgm"
    cfgmask.compile_grammar(JSON_GRAMMAR, TOK).save(str(path))
    return str(path)


def store_params(path, **kw):
    return SamplingParams(extra_args={"cfgmask_store": path, **kw})


def grammar_params(grammar=ARITH_GRAMMAR, **kw):
    return SamplingParams(extra_args={"cfgmask_grammar": grammar, "cfgmask_tokenizer": TOK, **kw})


def new_processor():
    return CfgmaskLogitsProcessor(None, torch.device("cpu"), False)


def reference_allowed(matcher, vocab):
    """The set a GrammarMatcher allows, as a bool row over `vocab` logits."""
    row = np.zeros(vocab, dtype=bool)
    if matcher.is_terminated():
        row[list(matcher.stop_token_ids)] = True
        return row
    bm = cfgmask.allocate_token_bitmask(1, matcher.vocab_size)
    matcher.fill_next_token_bitmask(bm)
    row[cfgmask.allowed_token_ids(bm[0], matcher.vocab_size)] = True
    return row


class Slot:
    """One request in the simulated persistent batch."""

    def __init__(self, rid, params, store):
        self.rid = rid
        self.params = params
        self.output = []  # the list vLLM appends sampled tokens to
        self.ref = cfgmask.GrammarMatcher(store) if store is not None else None
        if self.ref is not None and params.extra_args.get("cfgmask_suffix"):
            self.ref.set_suffix(params.extra_args["cfgmask_suffix"])
        self.done = False


class Batch:
    """vLLM's persistent-batch bookkeeping (gpu_input_batch.InputBatch), reduced
    to what logits processors see: slots, removals, additions that fill the
    lowest removed row first, condense moves and swaps."""

    def __init__(self):
        self.slots = []
        self.builder = BatchUpdateBuilder()

    def remove(self, i):
        self.slots[i] = None
        self.builder.removed_append(i)

    def add(self, slot):
        i = self.builder.pop_removed()
        if i is None:
            i = len(self.slots)
            self.slots.append(None)
        self.slots[i] = slot
        self.builder.added.append((i, slot.params, [1, 2, 3], slot.output))
        return i

    def swap(self, a, b):
        self.slots[a], self.slots[b] = self.slots[b], self.slots[a]
        self.builder.moved.append((a, b, MoveDirectionality.SWAP))

    def condense(self):
        """InputBatch.condense: the highest occupied rows move down into the
        lowest holes (UNIDIRECTIONAL moves), then the list is cut."""
        empty = self.builder.removed  # descending
        if not empty:
            return
        num_reqs = sum(s is not None for s in self.slots)
        last = len(self.slots) - 1
        while empty:
            while last in empty:
                last -= 1
            hole = self.builder.peek_removed()
            if hole >= last:
                break
            self.builder.pop_removed()
            self.slots[hole], self.slots[last] = self.slots[last], None
            self.builder.moved.append((last, hole, MoveDirectionality.UNIDIRECTIONAL))
            last -= 1
        del self.slots[num_reqs:]

    def update(self):
        return self.builder.get_and_reset(len(self.slots))


def check_step(proc, batch, logits_before, logits_after):
    vocab = logits_after.shape[1]
    finite = torch.isfinite(logits_after).numpy()
    constrained = 0
    for i, slot in enumerate(batch.slots):
        if slot.ref is None:
            assert torch.equal(logits_after[i], logits_before[i]), f"row {i} is unconstrained"
            assert i not in proc.requests
            continue
        constrained += 1
        req = proc.requests[i]
        assert req.output is slot.output, f"row {i} follows another request's output list"
        assert req.tokens == slot.output
        assert req.matcher.text == slot.ref.text
        want = reference_allowed(slot.ref, vocab)
        got = finite[i]
        if not np.array_equal(got, want):
            extra = np.flatnonzero(got & ~want)[:5]
            missing = np.flatnonzero(want & ~got)[:5]
            raise AssertionError(f"row {i} (request {slot.rid}) after {slot.ref.text!r}: "
                                 f"allows {extra.tolist()} it should not, refuses "
                                 f"{missing.tolist()} it should allow")
        kept = torch.from_numpy(got)
        assert torch.equal(logits_after[i][kept], logits_before[i][kept])
    assert len(proc.requests) == constrained, "a removed request is still held"
    assert not proc.failures


def sample_rows(logits, rng):
    """A token per row from masked logits (Gumbel-max), as a sampler picks."""
    g = -np.log(-np.log(rng.random(logits.shape)))
    return np.argmax(logits.numpy().astype(np.float64) + g, axis=1)


def make_logits(rows, vocab, eos_ids, rng, dtype=torch.float32):
    x = rng.standard_normal((rows, vocab)).astype(np.float32) * 2.0
    if eos_ids:
        x[:, list(eos_ids)] += rng.choice([-6.0, 4.0], size=(rows, 1), p=[0.9, 0.1])
    return torch.from_numpy(x).to(dtype)


@pytest.mark.parametrize("seed", [1, 2] if not FULL else list(range(1, 9)))
def test_batch_updates_follow_vllm(seed, json_store_path, cache_dir):
    """Random adds, removals, condensing moves and swaps; every step's masks
    equal per-request GrammarMatchers'."""
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    json_store = load_request_store(store_params(json_store_path))
    arith_store = load_request_store(grammar_params())
    vocab = padded(json_store.vocab_size)
    eos = json_store.eos_ids
    proc = new_processor()
    assert isinstance(proc, LogitsProcessor) and not proc.is_argmax_invariant()
    batch = Batch()
    next_id = 0
    steps = 60 if not FULL else 400
    ended = swaps = moves = 0

    def new_slot():
        nonlocal next_id
        next_id += 1
        kind = pyrng.choice(["json", "json_suffix", "arith", "plain", "other"])
        if kind == "json":
            return Slot(next_id, store_params(json_store_path), json_store)
        if kind == "json_suffix":
            return Slot(next_id, store_params(json_store_path, cfgmask_suffix=', "z": 1}'),
                        json_store)
        if kind == "arith":
            return Slot(next_id, grammar_params(), arith_store)
        if kind == "plain":
            return Slot(next_id, SamplingParams(), None)
        return Slot(next_id, SamplingParams(extra_args={"other_plugin": 3}), None)

    for _ in range(4):
        batch.add(new_slot())
    for step in range(steps):
        # Requests that ended, and a few random ones (aborts), leave.
        for i, s in enumerate(batch.slots):
            # (an ended request stays a step now and then, as with ignore_eos)
            if s is not None and ((s.done and pyrng.random() < 0.7) or pyrng.random() < 0.08):
                batch.remove(i)
                ended += 1
        for _ in range(pyrng.choice([0, 1, 2, 3])):
            if sum(s is not None for s in batch.slots) < 10:
                batch.add(new_slot())
        n_moves = len(batch.builder.moved)
        batch.condense()
        live = [i for i, s in enumerate(batch.slots) if s is not None]
        if len(live) >= 2 and pyrng.random() < 0.3:
            a, b = pyrng.sample(live, 2)
            batch.swap(a, b)
            swaps += 1
        moves += len(batch.builder.moved) - n_moves
        proc.update_state(batch.update())
        if not batch.slots:
            continue
        assert all(s is not None for s in batch.slots)
        before = make_logits(len(batch.slots), vocab, eos, rng)
        after = proc.apply(before.clone())
        check_step(proc, batch, before, after)
        picks = sample_rows(after, rng)
        for i, s in enumerate(batch.slots):
            t = int(picks[i])
            s.output.append(t)  # vLLM appends the sampled token to the request's list
            if s.ref is not None:
                if s.ref.is_terminated():
                    assert t in eos  # past its end a request may only stop
                else:
                    assert s.ref.accept_token(t)
                s.done = s.ref.is_terminated()
            else:
                s.done = t in eos
        proc.update_state(None)  # a step without batch changes
    assert ended >= 5 and swaps >= 3 and moves >= 1, (ended, swaps, moves)


def test_ended_texts_parse(json_store_path, cache_dir):
    """Constrained rows sampled to their end are JSON (json.loads) and
    arithmetic (Lark's LALR parser)."""
    import json
    lark = pytest.importorskip("lark")
    arith = lark.Lark(ARITH_GRAMMAR, parser="lalr")
    rng = np.random.default_rng(7)
    json_store = load_request_store(store_params(json_store_path))
    arith_store = load_request_store(grammar_params())
    proc = new_processor()
    batch = Batch()
    slots = [Slot(k, store_params(json_store_path), json_store) for k in range(3)] + \
            [Slot(10 + k, grammar_params(), arith_store) for k in range(3)]
    for s in slots:
        batch.add(s)
    proc.update_state(batch.update())
    vocab = json_store.vocab_size
    for step in range(200):
        logits = make_logits(len(slots), vocab, json_store.eos_ids, rng)
        if step >= 20:  # a model that wants to finish: the end, or a shortest way to it
            for i, s in enumerate(slots):
                if not s.done:
                    want = s.ref.stop_token_ids[0] if s.ref.can_end() else \
                        s.ref.tokenize_forced(s.ref.find_completion())[0]
                    logits[i, want] += 50.0
        picks = sample_rows(proc.apply(logits), rng)
        for s, t in zip(slots, picks):
            if not s.done:
                s.output.append(int(t))
                assert s.ref.accept_token(int(t))
                s.done = s.ref.is_terminated()
        if all(s.done for s in slots):
            break
    texts = [(s, b"".join(json_store.token_bytes(t) for t in s.output[:-1]).decode())
             for s in slots if s.done]
    assert len(texts) == len(slots)
    for s, text in texts:
        if s.rid < 10:
            json.loads(text)
        else:
            arith.parse(text)


def test_added_request_replaces_the_rows_occupant(json_store_path):
    """vLLM gives a removed row to the next added request and then leaves the
    row out of BatchUpdate.removed: the old request must go all the same."""
    store = load_request_store(store_params(json_store_path))
    proc = new_processor()
    batch = Batch()
    a, b = Slot(0, store_params(json_store_path), store), Slot(1, store_params(json_store_path), store)
    batch.add(a)
    batch.add(b)
    proc.update_state(batch.update())
    batch.remove(0)
    plain = Slot(2, SamplingParams(), None)
    assert batch.add(plain) == 0
    upd = batch.update()
    assert list(upd.removed) == [] and upd.added[0][0] == 0
    proc.update_state(upd)
    assert list(proc.requests) == [1]
    before = torch.zeros((2, store.vocab_size))
    after = proc.apply(before.clone())
    assert torch.equal(after[0], before[0])
    batch.remove(0)
    c = Slot(3, store_params(json_store_path), store)
    c.output.extend(c.ref.tokenize_forced("[1"))
    for t in c.output:
        assert c.ref.accept_token(t)
    assert batch.add(c) == 0
    proc.update_state(batch.update())
    proc.apply(torch.zeros((2, store.vocab_size)))
    assert proc.requests[0].output is c.output and proc.requests[0].matcher.text == "[1"
    # A request added and removed again before the update reaches the processor.
    d = Slot(4, store_params(json_store_path), store)
    assert batch.add(d) == 2
    batch.remove(2)
    batch.condense()
    upd = batch.update()
    assert [a[0] for a in upd.added] == [2] and list(upd.removed) == [2]
    proc.update_state(upd)
    assert sorted(proc.requests) == [0, 1]


@pytest.fixture()
def input_batch_module(monkeypatch):
    """vLLM's GPU input batch, on the CPU: only its pinned host buffers need a
    driver, so they are made unpinned."""
    gib = pytest.importorskip("vllm.v1.worker.gpu_input_batch")
    monkeypatch.setattr(gib, "PIN_MEMORY", False)
    return gib


def test_vllms_own_input_batch_drives_it(input_batch_module, json_store_path, cache_dir):
    """vLLM's InputBatch (add_request, remove_request, condense, swap_states,
    refresh_metadata) calls update_state itself; masks per row still equal
    per-request GrammarMatchers'."""
    from vllm.v1.sample.logits_processor import LogitsProcessors
    gib = input_batch_module
    rng = np.random.default_rng(11)
    pyrng = random.Random(11)
    json_store = load_request_store(store_params(json_store_path))
    arith_store = load_request_store(grammar_params())
    vocab = padded(json_store.vocab_size)
    proc = new_processor()
    ib = gib.InputBatch(max_num_reqs=16, max_model_len=4096, max_num_batched_tokens=4096,
                        device=torch.device("cpu"), vocab_size=vocab, block_sizes=[16],
                        max_num_blocks_per_req=[256], logitsprocs=LogitsProcessors([proc]),
                        logitsprocs_need_output_token_ids=True)
    states = {}  # req_id -> (CachedRequestState, reference matcher or None)
    next_id = 0

    def add():
        nonlocal next_id
        next_id += 1
        kind = next_id % 3
        params, store = [(store_params(json_store_path), json_store),
                         (grammar_params(), arith_store), (SamplingParams(), None)][kind]
        rs = gib.CachedRequestState(
            req_id=f"r{next_id}", prompt_token_ids=[1, 2, 3], mm_features=[],
            sampling_params=params, generator=None, block_ids=([],), num_computed_tokens=3,
            output_token_ids=[])
        states[rs.req_id] = (rs, cfgmask.GrammarMatcher(store) if store else None)
        ib.add_request(rs)

    for _ in range(5):
        add()
    steps = 40 if not FULL else 300
    swaps = 0
    for step in range(steps):
        for rid in list(ib.req_ids):
            rs, ref = states[rid]
            if (ref is not None and ref.is_terminated()) or pyrng.random() < 0.08:
                ib.remove_request(rid)
                del states[rid]
        for _ in range(pyrng.choice([0, 1, 2])):
            if len(states) < 10:
                add()
        ib.condense()
        if ib.num_reqs >= 2 and pyrng.random() < 0.3:
            a, b = pyrng.sample(range(ib.num_reqs), 2)
            ib.swap_states(a, b)
            swaps += 1
        ib.refresh_metadata()
        if ib.num_reqs == 0:
            add()
            ib.refresh_metadata()
        before = make_logits(ib.num_reqs, vocab, json_store.eos_ids, rng)
        after = proc.apply(before.clone())
        finite = torch.isfinite(after).numpy()
        assert len(proc.requests) == sum(states[r][1] is not None for r in ib.req_ids)
        picks = sample_rows(after, rng)
        for i, rid in enumerate(ib.req_ids):
            rs, ref = states[rid]
            if ref is None:
                assert torch.equal(after[i], before[i])
            else:
                assert proc.requests[i].output is rs.output_token_ids
                assert proc.requests[i].matcher.text == ref.text
                assert np.array_equal(finite[i], reference_allowed(ref, vocab)), (rid, ref.text)
                assert ref.accept_token(int(picks[i]))
            rs.output_token_ids.append(int(picks[i]))  # as the model runner does
    assert swaps >= 3 and next_id >= 10


def test_vllm_loads_it_by_name(monkeypatch):
    """What `--logits-processors cfgmask.vllm:CfgmaskLogitsProcessor` does:
    vLLM's build_logitsprocs finds the class by name and builds it beside
    its built-ins; with speculative decoding on it refuses custom ones."""
    from types import SimpleNamespace
    from vllm.utils import torch_utils
    from vllm.v1.sample import logits_processor as lp
    monkeypatch.setattr(torch_utils, "PIN_MEMORY", False)  # no driver here
    assert lp._load_logitsprocs_by_fqcns([FQCN]) == [CfgmaskLogitsProcessor]
    config = SimpleNamespace(speculative_config=None,
                             scheduler_config=SimpleNamespace(max_num_seqs=8), model_config=None)
    procs = lp.build_logitsprocs(config, torch.device("cpu"), False, False, (FQCN,))
    mine = [p for p in procs.non_argmax_invariant if isinstance(p, CfgmaskLogitsProcessor)]
    assert len(mine) == 1 and not any(isinstance(p, CfgmaskLogitsProcessor)
                                      for p in procs.argmax_invariant)
    config.speculative_config = object()
    with pytest.raises(ValueError, match="speculative decoding"):
        lp.build_logitsprocs(config, torch.device("cpu"), False, False, (FQCN,))


def test_bad_requests_are_one_line_errors(json_store_path, cache_dir, tmp_path):
    from vllm.v1.sample import logits_processor as lp
    bad_grammar = 'start: "a" missing_rule\n'
    cases = [
        (store_params(str(tmp_path / "nope.cfgm")), "cannot read store"),
        (store_params(__file__), "cfgmask:"),
        (grammar_params(bad_grammar), "missing_rule"),
        (grammar_params("no/such/file.lark"), "does not exist"),
        (SamplingParams(extra_args={"cfgmask_grammar": ARITH_GRAMMAR}), "cfgmask_tokenizer"),
        (SamplingParams(extra_args={"cfgmask_store": json_store_path,
                                    "cfgmask_grammar": ARITH_GRAMMAR}), "exactly one"),
        (SamplingParams(extra_args={"cfgmask_stor": json_store_path}), "unknown request argument"),
        (SamplingParams(extra_args={"cfgmask_store": 3}), "must be a string"),
        (grammar_params(cfgmask_tokenizer=str(tmp_path / "tok.json")), "cannot read tokenizer"),
    ]
    for params, needle in cases:
        with pytest.raises(ValueError) as e:
            load_request_store(params)
        msg = str(e.value)
        assert needle in msg and "\n" not in msg and msg.startswith("cfgmask:"), msg
        # What vLLM's request validation raises: its client (HTTP 400) error.
        with pytest.raises(VLLMValidationError) as e:
            lp.validate_logits_processors_parameters([FQCN], params)
        assert str(e.value) == msg
    CfgmaskLogitsProcessor.validate_params(SamplingParams())
    CfgmaskLogitsProcessor.validate_params(store_params(json_store_path))


def test_grammar_store_is_compiled_once(cache_dir):
    from cfgmask import vllm as plugin
    grammar = ARITH_GRAMMAR + "// another grammar text\n"
    s1 = load_request_store(grammar_params(grammar))
    files = list(cache_dir.glob("*.cfgm"))
    assert files
    # Another process (the engine) finds the API server's compile on disk.
    plugin._stores.clear()
    before = {f: f.stat().st_mtime_ns for f in cache_dir.glob("*.cfgm")}
    s2 = load_request_store(grammar_params(grammar))
    assert s2 is not s1 and s2.stats()["rows"] == s1.stats()["rows"]
    assert {f: f.stat().st_mtime_ns for f in cache_dir.glob("*.cfgm")} == before
    assert load_request_store(grammar_params(grammar)) is s2
    with pytest.warns(UserWarning, match="unreachable"):  # 'start' is, from 'product'
        assert load_request_store(grammar_params(grammar, cfgmask_start="product")) is not s2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, "strided"])
def test_other_logits_layouts(dtype, json_store_path):
    """fp16 (the engine's CPU path), bf16 and non-contiguous logits (torch's
    path, as on a GPU) give the float32 masks."""
    rng = np.random.default_rng(3)
    store = load_request_store(store_params(json_store_path))
    proc32, proc = new_processor(), new_processor()
    batch = Batch()
    slots = [Slot(0, SamplingParams(), None), Slot(1, store_params(json_store_path), store),
             Slot(2, SamplingParams(), None), Slot(3, store_params(json_store_path), store)]
    for s in slots:
        batch.add(s)
    upd = batch.update()
    proc32.update_state(upd)
    proc.update_state(upd)
    vocab = padded(store.vocab_size)
    for _ in range(25):
        base = make_logits(len(slots), vocab, store.eos_ids, rng)
        if dtype == "strided":
            wide = torch.zeros((len(slots), vocab * 2))
            wide[:, ::2] = base
            other = wide[:, ::2]
            assert not other.is_contiguous()
        else:
            other = base.to(dtype)
        want = torch.isfinite(proc32.apply(base.clone()))
        got_t = proc.apply(other)
        assert torch.equal(torch.isfinite(got_t), want)
        if dtype == "strided":
            assert torch.equal(torch.isfinite(wide[:, ::2]), want)  # masked in place
        picks = sample_rows(base.masked_fill(~want, float("-inf")), rng)
        for i, s in enumerate(slots):
            if s.ref is not None and not s.done:
                s.output.append(int(picks[i]))
                assert s.ref.accept_token(int(picks[i]))
                s.done = s.ref.is_terminated()
        if any(s.done for s in slots):
            break


def test_device_bit_expansion():
    """The expansion a GPU runs (torch ops on the device), here on the CPU,
    equals numpy's: every bit pattern, widths that do not fill the last word."""
    proc = new_processor()
    rng = np.random.default_rng(4)
    for vocab in (1, 31, 32, 33, 100, 32000 + PAD):
        words = (vocab + 31) // 32
        bm = rng.integers(-2**31, 2**31, size=(5, words), dtype=np.int64).astype(np.int32)
        bm[0] = -1
        bm[1] = 0
        bm[2] = np.int32(-2**31)  # the sign bit alone: token 31 of each word
        want = np.unpackbits(bm.view(np.uint8), axis=1, bitorder="little")[:, :vocab].astype(bool)
        got = proc._expand_on(torch.device("cpu"), bm, vocab)
        assert got.dtype == torch.bool and got.shape == (5, vocab)
        assert np.array_equal(got.numpy(), want), vocab


def test_dropped_tokens_roll_back(json_store_path):
    """vLLM may drop output tokens (a KV-cache load failure): the matcher
    rolls back to what the list still holds."""
    rng = np.random.default_rng(5)
    store = load_request_store(store_params(json_store_path))
    proc = new_processor()
    batch = Batch()
    slot = Slot(0, store_params(json_store_path), store)
    batch.add(slot)
    proc.update_state(batch.update())
    vocab = store.vocab_size
    for step in range(40):
        logits = make_logits(1, vocab, (), rng)
        logits[:, list(store.eos_ids)] = -30.0  # finite, but never picked: no end here
        after = proc.apply(logits.clone())
        assert np.array_equal(torch.isfinite(after)[0].numpy(), reference_allowed(slot.ref, vocab))
        assert proc.requests[0].matcher.text == slot.ref.text
        t = int(sample_rows(after, rng)[0])
        slot.output.append(t)
        assert slot.ref.accept_token(t)
        if step in (15, 30):
            k = 4 if step == 15 else 1
            del slot.output[-k:]
            slot.ref.rollback(k)
        if step == 22:  # the last token replaced by another allowed one
            slot.ref.rollback(1)
            alt = [int(x) for x in np.flatnonzero(reference_allowed(slot.ref, vocab))
                   if int(x) != slot.output[-1] and int(x) not in store.eos_ids][0]
            slot.output[-1] = alt
            assert slot.ref.accept_token(alt)
    after = proc.apply(make_logits(1, vocab, (), rng))
    assert np.array_equal(torch.isfinite(after)[0].numpy(), reference_allowed(slot.ref, vocab))
    assert proc.requests[0].tokens == slot.output


def test_dropped_tokens_past_the_end(json_store_path):
    """Stop tokens read past the grammar's end (ignore_eos) are no matcher
    steps: dropping them and more rolls the matcher back by what it took."""
    store = load_request_store(store_params(json_store_path))
    proc = new_processor()
    batch = Batch()
    s = Slot(0, store_params(json_store_path), store)
    batch.add(s)
    proc.update_state(batch.update())
    eos = store.eos_ids[0]
    s.output.extend(s.ref.tokenize_forced("[1, 2]") + [eos, eos, eos])
    proc.apply(torch.zeros((1, store.vocab_size)))
    assert proc.requests[0].matcher.is_terminated() and not proc.failures
    del s.output[-5:]  # two stop tokens past the end, the end, "]" and what came before
    for t in s.output:
        assert s.ref.accept_token(t)
    after = proc.apply(torch.zeros((1, store.vocab_size)))
    assert proc.requests[0].matcher.text == s.ref.text
    assert np.array_equal(torch.isfinite(after[0]).numpy(), reference_allowed(s.ref, store.vocab_size))


def test_refused_token_ends_only_that_request(json_store_path):
    rng = np.random.default_rng(9)
    store = load_request_store(store_params(json_store_path))
    proc = new_processor()
    batch = Batch()
    a = Slot(0, store_params(json_store_path), store)
    b = Slot(1, store_params(json_store_path), store)
    batch.add(a)
    batch.add(b)
    proc.update_state(batch.update())
    vocab = store.vocab_size
    proc.apply(make_logits(2, vocab, (), rng))
    refused = int(np.flatnonzero(~reference_allowed(a.ref, vocab))[0])
    a.output.append(refused)  # something after the mask picked a refused token
    t = int(np.flatnonzero(reference_allowed(b.ref, vocab))[0])
    b.output.append(t)
    b.ref.accept_token(t)
    after = proc.apply(make_logits(2, vocab, (), rng))
    assert 0 in proc.failures and "refuses" in proc.failures[0]
    allowed = np.flatnonzero(torch.isfinite(after[0]).numpy())
    assert sorted(allowed.tolist()) == sorted(store.eos_ids)
    assert np.array_equal(torch.isfinite(after[1]).numpy(), reference_allowed(b.ref, vocab))
    batch.remove(0)
    proc.update_state(batch.update())
    assert list(proc.requests) == [1] and not proc.failures


def test_placeholder_tokens_are_reported(json_store_path):
    """With asynchronous scheduling vLLM resolves its -1 placeholders before the
    processors run only when they were named by --logits-processors; one left
    over is reported rather than guessed."""
    store = load_request_store(store_params(json_store_path))
    proc = new_processor()
    batch = Batch()
    s = Slot(0, store_params(json_store_path), store)
    batch.add(s)
    proc.update_state(batch.update())
    rng = np.random.default_rng(1)
    proc.apply(make_logits(1, store.vocab_size, (), rng))
    s.output.append(-1)
    proc.apply(make_logits(1, store.vocab_size, (), rng))
    assert "--logits-processors" in proc.failures[0]


def test_resumed_request_replays_its_output(json_store_path):
    """A preempted request comes back (added again) with the tokens it had."""
    store = load_request_store(store_params(json_store_path))
    ref = cfgmask.GrammarMatcher(store)
    toks = ref.tokenize_forced('{"a": [1, 2')
    for t in toks:
        assert ref.accept_token(t)
    assert ref.text == '{"a": [1, 2'
    proc = new_processor()
    batch = Batch()
    s = Slot(0, store_params(json_store_path), store)
    s.output.extend(toks)
    batch.add(s)
    proc.update_state(batch.update())
    after = proc.apply(torch.zeros((1, store.vocab_size)))
    assert np.array_equal(torch.isfinite(after[0]).numpy(), reference_allowed(ref, store.vocab_size))


def test_store_cache_is_bounded(json_store_path, tmp_path, monkeypatch):
    import shutil
    from cfgmask import vllm as plugin
    monkeypatch.setattr(plugin, "MAX_CACHED_STORES", 2)
    paths = []
    for k in range(3):
        paths.append(str(tmp_path / f"s{k}.cfgm"))
        shutil.copy(json_store_path, paths[-1])
    first = load_request_store(store_params(paths[0]))
    assert load_request_store(store_params(paths[0])) is first
    m = cfgmask.GrammarMatcher(first)  # a request holding the store
    load_request_store(store_params(paths[1]))
    load_request_store(store_params(paths[2]))
    assert len(plugin._stores) == 2
    assert load_request_store(store_params(paths[0])) is not first  # evicted, loaded again
    assert m.accept_string("[1") and m.text == "[1"
