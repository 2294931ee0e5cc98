// HF tokenizer.json vocabularies, parsed by nlohmann-json (strict RFC 8259:
// no comments, no trailing commas, UTF-8 text checked, \u escapes with
// surrogate pairs).  Its SAX interface feeds a small DOM of our own that keeps
// object members in file order (duplicates included), skips the model's
// merges, which we do not need, and caps nesting at 128.  Errors are
// "FILE:LINE:COL: what": nlohmann's error kinds are reworded and their byte
// positions turned into the start of the offending token.
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
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "lexer/tokenizer/tokenizer.h"

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

// An iterator over the text that records how far nlohmann's lexer has read,
// so that each SAX event knows where its token ends.
class CountingIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator() = default;
  CountingIterator(const char* at, const char** read) : at_(at), read_(read) {}
  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    *read_ = at_;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }
  bool operator!=(const CountingIterator& other) const { return at_ != other.at_; }

 private:
  const char* at_ = nullptr;
  const char** read_ = nullptr;
};

bool IsNumberChar(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

bool IsLetter(char c) { return c >= 'a' && c <= 'z'; }

std::string PrintableChar(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7F) return std::string(1, c);
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\x%02x", u);
  return buf;
}

// Builds the DOM from nlohmann's SAX events.  On a parse error it records the
// message and the byte offset it refers to.
class DomBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  DomBuilder(std::string_view text, const char* const* read, JsonValue* root)
      : text_(text), read_(read), root_(root) {}

  bool null() override {
    Scalar(Literal(4));
    return !failed_;
  }
  bool boolean(bool value) override {
    JsonValue* v = Scalar(Literal(value ? 4 : 5));
    if (v != nullptr) {
      v->kind = JsonValue::Kind::kBool;
      v->boolean = value;
    }
    return !failed_;
  }
  bool number_integer(number_integer_t value) override {
    return Number(true, value, static_cast<double>(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    const bool fits = value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return Number(fits, fits ? static_cast<int64_t>(value) : 0, static_cast<double>(value));
  }
  bool number_float(number_float_t value, const string_t& /*literal*/) override {
    return Number(false, 0, value);
  }
  bool string(string_t& value) override {
    JsonValue* v = Scalar(StringStart());
    if (v != nullptr) {
      v->kind = JsonValue::Kind::kString;
      v->string = std::move(value);
    }
    return !failed_;
  }
  bool binary(binary_t& /*value*/) override { return true; }  // not produced by JSON text

  bool start_object(std::size_t /*elements*/) override {
    return Open(JsonValue::Kind::kObject);
  }
  bool key(string_t& value) override {
    pending_key_ = std::move(value);
    last_end_ = Read();
    after_open_ = false;
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t /*elements*/) override { return Open(JsonValue::Kind::kArray); }
  bool end_array() override { return Close(); }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& error) override {
    Translate(position, error.what());
    return false;
  }

  bool failed() const { return failed_; }
  size_t RestAfterValue() const { return SkipSpace(last_end_); }
  size_t error_at() const { return error_at_; }
  const std::string& error_message() const { return error_message_; }

 private:
  struct Frame {
    JsonValue* value;  // null while validating without keeping
  };

  size_t Read() const { return static_cast<size_t>(*read_ - text_.data()); }

  size_t Literal(size_t length) const { return Read() - length; }

  // A number's lexer reads one character past it unless the text ends there.
  size_t NumberEnd() const {
    size_t end = Read();
    if (end > 0 && !(end == text_.size() && text_[end - 1] >= '0' && text_[end - 1] <= '9')) {
      return end - 1;
    }
    // At the end of the text: a leading "0" ends before the digit after it.
    size_t start = end;
    while (start > 0 && IsNumberChar(text_[start - 1])) --start;
    if (start < end && text_[start] == '-') ++start;
    if (start + 1 < end && text_[start] == '0' && text_[start + 1] >= '0' &&
        text_[start + 1] <= '9') {
      return start + 1;
    }
    return end;
  }
  size_t NumberStart() const {
    size_t start = NumberEnd();
    while (start > 0 && IsNumberChar(text_[start - 1])) --start;
    return start;
  }

  // The opening quote of the string that ends just before Read(): the last
  // quote not escaped by an odd run of backslashes.
  size_t StringStart() const {
    size_t i = Read() - 1;
    while (i > 0) {
      --i;
      if (text_[i] != '"') continue;
      size_t slashes = 0;
      while (slashes < i && text_[i - 1 - slashes] == '\\') ++slashes;
      if (slashes % 2 == 0) return i;
    }
    return 0;
  }

  bool Fail(size_t at, std::string what) {
    failed_ = true;
    error_at_ = std::min(at, text_.size());
    error_message_ = std::move(what);
    return false;
  }

  // A new value at `offset`: the node to fill, or null when not kept.
  JsonValue* Place(size_t offset) {
    last_end_ = Read();
    after_open_ = false;
    if (static_cast<int>(stack_.size()) > kMaxJsonDepth) {
      Fail(offset, "JSON nested too deeply");
      return nullptr;
    }
    JsonValue* v = nullptr;
    if (stack_.empty()) {
      v = root_;
    } else {
      Frame& parent = stack_.back();
      if (parent.value != nullptr) {
        if (parent.value->kind == JsonValue::Kind::kObject) {
          // The merge list is the largest part of a BPE file and is not needed.
          if (!(stack_.size() == 2 && pending_key_ == "merges")) {
            parent.value->keys.push_back(std::move(pending_key_));
            parent.value->items.emplace_back();
            v = &parent.value->items.back();
          }
        } else {
          parent.value->items.emplace_back();
          v = &parent.value->items.back();
        }
      }
    }
    if (v != nullptr) v->offset = offset;
    return v;
  }

  JsonValue* Scalar(size_t offset) { return Place(offset); }

  bool Number(bool is_integer, int64_t integer, double number) {
    JsonValue* v = Scalar(NumberStart());
    last_end_ = NumberEnd();
    if (v != nullptr) {
      v->kind = JsonValue::Kind::kNumber;
      v->is_integer = is_integer;
      v->integer = integer;
      v->number = number;
    }
    return !failed_;
  }

  bool Open(JsonValue::Kind kind) {
    JsonValue* v = Place(Read() - 1);
    after_open_ = true;
    if (failed_) return false;
    if (v != nullptr) v->kind = kind;
    stack_.push_back({v});
    return true;
  }

  bool Close() {
    last_end_ = Read();
    after_open_ = false;
    stack_.pop_back();
    return true;
  }

  size_t SkipSpace(size_t i) const {
    while (i < text_.size() &&
           (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' || text_[i] == '\r')) {
      ++i;
    }
    return i;
  }

  // Where the offending token starts: after the last event's token, white
  // space and, where the parser took one since, the ',' or ':' before a key
  // or value (none after '{' or '[').
  size_t TokenStart(bool separator_taken) const {
    size_t i = last_end_;
    if (i == 0 && text_.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
    i = SkipSpace(i);
    if (separator_taken && !after_open_ && last_end_ > 0 && i < text_.size() &&
        (text_[i] == ',' || text_[i] == ':')) {
      i = SkipSpace(i + 1);
    }
    return i;
  }

  // nlohmann's message -> ours, at the offending token.  Its parser says
  // "syntax error while parsing CONTEXT - unexpected TOKEN; expected X", or
  // "... - LEXER ERROR; last read: '...'" when the token itself is malformed.
  // CONTEXT is "value" where a value belongs (then no ',' or ':' is in the
  // way), "object key", "object separator" (':'), "object" or "array" (','
  // or the closing bracket).
  void Translate(size_t position, const std::string& what) {
    const size_t size = text_.size();
    // The character the lexer stopped at (size at the end of the text).
    const size_t bad = std::min(position == 0 ? 0 : position - 1, size);
    auto has = [&](std::string_view part) { return what.find(part) != std::string::npos; };
    if (has("; expected end of input")) {
      Fail(SkipSpace(last_end_), "unexpected text after the JSON value");
      return;
    }
    if (has("number overflow")) {  // as serde_json, which `tokenizers` reads with
      Fail(NumberStart(), "number out of range");
      return;
    }
    const bool key = has("while parsing object key");
    const bool separator = has("while parsing object separator");
    const bool object = !key && !separator && has("while parsing object ");
    const bool array = has("while parsing array ");
    const bool value = !key && !separator && !object && !array;
    const size_t start = TokenStart(key || value);
    // nlohmann's lexer takes a NUL byte for the end of the text.
    const bool at_end = has("unexpected end of input") && start >= size;
    const bool lexer_error = has("; last read: ");
    if (key) {
      if (lexer_error && start < size && text_[start] == '"') {
        TranslateLexerError(bad, what);
      } else {
        Fail(start, "expected a string key");
      }
    } else if (separator) {
      Fail(start, "expected ':'");
    } else if (object) {
      Fail(start, at_end ? "unexpected end of file in an object" : "expected ',' or '}'");
    } else if (array) {
      Fail(start, at_end ? "unexpected end of file in an array" : "expected ',' or ']'");
    } else if (lexer_error) {
      TranslateLexerError(bad, what);
    } else if (at_end) {
      Fail(size, "unexpected end of file, expected a value");
    } else {
      Fail(start, "unexpected character '" + PrintableChar(text_[start]) + "'");
    }
  }

  void TranslateLexerError(size_t bad, const std::string& what) {
    const size_t size = text_.size();
    auto has = [&](std::string_view part) { return what.find(part) != std::string::npos; };
    // The last "\u" at or before `from`, optionally only a high surrogate's.
    auto escape_before = [&](size_t from, bool high_only) {
      for (size_t i = std::min(from, size); i-- > 0;) {
        if (text_[i] != '\\' || i + 1 >= size || text_[i + 1] != 'u') continue;
        if (!high_only) return i;
        if (i + 3 < size && (text_[i + 2] == 'd' || text_[i + 2] == 'D') &&
            std::string_view("89abAB").find(text_[i + 3]) != std::string_view::npos) {
          return i;
        }
      }
      return bad;
    };
    // The opening quote of the string being read: the first quote after the
    // last complete event (only white space, ',' and ':' lie between).
    auto string_start = [&] {
      size_t i = last_end_;
      while (i < size && text_[i] != '"') ++i;
      return i;
    };
    if (has("invalid BOM")) {
      Fail(0, "unexpected character '" + PrintableChar(text_[0]) + "'");
    } else if (has("missing closing quote") ||
               (bad >= size && has("forbidden character after backslash"))) {
      Fail(string_start(), "unterminated string");
    } else if (has("forbidden character after backslash")) {
      Fail(bad == 0 ? 0 : bad - 1, "invalid escape");
    } else if (has("must be followed by 4 hex digits")) {
      // After a high surrogate, the second escape is its missing low half.
      const size_t at = escape_before(bad, false);
      const size_t high = at >= 6 ? escape_before(at, true) : bad;
      if (high + 6 == at) {
        Fail(high, "lone high surrogate");
      } else {
        Fail(at, "invalid \\u escape");
      }
    } else if (has("must be followed by U+DC00..U+DFFF")) {
      // When the escape after a high surrogate is high too, the first one
      // is the lone one.
      size_t high = escape_before(bad, true);
      if (high >= 6 && high < size && escape_before(high, true) == high - 6) high -= 6;
      Fail(high, "lone high surrogate");
    } else if (has("must follow U+D800..U+DBFF")) {
      Fail(escape_before(bad, false), "lone low surrogate");
    } else if (has("ill-formed UTF-8")) {
      // Back to the lead byte of the sequence the bad byte broke off.
      size_t start = bad;
      size_t j = bad;
      while (j > 0 && j + 3 > bad && (static_cast<unsigned char>(text_[j - 1]) & 0xC0) == 0x80) --j;
      if (j > 0 && static_cast<unsigned char>(text_[j - 1]) >= 0xC0) start = j - 1;
      Fail(start, "invalid UTF-8 in a string");
    } else if (has("control character")) {
      Fail(bad, "control character in a string");
    } else if (has("invalid number")) {
      size_t start = bad;
      while (start > 0 && IsNumberChar(text_[start - 1])) --start;
      Fail(start, "invalid number");
    } else if (has("invalid literal")) {
      size_t start = bad;
      while (start > 0 && IsLetter(text_[start - 1])) --start;
      if (start < size && start < bad && (text_[start] == 't' || text_[start] == 'f' || text_[start] == 'n')) {
        Fail(start, "invalid literal");
      } else if (bad >= size) {
        Fail(size, "unexpected end of file, expected a value");
      } else {
        Fail(bad, "unexpected character '" + PrintableChar(text_[bad]) + "'");
      }
    } else {
      Fail(bad, "invalid JSON");
    }
  }

  std::string_view text_;
  const char* const* read_;
  JsonValue* root_;
  std::vector<Frame> stack_;
  std::string pending_key_;
  size_t last_end_ = 0;      // where the last event's token ended
  bool after_open_ = false;  // that token was '{' or '['
  bool failed_ = false;
  size_t error_at_ = 0;
  std::string error_message_;
};

// "PATH:LINE:COL: what" for the byte offset `at` of `text`.
Status JsonError(const std::string& path, std::string_view text, size_t at,
                 const std::string& what) {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return Status(ErrorCode::kTokenizer, path + ":" + std::to_string(line) + ":" +
                                           std::to_string(at - line_start + 1) + ": " + what);
}

Status ParseJson(const std::string& path, std::string_view text, JsonValue* root) {
  const char* read = text.data();
  DomBuilder builder(text, &read, root);
  CountingIterator first(text.data(), &read);
  CountingIterator last(text.data() + text.size(), &read);
  nlohmann::json::sax_parse(first, last, &builder, nlohmann::json::input_format_t::json,
                            /*strict=*/true);
  if (builder.failed()) {
    return JsonError(path, text, builder.error_at(), builder.error_message());
  }
  // nlohmann stops at a NUL byte after the value as at the end of the text.
  if (const size_t rest = builder.RestAfterValue(); rest < text.size()) {
    return JsonError(path, text, rest, "unexpected text after the JSON value");
  }
  return Status::Ok();
}

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
  JsonValue root;
  CFGMASK_RETURN_IF_ERROR(ParseJson(path, text, &root));
  using Kind = JsonValue::Kind;
  auto error = [&](const JsonValue& at, const std::string& what) {
    return JsonError(path, text, at.offset, what);
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
      if (v.special_names.empty()) v.special_names.resize(n);
      v.special_names[id] = *token.content;
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
