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
* a tiktoken rank file (Qwen's): `tiktoken` with Qwen's split regex;
* a HF tokenizer.json: that tokenizer itself (`tokenizers.Tokenizer.from_file`),
  each id's bytes from its piece: byte-level pieces through the GPT-2 byte
  map when the tokenizer is byte-level, else "▁" as a space and
  "<0xNN>" byte-fallback pieces as the byte.  A tokenizer whose normaliser
  changes the text (e.g. prepends a space) gives encodings that do not decode
  to the file, which are reported as below.

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
        if os.path.isdir(path):
            raise SystemExit(f"canonical_ids: {path}: is a directory, not a tokenizer file")
        with open(path, "rb") as f:
            head = f.read(64)
        self.nfc = False
        if head[:4] == b"GGUF":
            self._init_gguf(path)
        elif head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"{":
            self._init_json(path)
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

    def _init_json(self, path):
        import json
        from tokenizers import Tokenizer
        try:
            self._tok = Tokenizer.from_file(path)
            with open(path, encoding="utf-8-sig") as f:
                spec = json.load(f)
        except Exception as e:  # noqa: BLE001 - any reader error is a bad file
            raise SystemExit(f"canonical_ids: {path}: not a tokenizer.json the `tokenizers` "
                             f"package reads: {str(e).splitlines()[0] if str(e) else e!r}")
        described = json.dumps([spec.get("pre_tokenizer"), spec.get("decoder")])
        byte_level = '"ByteLevel"' in described
        self.nfc = '"NFC"' in json.dumps(spec.get("normalizer"))
        unbyte = {c: b for b, c in vocab_oracle.bytes_to_unicode().items()} if byte_level else None
        size = self._tok.get_vocab_size(with_added_tokens=True)
        self._bytes = [b""] * size
        added = {t["content"] for t in spec.get("added_tokens", [])}
        for piece, i in self._tok.get_vocab(with_added_tokens=True).items():
            if i >= size:
                continue
            if piece in added:
                self._bytes[i] = piece.encode("utf-8")
            elif byte_level:
                self._bytes[i] = bytes(unbyte[c] for c in piece) \
                    if all(c in unbyte for c in piece) else piece.encode("utf-8")
            elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                self._bytes[i] = bytes([int(piece[3:5], 16)])
            else:
                self._bytes[i] = piece.replace("\u2581", " ").encode("utf-8")
        self.name = f"{os.path.basename(path)} (tokenizers, tokenizer.json)"

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
