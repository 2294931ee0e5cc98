// Tokenizer vocabularies: the byte string of every token id, the EOS ids and
// an identity hash, read from a HF tokenizer.json (byte-level BPE with the
// GPT-2 byte map, or SentencePiece-style "▁" + <0xNN> byte fallback), a GGUF
// file (tokenizer.ggml.* metadata: model "gpt2", "llama" or "gemma4"), or a tiktoken
// rank file.  Tested by tokenizer_test.cc (against HF `tokenizers`).
#ifndef CFGMASK_LEXER_TOKENIZER_H_
#define CFGMASK_LEXER_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/base/status.h"

namespace cfgmask {

struct Vocabulary {
  std::string name;                  // e.g. "qwen2 (gguf, gpt2 byte-level BPE)"
  std::vector<std::string> tokens;   // token id -> bytes it decodes to
  // Tokens that can never appear inside generated text (control/special
  // tokens: BOS, EOS, padding, <unk>, chat markers).  Never allowed by a mask
  // except EOS ids at the end.
  std::vector<uint8_t> special;      // per token id: 1 = special
  std::vector<int32_t> eos_ids;      // allowed exactly when the text is complete
  uint64_t identity = 0;             // FNV-1a over ids, bytes and flags
  // Per token id, the file's text of a special token ("<|endoftext|>"; its
  // bytes above are empty), empty for the others; empty where a format
  // names none.  How `--eos TEXT` finds a special token by its text.
  std::vector<std::string> special_names;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
};

// Detects the format from the content (GGUF magic, JSON, tiktoken lines).
Status LoadVocabulary(const std::string& path, Vocabulary* out);

// Caller-supplied additions for formats that do not carry everything.
struct VocabularyOptions {
  // Special tokens appended after the file's tokens, at ids [n, n + k) in
  // this order (tiktoken rank files list no special tokens).  They get empty
  // bytes; a name on the EOS list below (e.g. "<|endoftext|>") makes it EOS.
  std::vector<std::string> extra_special;
  // When >= 0, the only EOS id, replacing whatever the file or the naming
  // rule says; it is marked special with empty bytes.  Out of range ->
  // kInvalidArgument.
  int32_t eos_id = -1;
};

// As above, with the additions applied before `identity` is computed.
//
// EOS rules per format:
//  - GGUF: tokenizer.ggml.eos_token_id, plus tokenizer.ggml.eot_token_id when
//    present and different (chat models end a turn with EOT); with neither
//    key, the special tokens named on kEosTokenNames.
//  - tokenizer.json: every special added token whose content is one of
//    kEosTokenNames below.
//  - tiktoken: none in the file.  A file of exactly 151,643 ranks is Qwen's;
//    when extra_special is empty, "<|endoftext|>" is appended as id 151,643
//    and is the EOS.
//  - extra_special names on kEosTokenNames are EOS too.
Status LoadVocabulary(const std::string& path, Vocabulary* out,
                      const VocabularyOptions& options);

// Token texts recognised as end-of-sequence markers (see above).
inline constexpr const char* kEosTokenNames[] = {
    "</s>",        "<|endoftext|>", "<|im_end|>", "<|eot_id|>",
    "<|end_of_text|>", "<eos>",     "<|end|>",    "<end_of_turn>",
};

// FNV-1a 64 over every token's (id, byte length, bytes, special flag), then
// the EOS ids, all integers little-endian.  The value `identity` holds.
uint64_t VocabularyIdentity(const Vocabulary& vocab);

// One line per token: "id<TAB>hex bytes<TAB>special" (the oracle's format,
// tests/tools/vocab_oracle.py), then one line "eos<TAB>id" per EOS id.
std::string DumpVocabulary(const Vocabulary& vocab);

// The readers behind LoadVocabulary, one per format (gguf_reader.cc +
// tokenizer.cc, tokenizer_json.cc, tiktoken_reader.cc).  They fill tokens,
// special, eos_ids and name; LoadVocabulary then applies the options and
// computes identity.
Status LoadGgufVocabulary(const std::string& path, Vocabulary* out);
Status LoadTokenizerJson(const std::string& path, Vocabulary* out);
Status LoadTiktokenVocabulary(const std::string& path, Vocabulary* out);

// Token text -> bytes through the inverse of GPT-2's bytes_to_unicode map.
// A text with a character outside the map (or invalid UTF-8) is returned as
// its own UTF-8 bytes and the result is false, as HF's ByteLevel decoder does.
bool DecodeByteLevel(std::string_view text, std::string* bytes);

// SentencePiece piece -> bytes: every U+2581 "▁" becomes a space.
std::string DecodeMetaspace(std::string_view text);

// "<0xNN>" (either hex case) -> NN; anything else -> -1.
int ParseByteToken(std::string_view text);

}  // namespace cfgmask

#endif  // CFGMASK_LEXER_TOKENIZER_H_
