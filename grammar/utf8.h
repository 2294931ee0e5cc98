// UTF-8 encoding of one code point, shared by the .lark reader (string
// literals), the tokenizer.json reader (\u escapes) and the tests.  The
// caller guarantees cp <= 0x10FFFF.
#ifndef CFGMASK_GRAMMAR_UTF8_H_
#define CFGMASK_GRAMMAR_UTF8_H_

#include <cstdint>
#include <string>

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

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_UTF8_H_
