// Segmentation of texts into vocabulary tokens: see segment.h.
#include "runtime/segment.h"

#include <cstdlib>
#include <string>

#include "lexer/tokenizer/tokenizer.h"

namespace cfgmask {

VocabTrie StoreVocabTrie(const CompiledStore& store) {
  Vocabulary v;
  v.tokens.reserve(store.vocab_size);
  for (int32_t t = 0; t < store.vocab_size; ++t) v.tokens.emplace_back(store.TokenBytes(t));
  v.special = store.token_special.ToVector();
  v.special.resize(store.vocab_size, 0);
  return VocabTrie::Build(v);
}

Segmenter::Segmenter(const CompiledStore& store) : trie_(StoreVocabTrie(store)) {}

void Segmenter::Matches(std::string_view rest,
                        std::vector<std::pair<int32_t, int32_t>>* out) const {
  int32_t n = 0;
  for (size_t k = 0; k < rest.size(); ++k) {
    const uint8_t b = static_cast<uint8_t>(rest[k]);
    int32_t c = trie_.first_child(n);
    while (c >= 0 && trie_.byte(c) < b) c = trie_.next_sibling(c);
    if (c < 0 || trie_.byte(c) != b) return;
    n = c;
    for (int32_t t : trie_.tokens_at(n)) out->emplace_back(t, static_cast<int32_t>(k + 1));
  }
}

std::vector<Segment> Segmenter::Cut(std::string_view text, SegmentMode mode,
                                    std::mt19937_64* rng) const {
  std::vector<Segment> out;
  std::vector<std::pair<int32_t, int32_t>> m;
  size_t i = 0;
  while (i < text.size()) {
    m.clear();
    if (mode != SegmentMode::kBytes) Matches(text.substr(i), &m);
    Segment s{-1, static_cast<int32_t>(i), 1};
    if (!m.empty()) {
      // Matches come in order of length; ids of equal bytes are adjacent.
      size_t pick = m.size() - 1;
      if (mode == SegmentMode::kRandom) {
        pick = std::uniform_int_distribution<size_t>(0, m.size() - 1)(*rng);
      } else {
        while (pick > 0 && m[pick - 1].second == m[pick].second) --pick;  // lowest id
      }
      s.token = m[pick].first;
      s.length = m[pick].second;
    }
    out.push_back(s);
    i += s.length;
  }
  return out;
}

Status ReadTokenIds(const CompiledStore& store, std::string_view ids_path,
                    std::string_view ids_text, std::string_view text_path,
                    std::string_view text, std::vector<Segment>* out) {
  out->clear();
  size_t i = 0, pos = 0;  // pos: bytes of `text` spelled so far
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (true) {
    while (i < ids_text.size() && space(ids_text[i])) ++i;
    if (i == ids_text.size()) break;
    const size_t start = i;
    while (i < ids_text.size() && !space(ids_text[i])) ++i;
    const std::string word(ids_text.substr(start, i - start));
    const std::string where = TextPosition(ids_path, ids_text, start);
    char* end = nullptr;
    const long long id = std::strtoll(word.c_str(), &end, 10);
    if (word.empty() || *end != '\0' || !(word[0] >= '0' && word[0] <= '9')) {
      return Status(ErrorCode::kInvalidArgument,
                    where + ": expected a token id, got '" + Printable(word) + "'");
    }
    if (id >= store.vocab_size) {
      return Status(ErrorCode::kInvalidArgument,
                    where + ": token id " + word + " is out of range (vocabulary of " +
                        std::to_string(store.vocab_size) + ")");
    }
    const int32_t t = static_cast<int32_t>(id);
    if (store.token_special[t]) {
      return Status(ErrorCode::kInvalidArgument,
                    where + ": token id " + word + " is a special token, not text");
    }
    const std::string_view bytes = store.TokenBytes(t);
    if (text.substr(pos, bytes.size()) != bytes) {
      size_t k = 0;
      while (pos + k < text.size() && k < bytes.size() && text[pos + k] == bytes[k]) ++k;
      return Status(ErrorCode::kInvalidArgument,
                    TextPosition(text_path, text, pos + k) + ": token id " + word + " (" +
                        where + ") spells \"" + Printable(bytes) + "\" but the file has \"" +
                        Printable(text.substr(pos, bytes.size() + 8)) + "\"");
    }
    out->push_back(Segment{t, static_cast<int32_t>(pos), static_cast<int32_t>(bytes.size())});
    pos += bytes.size();
  }
  if (pos != text.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  TextPosition(text_path, text, pos) + ": the token ids of " +
                      std::string(ids_path) + " end here, before the end of the file");
  }
  return Status::Ok();
}

std::string TextPosition(std::string_view file, std::string_view text, size_t offset) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return std::string(file) + ":" + std::to_string(line) + ":" +
         std::to_string(offset - line_start + 1);
}

std::string Printable(std::string_view bytes, size_t max_len) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_len; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          static const char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  if (bytes.size() > max_len) out += "...";
  return out;
}

std::string TokenLabel(const CompiledStore& store, int32_t token) {
  return "token " + std::to_string(token) + " \"" + Printable(store.TokenBytes(token)) + "\"";
}

}  // namespace cfgmask
