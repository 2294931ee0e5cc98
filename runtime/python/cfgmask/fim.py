"""Fill-in-the-middle prompts: a model's FIM template, read from its tokenizer.

A code model trained for completion in the middle of a file reads the text
before the cursor and the text after it around three special tokens of its
vocabulary, then writes the middle.  Which tokens, and in which order, is the
model family's convention; the tokenizer says which family by the special
tokens it has.  :func:`select_template` takes a vocabulary's special tokens
(text -> id: :func:`special_tokens_of_llama` from the model,
:func:`special_tokens_of_gguf` from a GGUF file; a cfgmask Store keeps no text
for its special tokens) and returns the first family of
:data:`FAMILIES` whose tokens are all there, or None for a model that has
none (SmolLM2, LLaMA 2, Qwen2's base vocabulary).  :func:`prompt_ids` builds
the token ids of a FIM prompt (:func:`llama_prompt_ids` with a llama_cpp.Llama's
tokenizer); with no template the model is given the prefix
alone (it still cannot end where the suffix does not follow: the grammar
sees the suffix, GrammarMatcher.set_suffix).

The ids are put together from the template's token ids and the tokenized
prefix and suffix, never by tokenizing a template string: text that spells a
special token inside the user's code stays text.

Used by ``python -m cfgmask serve`` (cfgmask/serve.py: ``/v1/completions``
with ``suffix``); any other caller with a model and the text around a cursor
(``template_of_llama`` once, then ``llama_prompt_ids``) builds the same prompt.  Tested by tests/py/test_fim.py on real vocabularies
(StarCoder, DeepSeek-Coder and Falcon GGUFs from llama-cpp-python's source
distribution, SmolLM2's) and on the other families' token lists.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["FimTemplate", "FAMILIES", "select_template", "prompt_ids", "template_of_llama",
           "llama_prompt_ids",
           "special_tokens_of_llama", "special_tokens_of_gguf"]

PSM = "psm"  # prefix marker, prefix, suffix marker, suffix, middle marker
SPM = "spm"  # suffix marker, suffix, prefix marker, prefix (the middle follows the prefix)


@dataclasses.dataclass(frozen=True)
class _Family:
    name: str
    prefix: Tuple[str, ...]  # spellings of each marker a vocabulary may use
    suffix: Tuple[str, ...]
    middle: Tuple[str, ...]  # () for a family with no middle marker
    order: str
    models: str


# Checked in this order; the first whose markers are all special tokens wins.
FAMILIES: Tuple[_Family, ...] = (
    _Family("starcoder", ("<fim_prefix>",), ("<fim_suffix>",), ("<fim_middle>",), PSM,
            "StarCoder 1/2, SantaCoder, Refact, StableCode, Granite Code"),
    _Family("qwen-coder", ("<|fim_prefix|>",), ("<|fim_suffix|>",), ("<|fim_middle|>",), PSM,
            "Qwen2.5-Coder, Qwen3-Coder, CodeGemma"),
    _Family("deepseek-coder", ("<｜fim▁begin｜>", "<｜fim begin｜>"),
            ("<｜fim▁hole｜>", "<｜fim hole｜>"), ("<｜fim▁end｜>", "<｜fim end｜>"), PSM,
            "DeepSeek-Coder 1/1.5/V2"),
    _Family("codellama", ("▁<PRE>", " <PRE>", "<PRE>"), ("▁<SUF>", " <SUF>", "<SUF>"),
            ("▁<MID>", " <MID>", "<MID>"), PSM, "Code Llama"),
    _Family("falcon", (">>PREFIX<<",), (">>SUFFIX<<",), (">>MIDDLE<<",), PSM, "Falcon"),
    _Family("codestral", ("[PREFIX]",), ("[SUFFIX]",), (), SPM, "Codestral, Mistral"),
)


@dataclasses.dataclass(frozen=True)
class FimTemplate:
    """One model's FIM convention: its marker token ids and their order."""

    family: str
    prefix_id: int
    suffix_id: int
    middle_id: Optional[int]  # None where the middle follows the prefix directly
    order: str                # PSM or SPM
    prefix_text: str
    suffix_text: str
    middle_text: str

    def describe(self) -> str:
        """The template as text, e.g. ``<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>``."""
        if self.order == SPM:
            return (f"{self.suffix_text}{{suffix}}{self.prefix_text}{{prefix}}"
                    f"{self.middle_text}")
        return f"{self.prefix_text}{{prefix}}{self.suffix_text}{{suffix}}{self.middle_text}"

    def ids(self, prefix_ids: Sequence[int], suffix_ids: Sequence[int]) -> List[int]:
        """The prompt's token ids, the model writing the middle next."""
        middle = [] if self.middle_id is None else [self.middle_id]
        if self.order == SPM:
            return [self.suffix_id, *suffix_ids, self.prefix_id, *prefix_ids, *middle]
        return [self.prefix_id, *prefix_ids, self.suffix_id, *suffix_ids, *middle]


