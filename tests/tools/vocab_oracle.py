#!/usr/bin/env python3
"""Reference vocabularies for tests/tokenizer_test.cc, from the Python packages.

The C++ loader (lexer/tokenizer/tokenizer.cc) is checked against this script, which
reads the same files with independent code:

  dump FILE OUT         GGUF through gguf.GGUFReader plus the decoding rules
                        below, or a .tiktoken through
                        tiktoken.load.load_tiktoken_bpe.  Writes one line
                        "id<TAB>hex bytes<TAB>special" per token, then
                        "eos<TAB>id" lines (DumpVocabulary's format).
  make-json GGUF OUT [sequence|metaspace]
                        Builds an HF tokenizer.json with the `tokenizers`
                        library from a GGUF's tokens (+ merges): BPE with a
                        ByteLevel pre-tokenizer/decoder for model "gpt2"; BPE
                        with byte_fallback and either HF LLaMA's decoder
                        sequence (Replace "▁", ByteFallback, Fuse, Strip) or a
                        Metaspace pre-tokenizer and Metaspace + ByteFallback +
                        Fuse decoder for model "llama".
  decode-json JSON OUT  `tokenizers` decode of every single id
                        (skip_special_tokens=True): "id<TAB>hex utf-8".

Decoding rules (llama.cpp's token_to_piece): token_type NORMAL(1)/UNDEFINED(0)
decode through the inverse GPT-2 byte map ("gpt2"; a token with a character
outside the map stays as its UTF-8) or "▁" -> " " ("llama", "gemma4"); BYTE(6) "<0xNN>"
is that byte; USER_DEFINED(4) is verbatim text; UNKNOWN(2), CONTROL(3),
UNUSED(5) are special with empty bytes, as are the bos/eos/eot/padding/unknown
ids.  EOS = eos_token_id, plus eot_token_id when present.  A .tiktoken of
151,643 ranks (Qwen) gets <|endoftext|> appended as special EOS id 151,643.
"""
import re
import sys

EOS_NAMES = {"</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>",
             "<|end_of_text|>", "<eos>", "<|end|>", "<end_of_turn>"}


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


UNICODE_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}
BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def byte_level(raw):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
    if all(c in UNICODE_TO_BYTE for c in text):
        return bytes(UNICODE_TO_BYTE[c] for c in text)
    return raw


def field_value(reader, key):
    field = reader.fields.get(key)
    if field is None:
        return None
    return field.parts[field.data[0]][0] if len(field.data) == 1 else field


def gguf_vocab(reader):
    model = bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode()
    tokens_field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(tokens_field.parts[i]) for i in tokens_field.data]
    types_field = reader.fields.get("tokenizer.ggml.token_type")
    types = ([int(types_field.parts[i][0]) for i in types_field.data]
             if types_field is not None else [1] * len(tokens))
    out = []
    for raw, ttype in zip(tokens, types):
        if ttype in (2, 3, 5):
            out.append((b"", 1))
        elif ttype == 4:
            out.append((raw, 0))
        elif model == "gpt2":
            out.append((byte_level(raw), 0))
        else:
            m = BYTE_TOKEN.match(raw.decode("utf-8", "replace"))
            if ttype == 6 and m:
                out.append((bytes([int(m.group(1), 16)]), 0))
            else:
                out.append((raw.replace("▁".encode(), b" "), 0))
    ids = {}
    for key in ("eos", "eot", "bos", "padding", "unknown"):
        value = field_value(reader, "tokenizer.ggml.%s_token_id" % key)
        if value is not None:
            ids[key] = int(value)
            out[int(value)] = (b"", 1)
    eos = []
    if "eos" in ids:
        eos.append(ids["eos"])
    if "eot" in ids and ids["eot"] not in eos:
        eos.append(ids["eot"])
    if not eos:
        eos = [i for i, (raw, t) in enumerate(zip(tokens, types))
               if out[i][1] and raw.decode("utf-8", "replace") in EOS_NAMES]
    return model, tokens, types, out, sorted(eos)


def open_gguf(path):
    from gguf import GGUFReader
    return GGUFReader(path)


def tiktoken_vocab(path):
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(path)
    size = max(ranks.values()) + 1
    out = [(b"", 1)] * size
    for token, rank in ranks.items():
        out[rank] = (token, 0)
    eos = []
    if size == 151643:
        out.append((b"", 1))
        eos = [151643]
    return out, eos


def dump(path, out_path):
    with open(path, "rb") as f:
        is_gguf = f.read(4) == b"GGUF"
    if is_gguf:
        _, _, _, vocab, eos = gguf_vocab(open_gguf(path))
    else:
        vocab, eos = tiktoken_vocab(path)
    with open(out_path, "w") as f:
        for i, (raw, special) in enumerate(vocab):
            f.write("%d\t%s\t%d\n" % (i, raw.hex(), special))
        for e in eos:
            f.write("eos\t%d\n" % e)


def spm_merges(vocab, normal):
    """Merges in the order HF's SentencePiece converter gives: by the rank of
    the merged piece, every split of a piece into two vocabulary pieces."""
    merges = []
    for piece, rank in vocab.items():
        if rank not in normal:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab and vocab[left] in normal \
                    and vocab[right] in normal:
                merges.append((rank, vocab[left], vocab[right], left, right))
    merges.sort()
    return [(m[3], m[4]) for m in merges]


def make_json(gguf_path, out_path, style):
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    reader = open_gguf(gguf_path)
    model, tokens, types, vocab_rows, _ = gguf_vocab(reader)
    texts = [t.decode("utf-8") for t in tokens]
    vocab = {text: i for i, text in enumerate(texts)}
    assert len(vocab) == len(texts), "duplicate token texts"
    special_ids = [i for i, (_, special) in enumerate(vocab_rows) if special]
    user_ids = [i for i, t in enumerate(types) if t == 4 and not vocab_rows[i][1]]
    if model == "gpt2":
        merges_field = reader.fields["tokenizer.ggml.merges"]
        merges = [tuple(bytes(merges_field.parts[i]).decode().split(" ", 1))
                  for i in merges_field.data]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
    else:
        normal = {i for i, t in enumerate(types) if t == 1}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=spm_merges(vocab, normal),
                                   unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        if style == "metaspace":
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁",
                                                         prepend_scheme="first")
            tok.decoder = decoders.Sequence([
                decoders.Metaspace(replacement="▁", prepend_scheme="first"),
                decoders.ByteFallback(), decoders.Fuse()])
        else:
            tok.normalizer = normalizers.Sequence(
                [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                             decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_tokens([AddedToken(texts[i], special=False, normalized=False) for i in user_ids])
    tok.add_special_tokens([AddedToken(texts[i], special=True, normalized=False)
                            for i in special_ids])
    for i in user_ids + special_ids:
        assert tok.token_to_id(texts[i]) == i, (i, texts[i])
    tok.save(out_path)


def decode_json(json_path, out_path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(json_path)
    n = tok.get_vocab_size(with_added_tokens=True)
    texts = tok.decode_batch([[i] for i in range(n)], skip_special_tokens=True)
    with open(out_path, "w") as f:
        for i, text in enumerate(texts):
            f.write("%d\t%s\n" % (i, text.encode("utf-8").hex()))


def main(argv):
    if len(argv) >= 3 and argv[0] == "dump":
        dump(argv[1], argv[2])
    elif len(argv) >= 3 and argv[0] == "make-json":
        make_json(argv[1], argv[2], argv[3] if len(argv) > 3 else "sequence")
    elif len(argv) >= 3 and argv[0] == "decode-json":
        decode_json(argv[1], argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
