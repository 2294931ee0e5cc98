// Tokenizer vocabularies: format detection, the token-text -> bytes rules
// shared by the readers, the GGUF vocabulary (tokenizer.ggml.* metadata read
// by gguf_reader.cc), and the identity hash.
//
// Bytes of a token, by tokenizer model:
//  - byte-level BPE (GGUF model "gpt2", HF ByteLevel): the text is a string
//    of stand-in characters, one per byte, from GPT-2's bytes_to_unicode
//    (printable Latin-1 bytes stand for themselves, the other 68 bytes map to
//    U+0100..U+0143); decoding inverts that map.
//  - SentencePiece (GGUF model "llama" or "gemma4", HF byte_fallback/Metaspace): "▁"
//    (U+2581) is a space and "<0xNN>" byte-fallback tokens are that byte.
// GGUF token_type decides the rest, following llama.cpp's token_to_piece:
// NORMAL (1) and UNDEFINED (0) are decoded as above, BYTE (6) is "<0xNN>",
// USER_DEFINED (4) is ordinary text taken verbatim, and CONTROL (3), UNKNOWN
// (2) and UNUSED (5) are special with empty bytes.  The ids named by
// bos/eos/eot/padding/unknown_token_id are special whatever their type.
// Tested by tokenizer_test.cc (against tests/tools/vocab_oracle.py).
#include "lexer/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sys/stat.h>
#include <limits>

#include "lexer/tokenizer/gguf_reader.h"

namespace cfgmask {
namespace {

constexpr int32_t kMaxTokens = std::numeric_limits<int32_t>::max();

// codepoint -> byte for the 256 stand-in characters, -1 elsewhere.
struct ByteLevelTable {
  std::array<int16_t, 324> byte_of;
  ByteLevelTable() {
    byte_of.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      int cp = printable ? b : next++;
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

// Decodes one UTF-8 sequence at s[*i]; -1 if invalid (overlong, surrogate,
// out of range, truncated).
int32_t NextCodepoint(std::string_view s, size_t* i) {
  auto c = static_cast<uint8_t>(s[*i]);
  int len;
  int32_t cp;
  if (c < 0x80) {
    ++*i;
    return c;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return -1;
  }
  if (*i + len > s.size()) return -1;
  for (int k = 1; k < len; ++k) {
    auto cc = static_cast<uint8_t>(s[*i + k]);
    if ((cc & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (cc & 0x3F);
  }
  static constexpr int32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *i += len;
  return cp;
}

void Fnv(uint64_t* h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    *h ^= p[i];
    *h *= 0x100000001b3ULL;
  }
}

void FnvU32(uint64_t* h, uint32_t v) {
  uint8_t le[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8),
                   static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24)};
  Fnv(h, le, 4);
}

bool IsEosName(std::string_view name) {
  for (const char* eos : kEosTokenNames) {
    if (name == eos) return true;
  }
  return false;
}

std::string Basename(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Reads an optional integer token id key; range-checked against `size`.
Status OptionalTokenId(const std::string& path, const GgufMetadata& meta, const char* key,
                       int32_t size, int32_t* id) {
  *id = -1;
  const GgufValue* v = meta.Find(key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_integer()) {
    return Status(ErrorCode::kTokenizer, path + ": offset " + std::to_string(v->offset) + ": " +
                                             key + " is not an integer");
  }
  if (v->integer < 0 || v->integer >= size) {
    return Status(ErrorCode::kTokenizer, path + ": offset " + std::to_string(v->offset) + ": " +
                                             key + " " + std::to_string(v->integer) +
                                             " is not a token id (vocabulary has " +
                                             std::to_string(size) + " tokens)");
  }
  *id = static_cast<int32_t>(v->integer);
  return Status::Ok();
}

Status ApplyOptions(const std::string& path, const VocabularyOptions& options, Vocabulary* v) {
  for (const std::string& name : options.extra_special) {
    if (v->size() == kMaxTokens) {
      return Status(ErrorCode::kInvalidArgument, path + ": too many tokens");
    }
    int32_t id = v->size();
    v->tokens.emplace_back();
    v->special.push_back(1);
    if (options.eos_id < 0 && IsEosName(name)) v->eos_ids.push_back(id);
  }
  if (options.eos_id >= 0) {
    if (options.eos_id >= v->size()) {
      return Status(ErrorCode::kInvalidArgument,
                    path + ": eos id " + std::to_string(options.eos_id) +
                        " is out of range (vocabulary has " + std::to_string(v->size()) +
                        " tokens)");
    }
    v->eos_ids = {options.eos_id};
    v->special[options.eos_id] = 1;
    v->tokens[options.eos_id].clear();
  }
  std::sort(v->eos_ids.begin(), v->eos_ids.end());
  v->eos_ids.erase(std::unique(v->eos_ids.begin(), v->eos_ids.end()), v->eos_ids.end());
  return Status::Ok();
}

}  // namespace

bool DecodeByteLevel(std::string_view text, std::string* bytes) {
  static const ByteLevelTable table;
  bytes->clear();
  bytes->reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    int32_t cp = NextCodepoint(text, &i);
    if (cp < 0 || cp >= static_cast<int32_t>(table.byte_of.size()) || table.byte_of[cp] < 0) {
      bytes->assign(text);
      return false;
    }
    bytes->push_back(static_cast<char>(table.byte_of[cp]));
  }
  return true;
}

std::string DecodeMetaspace(std::string_view text) {
  static constexpr std::string_view kMeta = "\xE2\x96\x81";
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, kMeta.size(), kMeta) == 0) {
      out.push_back(' ');
      i += kMeta.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (int k = 3; k < 5; ++k) {
    char c = text[k];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return -1;
    }
    value = value * 16 + d;
  }
  return value;
}

