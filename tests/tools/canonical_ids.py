#!/usr/bin/env python3
"""The tokenizer's own (canonical) encoding of text files, for
`cfgmask check/bench --segment canonical`.

usage: canonical_ids.py TOKENIZER FILE... [--suffix .ids] [--tiktoken QWEN.tiktoken]

For every FILE, writes FILE + suffix: the token ids of the file's text, as
decimal numbers separated by whitespace (16 to a line).  The encoder is a HF
`tokenizers.Tokenizer` built here from the tokenizer file:

* a GGUF of model "gpt2" (byte-level BPE): vocabulary and merges from the
  file's tokenizer.ggml.* metadata (read with the `gguf` package); pre-tokenizer
  from tokenizer.ggml.pre: "qwen2" -> NFC normalizer and the Split regex of
  Qwen2's tokenizer.json followed by ByteLevel without its own regex; any
  other value -> ByteLevel with the GPT-2 regex;
* a tiktoken rank file (Qwen's): `tiktoken` with Qwen's split regex.

Special and control tokens are not added tokens: a file that contains
"<|endoftext|>" is encoded as plain text, as a model would have to write it.

Every encoding is checked to decode back to the file's exact bytes; a file
that does not (e.g. text that NFC changes) gets no ids file and is listed on
stderr with exit status 1.  With --tiktoken, each GGUF encoding must also equal
the tiktoken encoding of the same text (Qwen's ranks are Qwen2's ids), a
second, independent implementation of the same BPE.
"""
from __future__ import annotations

import argparse
import os
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vocab_oracle  # noqa: E402

# The Split pattern of Qwen2's tokenizer.json (and of llama.cpp's "qwen2" pre).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


class Encoder:
    """encode(text) -> ids, decode(ids) -> bytes; `nfc` says whether the
    encoder normalises first (then only NFC texts can round-trip)."""

    def __init__(self, path: str):
        with open(path, "rb") as f:
            is_gguf = f.read(4) == b"GGUF"
        self.nfc = False
        if is_gguf:
            self._init_gguf(path)
        else:
            self._init_tiktoken(path)

    def _init_gguf(self, path):
        from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
        reader = vocab_oracle.open_gguf(path)
        model, tokens, types, rows, _ = vocab_oracle.gguf_vocab(reader)
        if model != "gpt2":
            raise SystemExit(f"canonical_ids: {path}: model {model!r}: only byte-level BPE "
                             "(gpt2) GGUF files are supported")
        pre = reader.fields.get("tokenizer.ggml.pre")
        pre = bytes(pre.parts[-1]).decode() if pre is not None else "default"
        # Only normal tokens are BPE pieces; special/control ones never match text.
        vocab = {tokens[i].decode("utf-8"): i for i, t in enumerate(types)
                 if t in (0, 1) and not rows[i][1]}
        merges_field = reader.fields["tokenizer.ggml.merges"]
        merges = [tuple(bytes(merges_field.parts[i]).decode().split(" ", 1))
                  for i in merges_field.data]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False))
        if pre == "qwen2":
            tok.normalizer = normalizers.NFC()
            self.nfc = True
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        else:
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
        self._tok = tok
        self._bytes = [r[0] for r in rows]
        self.name = f"{os.path.basename(path)} (tokenizers BPE, pre {pre})"

    def _init_tiktoken(self, path):
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
        ranks = load_tiktoken_bpe(path)
        self._enc = tiktoken.Encoding(name="qwen", pat_str=QWEN2_PATTERN, mergeable_ranks=ranks,
                                      special_tokens={})
        self._tok = None
        self._bytes = [b""] * len(ranks)
        for piece, rank in ranks.items():
            self._bytes[rank] = piece
        self.name = f"{os.path.basename(path)} (tiktoken)"

    def encode(self, text: str) -> list[int]:
        if self._tok is not None:
            return self._tok.encode(text, add_special_tokens=False).ids
        return self._enc.encode_ordinary(text)

    def decode(self, ids) -> bytes:
        # Token bytes concatenated: the exact bytes a model's output spells.
        return b"".join(self._bytes[i] for i in ids)


def write_ids(path: str, ids) -> None:
    lines = [" ".join(map(str, ids[k:k + 16])) for k in range(0, len(ids), 16)]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tokenizer")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--suffix", default=".ids")
    ap.add_argument("--tiktoken", default=None, help="cross-check against this rank file")
    a = ap.parse_args(argv)
    enc = Encoder(a.tokenizer)
    other = Encoder(a.tiktoken) if a.tiktoken else None
    bad = 0
    for path in a.files:
        data = open(path, "rb").read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            print(f"canonical_ids: {path}: not UTF-8: {e.reason}", file=sys.stderr)
            bad += 1
            continue
        ids = enc.encode(text)
        if enc.decode(ids) != data:
            why = "not NFC" if enc.nfc and unicodedata.normalize("NFC", text) != text else "differs"
            print(f"canonical_ids: {path}: encoding does not decode to the file ({why})",
                  file=sys.stderr)
            bad += 1
            continue
        if other is not None and other.encode(text) != ids:
            print(f"canonical_ids: {path}: tiktoken encodes differently", file=sys.stderr)
            bad += 1
            continue
        write_ids(path + a.suffix, ids)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
