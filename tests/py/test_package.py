"""Tests of the Python package `cfgmask` (runtime/python/): the store, the
GrammarMatcher, the batch calls and logits masking, against slow references
computed here (per-token acceptance on forks, json.loads, numpy masking).

Uses a small JSON grammar with the LLaMA SentencePiece tokenizer
($CFGMASK_TOK_LLAMA_SPM), compiled once per session.
"""
import json
import os
import tempfile
import threading

import numpy as np
import pytest

import cfgmask

TOK = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "/work/main/.cache/tokenizers/llama-spm.gguf")

JSON_GRAMMAR = r"""
?start: value
?value: object | array | STRING | NUMBER | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : STRING ":" value
STRING : /"([^"\\\x00-\x1f]|\\["\\\/bfnrt])*"/
NUMBER : /-?(0|[1-9][0-9]*)(\.[0-9]+)?/
%ignore /[ \t\n\r]+/
"""


@pytest.fixture(scope="module")
def store():
    return cfgmask.compile_grammar(JSON_GRAMMAR, TOK)


def mask_of(m):
    bm = cfgmask.allocate_token_bitmask(1, m.vocab_size)
    m.fill_next_token_bitmask(bm)
    return bm


def slow_allowed(m, tokens):
    """Tokens among `tokens` that a fork of m accepts (the reference)."""
    out = []
    for t in tokens:
        f = m.fork()
        if f.accept_token(int(t)):
            out.append(int(t))
    return out


def test_store_stats_and_round_trip(store, tmp_path):
    st = store.stats()
    assert st["vocab_size"] == store.vocab_size == 32000
    assert st["rows"] > 0 and st["lalr_states"] > 0 and st["terminals"] >= 9
    assert store.mask_words == 1000
    path = tmp_path / "json.cfgm"
    store.save(str(path))
    loaded = cfgmask.Store.load(str(path))
    assert loaded.stats()["rows"] == st["rows"]
    a, b = cfgmask.GrammarMatcher(store), cfgmask.GrammarMatcher(loaded)
    for piece in ['{"a"', ': [', '1', ', 2.5', ']}']:
        assert np.array_equal(mask_of(a), mask_of(b))
        assert a.accept_string(piece) and b.accept_string(piece)


def test_matchers_of_one_store_share_the_row_memo(store, tmp_path):
    """Matchers of one store share its row memo (a server's matcher per
    request): a second matcher over the same text is answered from the
    first one's entries, with the same masks as a matcher of another store
    object (its own memo)."""
    pieces = ['{"a"', ': [', '1', ', 2.5', ', {"b": null}', ']', '}']
    path = tmp_path / "copy.cfgm"
    store.save(str(path))
    other = cfgmask.Store.load(str(path))
    a = cfgmask.GrammarMatcher(store)
    masks = []
    for piece in pieces:
        masks.append(mask_of(a))
        assert a.accept_string(piece)
    hits_before, _ = a._session.memo_stats()
    b, c = cfgmask.GrammarMatcher(store), cfgmask.GrammarMatcher(other)
    for piece, m in zip(pieces, masks):
        assert np.array_equal(mask_of(b), m)
        assert np.array_equal(mask_of(c), m)
        assert b.accept_string(piece) and c.accept_string(piece)
    hits_after, _ = b._session.memo_stats()
    assert a._session.memo_stats()[0] == hits_after  # one memo, one count
    assert hits_after - hits_before >= len(pieces)
    assert c._session.memo_stats()[0] < hits_after


def test_compile_from_path_equals_text(store, tmp_path):
    path = tmp_path / "g.lark"
    path.write_text(JSON_GRAMMAR)
    other = cfgmask.compile_grammar(path, TOK)
    assert other.stats()["rows"] == store.stats()["rows"]
    assert np.array_equal(mask_of(cfgmask.GrammarMatcher(other)),
                          mask_of(cfgmask.GrammarMatcher(store)))


PHASES = ["grammar", "lalr", "automaton", "tokenizer", "walk", "store", "streamline"]