uint64_t VocabularyIdentity(const Vocabulary& vocab) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const std::string& bytes = vocab.tokens[id];
    FnvU32(&h, static_cast<uint32_t>(id));
    FnvU32(&h, static_cast<uint32_t>(bytes.size()));
    Fnv(&h, bytes.data(), bytes.size());
    uint8_t special = id < static_cast<int32_t>(vocab.special.size()) ? vocab.special[id] : 0;
    Fnv(&h, &special, 1);
  }
  for (int32_t eos : vocab.eos_ids) FnvU32(&h, static_cast<uint32_t>(eos));
  return h;
}

std::string DumpVocabulary(const Vocabulary& vocab) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    out += std::to_string(id);
    out += '\t';
    for (unsigned char c : vocab.tokens[id]) {
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    out += '\t';
    out += vocab.special[id] ? '1' : '0';
    out += '\n';
  }
  for (int32_t eos : vocab.eos_ids) out += "eos\t" + std::to_string(eos) + "\n";
  return out;
}

Status LoadGgufVocabulary(const std::string& path, Vocabulary* out) {
  GgufMetadata meta;
  CFGMASK_RETURN_IF_ERROR(ReadGgufMetadata(
      path,
      [](std::string_view key) {
        return (key.substr(0, 15) == "tokenizer.ggml." && key != "tokenizer.ggml.merges" &&
                key != "tokenizer.ggml.scores") ||
               key == "general.name";
      },
      &meta));
  auto error = [&](uint64_t offset, const std::string& what) {
    return Status(ErrorCode::kTokenizer, path + ": offset " + std::to_string(offset) + ": " + what);
  };

  const GgufValue* model = meta.Find("tokenizer.ggml.model");
  if (model == nullptr) return error(meta.metadata_end, "no tokenizer.ggml.model key");
  if (model->type != GgufType::kString) {
    return error(model->offset, "tokenizer.ggml.model is not a string");
  }
  bool byte_level;
  if (model->text == "gpt2") {
    byte_level = true;
  } else if (model->text == "llama" || model->text == "gemma4") {
    // Gemma 4's BPE is SentencePiece-style (llama.cpp: escape_whitespaces):
    // "▁" for spaces, "<0xNN>" byte tokens, decoded as "llama" is.
    byte_level = false;
  } else {
    return error(model->offset, "unsupported tokenizer model '" + model->text +
                                    "' (supported: gpt2, llama, gemma4)");
  }

  const GgufValue* tokens = meta.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr) return error(meta.metadata_end, "no tokenizer.ggml.tokens key");
  if (tokens->type != GgufType::kArray || tokens->element_type != GgufType::kString) {
    return error(tokens->offset, "tokenizer.ggml.tokens is not an array of strings");
  }
  if (tokens->strings.empty()) return error(tokens->offset, "tokenizer.ggml.tokens is empty");
  if (tokens->strings.size() > static_cast<size_t>(kMaxTokens)) {
    return error(tokens->offset, "too many tokens");
  }
  const auto n = static_cast<int32_t>(tokens->strings.size());

  const GgufValue* types = meta.Find("tokenizer.ggml.token_type");
  if (types != nullptr) {
    if (types->type != GgufType::kArray || types->element_type == GgufType::kString ||
        types->element_type == GgufType::kArray || types->element_type == GgufType::kFloat32 ||
        types->element_type == GgufType::kFloat64) {
      return error(types->offset, "tokenizer.ggml.token_type is not an array of integers");
    }
    if (types->integers.size() != tokens->strings.size()) {
      return error(types->offset, "tokenizer.ggml.token_type has " +
                                      std::to_string(types->integers.size()) + " entries for " +
                                      std::to_string(n) + " tokens");
    }
  }

  Vocabulary v;
  v.tokens.resize(n);
  v.special.assign(n, 0);
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = tokens->strings[id];
    int64_t type = types == nullptr ? 1 : types->integers[id];
    switch (type) {
      case 0:  // undefined: llama.cpp decodes it as a normal token
      case 1:  // normal
      case 6:  // byte
        if (byte_level) {
          DecodeByteLevel(text, &v.tokens[id]);
        } else if (int byte = ParseByteToken(text); type == 6 && byte >= 0) {
          v.tokens[id].assign(1, static_cast<char>(byte));
        } else {
          v.tokens[id] = DecodeMetaspace(text);
        }
        break;
      case 4:  // user-defined: ordinary text, verbatim
        v.tokens[id] = text;
        break;
      case 2:  // unknown
      case 3:  // control
      case 5:  // unused
        v.special[id] = 1;
        break;
      default:
        return error(types->offset, "token " + std::to_string(id) + " has unknown token type " +
                                        std::to_string(type));
    }
  }

  int32_t eos, eot, bos, pad, unk;
  CFGMASK_RETURN_IF_ERROR(OptionalTokenId(path, meta, "tokenizer.ggml.eos_token_id", n, &eos));
  CFGMASK_RETURN_IF_ERROR(OptionalTokenId(path, meta, "tokenizer.ggml.eot_token_id", n, &eot));
  CFGMASK_RETURN_IF_ERROR(OptionalTokenId(path, meta, "tokenizer.ggml.bos_token_id", n, &bos));
  CFGMASK_RETURN_IF_ERROR(
      OptionalTokenId(path, meta, "tokenizer.ggml.padding_token_id", n, &pad));
  CFGMASK_RETURN_IF_ERROR(
      OptionalTokenId(path, meta, "tokenizer.ggml.unknown_token_id", n, &unk));
  for (int32_t id : {eos, eot, bos, pad, unk}) {
    if (id >= 0) {
      v.special[id] = 1;
      v.tokens[id].clear();
    }
  }
  v.special_names.assign(static_cast<size_t>(n), std::string());
  for (int32_t id = 0; id < n; ++id) {
    if (v.special[id]) v.special_names[id] = tokens->strings[id];
  }
  if (eos >= 0) v.eos_ids.push_back(eos);
  if (eot >= 0 && eot != eos) v.eos_ids.push_back(eot);
  if (v.eos_ids.empty()) {
    // No id given: fall back to the naming rule over the special tokens.
    for (int32_t id = 0; id < n; ++id) {
      if (v.special[id] && IsEosName(tokens->strings[id])) v.eos_ids.push_back(id);
    }
  }

  const GgufValue* name = meta.Find("general.name");
  v.name = (name != nullptr && name->type == GgufType::kString ? name->text : Basename(path)) +
           (byte_level ? std::string(" (gguf, gpt2 byte-level BPE)")
                       : " (gguf, " + model->text + " SentencePiece)");
  *out = std::move(v);
  return Status::Ok();
}

