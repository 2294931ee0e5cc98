// tiktoken rank files: one "BASE64 RANK" line per token, as read by
// tiktoken.load.load_tiktoken_bpe.  The token id is the rank and the bytes are
// the base64-decoded text (standard alphabet, '=' padding).  Empty lines are
// skipped; ranks missing from the file become special tokens with empty bytes
// so that ids stay dense; the largest rank is capped by the file size, so a
// corrupted rank cannot make us allocate more than the file could describe.
// The file names no special tokens and no EOS: LoadVocabulary's options add
// them (and default to Qwen's <|endoftext|> for Qwen's file).  Errors are
// "FILE:LINE:COL: what".  Tested by tokenizer_test.cc.
#include <fstream>
#include <limits>
#include <sstream>

#include "lexer/tokenizer/tokenizer.h"

namespace cfgmask {
namespace {

int Base64Digit(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict base64 (length a multiple of 4, padding only at the end); returns the
// index of the first bad character, or -1 when the text decodes.
int64_t DecodeBase64(std::string_view text, std::string* out) {
  out->clear();
  if (text.size() % 4 != 0) return static_cast<int64_t>(text.size());
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t group = 0;
    for (size_t k = 0; k < 4; ++k) {
      size_t at = i + k;
      int d;
      if (at >= text.size() - padding) {
        if (text[at] != '=') return static_cast<int64_t>(at);
        d = 0;
      } else {
        d = Base64Digit(static_cast<unsigned char>(text[at]));
        if (d < 0) return static_cast<int64_t>(at);
      }
      group = (group << 6) | static_cast<uint32_t>(d);
    }
    out->push_back(static_cast<char>(group >> 16));
    out->push_back(static_cast<char>(group >> 8));
    out->push_back(static_cast<char>(group));
  }
  out->resize(out->size() - padding);
  return -1;
}

}  // namespace

Status LoadTiktokenVocabulary(const std::string& path, Vocabulary* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status(ErrorCode::kIo, path + ": cannot open file");
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  auto error = [&](int64_t line, int64_t col, const std::string& what) {
    return Status(ErrorCode::kTokenizer,
                  path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  };

  Vocabulary v;
  v.name = path.substr(path.find_last_of('/') + 1) + " (tiktoken, byte-level BPE)";
  std::vector<bool> seen;
  int64_t line_number = 0;
  size_t pos = 0;
  std::string bytes;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;

    size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      return error(line_number, 1, "expected 'BASE64 RANK', found no space");
    }
    std::string_view token = line.substr(0, space);
    std::string_view rank_text = line.substr(space + 1);
    int64_t bad = DecodeBase64(token, &bytes);
    if (bad >= 0) return error(line_number, bad + 1, "invalid base64 token");
    if (rank_text.empty() || rank_text.size() > 10) {
      return error(line_number, static_cast<int64_t>(space) + 2, "invalid rank");
    }
    int64_t rank = 0;
    for (size_t k = 0; k < rank_text.size(); ++k) {
      char c = rank_text[k];
      if (c < '0' || c > '9') {
        return error(line_number, static_cast<int64_t>(space + 2 + k), "invalid rank");
      }
      rank = rank * 10 + (c - '0');
    }
    if (rank >= std::numeric_limits<int32_t>::max() || rank >= static_cast<int64_t>(text.size())) {
      return error(line_number, static_cast<int64_t>(space) + 2,
                   "rank " + std::to_string(rank) + " exceeds what the file can hold");
    }
    auto id = static_cast<size_t>(rank);
    if (id >= v.tokens.size()) {
      v.tokens.resize(id + 1);
      v.special.resize(id + 1, 1);
      seen.resize(id + 1, false);
    }
    if (seen[id]) return error(line_number, static_cast<int64_t>(space) + 2, "duplicate rank");
    seen[id] = true;
    v.tokens[id] = bytes;
    v.special[id] = 0;
  }
  if (v.tokens.empty()) return error(1, 1, "no tokens");
  *out = std::move(v);
  return Status::Ok();
}

}  // namespace cfgmask