def _find(specials: Mapping[str, int], spellings: Sequence[str]) -> Optional[Tuple[str, int]]:
    for s in spellings:
        if s in specials:
            return s, specials[s]
    return None


def select_template(specials: Mapping[str, int]) -> Optional[FimTemplate]:
    """The FIM template of a vocabulary whose special tokens are `specials`
    (text -> id), or None if it has no family's markers."""
    for fam in FAMILIES:
        pre, suf = _find(specials, fam.prefix), _find(specials, fam.suffix)
        mid = _find(specials, fam.middle) if fam.middle else ("", None)
        if pre and suf and mid:
            return FimTemplate(fam.name, pre[1], suf[1], mid[1], fam.order, pre[0], suf[0],
                               mid[0])
    return None


def prompt_ids(template: Optional[FimTemplate], tokenize: Callable[[str], List[int]],
               prefix: str, suffix: str, bos: Optional[int] = None) -> List[int]:
    """The token ids of a FIM prompt: `tokenize` (text -> ids, special tokens
    not parsed, no BOS) spells the prefix and the suffix, `bos` (if given)
    opens the prompt.  Without a template, the prefix alone."""
    head = [] if bos is None else [bos]
    if template is None:
        return head + list(tokenize(prefix))
    return head + template.ids(tokenize(prefix) if prefix else [],
                               tokenize(suffix) if suffix else [])


def template_of_llama(llm) -> Optional[FimTemplate]:
    """The FIM template of a llama_cpp.Llama's vocabulary, or None."""
    return select_template(special_tokens_of_llama(llm))


def llama_prompt_ids(llm, template: Optional[FimTemplate], prefix: str, suffix: str) -> List[int]:
    """:func:`prompt_ids` with a llama_cpp.Llama's tokenizer (special tokens
    not parsed in the text) and its BOS where the model adds one."""
    def tokenize(text: str) -> List[int]:
        return llm.tokenize(text.encode("utf-8", "surrogateescape"), add_bos=False, special=False)
    bos = llm.token_bos() if llm._model.add_bos_token() else None
    return prompt_ids(template, tokenize, prefix, suffix, bos)


def _specials(pairs) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for tid, text in pairs:
        out.setdefault(text, tid)  # the lowest id of a text spelled twice
    return out


def special_tokens_of_llama(llm) -> Dict[str, int]:
    """A llama_cpp.Llama's control and user-defined tokens, text -> id."""
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
    return _specials((t, llama_cpp.llama_vocab_get_text(vocab, t).decode("utf-8", "replace"))
                     for t in range(llm.n_vocab())
                     if llama_cpp.llama_vocab_get_attr(vocab, t) & wanted)


# GGUF token types (gguf.TokenType): CONTROL and USER_DEFINED are special.
_GGUF_SPECIAL_TYPES = (3, 4)


def special_tokens_of_gguf(path: str) -> Dict[str, int]:
    """A GGUF file's control and user-defined tokens, text -> id (needs the
    ``gguf`` package)."""
    import gguf
    reader = gguf.GGUFReader(path)
    tokens = reader.fields["tokenizer.ggml.tokens"]
    types = reader.fields["tokenizer.ggml.token_type"]
    return _specials((i, bytes(tokens.parts[d]).decode("utf-8", "replace"))
                     for i, d in enumerate(tokens.data)
                     if int(types.parts[types.data[i]][0]) in _GGUF_SPECIAL_TYPES)
