// Tests of the Grammar IR helpers (grammar/grammar.h) and of the pieces of
// Lark's terminal compilation they rest on: Pattern.to_regexp() text,
// Python `re` widths (lark::RegexpWidth, grammar/terminal_join.h) and literal unescaping
// (grammar/terminal_join.h).  Expected values were computed with CPython
// 3.11 and Lark 1.3.1 (lark.utils.get_regexp_width, load_grammar.eval_escaping).
#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <string>

#include "grammar/terminal_join.h"

namespace cfgmask {
namespace {

TEST(TerminalDefTest, ToRegexpEscapesStringsLikeReEscape) {
  TerminalDef t;
  t.kind = PatternKind::kString;
  t.value = "a+b (c)|d.e*f?g-h#i j&k~l\tm";
  EXPECT_EQ(t.ToRegexp(), "a\\+b\\ \\(c\\)\\|d\\.e\\*f\\?g\\-h\\#i\\ j\\&k\\~l\\\tm");
  t.value = "é/\"'_";
  EXPECT_EQ(t.ToRegexp(), "é/\"'_");
}

TEST(TerminalDefTest, ToRegexpWrapsFlagsInSortedOrder) {
  TerminalDef t;
  t.kind = PatternKind::kRegex;
  t.value = "a.b";
  t.flags = "is";
  EXPECT_EQ(t.ToRegexp(), "(?s:(?i:a.b))");
  t.kind = PatternKind::kString;
  t.flags = "i";
  EXPECT_EQ(t.ToRegexp(), "(?i:a\\.b)");
}

Grammar SmallGrammar() {
  Grammar g;
  g.terminals.push_back({"PLUS", PatternKind::kString, "+", "", 0, ""});
  g.terminals.push_back({"NUM", PatternKind::kRegex, "[0-9]+", "", 2, ""});
  g.terminals.push_back({"_INDENT", PatternKind::kDeclared, "", "", 0, ""});
  g.terminals.push_back({"WS", PatternKind::kRegex, " \n", "", 0, ""});
  g.nonterminals = {"start", "sum"};
  g.rules.push_back({/*lhs=*/4, /*rhs=*/{}, /*priority=*/0, /*order=*/0});
  g.rules.push_back({/*lhs=*/5, /*rhs=*/{5, 0, 1}, /*priority=*/0, /*order=*/0});
  g.ignore = {3};
  g.declared = {2};
  g.start = {"sum"};
  return g;
}

TEST(GrammarTest, SymbolLookup) {
  Grammar g = SmallGrammar();
  EXPECT_EQ(g.num_terminals(), 4);
  EXPECT_EQ(g.num_symbols(), 6);
  EXPECT_EQ(g.FindTerminal("NUM"), 1);
  EXPECT_EQ(g.FindTerminal("sum"), -1);
  EXPECT_EQ(g.FindNonterminal("sum"), 5);
  EXPECT_EQ(g.FindNonterminal("NUM"), -1);
  EXPECT_TRUE(g.IsTerminal(3));
  EXPECT_FALSE(g.IsTerminal(4));
  EXPECT_EQ(g.SymbolName(5), "sum");
}

TEST(GrammarTest, DebugStringFormat) {
  Grammar g = SmallGrammar();
  EXPECT_EQ(g.DebugString(),
            "start: sum\n"
            "terminal NUM re '[0-9]+' flags='' priority=2\n"
            "terminal PLUS str '+' flags='' priority=0\n"
            "terminal WS re ' \\n' flags='' priority=0\n"
            "rule start: (priority=0 order=0)\n"
            "rule sum: sum PLUS NUM (priority=0 order=0)\n"
            "ignore: WS\n"
            "declared: _INDENT\n");
}

struct WidthCase {
  const char* regex;
  uint64_t min;
  uint64_t max;
};

constexpr uint64_t kInf = lark::kMaxPatternWidth;

TEST(RegexWidthTest, MatchesCPythonGetwidth) {
  const WidthCase cases[] = {
      {"a", 1, 1},
      {"abc", 3, 3},
      {"a|bc", 1, 2},
      {"a*", 0, kInf},
      {"a+", 1, kInf},
      {"a?", 0, 1},
      {"a{2,5}", 2, 5},
      {"a{3}", 3, 3},
      {"a{2,}", 2, kInf},
      {"(?:ab)+c", 3, kInf},
      {"[a-z]\\d", 2, 2},
      {"(?=x)y", 1, 1},
      {"(?<!\\\\)(\\\\\\\\)*?\"", 1, kInf},
      {"(a)\\1", 2, 2},
      {"(?P<n>ab)(?P=n)", 4, 4},
      {"^$\\b", 0, 0},
      {"(?x: a b # c\n d)", 3, 3},
      {"(?i:ab)", 2, 2},
      {"x{,3}", 0, 3},
      {"a{", 2, 2},
      {"(?#c)ab", 2, 2},
      {"\\p{Lu}x", 2, 2},
      {"é+", 1, kInf},
      {"(?s:.)*?", 0, kInf},
      {"\\x41\\u00e9\\n", 3, 3},
      {"(?>ab|c)", 1, 2},
      {"a*+", 0, kInf},
      {"(a)(?(1)b|cd)", 2, 3},
      {"(?:a|)", 0, 1},
      {"[]a]b", 2, 2},
      {"[^\\]]", 1, 1},
  };
  for (const auto& c : cases) {
    RegexWidth w;
    EXPECT_TRUE(lark::RegexpWidth(c.regex, &w)) << c.regex;
    lark::Pattern p;
    p.is_regex = true;
    p.value = c.regex;
    uint64_t min = 0, max = 0;
    lark::PatternWidth(p, &min, &max);
    EXPECT_EQ(min, c.min) << c.regex;
    EXPECT_EQ(max, c.max) << c.regex;
  }
}

TEST(EvalEscapingTest, MatchesLark) {
  const std::pair<const char*, const char*> cases[] = {
      {"a\\nb", "a\nb"},     {"\\d", "\\d"},       {"\\\\", "\\\\"},
      {"a\\\"b", "a\"b"},    {"\\'", "\\'"},       {"\\x41", "A"},
      {"\\u00e9", "é"},      {"\\t\\\\n", "\t\\\\n"},
  };
  for (const auto& [in, want] : cases) {
    std::string out;
    ASSERT_TRUE(lark::EvalEscaping(in, {}, &out).ok()) << in;
    EXPECT_EQ(out, want) << in;
  }
  std::string out;
  EXPECT_FALSE(lark::EvalEscaping("abc\\", {}, &out).ok());
  EXPECT_FALSE(lark::EvalEscaping("\\x4", {}, &out).ok());
}

}  // namespace
}  // namespace cfgmask