def test_compile_progress_reports_the_phases_in_order(store):
    reports = []
    other = cfgmask.compile_grammar(JSON_GRAMMAR, TOK,
                                    progress=lambda *a: reports.append(a))
    assert other.stats()["rows"] == store.stats()["rows"]
    phases = [p for p, _, _ in reports]
    seen = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert seen == PHASES
    fractions = [f for _, f, _ in reports]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(f == 1.0 for p, f, _ in reports if p in ("store", "streamline"))
    seconds = [s for _, _, s in reports]
    assert seconds == sorted(seconds) and seconds[0] >= 0.0
    # Without streamlining the last phase is the store's.
    reports.clear()
    cfgmask.compile_grammar(JSON_GRAMMAR, TOK, streamline=False,
                            progress=lambda *a: reports.append(a))
    assert reports[-1][0] == "store" and reports[-1][1] == 1.0


class _Stop(Exception):
    pass


@pytest.mark.parametrize("at", ["grammar", "walk", "streamline"])
def test_compile_progress_exception_aborts_the_compile(tmp_path, monkeypatch, at):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the text grammar's file

    def progress(phase, fraction, seconds):
        if phase == at:
            raise _Stop(phase)

    tok = cfgmask.Tokenizer(TOK)
    with pytest.raises(_Stop, match=at):
        cfgmask.compile_grammar(JSON_GRAMMAR, tok, progress=progress)
    # No temporary grammar file left behind, and the engine still compiles.
    assert list(tmp_path.iterdir()) == []
    assert cfgmask.compile_grammar(JSON_GRAMMAR, tok).stats()["rows"] > 0
    with pytest.raises(TypeError, match="progress"):
        cfgmask.compile_grammar(JSON_GRAMMAR, tok, progress=3)


def test_prepared_tokenizer_compiles_the_same_store(store, tmp_path):
    """A Tokenizer read once serves several grammars and threads counts; each
    store equals the one compiled from the tokenizer file."""
    tok = cfgmask.Tokenizer(TOK)
    assert tok.vocab_size == store.vocab_size and tok.eos_ids == store.eos_ids
    assert tok.name == store.stats()["tokenizer"] and tok.seconds > 0
    text = b'{"a": [1, -2.5, true, null], "b": {"c": "d"}}'
    for threads in (1, 2):
        other = cfgmask.compile_grammar(JSON_GRAMMAR, tok, num_threads=threads)
        a, b = other.stats(), store.stats()
        assert {k: v for k, v in a.items() if k not in ("seconds", "streamlining", "grammar")} == \
            {k: v for k, v in b.items() if k not in ("seconds", "streamlining", "grammar")}
        assert a["seconds"]["tokenizer"] == 0.0 and b["seconds"]["tokenizer"] > 0
        x, y = cfgmask.GrammarMatcher(other), cfgmask.GrammarMatcher(store)
        for i in range(len(text)):
            assert np.array_equal(mask_of(x), mask_of(y)), i
            assert x.accept_string(text[i:i + 1]) and y.accept_string(text[i:i + 1])
    # A second grammar from the same Tokenizer.
    other = cfgmask.compile_grammar('start: "a" | "b"\n', tok)
    m = cfgmask.GrammarMatcher(other)
    assert set(cfgmask.allowed_token_ids(mask_of(m)[0], m.vocab_size)) == {
        t for t in range(m.vocab_size) if not other.is_special(t)
        and other.token_bytes(t) in (b"a", b"b")}
    with pytest.raises(cfgmask.Error, match="missing.gguf"):
        cfgmask.Tokenizer(str(tmp_path / "missing.gguf"))
    with pytest.raises(cfgmask.Error) as e:
        cfgmask.compile_grammar("start: foo\n", tok)
    assert str(e.value).startswith("<string>:1:8:")


def test_lexer_modes_fewer_lexer_states_same_masks():
    """A grammar whose strings hold fields of code splits into lexer modes
    (code, string text, format spec): with them the automaton is smaller,
    without them (``lexer_modes=False``) every mask is the same."""
    path = os.path.join(os.path.dirname(__file__), "..", "data", "engine", "fstring_modes.lark")
    on = cfgmask.compile_grammar(path, TOK)
    off = cfgmask.compile_grammar(path, TOK, lexer_modes=False)
    assert on.stats()["lexer_states"] < off.stats()["lexer_states"]
    text = b'x = f"a {b + 1:>{w}!} #{{c}}" + {d, f"{e!r}"}; # end\ny = f"";'
    x, y = cfgmask.GrammarMatcher(on), cfgmask.GrammarMatcher(off)
    for i in range(len(text)):
        assert np.array_equal(mask_of(x), mask_of(y)), text[:i]
        assert x.accept_string(text[i:i + 1]) and y.accept_string(text[i:i + 1]), text[:i + 1]
    assert x.can_end() and y.can_end()


