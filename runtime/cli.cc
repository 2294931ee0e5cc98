// Segmentation and token drawing for the `cfgmask` command: see cli.h.
#include "runtime/cli.h"

#include <algorithm>
#include <string>

#include "lexer/tokenizer.h"

namespace cfgmask {
namespace {

VocabTrie TrieOf(const CompiledStore& store) {
  Vocabulary v;
  v.tokens.reserve(store.vocab_size);
  for (int32_t t = 0; t < store.vocab_size; ++t) v.tokens.emplace_back(store.TokenBytes(t));
  v.special = store.token_special;
  v.special.resize(store.vocab_size, 0);
  return VocabTrie::Build(v);
}

}  // namespace

Segmenter::Segmenter(const CompiledStore& store) : trie_(TrieOf(store)) {}

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

int32_t DrawToken(const CompiledStore& store, const std::vector<uint32_t>& mask, double eos_bias,
                  std::mt19937_64* rng, bool ascii_only) {
  auto allowed = [&](int32_t t) { return (mask[t >> 5] >> (t & 31)) & 1u; };
  std::vector<int32_t> eos;
  for (int32_t e : store.eos_ids) {
    if (e >= 0 && e < store.vocab_size && allowed(e)) eos.push_back(e);
  }
  std::vector<int32_t> text;
  for (int32_t t = 0; t < store.vocab_size; ++t) {
    if (allowed(t) && std::find(store.eos_ids.begin(), store.eos_ids.end(), t) ==
                          store.eos_ids.end()) {
      text.push_back(t);
    }
  }
  if (ascii_only) {
    std::vector<int32_t> ascii;
    for (int32_t t : text) {
      bool ok = true;
      for (unsigned char c : store.TokenBytes(t)) ok &= (c >= 0x20 && c < 0x7F) || c == '\n' || c == '\t';
      if (ok) ascii.push_back(t);
    }
    if (!ascii.empty()) text.swap(ascii);
  }
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  if (!eos.empty() && (text.empty() || coin(*rng) < eos_bias)) {
    return eos[std::uniform_int_distribution<size_t>(0, eos.size() - 1)(*rng)];
  }
  if (text.empty()) return -1;
  return text[std::uniform_int_distribution<size_t>(0, text.size() - 1)(*rng)];
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

}  // namespace cfgmask