Status LoadVocabulary(const std::string& path, Vocabulary* out) {
  return LoadVocabulary(path, out, VocabularyOptions());
}

Status LoadVocabulary(const std::string& path, Vocabulary* out, const VocabularyOptions& options) {
  *out = Vocabulary();
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return Status(ErrorCode::kIo, path + ": is a directory, not a tokenizer file");
  }
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    return Status(ErrorCode::kIo, path + ": is not a regular file (a FIFO, socket or device)");
  }
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status(ErrorCode::kIo, path + ": cannot open file");
  char head[64];
  size_t got = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  std::string_view view(head, got);
  if (got == 0) return Status(ErrorCode::kTokenizer, path + ": offset 0: empty file");

  Vocabulary v;
  VocabularyOptions effective = options;
  if (LooksLikeGguf(view)) {
    CFGMASK_RETURN_IF_ERROR(LoadGgufVocabulary(path, &v));
  } else {
    size_t first = view.find_first_not_of(" \t\r\n");
    // A UTF-8 byte order mark may precede a JSON document.
    if (view.substr(0, 3) == "\xEF\xBB\xBF") first = view.find_first_not_of(" \t\r\n", 3);
    if (first != std::string_view::npos && view[first] == '{') {
      CFGMASK_RETURN_IF_ERROR(LoadTokenizerJson(path, &v));
    } else {
      CFGMASK_RETURN_IF_ERROR(LoadTiktokenVocabulary(path, &v));
      // Qwen's qwen.tiktoken holds the 151,643 BPE ranks only; its
      // <|endoftext|> (id 151,643) ends every document.
      if (v.size() == 151643 && effective.extra_special.empty()) {
        effective.extra_special = {"<|endoftext|>"};
      }
    }
  }
  CFGMASK_RETURN_IF_ERROR(ApplyOptions(path, effective, &v));
  v.identity = VocabularyIdentity(v);
  *out = std::move(v);
  return Status::Ok();
}

}  // namespace cfgmask
