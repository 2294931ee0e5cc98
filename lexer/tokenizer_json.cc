// HF tokenizer.json vocabularies, read with a small strict JSON parser of our
// own (RFC 8259: no comments, no trailing commas, UTF-8 text, \u escapes with
// surrogate pairs, nesting capped at 128 so malformed input cannot exhaust
// the stack).  Errors are "FILE:LINE:COL: what".  The parser keeps a DOM but
// validates without storing the model's merges, which we do not need.
//
// Interpretation (HF `tokenizers` semantics):
//  - model.type "BPE" (vocab: {token: id}) or "Unigram" (vocab: [[piece,
//    score], ...], id = position).
//  - The bytes of a vocabulary token depend on the decoding pipeline: with a
//    ByteLevel decoder or pre-tokenizer, the inverse GPT-2 byte map; else with
//    byte_fallback, a ByteFallback/Metaspace decoder or a Replace of "▁", the
//    SentencePiece rules ("▁" -> space, "<0xNN>" -> byte); else the text.
//  - added_tokens: special:true -> special with empty bytes, otherwise the
//    content verbatim (how `tokenizers` decodes an added token).
//  - EOS: the special added tokens whose content is on kEosTokenNames.
//  - Ids missing from both become special with empty bytes; the largest id is
//    capped by the file size.
// Tested by tokenizer_test.cc (files built with `tokenizers` itself).
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "grammar/utf8.h"
#include "lexer/tokenizer.h"

namespace cfgmask {
namespace {

constexpr int kMaxJsonDepth = 128;

struct JsonValue {
  enum class Kind : uint8_t {
    kNull,     // null, or a value validated but not kept
    kBool,     // true / false
    kNumber,   // number (integer when is_integer)
    kString,   // string, UTF-8
    kArray,    // items
    kObject,   // keys + items, in file order
  };
  Kind kind = Kind::kNull;
  bool boolean = false;
  bool is_integer = false;
  int64_t integer = 0;
  double number = 0;
  size_t offset = 0;
  std::string string;
  std::vector<std::string> keys;
  std::vector<JsonValue> items;

  const JsonValue* Get(std::string_view key) const {
    if (kind != Kind::kObject) return nullptr;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &items[i];
    }
    return nullptr;
  }
  std::string_view StringOr(std::string_view key, std::string_view fallback) const {
    const JsonValue* v = Get(key);
    return v != nullptr && v->kind == Kind::kString ? std::string_view(v->string) : fallback;
  }
  bool BoolOr(std::string_view key, bool fallback) const {
    const JsonValue* v = Get(key);
    return v != nullptr && v->kind == Kind::kBool ? v->boolean : fallback;
  }
};

class JsonParser {
 public:
  JsonParser(const std::string& path, std::string_view text) : path_(path), text_(text) {}

  Status Parse(JsonValue* out) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
    SkipSpace();
    CFGMASK_RETURN_IF_ERROR(ParseValue(0, true, out));
    SkipSpace();
    if (pos_ != text_.size()) return Error(pos_, "unexpected text after the JSON value");
    return Status::Ok();
  }

  Status Error(size_t at, const std::string& what) const {
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return Status(ErrorCode::kTokenizer, path_ + ":" + std::to_string(line) + ":" +
                                             std::to_string(at - line_start + 1) + ": " + what);
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (text_.compare(pos_, word.size(), word) != 0) return false;
    pos_ += word.size();
    return true;
  }

  // `keep` false: validate only, leave `out` null.
  Status ParseValue(int depth, bool keep, JsonValue* out) {
    if (depth > kMaxJsonDepth) return Error(pos_, "JSON nested too deeply");
    if (pos_ >= text_.size()) return Error(pos_, "unexpected end of file, expected a value");
    out->offset = pos_;
    char c = text_[pos_];
    switch (c) {
      case '{':
        return ParseObject(depth, keep, out);
      case '[':
        return ParseArray(depth, keep, out);
      case '"':
        if (keep) out->kind = JsonValue::Kind::kString;
        return ParseString(keep ? &out->string : nullptr);
      case 't':
      case 'f':
        if (Literal("true") || Literal("false")) {
          if (keep) {
            out->kind = JsonValue::Kind::kBool;
            out->boolean = c == 't';
          }
          return Status::Ok();
        }
        return Error(pos_, "invalid literal");
      case 'n':
        if (Literal("null")) return Status::Ok();
        return Error(pos_, "invalid literal");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(keep, out);
        return Error(pos_, std::string("unexpected character '") + PrintableChar(c) + "'");
    }
  }

