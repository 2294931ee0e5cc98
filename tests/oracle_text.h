// Test helpers for talking to the Python oracles (tests/tools/*.py): quoting
// an argument for the shell, and decoding the oracles' byte escapes
// (printable ASCII as is, every other byte as \xNN).
#ifndef CFGMASK_TESTS_ORACLE_TEXT_H_
#define CFGMASK_TESTS_ORACLE_TEXT_H_

#include <string>

namespace cfgmask {

inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

inline std::string UnescapeOracleText(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x') {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_ORACLE_TEXT_H_
