"""cfgmask/fim.py: a model's fill-in-the-middle template from its special tokens.

On real vocabularies: the StarCoder, DeepSeek-Coder and Falcon vocab-only
GGUFs that llama-cpp-python's source distribution carries (setup.sh extracts
them: $CFGMASK_TOK_STARCODER, $CFGMASK_TOK_DEEPSEEK_CODER, $CFGMASK_TOK_FALCON)
give their family's markers, read both from the GGUF file and from
llama.cpp's view of it; SmolLM2, LLaMA SPM and Qwen2 have none.  The other
families, the marker order and the prompt's ids on made-up vocabularies.
"""
import os

import pytest

from cfgmask import fim

REQUIRED = os.environ.get("CFGMASK_REQUIRE_LLAMA") == "1"

# (env var, family, (prefix id, suffix id, middle id), template text)
REAL = [
    ("CFGMASK_TOK_STARCODER", "starcoder", (1, 3, 2),
     "<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>"),
    ("CFGMASK_TOK_DEEPSEEK_CODER", "deepseek-coder", (32016, 32015, 32017),
     "<｜fim▁begin｜>{prefix}<｜fim▁hole｜>{suffix}<｜fim▁end｜>"),
    ("CFGMASK_TOK_FALCON", "falcon", (8, 9, 10), ">>PREFIX<<{prefix}>>SUFFIX<<{suffix}>>MIDDLE<<"),
]
NONE = ["CFGMASK_TOK_SMOLLM2", "CFGMASK_TOK_LLAMA_SPM", "CFGMASK_TOK_QWEN2"]


def _path(var):
    path = os.environ.get(var, "")
    if not os.path.isfile(path):
        if REQUIRED:
            pytest.fail(f"${var} names no file ({path!r}): run setup.sh")
        pytest.skip(f"${var} is not set (setup.sh extracts it)")
    return path


def _vocab_llama(path):
    llama_cpp = pytest.importorskip("llama_cpp") if not REQUIRED else __import__("llama_cpp")
    return llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)


@pytest.mark.parametrize("var,family,ids,text", REAL, ids=[r[1] for r in REAL])
def test_real_vocabularies(var, family, ids, text):
    path = _path(var)
    t = fim.select_template(fim.special_tokens_of_llama(_vocab_llama(path)))  # as `serve` reads it
    assert t is not None and t.family == family
    assert (t.prefix_id, t.suffix_id, t.middle_id) == ids
    assert t.describe() == text
    if family == "deepseek-coder":  # the gguf package's reading agrees (3 s a file: one file)
        assert fim.select_template(fim.special_tokens_of_gguf(path)) == t


@pytest.mark.parametrize("var", NONE)
def test_vocabularies_without_fim_tokens(var):
    path = _path(var)
    assert fim.select_template(fim.special_tokens_of_llama(_vocab_llama(path))) is None


def test_user_text_spelling_a_marker_stays_text():
    """The prompt's ids come from the markers' ids and the tokenized text: a
    prefix that spells <fim_middle> does not put the marker in the prompt."""
    llm = _vocab_llama(_path("CFGMASK_TOK_STARCODER"))
    t = fim.select_template(fim.special_tokens_of_llama(llm))

    def tokenize(text):
        return llm.tokenize(text.encode(), add_bos=False, special=False)

    prefix, suffix = "s = '<fim_middle>'\nx = ", "\nprint(x)\n"
    ids = fim.prompt_ids(t, tokenize, prefix, suffix)
    assert ids.count(t.middle_id) == 1 and ids[-1] == t.middle_id
    assert ids[0] == t.prefix_id and ids.count(t.prefix_id) == 1
    assert ids == [t.prefix_id, *tokenize(prefix), t.suffix_id, *tokenize(suffix), t.middle_id]
    assert llm.detokenize(ids[1:ids.index(t.suffix_id)]).decode() == prefix


def _fake(texts):
    return {text: 100 + i for i, text in enumerate(texts)}


def fake_tokenize(text):
    return [ord(c) for c in text]


@pytest.mark.parametrize("texts,family,order", [
    (["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>"], "qwen-coder", "psm"),
    (["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"], "codellama", "psm"),
    (["[PREFIX]", "[SUFFIX]", "[MIDDLE]"], "codestral", "spm"),
    (["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"], "deepseek-coder", "psm"),
])
def test_families(texts, family, order):
    specials = _fake(["<s>", "</s>"] + texts)
    t = fim.select_template(specials)
    assert t.family == family and t.order == order
    ids = fim.prompt_ids(t, fake_tokenize, "ab", "c", bos=1)
    if order == "psm":
        assert ids == [1, t.prefix_id, 97, 98, t.suffix_id, 99, t.middle_id]
    else:  # Codestral: [SUFFIX]suffix[PREFIX]prefix, the middle follows
        assert t.middle_id is None
        assert ids == [1, t.suffix_id, 99, t.prefix_id, 97, 98]
        assert t.describe() == "[SUFFIX]{suffix}[PREFIX]{prefix}"


def test_incomplete_markers_and_order_of_families():
    assert fim.select_template(_fake(["<fim_prefix>", "<fim_suffix>"])) is None
    assert fim.select_template({}) is None
    both = _fake(["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                  "<fim_prefix>", "<fim_suffix>", "<fim_middle>"])
    assert fim.select_template(both).family == "starcoder"  # FAMILIES' order


def test_without_template_the_prefix_alone():
    assert fim.prompt_ids(None, fake_tokenize, "ab", "cd") == [97, 98]
    assert fim.prompt_ids(None, fake_tokenize, "ab", "cd", bos=1) == [1, 97, 98]
    t = fim.select_template(_fake(["<fim_prefix>", "<fim_suffix>", "<fim_middle>"]))
    assert fim.prompt_ids(t, fake_tokenize, "", "") == [t.prefix_id, t.suffix_id, t.middle_id]