  static std::string PrintableChar(char c) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", u);
    return buf;
  }

  Status ParseObject(int depth, bool keep, JsonValue* out) {
    if (keep) out->kind = JsonValue::Kind::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return Status::Ok();
    }
    std::string key;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error(pos_, "expected a string key");
      CFGMASK_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error(pos_, "expected ':'");
      ++pos_;
      SkipSpace();
      // The merge list is the largest part of a BPE file and is not needed.
      bool keep_member = keep && !(depth == 1 && key == "merges");
      if (keep_member) {
        out->keys.push_back(key);
        out->items.emplace_back();
        CFGMASK_RETURN_IF_ERROR(ParseValue(depth + 1, true, &out->items.back()));
      } else {
        JsonValue ignored;
        CFGMASK_RETURN_IF_ERROR(ParseValue(depth + 1, false, &ignored));
      }
      SkipSpace();
      if (pos_ >= text_.size()) return Error(pos_, "unexpected end of file in an object");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        return Status::Ok();
      }
      return Error(pos_, "expected ',' or '}'");
    }
  }

  Status ParseArray(int depth, bool keep, JsonValue* out) {
    if (keep) out->kind = JsonValue::Kind::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      if (keep) {
        out->items.emplace_back();
        CFGMASK_RETURN_IF_ERROR(ParseValue(depth + 1, true, &out->items.back()));
      } else {
        JsonValue ignored;
        CFGMASK_RETURN_IF_ERROR(ParseValue(depth + 1, false, &ignored));
      }
      SkipSpace();
      if (pos_ >= text_.size()) return Error(pos_, "unexpected end of file in an array");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        return Status::Ok();
      }
      return Error(pos_, "expected ',' or ']'");
    }
  }


  // Four hex digits at pos_; -1 if not.
  int32_t Hex4() {
    if (pos_ + 4 > text_.size()) return -1;
    int32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text_[pos_ + k];
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
      v = v * 16 + d;
    }
    pos_ += 4;
    return v;
  }

  // Length of the valid UTF-8 sequence at pos_, 0 if invalid.
  size_t Utf8Length() const {
    auto c = static_cast<unsigned char>(text_[pos_]);
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return 0;
    }
    if (pos_ + len > text_.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(text_[pos_ + k]);
      if ((cc & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
  }

  Status ParseString(std::string* out) {
    size_t start = pos_;
    ++pos_;
    if (out != nullptr) out->clear();
    while (true) {
      if (pos_ >= text_.size()) return Error(start, "unterminated string");
      auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (c < 0x20) return Error(pos_, "control character in a string");
      if (c >= 0x80) {
        size_t len = Utf8Length();
        if (len == 0) return Error(pos_, "invalid UTF-8 in a string");
        if (out != nullptr) out->append(text_.substr(pos_, len));
        pos_ += len;
        continue;
      }
      if (c != '\\') {
        if (out != nullptr) out->push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      size_t escape_at = pos_;
      ++pos_;
      if (pos_ >= text_.size()) return Error(start, "unterminated string");
      char e = text_[pos_++];
      char plain = 0;
      switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          int32_t cp = Hex4();
          if (cp < 0) return Error(escape_at, "invalid \\u escape");
          if (cp >= 0xDC00 && cp <= 0xDFFF) return Error(escape_at, "lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!Literal("\\u")) return Error(escape_at, "lone high surrogate");
            int32_t low = Hex4();
            if (low < 0xDC00 || low > 0xDFFF) return Error(escape_at, "lone high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          if (out != nullptr) AppendUtf8(static_cast<uint32_t>(cp), out);
          continue;
        }
        default:
          return Error(escape_at, "invalid escape");
      }
      if (out != nullptr) out->push_back(plain);
    }
  }

  Status ParseNumber(bool keep, JsonValue* out) {
    size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Error(start, "invalid number");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) return Error(start, "invalid number");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      integral = false;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error(start, "invalid number");
    }
    if (!keep) return Status::Ok();
    out->kind = JsonValue::Kind::kNumber;
    std::string_view literal = text_.substr(start, pos_ - start);
    if (integral) {
      auto [end, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), out->integer);
      out->is_integer = ec == std::errc() && end == literal.data() + literal.size();
    }
    out->number = std::strtod(std::string(literal).c_str(), nullptr);
    return Status::Ok();
  }

  const std::string& path_;
  std::string_view text_;
  size_t pos_ = 0;
};

