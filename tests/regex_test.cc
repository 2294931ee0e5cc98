// Tests of the terminal-regex front end (lexer/regex/regex.h): parser, compiler to
// the byte NFA, MatchPrefix and RegexWidth.  The main test is differential:
// tests/tools/regex_oracle.py, run with $CFGMASK_PYTHON, writes Python re's
// answers for hand-written edge cases, 2000+ random regexes and every
// terminal of Lark's python.lark / lark.lark / common.lark, each on ~20
// texts; every row must agree byte for byte.  Without $CFGMASK_PYTHON the
// differential tests skip (and fail under CI=true).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lexer/regex/regex.h"
#include "grammar/base/regex_ast.h"
#include "tests/oracle_text.h"

namespace cfgmask {
namespace {


std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, '\t')) f.push_back(cell);
  return f;
}

std::string U128ToString(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

struct OracleRows {
  std::vector<std::vector<std::string>> rows;
  std::string error;  // why the oracle could not be run
};

// Runs the oracle once per process: popen, copy to a temp file, read back.
const OracleRows& LoadOracle() {
  static const OracleRows* const kRows = [] {
    auto* r = new OracleRows;
    const char* python = std::getenv("CFGMASK_PYTHON");
    if (python == nullptr || *python == '\0') {
      r->error = "CFGMASK_PYTHON is not set (source .cache/env.sh)";
      return r;
    }
    std::string cmd = std::string("'") + python + "' '" CFGMASK_SOURCE_DIR
                      "/tests/tools/regex_oracle.py'";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) {
      r->error = "cannot run " + cmd;
      return r;
    }
    FILE* tmp = std::tmpfile();
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) std::fwrite(buf, 1, n, tmp);
    int rc = pclose(pipe);
    if (rc != 0) {
      r->error = "oracle failed (" + std::to_string(rc) + "): " + cmd;
      std::fclose(tmp);
      return r;
    }
    std::rewind(tmp);
    std::string line;
    int c;
    while ((c = std::fgetc(tmp)) != EOF) {
      if (c == '\n') {
        r->rows.push_back(SplitTabs(line));
        line.clear();
      } else {
        line.push_back(static_cast<char>(c));
      }
    }
    std::fclose(tmp);
    return r;
  }();
  return *kRows;
}

#define CFGMASK_REQUIRE_ORACLE(oracle)                                              \
  do {                                                                              \
    if (!(oracle).error.empty()) {                                                  \
      const char* ci = std::getenv("CI");                                           \
      if (ci != nullptr && std::string(ci) == "true") FAIL() << (oracle).error;     \
      GTEST_SKIP() << (oracle).error;                                               \
    }                                                                               \
  } while (0)

TEST(RegexDifferentialTest, MatchPrefixAndWidthAgreeWithPythonRe) {
  const OracleRows& oracle = LoadOracle();
  CFGMASK_REQUIRE_ORACLE(oracle);
  struct Compiled {
    Status status;
    Nfa nfa;
    RegexWidth width;
  };
  std::map<std::string, Compiled> cache;
  int compared = 0, mismatches = 0;
  std::string report;
  std::map<std::string, bool> reported;  // one line per pattern
  for (const std::vector<std::string>& row : oracle.rows) {
    if (row.empty() || row[0] != "M") continue;
    ASSERT_EQ(row.size(), 6u);
    const std::string pattern = UnescapeOracleText(row[1]);
    const std::string text = UnescapeOracleText(row[2]);
    auto it = cache.find(pattern);
    if (it == cache.end()) {
      Compiled c;
      c.status = CompileRegex(pattern, "", "T", &c.nfa, &c.width);
      it = cache.emplace(pattern, std::move(c)).first;
    }
    ++compared;
    std::string problem;
    if (!it->second.status.ok()) {
      problem = "compile error: " + it->second.status.message();
    } else {
      int64_t got = MatchPrefix(it->second.nfa, text);
      if (std::to_string(got) != row[3]) {
        problem = "match " + std::to_string(got) + " want " + row[3];
      }
      std::string lo = U128ToString(it->second.width.lo);
      std::string hi = U128ToString(it->second.width.hi);
      if (lo != row[4] || hi != row[5]) {
        problem += " width (" + lo + "," + hi + ") want (" + row[4] + "," + row[5] + ")";
      }
    }
    if (!problem.empty()) {
      ++mismatches;
      if (reported.size() < 25 && !reported[row[1]]) {
        reported[row[1]] = true;
        report += "  pattern " + row[1] + "  text " + row[2] + ": " + problem + "\n";
      }
    }
  }
  EXPECT_GE(compared, 40000);
  EXPECT_EQ(mismatches, 0) << mismatches << " of " << compared << " rows differ; first:\n"
                           << report;
  std::printf("regex differential: %d rows, %zu patterns compared\n", compared, cache.size());
}

