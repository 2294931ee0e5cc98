"""Regression tests for bad input through the command line and the Python
package: each case is one that once crashed, lost data, was silently accepted
or gave a misleading error.  Command-line errors are one line with exit
status 2 and no output file; Python errors are cfgmask.Error (or TypeError
for a wrong type).
"""
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import cfgmask

BIN = os.environ.get("CFGMASK_BIN", "/work/main/build/cfgmask")
TOK = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "/work/main/.cache/tokenizers/llama-spm.gguf")

from test_package import JSON_GRAMMAR  # noqa: E402  (the same small JSON grammar)

needs_tok = pytest.mark.skipif(not os.path.exists(TOK), reason="llama-spm tokenizer not available")
needs_bin = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


from test_cli import assert_one_line_error as one_line_error  # noqa: E402
from test_cli import run  # noqa: E402


@pytest.fixture(scope="module")
def store():
    if not os.path.exists(TOK):
        pytest.skip("llama-spm tokenizer not available")
    return cfgmask.compile_grammar(JSON_GRAMMAR, TOK)


# ------------------------------------------------------------ command line


@needs_bin
@needs_tok
def test_cli_output_never_overwrites_the_grammar(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    line = one_line_error(run("compile", g, "--tokenizer", TOK, "-o", g))
    assert "refusing to overwrite" in line
    assert g.read_text() == JSON_GRAMMAR
    # The same file under another name.
    link = tmp_path / "alias.lark"
    os.link(g, link)
    one_line_error(run("compile", g, "--tokenizer", TOK, "-o", link))
    assert g.read_text() == JSON_GRAMMAR


@needs_bin
@needs_tok
def test_cli_directories_are_named_as_directories(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    d = tmp_path / "dir"
    d.mkdir()
    out = tmp_path / "o.cfgm"
    assert "is a directory" in one_line_error(run("compile", d, "--tokenizer", TOK, "-o", out))
    assert "is a directory" in one_line_error(run("compile", g, "--tokenizer", d, "-o", out))
    assert not out.exists()
    assert "is a directory" in one_line_error(run("stats", d))
    assert run("compile", g, "--tokenizer", TOK, "-o", out).returncode == 0
    assert "is a directory" in one_line_error(run("check", out, d))


@needs_bin
@needs_tok
def test_cli_empty_language_is_refused_at_the_start_rule(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text('// nothing ends\nstart: start "a"\n')
    out = tmp_path / "o.cfgm"
    line = one_line_error(run("compile", g, "--tokenizer", TOK, "-o", out))
    assert f"{g}:2:1:" in line and "empty" in line, line
    assert not out.exists()


@needs_bin
@needs_tok
def test_cli_non_utf8_byte_in_a_comment_is_refused_with_position(tmp_path):
    g = tmp_path / "g.lark"
    g.write_bytes(b'start: "a"\n// caf\xe9\n')
    out = tmp_path / "o.cfgm"
    line = one_line_error(run("compile", g, "--tokenizer", TOK, "-o", out))
    assert f"{g}:2:7:" in line and "UTF-8" in line, line
    assert not out.exists()


@needs_bin
@pytest.mark.parametrize("flag,value", [("--max-memory", "0"), ("--max-memory", "lots"),
                                        ("--max-memory", "-5M"), ("--max-roots", "0"),
                                        ("--max-lexer-states", "0"), ("--threads", "-3")])
def test_cli_limit_options_are_checked(flag, value):
    r = run("compile", "g.lark", "--tokenizer", "t", "-o", "x", flag, value)
    assert r.returncode == 2, r.stderr  # a usage error: the message, then the usage line
    assert r.stderr.startswith(f"cfgmask: option {flag}: "), r.stderr


@needs_bin
@needs_tok
def test_cli_memory_limit_is_one_line_error_without_output(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text("start: A\nA: /a{1000000}/\n")
    out = tmp_path / "o.cfgm"
    t0 = time.monotonic()
    line = one_line_error(run("compile", g, "--tokenizer", TOK, "--max-memory", "64M", "-o", out))
    assert "memory" in line and "--max-memory" in line, line
    assert time.monotonic() - t0 < 60
    assert not out.exists()


@needs_bin
@needs_tok
def test_cli_max_roots_can_be_raised_and_lowered(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    out = tmp_path / "o.cfgm"
    line = one_line_error(run("compile", g, "--tokenizer", TOK, "--max-roots", "1", "-o", out))
    assert "max_roots" in line, line
    assert not out.exists()


# ------------------------------------------------------------ Python


@needs_tok
@pytest.mark.parametrize("kw", [dict(max_lexer_states=0), dict(max_roots=0),
                                dict(num_threads=-3), dict(indenter="bogus"),
                                dict(max_memory=-1)])
def test_py_bad_compile_options_raise(kw):
    with pytest.raises(cfgmask.Error, match=list(kw)[0]):
        cfgmask.compile_grammar(JSON_GRAMMAR, TOK, **kw)


@needs_tok
def test_py_option_types_are_checked():
    with pytest.raises(TypeError):
        cfgmask.compile_grammar(JSON_GRAMMAR, TOK, max_memory=1.5)


@needs_tok
def test_py_memory_limit_raises_and_leaves_the_process_usable():
    with pytest.raises(cfgmask.Error, match="out of memory"):
        cfgmask.compile_grammar("start: A\nA: /a{1000000}/\n", TOK, max_memory=64 << 20)
    big = np.ones(50 << 20, dtype=np.uint8)  # the limit is lifted after the compile
    assert big.sum() == 50 << 20


@needs_tok
def test_py_empty_language_and_non_utf8_are_errors(tmp_path):
    with pytest.raises(cfgmask.Error, match="empty"):
        cfgmask.compile_grammar('start: start "a"\n', TOK)
    g = tmp_path / "g.lark"
    g.write_bytes(b'start: "a"  // \xff\n')
    with pytest.raises(cfgmask.Error, match=":1:16:.*UTF-8"):
        cfgmask.compile_grammar(str(g), TOK)
    with pytest.raises(cfgmask.Error, match="is a directory"):
        cfgmask.compile_grammar(str(tmp_path), TOK)
    with pytest.raises(cfgmask.Error, match="is a directory"):
        cfgmask.Tokenizer(str(tmp_path))
    with pytest.raises(cfgmask.Error, match="is a directory"):
        cfgmask.Store.load(str(tmp_path))


def test_py_bad_matcher_arguments(store):
    with pytest.raises(cfgmask.Error, match="max_live_states"):
        cfgmask.GrammarMatcher(store, max_live_states=0)
    m = cfgmask.GrammarMatcher(store)
    with pytest.raises(TypeError):
        m.accept_token(3.7)
    with pytest.raises(TypeError):
        m.accept_token(True)
    assert m.accept_string("[") is True
    assert m.accept_token(np.int64(m.tokenize_forced("1")[0])) is True
    assert m.text == "[1"


def test_py_accept_string_of_invalid_utf8_returns_false(store):
    m = cfgmask.GrammarMatcher(store)
    assert m.accept_string(b'"\xff') is False
    assert m.text == ""
    assert m.accept_string(b'"\xc3\xa9"') is True


def test_py_logits_shorter_than_the_vocabulary_are_refused(store):
    from cfgmask.processors import LlamaCppLogitsProcessor
    p = LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store))
    short = np.zeros(store.vocab_size - 1, dtype=np.float32)
    with pytest.raises(cfgmask.Error, match="fewer than"):
        p(np.array([1], dtype=np.int64), short)


def test_py_batch_refuses_the_same_matcher_twice(store):
    m = cfgmask.GrammarMatcher(store)
    batch = cfgmask.BatchGrammarMatcher()
    bitmask = cfgmask.allocate_token_bitmask(2, store.vocab_size)
    with pytest.raises(cfgmask.Error, match="same matcher"):
        batch.batch_fill_next_token_bitmask([m, m], bitmask)
    tok = m.tokenize_forced("[")[0]
    with pytest.raises(cfgmask.Error, match="same matcher"):
        batch.batch_accept_token([m, m], [tok, tok])
    assert m.text == ""
    with pytest.raises(TypeError):
        batch.batch_accept_token([m], [float(tok)])


def test_py_one_matcher_from_many_threads_raises_instead_of_racing(store):
    """Eight threads on one matcher: every call either completes or raises
    'in use by another thread'; the matcher ends consistent."""
    m = cfgmask.GrammarMatcher(store)
    errors, other = [], []
    stop = time.monotonic() + 20

    long_text = "[" + "1, " * 20000 + "2"  # an advance long enough for the others to meet it

    def work():
        bm = cfgmask.allocate_token_bitmask(1, store.vocab_size)
        for _ in range(200):
            if time.monotonic() > stop:
                return
            try:
                m.fill_next_token_bitmask(bm)
                if m.accept_string(long_text):
                    while True:  # undo it, waiting for the others to let go
                        try:
                            m.rollback(1)
                            break
                        except cfgmask.Error as e:
                            if "in use by another thread" not in str(e):
                                raise
                            errors.append(e)
            except cfgmask.Error as e:
                if "in use by another thread" in str(e):
                    errors.append(e)
                else:
                    other.append(e)
            except Exception as e:  # noqa: BLE001 - anything else is a failure
                other.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not other, other[:3]
    assert errors, "eight threads never met on one matcher"
    assert m.text == ""
    assert m.accept_string('["x"]') and m.can_end()


def test_py_many_threads_share_one_store(store):
    """Sixteen threads, each with its own matcher and forks of it, over one
    store: the masks are those computed alone."""
    texts = ['{"k": [', "[1, 2, 3", '{"a": {"b": ', "[[[[", '"s', "[true, ", '{"x": 1', "[]"]
    def mask(mm):
        bm = cfgmask.allocate_token_bitmask(1, store.vocab_size)
        mm.fill_next_token_bitmask(bm)
        return bm[0].copy()
    alone = []
    for t in texts:
        mm = cfgmask.GrammarMatcher(store)
        mm.accept_string(t)
        alone.append(mask(mm))
    bad = []

    def work(i):
        mm = cfgmask.GrammarMatcher(store)
        mm.accept_string(texts[i % len(texts)])
        f = mm.fork()
        for _ in range(30):
            for x in (mm, f):
                if not np.array_equal(mask(x), alone[i % len(texts)]):
                    bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


QWEN2 = os.environ.get("CFGMASK_TOK_QWEN2", "/work/main/.cache/tokenizers/qwen2.gguf")
TOOLS = os.path.join(os.path.dirname(__file__), "..", "tools")


@pytest.mark.skipif(not os.path.exists(QWEN2), reason="qwen2 tokenizer not available")
def test_canonical_ids_reads_tokenizer_json(tmp_path):
    """canonical_ids.py takes a tokenizer.json as the command does; its ids
    spell the file and are those the `tokenizers` package gives."""
    import sys
    pytest.importorskip("tokenizers")
    pytest.importorskip("gguf")
    tj = tmp_path / "tokenizer.json"
    subprocess.run([sys.executable, os.path.join(TOOLS, "vocab_oracle.py"), "make-json", QWEN2,
                    str(tj)], check=True, timeout=300)
    text = tmp_path / "a.json"
    text.write_text('{"caf\u00e9": [1, 2.5], "k": "x y"}\n')
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "canonical_ids.py"), str(tj),
                        str(text)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ids = [int(x) for x in (tmp_path / "a.json.ids").read_text().split()]
    from tokenizers import Tokenizer
    assert ids == Tokenizer.from_file(str(tj)).encode(text.read_text(),
                                                      add_special_tokens=False).ids
    sys.path.insert(0, TOOLS)
    try:
        import canonical_ids
        assert canonical_ids.Encoder(str(tj)).decode(ids) == text.read_bytes()
    finally:
        sys.path.remove(TOOLS)
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "canonical_ids.py"), str(tmp_path),
                        str(text)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "is a directory" in r.stderr


def _no_eos_tokenizer(tmp_path):
    import json
    vocab = {c: i for i, c in enumerate(["a", "b", "[", "]", ",", "ab", "<end>"])}
    spec = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
            "post_processor": None, "decoder": None,
            "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    return path


NO_EOS_GRAMMAR = 'start: "[" [X ("," X)*] "]"\nX: /(ab)+/\n'


@needs_bin
def test_cli_tokenizer_without_eos_warns_and_eos_names_one(tmp_path):
    tok = _no_eos_tokenizer(tmp_path)
    g = tmp_path / "g.lark"
    g.write_text(NO_EOS_GRAMMAR)
    out = tmp_path / "o.cfgm"
    r = run("compile", g, "--tokenizer", tok, "-o", out, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "warning" in r.stderr and "--eos" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run("compile", g, "--tokenizer", tok, "-o", out, "--quiet", "--eos", "<end>")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert cfgmask.Store.load(str(out)).eos_ids == [6]
    r = run("compile", g, "--tokenizer", tok, "-o", out, "--quiet", "--eos", "5")
    assert r.returncode == 0 and cfgmask.Store.load(str(out)).eos_ids == [5]
    out.unlink()
    line = one_line_error(run("compile", g, "--tokenizer", tok, "-o", out, "--eos", "<stop>"))
    assert "<stop>" in line and not out.exists()
    one_line_error(run("compile", g, "--tokenizer", tok, "-o", out, "--eos", "99"))


def test_py_tokenizer_without_eos_warns_and_eos_names_one(tmp_path):
    tok = _no_eos_tokenizer(tmp_path)
    with pytest.warns(UserWarning, match="end-of-sequence"):
        cfgmask.compile_grammar(NO_EOS_GRAMMAR, str(tok))
    store = cfgmask.compile_grammar(NO_EOS_GRAMMAR, str(tok), eos="<end>")
    assert store.eos_ids == [6]
    m = cfgmask.GrammarMatcher(store)
    assert m.accept_string("[ab]") and m.accept_token(6) and m.is_terminated()
    assert cfgmask.compile_grammar(NO_EOS_GRAMMAR, cfgmask.Tokenizer(str(tok)), eos=5).eos_ids == [5]
    with pytest.raises(cfgmask.Error, match="eos"):
        cfgmask.compile_grammar(NO_EOS_GRAMMAR, str(tok), eos="<stop>")
    with pytest.raises(TypeError):
        cfgmask.compile_grammar(NO_EOS_GRAMMAR, str(tok), eos=1.0)


WARN_GRAMMAR = '''start: "[" item "]"
item: WORD
orphan: "x" item
WORD: /[a-z]+/
UNUSED: /[0-9]+/
DIGIT: /[0-9]/
NUMBER: DIGIT+
%declare _INDENT _DEDENT
'''


@needs_bin
@needs_tok
def test_cli_warns_of_likely_mistakes(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(WARN_GRAMMAR)
    out = tmp_path / "o.cfgm"
    r = run("compile", g, "--tokenizer", TOK, "-o", out, "--quiet", "--indenter", "none")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert f"cfgmask: {g}:3:1: warning: rule 'orphan' is unreachable from the start rule" in lines
    assert f"cfgmask: {g}:5:1: warning: terminal UNUSED is never used" in lines
    assert not any("DIGIT" in x for x in lines), lines  # used inside NUMBER
    assert any("NUMBER is never used" in x for x in lines), lines
    assert any("%declare'd terminal _INDENT" in x for x in lines), lines
    # A clean grammar gives no warning.
    g.write_text('start: "[" WORD "]"\nWORD: /[a-z]+/\n')
    r = run("compile", g, "--tokenizer", TOK, "-o", out, "--quiet")
    assert r.returncode == 0 and r.stderr == "", r.stderr


@needs_tok
def test_py_warns_of_likely_mistakes():
    with pytest.warns(UserWarning) as rec:
        cfgmask.compile_grammar(WARN_GRAMMAR.replace("%declare _INDENT _DEDENT\n", ""), TOK)
    msgs = [str(w.message) for w in rec]
    assert any("<string>:3:1: warning: rule 'orphan'" in m or "rule 'orphan' is unreachable" in m
               for m in msgs), msgs
    assert any("UNUSED is never used" in m for m in msgs), msgs


# ------------------------------------------- issue: hardening for serving

def test_item1_busy_matcher_raises_never_false(store):
    """A refused token is False; every other error raises.  Two threads on
    one matcher accept a valid token and step back: a call that meets the
    other thread raises 'in use by another thread', never returns False."""
    m = cfgmask.GrammarMatcher(store)
    tok = m.tokenize_forced("[")[0]
    false_results, busy, other = [], [], []
    stop = time.monotonic() + 5

    def work():
        n = 0
        while time.monotonic() < stop and n < 3000:
            n += 1
            try:
                ok = m.accept_token(tok) if n % 2 else m.accept_string("[")
                if not ok:
                    false_results.append(n)
                    continue
                while True:
                    try:
                        m.rollback(1)
                        break
                    except cfgmask.Error as e:
                        if "in use by another thread" not in str(e):
                            raise
            except cfgmask.Error as e:
                (busy if "in use by another thread" in str(e) else other).append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not other, other[:3]
    assert not false_results, f"{len(false_results)} accepts of a valid token returned False"
    assert m.text == ""
    # A refusal is still False, and leaves the matcher as it was.
    assert m.accept_string("]") is False and m.accept_token(store.eos_ids[0]) is False
    assert m.text == ""


def test_item2_batch_accept_token_is_all_or_nothing(store):
    ms = [cfgmask.GrammarMatcher(store) for _ in range(6)]
    batch = cfgmask.BatchGrammarMatcher()
    good = ms[0].tokenize_forced("[")[0]
    bad = store.eos_ids[0]  # EOS: refused where nothing is complete yet
    masks_before = []
    for m in ms:
        bm = cfgmask.allocate_token_bitmask(1, store.vocab_size)
        m.fill_next_token_bitmask(bm)
        masks_before.append(bm.copy())
    with pytest.raises(cfgmask.Error, match="session 1"):
        batch.batch_accept_token(ms, [good, bad, good, good, good, good])
    for m, before in zip(ms, masks_before):
        assert m.text == ""
        bm = cfgmask.allocate_token_bitmask(1, store.vocab_size)
        m.fill_next_token_bitmask(bm)
        assert np.array_equal(bm, before)
        with pytest.raises(cfgmask.Error):
            m.rollback(1)  # nothing to undo: no history was left behind
    batch.batch_accept_token(ms, [good] * 6)
    assert all(m.text == "[" for m in ms)


def test_item3_logits_width_must_match_the_store(store):
    """Logits of another vocabulary are an error; a model's padding (a
    multiple of 64, fewer than 1,024 columns past the vocabulary) is not."""
    from cfgmask.processors import HFLogitsProcessor, LlamaCppLogitsProcessor
    v = store.vocab_size
    assert v == 32000
    pad = (v // 64 + 1) * 64
    rows = [
        (v, None),
        (pad, None),
        (v + 256, None),
        (49152, "not a model's padding"),   # SmolLM2's logits on a LLaMA store
        (v + 77, "not a model's padding"),
        (v + 1024, "not a model's padding"),
        (v - 1, "fewer than"),
    ]
    for width, error in rows:
        for make in (lambda: LlamaCppLogitsProcessor(cfgmask.GrammarMatcher(store)),):
            p = make()
            scores = np.zeros(width, dtype=np.float32)
            if error is None:
                p(np.array([1], dtype=np.int64), scores)
                assert np.isneginf(scores[v:]).all()
            else:
                with pytest.raises(cfgmask.Error, match=error):
                    p(np.array([1], dtype=np.int64), scores)
        hf = HFLogitsProcessor([cfgmask.GrammarMatcher(store)])
        scores = np.zeros((1, width), dtype=np.float32)
        if error is None:
            hf(np.array([[1]], dtype=np.int64), scores)
        else:
            with pytest.raises(cfgmask.Error, match=error):
                hf(np.array([[1]], dtype=np.int64), scores)
    with pytest.raises(cfgmask.Error, match="not a model's padding"):
        cfgmask.check_logits_width(49152, 32000)
    cfgmask.check_logits_width(151936, 151665)  # Qwen2's real padding


FULL = os.environ.get("CFGMASK_FULL") == "1"
HEADER_BYTES = 56        # magic, versions, identity, sizes, checksums (store_file.cc)
INDEX_BYTES_AT = 40      # the header's size of the index part


def _masks_along(store, texts):
    """The masks after each prefix of `texts`, or the Error raised."""
    m = cfgmask.GrammarMatcher(store)
    out = []
    bm = cfgmask.allocate_token_bitmask(1, store.vocab_size)
    for t in texts:
        m.fill_next_token_bitmask(bm)
        out.append(bm.copy())
        assert m.accept_string(t)
    m.fill_next_token_bitmask(bm)
    out.append(bm.copy())
    return out


@needs_bin
def test_item4_item5_row_bit_flips_are_errors_never_masks_or_crashes(store, tmp_path):
    """Single-bit flips in the rows part of a store file: stats never crash
    (command and Store.stats()); every flip either leaves the masks as they
    were (alignment padding) or is an error before the first mask of its
    root, never a different mask (the per-root row checksums)."""
    good_path = tmp_path / "good.cfgm"
    store.save(str(good_path))
    good = good_path.read_bytes()
    index_bytes = int.from_bytes(good[INDEX_BYTES_AT:INDEX_BYTES_AT + 8], "little")
    rows_start = HEADER_BYTES + index_bytes
    texts = ['{', '"k"', ': ', '[', '1', ', ', 'true', ']', '}']
    want = _masks_along(cfgmask.Store.load(str(good_path)), texts)
    want_stats = cfgmask.Store.load(str(good_path)).stats()
    flips = 300 if FULL else 60
    rng = np.random.default_rng(34)
    positions = rng.integers(rows_start, len(good), size=flips)
    caught = same = 0
    for k, at in enumerate(positions):
        bad = bytearray(good)
        bad[at] ^= 1 << int(rng.integers(0, 8))
        path = tmp_path / f"flip{k % 2}.cfgm"
        path.write_bytes(bytes(bad))
        try:
            s = cfgmask.Store.load(str(path))
        except cfgmask.Error:
            caught += 1
            continue
        try:
            got = _masks_along(s, texts)
        except cfgmask.Error as e:
            assert "damaged" in str(e), str(e)
            caught += 1
            with pytest.raises(cfgmask.Error, match="damaged"):
                s.stats()
            continue
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), f"byte {at}: a different mask"
        try:  # checks every root: a flip in a root the texts never reached is caught here
            stats = s.stats()
        except cfgmask.Error as e:
            assert "damaged" in str(e), str(e)
            caught += 1
        else:  # a flip outside every root's rows (alignment padding): no figure changes
            same += 1
            assert stats["rows"] == want_stats["rows"]
        if k % 10 == 0:  # the command on a few (a crash would be a signal, not 0 or 2)
            r = run("stats", path, "--json")
            assert r.returncode in (0, 2), r
    assert caught > flips // 2, (caught, same)


@needs_bin
def test_item5_stats_command_refuses_damaged_rows(store, tmp_path):
    path = tmp_path / "s.cfgm"
    store.save(str(path))
    data = bytearray(path.read_bytes())
    index_bytes = int.from_bytes(data[INDEX_BYTES_AT:INDEX_BYTES_AT + 8], "little")
    # The first row's sequence id (the first array of the rows part, after its count).
    at = HEADER_BYTES + index_bytes + 8
    data[at + 3] ^= 0x40
    path.write_bytes(bytes(data))
    for args in (("stats", path), ("stats", path, "--json")):
        line = one_line_error(run(*args))
        assert "damaged" in line, line
    with pytest.raises(cfgmask.Error, match="damaged"):
        cfgmask.Store.load(str(path)).stats()


def test_item6_store_file_rewritten_in_place_while_open(store, tmp_path):
    """cp over, truncate, same-size rewrite of a store file a process has
    open: the process keeps the store it opened (a private snapshot)."""
    path = tmp_path / "live.cfgm"
    store.save(str(path))
    size = path.stat().st_size
    texts = ['[', '1', ', ', '{', '"a"', ': ', 'null', '}', ']']
    want = _masks_along(store, texts)
    for damage in ("truncate", "zeros", "other"):
        store.save(str(path))
        s = cfgmask.Store.load(str(path))
        m = cfgmask.GrammarMatcher(s)
        if damage == "truncate":
            os.truncate(path, 0)
        elif damage == "zeros":
            with open(path, "r+b") as f:  # the same size, rewritten in place
                f.write(b"\0" * size)
        else:
            other = cfgmask.compile_grammar('start: "x"+\n', TOK)
            other.save(str(tmp_path / "other.cfgm"))
            with open(path, "wb") as f:  # cp other.cfgm live.cfgm
                f.write((tmp_path / "other.cfgm").read_bytes())
        got = _masks_along(s, texts)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), damage
        assert m.accept_string("[1]") and m.can_end()
        if damage != "other":
            with pytest.raises(cfgmask.Error):
                cfgmask.Store.load(str(path))


@needs_bin
@needs_tok
def test_item7_tiny_max_memory_is_one_line(tmp_path):
    out = tmp_path / "o.cfgm"
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    for value in ("16K", "1K", "1023K"):
        line = one_line_error(run("compile", g, "--tokenizer", TOK, "--max-memory", value,
                                  "-o", out))
        assert "max_memory" in line or "memory" in line, line
        assert not out.exists()
    with pytest.raises(cfgmask.Error, match="max_memory"):
        cfgmask.compile_grammar(JSON_GRAMMAR, TOK, max_memory=16 << 10)


@needs_bin
@needs_tok
def test_item8_compile_wall_clock_budget(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text("start: A\nA: /(a{1000}){1000}/\n")
    out = tmp_path / "o.cfgm"
    t0 = time.monotonic()
    line = one_line_error(run("compile", g, "--tokenizer", TOK, "--max-seconds", "1", "-o", out))
    assert time.monotonic() - t0 < 60
    # Past the budget in a phase, or inside the vocabulary walk (its own check).
    assert "max_seconds" in line and ("phase" in line or "vocabulary walk" in line), line
    assert not out.exists()
    r = run("compile", g, "--tokenizer", TOK, "--max-seconds", "-1", "-o", out)
    assert r.returncode == 2 and "option --max-seconds" in r.stderr.splitlines()[0], r.stderr
    with pytest.raises(cfgmask.Error, match="max_seconds"):
        cfgmask.compile_grammar(str(g), TOK, max_seconds=1)
    assert cfgmask._core.DEFAULTS["max_seconds"] == 3600


# Grammars whose automaton or LALR(1) phase alone takes seconds: the budget
# and the signals are looked at inside those phases (StopCheck), not only as
# each phase ends.  Four terminals of a million NFA instructions each (about
# 2.5 s apiece in the automaton phase), and 1,000 rules of 60 symbols over
# 500 keywords (a large LALR(1) table; the grammar phase takes a fraction of
# that).
AUTOMATON_HEAVY = "start: A0 | A1 | A2 | A3\n" + "".join(
    f"A{i}: /(b{{{i}}}a{{1000}}){{1000}}/\n" for i in range(4))


def _lalr_heavy():
    import random
    rng = random.Random(1)
    n, length, keywords = 1000, 60, 500
    lines = ["start: " + " | ".join(f"r{i}" for i in range(n))]
    for i in range(n):
        seq = " ".join(f'"w{rng.randrange(keywords)}"' if rng.random() < 0.7
                       else f"r{rng.randrange(n)}" for _ in range(length))
        lines.append(f'r{i}: {seq} | "z{i}"')
    return "\n".join(lines) + "\n"


@needs_bin
@needs_tok
def test_item8_budget_checked_inside_long_phases(tmp_path):
    """--max-seconds 1 on a grammar whose automaton phase alone takes about
    10 s stops inside that phase, with the budget's line.  (The LALR phase's
    own checks: CompileBudget.Item8BudgetAndInterruptInsideTheLalrPhase, and
    the reports inside it below; its grammar takes long enough in its
    grammar phase too that a 1 s budget on a loaded machine can end there.)"""
    g = tmp_path / "g.lark"
    g.write_text(AUTOMATON_HEAVY)
    out = tmp_path / "o.cfgm"
    line = one_line_error(run("compile", g, "--tokenizer", TOK, "--max-seconds", "1", "-o", out))
    assert line.endswith("compile exceeded 1 s (max_seconds, --max-seconds) in the automaton phase"), line
    assert not out.exists()


@needs_tok
@pytest.mark.parametrize("phase", ["automaton", "lalr"])
def test_item11_signals_looked_at_inside_long_phases(phase):
    """compile_grammar's progress hook (where signals are looked at) is
    called inside the automaton and LALR phases, not only as they begin:
    an exception raised from the third report of that phase stops the
    compile there."""
    class Stop(Exception):
        pass
    reports = []

    def progress(p, frac, sec):
        reports.append(p)
        if reports.count(phase) == 3:
            raise Stop(p)
    grammar = AUTOMATON_HEAVY if phase == "automaton" else _lalr_heavy()
    with pytest.raises(Stop):
        cfgmask.compile_grammar(grammar, TOK, progress=progress, max_seconds=120)
    assert reports[-1] == phase and reports.count(phase) == 3, reports


@needs_bin
@needs_tok
def test_item9_inputs_must_be_regular_files(store, tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "o.cfgm"
    store.save(str(out))
    cases = [("compile", fifo, "--tokenizer", TOK, "-o", tmp_path / "x.cfgm"),
             ("compile", g, "--tokenizer", fifo, "-o", tmp_path / "x.cfgm"),
             ("compile", g, "--tokenizer", "/dev/zero", "-o", tmp_path / "x.cfgm"),
             ("compile", "/dev/null", "--tokenizer", TOK, "-o", tmp_path / "x.cfgm"),
             ("stats", fifo), ("stats", "/dev/zero"),
             ("check", out, fifo), ("check", out, "/dev/zero")]
    for args in cases:
        line = one_line_error(run(*args))  # run() has a timeout: a block fails it
        assert "regular file" in line, (args, line)
    assert not (tmp_path / "x.cfgm").exists()
    for call in (lambda: cfgmask.Tokenizer("/dev/zero"), lambda: cfgmask.Tokenizer(str(fifo)),
                 lambda: cfgmask.Store.load(str(fifo)), lambda: cfgmask.Store.load("/dev/zero"),
                 lambda: cfgmask.compile_grammar(str(fifo), TOK)):
        with pytest.raises(cfgmask.Error, match="regular file"):
            call()


@needs_bin
@needs_tok
def test_item12_output_only_to_regular_files(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "null-link"
    os.symlink("/dev/null", link)
    for target in (fifo, link, "/dev/null"):
        line = one_line_error(run("compile", g, "--tokenizer", TOK, "-o", target))
        assert "regular file" in line, line
    assert os.path.islink(link) and os.path.realpath(link) == "/dev/null"
    import stat
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@needs_bin
@needs_tok
def test_item13_temporary_names_are_ours_alone(tmp_path):
    """No OUT.tmp.<pid> file of the user's is removed or overwritten; a bare
    file name works; the compile leaves no temporary file behind."""
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    dead = subprocess.Popen(["true"])
    dead.wait()
    theirs = [tmp_path / f"out.cfgm.tmp.{dead.pid}", tmp_path / "out.cfgm.tmp.1",
              tmp_path / "out.cfgm.tmp.x"]
    for p in theirs:
        p.write_text("a user's file")
    r = subprocess.run([BIN, "compile", "g.lark", "--tokenizer", TOK, "-o", "out.cfgm",
                        "--quiet"], cwd=tmp_path, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for p in theirs:
        assert p.read_text() == "a user's file"
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["g.lark", "out.cfgm"] + [p.name for p in theirs]), names
    cfgmask.Store.load(str(tmp_path / "out.cfgm"))


def test_item10_suffix_size_limit(store):
    m = cfgmask.GrammarMatcher(store)
    limit = cfgmask._core.MAX_SUFFIX_BYTES
    assert limit == 64 * 1024
    t0 = time.monotonic()
    with pytest.raises(cfgmask.Error, match="limit"):
        m.set_suffix(b" " * (10 << 20))
    with pytest.raises(cfgmask.Error, match="limit"):
        m.set_suffix(b" " * (limit + 1))
    assert time.monotonic() - t0 < 5
    assert m.suffix == b""
    m.set_suffix(b" " * 100 + b"]")
    assert m.accept_string("[1") and m.can_end()


def test_item11_ctrl_c_interrupts_compile_grammar(tmp_path):
    """SIGINT during compile_grammar raises KeyboardInterrupt at the next
    progress report, long before the compile would end."""
    import signal
    import sys
    script = tmp_path / "c.py"
    script.write_text(f"""
import os, sys, time, signal, threading
import cfgmask
seen = []
def progress(phase, frac, sec):
    if phase == "walk" and not seen:
        seen.append(time.monotonic())
        signal.raise_signal(signal.SIGINT)  # as a Ctrl-C, but delivered to this thread at once
try:
    cfgmask.compile_grammar({os.path.join(os.path.dirname(__file__), '..', '..', 'grammar', 'lark', 'json.lark')!r},
                            {TOK!r}, num_threads=1, progress=progress)
    print("finished")
except KeyboardInterrupt:
    print("interrupted", time.monotonic() - seen[0])
""")
    if not os.path.exists(TOK):
        pytest.skip("llama-spm tokenizer not available")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert r.stdout.startswith("interrupted"), (r.stdout, r.stderr[-2000:])


def test_messages_one_line_for_python_arguments(store):
    m = cfgmask.GrammarMatcher(store)
    calls = [lambda: m.rollback(2**40), lambda: m.rollback("1"),
             lambda: m.find_jump_forward_string(2**40), lambda: m.accept_token(2**70),
             lambda: m.fill_next_token_bitmask(cfgmask.allocate_token_bitmask(1, store.vocab_size),
                                              2**70),
             lambda: cfgmask.GrammarMatcher(store, max_live_states=2**40),
             lambda: m.find_completion("x")]
    for call in calls:
        with pytest.raises((cfgmask.Error, TypeError, ValueError)) as e:
            call()
        text = str(e.value)
        assert "\n" not in text and len(text.encode()) < 1000, text
    # find_completion and completion_search agree on a negative budget.
    with pytest.raises(ValueError, match=">= 0"):
        m.find_completion(-1)
    with pytest.raises(ValueError, match=">= 0"):
        m.completion_search(-1)


# ----------------------------------------------- table of bad inputs, by kind
# Each row: (kind, what, call, expected).  expected: False / True (a refusal,
# an acceptance), ("Error", text) or ("TypeError", text): raised, with the
# text in the one-line message.  Command-line rows run the binary: ("exit2",
# text) is one line on stderr, exit status 2.

def _bad_input_rows(store, tmp_path):
    m = cfgmask.GrammarMatcher(store)
    tok = m.tokenize_forced("[")[0]
    eos = store.eos_ids[0]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    garbage = tmp_path / "garbage.cfgm"
    garbage.write_bytes(b"CFGMASK\n" + b"\xff" * 100)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    bad_json = tmp_path / "tokenizer.json"
    bad_json.write_text('{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}}}')
    fresh = lambda: cfgmask.GrammarMatcher(store)  # noqa: E731
    return [
        # Python API: refusals are False, everything else raises.
        ("api", "EOS at the start", lambda: fresh().accept_token(eos), False),
        ("api", "valid token", lambda: fresh().accept_token(tok), True),
        ("api", "closing bracket first", lambda: fresh().accept_string("]"), False),
        ("api", "invalid UTF-8 in a string", lambda: fresh().accept_string(b'"\xff'), False),
        ("api", "token id past the vocabulary", lambda: fresh().accept_token(store.vocab_size),
         ("Error", "out of range")),
        ("api", "negative token id", lambda: fresh().accept_token(-1), ("Error", "out of range")),
        ("api", "token id as float", lambda: fresh().accept_token(1.0), ("TypeError", "int")),
        ("api", "token id 2**70", lambda: fresh().accept_token(2**70), ("Error", "out of range")),
        ("api", "rollback past the history", lambda: fresh().rollback(1), ("Error", "roll back")),
        ("api", "rollback 2**40", lambda: fresh().rollback(2**40), ("Error", "num_tokens")),
        ("api", "rollback of a string", lambda: fresh().rollback("1"), ("TypeError", "int")),
        ("api", "find_completion(-1)", lambda: fresh().find_completion(-1), ("ValueError", ">= 0")),
        ("api", "completion_search(-1)", lambda: fresh().completion_search(-1),
         ("ValueError", ">= 0")),
        ("api", "suffix of 10 MB", lambda: fresh().set_suffix(b"x" * (10 << 20)), ("Error", "limit")),
        ("api", "max_live_states 0", lambda: cfgmask.GrammarMatcher(store, max_live_states=0),
         ("Error", "max_live_states")),
        ("api", "batch with one refusal", lambda: cfgmask.BatchGrammarMatcher().batch_accept_token(
            [fresh(), fresh()], [tok, eos]), ("Error", "session 1")),
        ("api", "logits 49,152 wide for 32,000", lambda: cfgmask.check_logits_width(49152, 32000),
         ("Error", "not a model's padding")),
        # Grammars.
        ("grammar", "FIFO as grammar", lambda: cfgmask.compile_grammar(str(fifo), TOK),
         ("Error", "regular file")),
        ("grammar", "undefined rule", lambda: cfgmask.compile_grammar("start: x\n", TOK),
         ("Error", "<string>:1:")),
        ("grammar", "max_seconds negative", lambda: cfgmask.compile_grammar(JSON_GRAMMAR, TOK,
                                                                            max_seconds=-1),
         ("Error", "max_seconds")),
        ("grammar", "max_memory 16K", lambda: cfgmask.compile_grammar(JSON_GRAMMAR, TOK,
                                                                      max_memory=16 << 10),
         ("Error", "max_memory")),
        # Tokenizers.
        ("tokenizer", "/dev/zero", lambda: cfgmask.Tokenizer("/dev/zero"), ("Error", "regular file")),
        ("tokenizer", "FIFO", lambda: cfgmask.Tokenizer(str(fifo)), ("Error", "regular file")),
        ("tokenizer", "empty file", lambda: cfgmask.Tokenizer(str(empty)), ("Error", "empty")),
        ("tokenizer", "duplicate ids", lambda: cfgmask.Tokenizer(str(bad_json)), ("Error", "")),
        # Stores.
        ("store", "garbage after the magic", lambda: cfgmask.Store.load(str(garbage)),
         ("Error", str(garbage))),
        ("store", "empty file", lambda: cfgmask.Store.load(str(empty)), ("Error", "not a cfgmask store")),
        ("store", "FIFO", lambda: cfgmask.Store.load(str(fifo)), ("Error", "regular file")),
        ("store", "a directory", lambda: cfgmask.Store.load(str(tmp_path)), ("Error", "directory")),
        # The command line.
        ("cli", "compile a FIFO", ("compile", fifo, "--tokenizer", TOK, "-o", tmp_path / "o.cfgm"),
         ("exit2", "regular file")),
        ("cli", "-o a FIFO", ("compile", g, "--tokenizer", TOK, "-o", fifo), ("exit2", "regular file")),
        ("cli", "stats of /dev/zero", ("stats", "/dev/zero"), ("exit2", "regular file")),
        ("cli", "stats of garbage", ("stats", garbage), ("exit2", str(garbage))),
        ("cli", "--max-memory 16K", ("compile", g, "--tokenizer", TOK, "--max-memory", "16K", "-o",
                                     tmp_path / "o.cfgm"), ("exit2", "max_memory")),
    ]


def _generated_bad_rows(store, tmp_path, n):
    """`n` more rows of the same table, generated (seeded) from the
    categories the probe used: token ids and rollbacks out of range, texts
    the grammar refuses, grammars with an undefined rule, a raw NUL in a
    literal or a byte that is not UTF-8 at a known position, truncated
    store files; every fifth grammar also through the command line."""
    import random
    rng = random.Random(34)
    good = tmp_path / "good.cfgm"
    store.save(str(good))
    data = good.read_bytes()
    fresh = lambda: cfgmask.GrammarMatcher(store)  # noqa: E731
    rows = []
    for i in range(n):
        kind = i % 7
        if kind == 0:
            t = rng.choice([store.vocab_size + rng.randrange(1 << 20), -1 - rng.randrange(1 << 20)])
            rows.append(("api", f"token id {t}", lambda t=t: fresh().accept_token(t),
                         ("Error", "out of range")))
        elif kind == 1:
            k = 1 + rng.randrange(1000)
            rows.append(("api", f"rollback {k} of a fresh matcher", lambda k=k: fresh().rollback(k),
                         ("Error", "roll back")))
        elif kind == 2:
            text = rng.choice("]},:") + "".join(rng.choice('[]{}",:0123 truefalsn') for _ in
                                                range(rng.randrange(12)))
            rows.append(("api", f"text {text!r}", lambda text=text: fresh().accept_string(text),
                         False))
        elif kind == 3:
            line = 2 + rng.randrange(20)
            lines = [f'r{j}: "k{j}"' for j in range(line - 2)]
            text = "start: " + " | ".join(["r_undef"] + [f"r{j}" for j in range(line - 2)]) + "\n"
            text = "\n".join([text.rstrip("\n")] + lines) + "\n"
            rows.append(("grammar", f"undefined rule, {line} lines",
                         lambda text=text: cfgmask.compile_grammar(text, TOK),
                         ("Error", "<string>:1:8:")))
        elif kind == 4:
            word = "".join(rng.choice("abcxyz") for _ in range(1 + rng.randrange(8)))
            at = rng.randrange(len(word) + 1)
            lit = word[:at] + "\0" + word[at:]
            quote = rng.choice('"/')
            text = f"start: A\nA: {quote}{lit}{quote}\n"
            where = f"2:{4 + 1 + at}: NUL byte in"
            rows.append(("grammar", f"NUL in {quote}{word}{quote} at {at}",
                         lambda text=text: cfgmask.compile_grammar(text, TOK), ("Error", where)))
            if i % 5 == 0:
                f = tmp_path / f"nul{i}.lark"
                f.write_bytes(text.encode())
                rows.append(("cli", f"NUL in {quote}{word}{quote} at {at}, command line",
                             ("compile", f, "--tokenizer", TOK, "-o", tmp_path / "o.cfgm"),
                             ("exit2", f"nul{i}.lark:{where}")))
        elif kind == 5:
            line = 1 + rng.randrange(4)
            lines = ['start: "x" r', 'r: "y"', "// a comment", '%ignore " "']
            col = 1 + rng.randrange(len(lines[line - 1]) + 1)
            bad = rng.choice([0x80, 0xbf, 0xc0, 0xff, 0xfe, 0xf8])
            raw = [x.encode() for x in lines]
            raw[line - 1] = raw[line - 1][:col - 1] + bytes([bad]) + raw[line - 1][col - 1:]
            f = tmp_path / f"utf{i}.lark"
            f.write_bytes(b"\n".join(raw) + b"\n")
            where = f"utf{i}.lark:{line}:{col}: byte 0x{bad:02x} is not UTF-8"
            rows.append(("grammar", f"byte 0x{bad:02x} at {line}:{col}",
                         lambda f=f: cfgmask.compile_grammar(str(f), TOK), ("Error", where)))
            if i % 5 == 0:
                rows.append(("cli", f"byte 0x{bad:02x} at {line}:{col}, command line",
                             ("compile", f, "--tokenizer", TOK, "-o", tmp_path / "o.cfgm"),
                             ("exit2", where)))
        else:
            cut = rng.randrange(len(data))
            f = tmp_path / f"cut{i}.cfgm"
            f.write_bytes(data[:cut])
            rows.append(("store", f"store cut at {cut} of {len(data)} bytes",
                         lambda f=f: cfgmask.Store.load(str(f)), ("Error", "")))
            if i % 5 == 0:
                rows.append(("cli", f"stats of a store cut at {cut}", ("stats", f), ("exit2", "")))
    return rows


@needs_bin
@needs_tok
def test_table_of_bad_inputs(store, tmp_path):
    # The hand-written rows, then 300 generated ones (about 0.4 s in all:
    # bad grammars fail before the tokenizer is read).
    rows = _bad_input_rows(store, tmp_path)
    hand = len(rows)
    rows += _generated_bad_rows(store, tmp_path, 300)
    failures = []
    for kind, what, call, expected in rows:
        try:
            if kind == "cli":
                r = run(*call)
                got = ("exit2", one_line_error(r))
            else:
                got = call()
                if got is None:
                    got = "ok"
        except (cfgmask.Error, TypeError, ValueError) as e:
            text = str(e)
            assert "\n" not in text and len(text.encode()) < 1000, (what, text)
            got = (("Error" if isinstance(e, cfgmask.Error) else type(e).__name__), text)
        if isinstance(expected, tuple):
            ok = (isinstance(got, tuple) and got[0] == expected[0]
                  and expected[1] in got[1])
        else:
            ok = got is expected
        if not ok:
            failures.append((kind, what, expected, got))
    assert not failures, failures
    assert hand >= 30 and len(rows) >= 300 + hand, (hand, len(rows))


@needs_bin
@needs_tok
def test_messages_nul_byte_in_a_literal_is_refused_as_lark_does(tmp_path):
    """A raw NUL inside a string literal or a regexp: Lark refuses it (its
    literal_eval: "source code string cannot contain null bytes"); so does
    cfgmask, in one line at the NUL's position that quotes the literal with
    its closing quote.  An escaped \\x00 is a NUL character for both."""
    cases = [('start: "a\0b"\n', 'string literal "a\\x00b"'),
             ('start: /a\0b/\n', 'regular expression /a\\x00b/')]
    try:
        import lark
    except ImportError:
        lark = None
    for text, quoted in cases:
        if lark is not None:
            with pytest.raises(lark.exceptions.GrammarError, match="null bytes"):
                lark.Lark(text, parser="lalr", lexer="contextual")
        with pytest.raises(cfgmask.Error) as e:
            cfgmask.compile_grammar(text, TOK)
        assert str(e.value).startswith("<string>:1:10: NUL byte in " + quoted), str(e.value)
        g = tmp_path / "g.lark"
        g.write_bytes(text.encode())
        line = one_line_error(run("compile", g, "--tokenizer", TOK, "-o", tmp_path / "o.cfgm"))
        assert "g.lark:1:10: NUL byte in " + quoted in line, line
    if lark is not None:
        lark.Lark('start: "a\\x00b"\n', parser="lalr", lexer="contextual")
    cfgmask.compile_grammar('start: "a\\x00b"\n', TOK)


@needs_bin
@pytest.mark.skipif(not os.path.exists(QWEN2), reason="qwen2 tokenizer not available")
def test_messages_eos_by_text_on_tokenizer_json(tmp_path):
    """--eos '<|endoftext|>' names Qwen's special token by its text on a
    tokenizer.json (its bytes are empty), as the id 151643 does."""
    import sys
    pytest.importorskip("gguf")
    tj = tmp_path / "tokenizer.json"
    subprocess.run([sys.executable, os.path.join(TOOLS, "vocab_oracle.py"), "make-json", QWEN2,
                    str(tj)], check=True, timeout=300)
    g = tmp_path / "g.lark"
    g.write_text(JSON_GRAMMAR)
    for eos in ("<|endoftext|>", "151643"):
        out = tmp_path / "o.cfgm"
        r = run("compile", g, "--tokenizer", tj, "--eos", eos, "-o", out, "--quiet")
        assert r.returncode == 0, r.stderr
        assert cfgmask.Store.load(str(out)).eos_ids == [151643]
    assert "no token" in one_line_error(run("compile", g, "--tokenizer", tj, "--eos", "<|nope|>",
                                            "-o", tmp_path / "x.cfgm"))


def test_item6_map_mode_is_opt_in(store, tmp_path, monkeypatch):
    """CFGMASK_STORE_OPEN=map maps the file (zero-copy, for operators who
    replace store files only atomically): the same masks as the snapshot."""
    path = tmp_path / "s.cfgm"
    store.save(str(path))
    texts = ['[', '1', ', ', '"x"', ']']
    want = _masks_along(cfgmask.Store.load(str(path)), texts)
    monkeypatch.setenv("CFGMASK_STORE_OPEN", "map")
    mapped = cfgmask.Store.load(str(path))
    got = _masks_along(mapped, texts)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    store.save(str(path))  # an atomic replacement leaves the mapping intact
    got = _masks_along(mapped, texts)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
