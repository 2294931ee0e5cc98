// UTF-8 encoding of one code point, shared by the .lark reader (string
// literals), the tokenizer.json reader (\u escapes) and the tests.  The
// caller guarantees cp <= 0x10FFFF.
#ifndef CFGMASK_GRAMMAR_BASE_UTF8_H_
#define CFGMASK_GRAMMAR_BASE_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace cfgmask {

inline void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF) that starts at s[i], or 0 if none does.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  bool ok = len > 0 && i + len <= s.size();
  for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<uint8_t>(s[i + k]) >> 6) == 2;
  if (ok && len == 2) ok = c >= 0xC2;
  if (ok && len == 3) {
    const uint8_t d = static_cast<uint8_t>(s[i + 1]);
    ok = !(c == 0xE0 && d < 0xA0) && !(c == 0xED && d >= 0xA0);
  }
  if (ok && len == 4) {
    const uint8_t d = static_cast<uint8_t>(s[i + 1]);
    ok = c <= 0xF4 && !(c == 0xF0 && d < 0x90) && !(c == 0xF4 && d >= 0x90);
  }
  return ok ? len : 0;
}

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_BASE_UTF8_H_
