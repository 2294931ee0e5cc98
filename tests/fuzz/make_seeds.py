#!/usr/bin/env python3
"""Seed corpora for the fuzz targets of tests/fuzz, made from the real inputs.

    make_seeds.py OUT_DIR

writes OUT_DIR/<target>/ for every target and OUT_DIR/small_tokenizer.json
(the first 600 tokens of the Qwen2 byte-level BPE plus <|endoftext|>: every
byte is a token, so any text can be written, and a compile of python.lark
with it takes seconds).  Sources: the grammars of tests/data, grammar/lark and
Lark's own grammars folder ($CFGMASK_LARK_GRAMMARS), every terminal of those
grammars as Lark compiles it, and the tokenizer files named by
$CFGMASK_TOK_QWEN2 / $CFGMASK_TOK_LLAMA_SPM (small files cut from them).
Store-file seeds are written by run_fuzz.sh, which needs a built target to
compile them.  Nothing here is committed: OUT_DIR lives in the build tree.
"""
import glob
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def put(folder, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    os.makedirs(folder, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def grammar_files():
    lark_dir = os.environ.get("CFGMASK_LARK_GRAMMARS", "")
    files = sorted(glob.glob(os.path.join(ROOT, "tests/data/**/*.lark"), recursive=True))
    files += sorted(glob.glob(os.path.join(ROOT, "grammar/lark/*.lark")))
    if lark_dir:
        files += sorted(glob.glob(os.path.join(lark_dir, "*.lark")))
    return files


def lark_seeds(out):
    for path in grammar_files():
        with open(path, "rb") as f:
            put(out, f.read())


def regex_seeds(out):
    import lark

    sample = b"def f(x):\n    return x + 1.5e3  # done\nif a == 'b': pass\n"
    seen = set()
    for path in grammar_files():
        text = open(path, encoding="utf-8").read()
        for start in ("start", "file_input", "value", "statement"):
            try:
                parser = lark.Lark(text, parser="lalr", start=start,
                                   import_paths=[os.path.dirname(path)])
            except Exception:
                continue
            for term in parser.terminals:
                pattern = term.pattern.to_regexp()
                if pattern in seen:
                    continue
                seen.add(pattern)
                put(out, b"\x00" + pattern.encode("utf-8") + b"\x00" + sample)
            break
    for pattern in (r"a*?b", r"(?i:select)", r"[^\W\d]\w*", r"(?!if\b)[a-z]+", r"(?<=\n)x",
                    r"\d{2,5}", r"(a|ab)(c|bcd)", r"\p{L}", r"[\u00e9-\uffff]+", r"(?s:.)*?\*/"):
        put(out, b"\x00" + pattern.encode("utf-8") + b"\x00" + sample)


def gguf_tokens(path, limit):
    import gguf

    r = gguf.GGUFReader(path)
    field = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode("utf-8") for i in field.data[:limit]]
    model = bytes(r.fields["tokenizer.ggml.model"].parts[-1]).decode()
    types = []
    if "tokenizer.ggml.token_type" in r.fields:
        f = r.fields["tokenizer.ggml.token_type"]
        types = [int(f.parts[i][0]) for i in f.data[:limit]]
    return model, tokens, types


def tokenizer_json(tokens, eos, byte_level):
    vocab = {t: i for i, t in enumerate(tokens)}
    doc = {
        "version": "1.0",
        "added_tokens": [{"id": len(tokens), "content": eos, "special": True}],
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    if byte_level:
        doc["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False}
        doc["decoder"] = {"type": "ByteLevel"}
    else:
        doc["model"]["byte_fallback"] = True
        doc["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return json.dumps(doc, ensure_ascii=False)


def write_gguf(path, model, tokens, types, eos_id):
    import gguf

    w = gguf.GGUFWriter(path, arch="llama")
    w.add_tokenizer_model(model)
    w.add_token_list(tokens)
    if types:
        w.add_token_types(types)
    if model == "gpt2":
        w.add_token_merges(["a b", "\u0120 t"])
    else:
        w.add_token_scores([0.0] * len(tokens))
    w.add_eos_token_id(eos_id)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def tokenizer_seeds(out_json, out_gguf, out_dir):
    qwen = os.environ.get("CFGMASK_TOK_QWEN2", "")
    spm = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "")
    if not (qwen and os.path.exists(qwen)):
        sys.exit("make_seeds.py: $CFGMASK_TOK_QWEN2 not set (source .cache/env.sh)")
    _, qtokens, _ = gguf_tokens(qwen, 600)
    small = tokenizer_json(qtokens, "<|endoftext|>", True)
    with open(os.path.join(out_dir, "small_tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(small)
    for n in (40, 300):
        put(out_json, tokenizer_json(qtokens[:n], "<|endoftext|>", True))
    tmp = os.path.join(out_dir, "seed.gguf")
    write_gguf(tmp, "gpt2", qtokens[:64] + ["<|endoftext|>"], [1] * 64 + [3], 64)
    put(out_gguf, open(tmp, "rb").read())
    with open(qwen, "rb") as f:
        put(out_gguf, f.read(4096))  # a truncated real file
    if spm and os.path.exists(spm):
        _, stokens, stypes = gguf_tokens(spm, 300)
        put(out_json, tokenizer_json(stokens[3:], "</s>", False))
        write_gguf(tmp, "llama", stokens[:80], stypes[:80], 2)
        put(out_gguf, open(tmp, "rb").read())
    os.remove(tmp)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lark_seeds(os.path.join(out, "lark_reader_fuzz"))
    regex_seeds(os.path.join(out, "regex_fuzz"))
    tokenizer_seeds(os.path.join(out, "tokenizer_json_fuzz"),
                    os.path.join(out, "tokenizer_gguf_fuzz"), out)
    # The runtime target starts from a few ops; libFuzzer grows the rest.
    put(os.path.join(out, "session_fuzz"), bytes([3, 0, 0] * 8 + [5, 3, 0, 3, 7, 0]))
    put(os.path.join(out, "session_fuzz"), bytes([0, 1, 0, 4, 9, 0, 7, 0, 0, 6, 65, 0]))
    # Two threads on one matcher (bit 7 of the op: the second thread):
    # accepts from the mask, fills, a rollback, a fork, a suffix, a search.
    shared = os.path.join(out, "shared_matcher_fuzz")
    put(shared, bytes([1, 3, 0, 129, 5, 0, 4, 0, 0, 132, 0, 0, 1, 7, 0, 133, 2, 0,
                       5, 2, 0, 135, 1, 0, 8, 9, 0, 138, 0, 0, 11, 20, 0, 141, 1, 0]))
    put(shared, bytes([2, 1, 0, 130, 2, 0] * 6 + [12, 16, 0, 142, 0, 0, 9, 0, 0, 6, 0, 0]))


if __name__ == "__main__":
    main()