def test_without_pair_pruning_more_rows_before_same_masks(store):
    """prune_pairs=False starts from every lexing (more rows before
    streamlining); the streamlined store's masks are the same."""
    other = cfgmask.compile_grammar(JSON_GRAMMAR, TOK, prune_pairs=False)
    a, b = other.stats(), store.stats()
    assert a["rows_before_streamlining"] > b["rows_before_streamlining"]
    assert 0 < a["terminal_sequence_keys"] <= a["rows"]
    text = b'{"k": [0, -2.5, false, null], "m": {"n": "x y"}}'
    x, y = cfgmask.GrammarMatcher(other), cfgmask.GrammarMatcher(store)
    for i in range(len(text)):
        assert np.array_equal(mask_of(x), mask_of(y)), i
        assert x.accept_string(text[i:i + 1]) and y.accept_string(text[i:i + 1])


def test_errors_are_value_errors_with_the_engine_message(tmp_path):
    with pytest.raises(cfgmask.Error) as e:
        cfgmask.compile_grammar("start: foo\n", TOK)
    assert isinstance(e.value, ValueError)
    assert str(e.value).startswith("<string>:1:8:") and "foo" in str(e.value)
    with pytest.raises(cfgmask.Error, match="missing.lark"):
        cfgmask.compile_grammar(str(tmp_path / "missing.lark"), TOK)
    bad = tmp_path / "bad.cfgm"
    bad.write_bytes(b"not a store")
    with pytest.raises(cfgmask.Error, match="bad.cfgm"):
        cfgmask.Store.load(str(bad))


def test_masks_match_per_token_reference(store):
    rng = np.random.default_rng(0)
    m = cfgmask.GrammarMatcher(store)
    text = '{"key": [1, -2.5, "x\\n"], "b": {"c": null}}'
    pos = 0
    steps = 0
    while pos < len(text):
        bm = mask_of(m)
        allowed = set(cfgmask.allowed_token_ids(bm[0], store.vocab_size).tolist())
        sample = set(rng.choice(store.vocab_size, 300, replace=False).tolist()) | allowed
        assert set(slow_allowed(m, sorted(sample))) == allowed & sample
        # advance by the longest allowed token that spells the rest of the text
        best = max((t for t in allowed if not store.is_special(t)
                    and text.encode()[pos:].startswith(store.token_bytes(t))
                    and store.token_bytes(t)),
                   key=lambda t: len(store.token_bytes(t)))
        assert m.accept_token(best)
        pos += len(store.token_bytes(best))
        steps += 1
    assert steps > 5
    assert m.can_end()
    eos = store.eos_ids[0]
    assert eos in cfgmask.allowed_token_ids(mask_of(m)[0], store.vocab_size)
    assert m.accept_token(eos) and m.is_terminated()
    assert m.text == text


def test_accept_refuse_rollback_fork_reset(store):
    m = cfgmask.GrammarMatcher(store)
    assert m.accept_string('[1, ')
    before = mask_of(m)
    assert not m.accept_string("]")          # "[1, ]" is not JSON
    assert not m.accept_token(store.eos_ids[0])
    assert np.array_equal(mask_of(m), before)  # refusals change nothing
    with pytest.raises(cfgmask.Error, match="out of range"):
        m.accept_token(store.vocab_size)
    f = m.fork()
    assert f.accept_string("2]") and f.can_end()
    assert not m.can_end() and m.text == "[1, "
    m.rollback(1)
    assert m.text == ""
    with pytest.raises(cfgmask.Error):
        m.rollback(5)
    assert m.accept_string("{}")
    m.reset()
    assert m.text == "" and not m.is_terminated()