enum class Decoding {
  kByteLevel,      // inverse GPT-2 byte map
  kSentencePiece,  // "▁" -> space, <0xNN> -> byte
  kVerbatim,       // token text as is
};

// Collects the "type" of a pipeline component and of its Sequence members.
void CollectTypes(const JsonValue* component, std::vector<const JsonValue*>* out) {
  if (component == nullptr || component->kind != JsonValue::Kind::kObject) return;
  out->push_back(component);
  for (const char* list : {"decoders", "pretokenizers", "normalizers"}) {
    const JsonValue* members = component->Get(list);
    if (members == nullptr || members->kind != JsonValue::Kind::kArray) continue;
    for (const JsonValue& member : members->items) CollectTypes(&member, out);
  }
}

bool IsEosName(std::string_view name) {
  for (const char* eos : kEosTokenNames) {
    if (name == eos) return true;
  }
  return false;
}

}  // namespace

Status LoadTokenizerJson(const std::string& path, Vocabulary* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status(ErrorCode::kIo, path + ": cannot open file");
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  JsonParser parser(path, text);
  JsonValue root;
  CFGMASK_RETURN_IF_ERROR(parser.Parse(&root));
  using Kind = JsonValue::Kind;
  auto error = [&](const JsonValue& at, const std::string& what) {
    return parser.Error(at.offset, what);
  };

  if (root.kind != Kind::kObject) return error(root, "tokenizer.json is not an object");
  const JsonValue* model = root.Get("model");
  if (model == nullptr || model->kind != Kind::kObject) return error(root, "no \"model\" object");
  std::string_view type = model->StringOr("type", "");
  if (type != "BPE" && type != "Unigram") {
    return error(*model, "unsupported model type '" + std::string(type) +
                             "' (supported: BPE, Unigram)");
  }

  std::vector<const JsonValue*> components;
  CollectTypes(root.Get("decoder"), &components);
  CollectTypes(root.Get("pre_tokenizer"), &components);
  bool byte_level = false;
  bool sentence_piece = model->BoolOr("byte_fallback", false);
  for (const JsonValue* c : components) {
    std::string_view t = c->StringOr("type", "");
    if (t == "ByteLevel") byte_level = true;
    if (t == "ByteFallback" || t == "Metaspace") sentence_piece = true;
    if (t == "Replace") {
      const JsonValue* pattern = c->Get("pattern");
      if (pattern != nullptr && pattern->StringOr("String", "") == "\xE2\x96\x81") {
        sentence_piece = true;
      }
    }
  }
  Decoding decoding = byte_level       ? Decoding::kByteLevel
                      : sentence_piece ? Decoding::kSentencePiece
                                       : Decoding::kVerbatim;

  // (id, text) of the model vocabulary.
  std::vector<std::pair<int64_t, const std::string*>> entries;
  const JsonValue* vocab = model->Get("vocab");
  if (vocab == nullptr) return error(*model, "model has no \"vocab\"");
  if (type == "BPE") {
    if (vocab->kind != Kind::kObject) return error(*vocab, "BPE vocab is not an object");
    for (size_t i = 0; i < vocab->keys.size(); ++i) {
      const JsonValue& id = vocab->items[i];
      if (id.kind != Kind::kNumber || !id.is_integer) {
        return error(id, "token id is not an integer");
      }
      entries.emplace_back(id.integer, &vocab->keys[i]);
    }
  } else {
    if (vocab->kind != Kind::kArray) return error(*vocab, "Unigram vocab is not an array");
    for (size_t i = 0; i < vocab->items.size(); ++i) {
      const JsonValue& piece = vocab->items[i];
      if (piece.kind != Kind::kArray || piece.items.empty() ||
          piece.items[0].kind != Kind::kString) {
        return error(piece, "Unigram vocab entry is not [piece, score]");
      }
      entries.emplace_back(static_cast<int64_t>(i), &piece.items[0].string);
    }
  }

  struct Added {
    int64_t id;
    const std::string* content;
    bool special;
  };
  std::vector<Added> added;
  if (const JsonValue* list = root.Get("added_tokens"); list != nullptr && list->kind != Kind::kNull) {
    if (list->kind != Kind::kArray) return error(*list, "added_tokens is not an array");
    for (const JsonValue& token : list->items) {
      const JsonValue* id = token.Get("id");
      const JsonValue* content = token.Get("content");
      if (id == nullptr || id->kind != Kind::kNumber || !id->is_integer || content == nullptr ||
          content->kind != Kind::kString) {
        return error(token, "added token needs an integer \"id\" and a string \"content\"");
      }
      added.push_back({id->integer, &content->string, token.BoolOr("special", false)});
    }
  }

  int64_t max_id = -1;
  auto check_id = [&](int64_t id, const JsonValue& at) -> Status {
    // Each id needs a few bytes of text, so a valid id is below the file size.
    if (id < 0 || id >= static_cast<int64_t>(text.size()) || id >= INT32_MAX) {
      return error(at, "token id " + std::to_string(id) + " is out of range");
    }
    max_id = std::max(max_id, id);
    return Status::Ok();
  };
  if (type == "BPE") {
    for (size_t i = 0; i < entries.size(); ++i) {
      CFGMASK_RETURN_IF_ERROR(check_id(entries[i].first, vocab->items[i]));
    }
  } else {
    max_id = static_cast<int64_t>(entries.size()) - 1;
  }
  for (size_t i = 0; i < added.size(); ++i) {
    CFGMASK_RETURN_IF_ERROR(check_id(added[i].id, root.Get("added_tokens")->items[i]));
  }
  if (max_id < 0) return error(*vocab, "empty vocabulary");

  Vocabulary v;
  const auto n = static_cast<size_t>(max_id + 1);
  v.tokens.resize(n);
  v.special.assign(n, 1);  // ids named nowhere stay special and empty
  std::vector<uint8_t> named(n, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    auto id = static_cast<size_t>(entries[i].first);
    if (named[id]) return error(type == "BPE" ? vocab->items[i] : *vocab, "duplicate token id");
    named[id] = 1;
    const std::string& token_text = *entries[i].second;
    std::string& bytes = v.tokens[id];
    v.special[id] = 0;
    switch (decoding) {
      case Decoding::kByteLevel:
        DecodeByteLevel(token_text, &bytes);
        break;
      case Decoding::kSentencePiece:
        if (int byte = ParseByteToken(token_text); byte >= 0) {
          bytes.assign(1, static_cast<char>(byte));
        } else {
          bytes = DecodeMetaspace(token_text);
        }
        break;
      case Decoding::kVerbatim:
        bytes = token_text;
        break;
    }
  }
  for (const Added& token : added) {
    auto id = static_cast<size_t>(token.id);
    v.special[id] = token.special ? 1 : 0;
    if (token.special) {
      v.tokens[id].clear();
      if (IsEosName(*token.content)) v.eos_ids.push_back(static_cast<int32_t>(id));
    } else {
      v.tokens[id] = *token.content;
    }
  }
  std::string base = path.substr(path.find_last_of('/') + 1);
  v.name = base + (decoding == Decoding::kByteLevel       ? " (tokenizer.json, byte-level BPE)"
                   : decoding == Decoding::kSentencePiece ? " (tokenizer.json, SentencePiece)"
                                                          : " (tokenizer.json)");
  *out = std::move(v);
  return Status::Ok();
}

}  // namespace cfgmask