TEST(RegexDifferentialTest, ErrorsHaveTheRightCodeAndOffset) {
  const OracleRows& oracle = LoadOracle();
  CFGMASK_REQUIRE_ORACLE(oracle);
  int checked = 0;
  for (const std::vector<std::string>& row : oracle.rows) {
    if (row.empty() || row[0] != "E") continue;
    ASSERT_EQ(row.size(), 4u);
    const std::string pattern = UnescapeOracleText(row[1]);
    Nfa nfa;
    RegexWidth width;
    Status st = CompileRegex(pattern, "", "NAME", &nfa, &width);
    ErrorCode want = row[2] == "syntax" ? ErrorCode::kRegexSyntax : ErrorCode::kRegexUnsupported;
    EXPECT_EQ(st.code(), want) << "pattern " << row[1] << ": " << st.ToString();
    if (row[3] != "-1") {
      std::string where = "terminal NAME: pattern offset " + row[3] + ": ";
      EXPECT_EQ(st.message().rfind(where, 0), 0u)
          << "pattern " << row[1] << ": got '" << st.message() << "', want prefix '" << where
          << "'";
    }
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// ---- hand-written checks that need no Python ------------------------------

int64_t Match(const std::string& pattern, const std::string& text, int prev = -1) {
  Nfa nfa;
  RegexWidth width;
  Status st = CompileRegex(pattern, "", "T", &nfa, &width);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return MatchPrefix(nfa, text, prev);
}

TEST(RegexTest, AlternationAndLaziness) {
  EXPECT_EQ(Match("a|ab", "ab"), 1);
  EXPECT_EQ(Match("ab|a", "ab"), 2);
  EXPECT_EQ(Match("a*?", "aaa"), 0);
  EXPECT_EQ(Match("a+?", "aaa"), 1);
  EXPECT_EQ(Match("a{2,3}?", "aaaa"), 2);
  EXPECT_EQ(Match("a{2,3}", "aaaa"), 3);
  EXPECT_EQ(Match("(?:|a)*", "aa"), 0);  // sre stops after an empty iteration
  EXPECT_EQ(Match("(?:a|)*", "aa"), 2);
  EXPECT_EQ(Match("x", "y"), -1);
}

TEST(RegexTest, Utf8AndCaseFolding) {
  EXPECT_EQ(Match("\\w+", "é€"), 2);
  EXPECT_EQ(Match(".", "\xF0\x9F\x98\x80"), 4);
  EXPECT_EQ(Match(".", "\xF0\x9F\x98"), -1);  // a truncated character never matches
  EXPECT_EQ(Match("(?i)k", "\xE2\x84\xAA"), 3);  // KELVIN SIGN
  EXPECT_EQ(Match("(?i)ǅ", "ǆ"), 2);
  EXPECT_EQ(Match(".", "\n"), -1);
  EXPECT_EQ(Match("(?s).", "\n"), 1);
}

// Found by regex_fuzz: a UTF-8 byte inside "{...}" or a group name reached
// the C classification functions with a negative char.  As in Python's re,
// "{" not followed by a well-formed count is a literal.
TEST(RegexTest, NonAsciiBytesInCountsAndGroupNames) {
  EXPECT_EQ(Match("a{2\xCE\x91}", "a{2\xCE\x91}"), 6);
  EXPECT_EQ(Match("a{2,\xCE\x91}", "a{2,\xCE\x91}"), 7);
  EXPECT_EQ(Match("x{\xCE\x91", "x{\xCE\x91"), 4);
  // Python 3 takes any identifier as a group name.
  EXPECT_EQ(Match("(?P<\xCE\x91>x)y", "xy"), 2);
  EXPECT_EQ(Match("(?P<a\xCE\x91>x)", "x"), 1);
}

TEST(RegexTest, GroupNestingIsBounded) {
  const auto nest = [](int n) { return std::string(n, '(') + "a" + std::string(n, ')'); };
  EXPECT_EQ(Match(nest(kRegexMaxGroupNesting), "a"), 1);
  Nfa nfa;
  RegexWidth w;
  Status st = CompileRegex(nest(kRegexMaxGroupNesting + 1), "", "T", &nfa, &w);
  EXPECT_EQ(st.code(), ErrorCode::kResourceLimit) << st.message();
  EXPECT_NE(st.message().find("nested more than"), std::string::npos) << st.message();
  st = CompileRegex(nest(20000), "", "T", &nfa, &w);  // no stack overflow
  EXPECT_FALSE(st.ok());
}

TEST(RegexTest, Lookarounds) {
  EXPECT_EQ(Match("0(?![1-9])", "01"), -1);
  EXPECT_EQ(Match("0(?![1-9])", "0a"), 1);
  EXPECT_EQ(Match("(?<!\\\\)\"", "\""), 1);
  EXPECT_EQ(Match("(?<!\\\\)\"", "\"", '\\'), -1);
  EXPECT_EQ(Match("(?<=a)b", "b", 'a'), 1);
  EXPECT_EQ(Match("\"(?!\"\").*?(?<!\\\\)(\\\\\\\\)*?\"", "\"a\\\"b\" x"), 6);
}

TEST(RegexTest, Width) {
  Nfa nfa;
  RegexWidth w;
  ASSERT_TRUE(CompileRegex("a*b{2,5}(?!c)", "", "T", &nfa, &w).ok());
  EXPECT_TRUE(w.lo == 2);
  EXPECT_TRUE(w.hi == (static_cast<unsigned __int128>(1) << 64));
  ASSERT_TRUE(CompileRegex("(?:ab){3}|x", "", "T", &nfa, &w).ok());
  EXPECT_TRUE(w.lo == 1 && w.hi == 6);
  EXPECT_FALSE(nfa.DebugString().empty());
}

TEST(RegexTest, ErrorMessages) {
  Nfa nfa;
  RegexWidth w;
  Status st = CompileRegex("(a)\\1", "", "NAME", &nfa, &w);
  EXPECT_EQ(st.code(), ErrorCode::kRegexUnsupported);
  EXPECT_EQ(st.message(), "terminal NAME: pattern offset 3: back-references are not regular");
  st = CompileRegex("ab[c", "", "NAME", &nfa, &w);
  EXPECT_EQ(st.code(), ErrorCode::kRegexSyntax);
  EXPECT_EQ(st.message(), "terminal NAME: pattern offset 2: unterminated character set");
  st = CompileRegex("a", "q", "NAME", &nfa, &w);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(CompileRegex("A", "i", "NAME", &nfa, &w).ok());
  EXPECT_EQ(MatchPrefix(nfa, "a"), 1);
}

}  // namespace
}  // namespace cfgmask