def test_jump_forward_and_completion(store):
    m = cfgmask.GrammarMatcher(store)
    assert m.accept_string('{"a": tr')
    assert m.find_jump_forward_string() == "ue"
    assert m.find_jump_forward_string() == "ue"  # read-only
    m2 = cfgmask.GrammarMatcher(store)
    assert m2.accept_string('[{"a": [1')
    completion = m2.find_completion()
    assert completion is not None
    json.loads('[{"a": [1' + completion)
    toks = m2.tokenize_forced(completion)
    for t in toks:
        assert m2.accept_token(t)
    assert m2.can_end()


def test_completion_search_tells_dead_ends_from_budget(store):
    m = cfgmask.GrammarMatcher(store)
    assert m.accept_string('[[[{"a": [1')
    what, text, nodes = m.completion_search()
    assert what == "found" and nodes > 0
    json.loads('[[[{"a": [1' + text)
    assert m.find_completion() == text
    what, text, nodes = m.completion_search(2)  # too small a budget
    assert (what, text) == ("budget", None) and nodes <= 2
    assert m.text == '[[[{"a": [1'  # left as it was
    with pytest.raises(ValueError):
        m.completion_search(-1)
    # Adjacent NAMEs without a separator: no text ends (Lark's NAME is
    # greedy); when the mask still lets "ab" in, the search proves it dead.
    adj = cfgmask.GrammarMatcher(cfgmask.compile_grammar("start: NAME NAME\nNAME: /[a-z]+/\n", TOK))
    if adj.accept_string("ab"):
        assert adj.completion_search() == ("none", None, adj.completion_search()[2])
        assert adj.find_completion() is None


def test_batch_fill_equals_single_fills(store):
    texts = ["", '{"a"', "[1, 2", '"abc', "tru"]
    ms = []
    for t in texts:
        m = cfgmask.GrammarMatcher(store)
        assert m.accept_string(t)
        ms.append(m)
    batch = cfgmask.BatchGrammarMatcher()
    bm = cfgmask.allocate_token_bitmask(len(ms), store.vocab_size + 64)  # padded rows
    bm[:] = -1
    batch.batch_fill_next_token_bitmask(ms, bm)
    for i, m in enumerate(ms):
        single = np.full((1, bm.shape[1]), -1, dtype=np.int32)
        m.fill_next_token_bitmask(single)
        assert np.array_equal(bm[i], single[0])
        assert not bm[i, store.mask_words:].any()
    first = [int(cfgmask.allowed_token_ids(bm[i], store.vocab_size)[0]) for i in range(len(ms))]
    batch.batch_accept_token(ms, first)
    with pytest.raises(cfgmask.Error, match="session 0"):
        batch.batch_accept_token(ms[:1], [store.vocab_size - 1])
    with pytest.raises(cfgmask.Error):
        batch.batch_fill_next_token_bitmask(ms, cfgmask.allocate_token_bitmask(len(ms), 64))


def test_apply_token_bitmask_inplace(store):
    m = cfgmask.GrammarMatcher(store)
    bm = mask_of(m)
    allowed = np.zeros(store.vocab_size + 100, dtype=bool)
    allowed[cfgmask.allowed_token_ids(bm[0], store.vocab_size)] = True
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float16):
        logits = rng.standard_normal((1, store.vocab_size + 100)).astype(dtype)
        want = np.where(allowed, logits[0], -np.inf).astype(dtype)
        cfgmask.apply_token_bitmask_inplace(logits, bm)
        assert np.array_equal(logits[0], want)
    one = rng.standard_normal(store.vocab_size).astype(np.float32)
    cfgmask.apply_token_bitmask_inplace(one, bm)
    assert np.array_equal(np.isfinite(one), allowed[:store.vocab_size])
    with pytest.raises(TypeError):
        cfgmask.apply_token_bitmask_inplace(np.zeros(store.vocab_size), bm)  # float64
    with pytest.raises(TypeError):
        cfgmask.apply_token_bitmask_inplace(np.zeros((2, store.vocab_size), np.float32)[:, ::2],
                                            np.zeros((2, 500), np.int32))
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask(np.zeros((1, store.mask_words), np.int64))


