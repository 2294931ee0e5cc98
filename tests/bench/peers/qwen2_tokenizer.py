#!/usr/bin/env python3
"""An HF ``tokenizers.Tokenizer`` for the Qwen2 vocabulary, built from the GGUF file.

The GGUF (``$CFGMASK_TOK_QWEN2``, llama.cpp's vocab-only Qwen2 file) holds the
151,936 token strings (GPT-2 byte-to-unicode form), their types and the
151,387 merges.  The tokenizer built here is byte-level BPE with Qwen2's
pre-tokenizer: a Split on Qwen2's regex (isolated), then ByteLevel without
its own regex; decoder ByteLevel.  Ids are the GGUF ids, so every engine of
the benchmark sees the same vocabulary as ``cfgmask compile --tokenizer
qwen2.gguf``.  Token types CONTROL (3: <|endoftext|>, <|im_start|>,
<|im_end|>) and USER_DEFINED (4: the [PADnnnnnn] fillers up to 151,935) become
special added tokens.  No NFC normaliser: the id streams must spell the
documents byte for byte.

``check_against_tiktoken`` encodes texts with this tokenizer and with
tiktoken over Qwen's rank file (``$CFGMASK_TOK_QWEN_TIKTOKEN``, same regex) and
returns the texts whose ids differ.

Usage: qwen2_tokenizer.py GGUF OUT.json
"""
from __future__ import annotations

import json
import sys

# Qwen2's pre-tokenizer pattern (the one its tokenizer.json and Qwen's
# tiktoken encoding use).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
EOS_ID = 151643


def _field_strings(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def build(gguf_path: str):
    """Returns (tokenizers.Tokenizer, vocab_size, eos_id)."""
    import gguf
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    reader = gguf.GGUFReader(gguf_path)
    tokens = _field_strings(reader, "tokenizer.ggml.tokens")
    tt = reader.fields["tokenizer.ggml.token_type"]
    types = [int(tt.parts[i][0]) for i in tt.data]
    merges = [tuple(m.split(" ", 1)) for m in _field_strings(reader, "tokenizer.ggml.merges")]
    eos = int(reader.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    vocab = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    model = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [i for i, t in enumerate(types) if t != 1]
    # added tokens must get their GGUF ids: they follow the BPE ids in order
    assert specials == list(range(len(vocab), len(tokens))), "special ids are not a tail"
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in specials])
    for i in specials:
        assert tok.token_to_id(tokens[i]) == i
    return tok, len(tokens), eos


def tiktoken_encoding(path: str):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(path)
    return tiktoken.Encoding(name="qwen", pat_str=QWEN2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOS_ID})


def check_against_tiktoken(tok, tiktoken_path: str, texts):
    enc = tiktoken_encoding(tiktoken_path)
    bad = []
    for name, text in texts:
        a = tok.encode(text, add_special_tokens=False).ids
        b = enc.encode(text, disallowed_special=())
        if a != b:
            bad.append(name)
    return bad


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    tok, n, eos = build(argv[1])
    tok.save(argv[2])
    print(json.dumps({"vocab_size": n, "eos": eos, "out": argv[2]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
