// Exhaustive differential of the regex front end (lexer/regex/*.cc) against
// Python's re on the terminals of real grammars: for every terminal of
// python.lark, lark.lark, common.lark and grammar/lark/*.lark, every string
// up to length 3 (full size: 4) over an alphabet of the pattern's own
// characters plus a few others, and 1,000 (full: 10,000) random strings
// (fixed seed), the match length equals re.match's; and for every Unicode
// code point, \w, \d and \s agree with Python's.  The oracle is
// tests/tools/terminal_strings_oracle.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "lexer/regex/regex.h"
#include "tests/exactness_harness.h"
#include "tests/oracle_text.h"
#include "grammar/base/utf8.h"

namespace cfgmask {
namespace {



TEST(TerminalStrings, EveryShortStringAndCodePointAgreesWithPythonRe) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  const bool quick = TestQuick();
  // Under the sanitizer (TestSanitized) every pattern is matched on every
  // string up to length 2 and 300 random ones, and every 16th code point
  // against the classes: the same code paths on far fewer matches (the
  // optimised build runs them all).
  const bool sanitized = TestSanitized();
  const std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                          "/tests/tools/terminal_strings_oracle.py " +
                          (sanitized ? "2 300" : quick ? "3 1000" : "4 10000");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::map<std::string, Nfa> nfas;
  Nfa classes[3];
  RegexWidth w;
  ASSERT_TRUE(CompileRegex("\\w", "", "w", &classes[0], &w).ok());
  ASSERT_TRUE(CompileRegex("\\d", "", "d", &classes[1], &w).ok());
  ASSERT_TRUE(CompileRegex("\\s", "", "s", &classes[2], &w).ok());
  int64_t rows = 0, code_points = 0, mismatches = 0;
  std::string line;
  char buf[1 << 16];
  while (std::fgets(buf, sizeof buf, p)) {
    line += buf;
    if (line.back() != '\n') continue;
    line.pop_back();
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, '\t');) f.push_back(cell);
    line.clear();
    if (f.size() == 4 && f[0] == "T") {
      auto it = nfas.find(f[1]);
      if (it == nfas.end()) {
        Nfa nfa;
        Status st = CompileRegex(UnescapeOracleText(f[1]), "", "terminal", &nfa, &w);
        ASSERT_TRUE(st.ok()) << st.message();
        it = nfas.emplace(f[1], std::move(nfa)).first;
      }
      const std::string text = UnescapeOracleText(f[2]);
      const int64_t want = std::stoll(f[3]);
      const int64_t got = MatchPrefix(it->second, text);
      ++rows;
      if (got != want && ++mismatches <= 10) {
        ADD_FAILURE() << "pattern " << f[1] << " text " << f[2] << ": re " << want << ", cfgmask "
                      << got;
      }
    } else if (f.size() == 3 && f[0] == "C") {
      const uint32_t cp = static_cast<uint32_t>(std::stoul(f[1], nullptr, 16));
      ++code_points;
      if (sanitized && cp % 16 != 0) continue;
      std::string ch;
      AppendUtf8(cp, &ch);
      for (int k = 0; k < 3; ++k) {
        const bool want = f[2][k] == '1';
        const bool got = MatchPrefix(classes[k], ch) == static_cast<int64_t>(ch.size());
        if (got != want && ++mismatches <= 10) {
          ADD_FAILURE() << "code point U+" << f[1] << " class " << "wds"[k] << ": re " << want
                        << ", cfgmask " << got;
        }
      }
    }
  }
  pclose(p);
  std::printf("terminal strings: %zu patterns, %lld rows, %lld code points, %lld mismatches\n",
              nfas.size(), static_cast<long long>(rows), static_cast<long long>(code_points),
              static_cast<long long>(mismatches));
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(nfas.size(), 100u);
  EXPECT_EQ(code_points, 0x110000 - 0x800);
}

}  // namespace
}  // namespace cfgmask