def test_matchers_on_threads(store):
    """Sessions on several threads at once give the masks they give alone."""
    texts = ['{"k": [', "[1, 2, 3", '{"a": {"b": ', "[[[[", '"s']
    alone = []
    for t in texts:
        m = cfgmask.GrammarMatcher(store)
        m.accept_string(t)
        alone.append(mask_of(m))
    results = [None] * len(texts)

    def work(i):
        m = cfgmask.GrammarMatcher(store)
        m.accept_string(texts[i])
        for _ in range(20):
            results[i] = mask_of(m)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for a, b in zip(alone, results):
        assert np.array_equal(a, b)


def test_streamlining_off_gives_the_same_masks(store):
    """streamline=False keeps every row; the masks are the same at every step."""
    st = store.stats()["streamlining"]
    assert st["applied"] and [s["step"] for s in st["steps"]] == [
        "nfa_transition", "delete_never_legal", "fold_always_legal"]
    plain = cfgmask.compile_grammar(JSON_GRAMMAR, TOK, streamline=False)
    ps = plain.stats()
    assert not ps["streamlining"]["applied"]
    assert ps["rows"] == st["steps"][0]["rows"] > store.stats()["rows"]
    text = b'{"a": [1, -2.5, true, null], "b": {"c": "d"}, "e": []}'
    a, b = cfgmask.GrammarMatcher(plain), cfgmask.GrammarMatcher(store)
    for i in range(len(text)):
        assert np.array_equal(mask_of(a), mask_of(b)), i
        assert a.accept_string(text[i:i + 1]) and b.accept_string(text[i:i + 1])
    assert np.array_equal(mask_of(a), mask_of(b)) and a.can_end() and b.can_end()


def test_output_judges():
    # The judges of tests/tools/validity_table.py: CPython's compile() and
    # SQLite's parser, where only syntax errors count and comments are text.
    from cfgmask import generate as gen
    assert gen.python_compiles("def f(x):\n    return x\n")
    assert not gen.python_compiles("def f(x)\n    return x\n")
    assert gen.sqlite_parses("SELECT a FROM t WHERE b = 1;")
    assert gen.sqlite_parses("CREATE TABLE t(x INT PRIMARY KEY AUTOINCREMENT);")  # semantic only
    assert gen.sqlite_parses("SELECT 1;\n\n-- done\n-- truly done")
    assert gen.sqlite_parses("/* first */ -- then\nSELECT 1;")
    assert not gen.sqlite_parses("SELEC 1;")
    assert not gen.sqlite_parses("SELECT 1;\n/* not closed")
    assert not gen.sqlite_parses("-- only a comment")


def test_defaults_are_the_headers():
    """Every default the package shows is maskstore/defaults.h's, read through the extension."""
    import inspect
    import re
    header = os.path.join(os.path.dirname(__file__), "..", "..", "maskstore", "defaults.h")
    with open(header, encoding="utf-8") as f:
        text = f.read()
    consts = {m.group(1): m.group(2) for m in re.finditer(
        r"inline constexpr \S+ (k\w+) = ([^;]+);", text)}

    def value(name):
        v = consts[name].strip()
        if v.startswith('"'):
            return v.strip('"')
        if v in ("true", "false"):
            return v == "true"
        m = re.fullmatch(r"int64_t\{(\d+)\} << (\d+)", v)
        return int(m.group(1)) << int(m.group(2)) if m else int(v)

    d = cfgmask._core.DEFAULTS
    expected = {"indenter": "kIndenter", "max_lexer_states": "kMaxLexerStates",
                "max_roots": "kMaxRoots", "max_memory": "kMaxMemory",
                "max_seconds": "kMaxSeconds", "streamline": "kStreamline", "num_threads": "kNumThreads",
                "prune_pairs": "kPrunePairs", "lexer_modes": "kLexerModes",
                "max_live_states": "kMaxLiveStates",
                "session_memo_bytes": "kSessionMemoBytes"}
    for key, const in expected.items():
        assert d[key] == value(const), key
    assert d["indenter_choices"] == ("auto", "python", "none")
    sig = inspect.signature(cfgmask.compile_grammar).parameters
    for key in ("indenter", "max_lexer_states", "max_roots", "max_memory", "max_seconds",
                "streamline", "num_threads", "prune_pairs", "lexer_modes"):
        assert sig[key].default == d[key], key
    assert (inspect.signature(cfgmask.GrammarMatcher.__init__).parameters["max_live_states"].default
            == d["max_live_states"])
