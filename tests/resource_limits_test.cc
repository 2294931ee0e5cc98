// Resource bounds of compilation and of the runtime: a grammar or regex whose
// LALR tables, NFA or lexer automaton would outgrow a configured limit is
// refused with kResourceLimit and a message naming the limit and the
// culprit, in a fraction of the time and memory it would otherwise take; a
// decoding step that would track more live hypotheses than
// SessionLimits::max_live_states is refused and leaves the session as it
// was.  Covers parser/lr0.cc, parser/parse_tables.cc, lexer/regex/regex_compile.cc,
// the lexer-state bound of lexer/terminal_automaton.cc and runtime/session.cc.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/lark_reader.h"
#include "lexer/regex/regex.h"
#include "maskstore/compiled_store.h"
#include "runtime/compile/compile.h"
#include "parser/lalr.h"
#include "runtime/session.h"
#include "tests/small_tokenizer.h"

namespace cfgmask {
namespace {


Grammar Read(const std::string& text) {
  Grammar g;
  Status st = ReadLarkString(text, "limits.lark", LarkReaderOptions(), &g);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return g;
}

// A chain of n rules, each with its own keyword: about 3n LR(0) states.
std::string ChainGrammar(int n) {
  std::string text = "start: r0\n";
  for (int i = 0; i < n; ++i) {
    text += "r" + std::to_string(i) + ": \"k" + std::to_string(i) + "\" r" +
            std::to_string(i + 1) + " | \"e" + std::to_string(i) + "\"\n";
  }
  text += "r" + std::to_string(n) + ": \"end\"\n";
  return text;
}

TEST(LalrLimits, DefaultLimitsAcceptLargeGrammars) {
  const Grammar g = Read(ChainGrammar(400));
  ParseTables t;
  LalrStats stats;
  ASSERT_TRUE(BuildParseTables(g, &t, &stats).ok());
  EXPECT_GT(stats.lr0_states, 800);
}

TEST(LalrLimits, StateLimitNamesRule) {
  const Grammar g = Read(ChainGrammar(400));
  LalrLimits limits;
  limits.max_states = 100;
  ParseTables t;
  Status st = BuildParseTables(g, &t, nullptr, limits);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("limit of 100 states"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rule '"), std::string::npos) << st.message();
  EXPECT_EQ(t.num_states, 0);  // `out` untouched
}

TEST(LalrLimits, ItemLimit) {
  const Grammar g = Read(ChainGrammar(50));
  LalrLimits limits;
  limits.max_items = 40;
  ParseTables t;
  Status st = BuildParseTables(g, &t, nullptr, limits);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("limit of 40 items"), std::string::npos) << st.message();
}

TEST(LalrLimits, TableBytesLimit) {
  const Grammar g = Read(ChainGrammar(50));
  LalrLimits limits;
  limits.max_table_bytes = 1000;
  ParseTables t;
  Status st = BuildParseTables(g, &t, nullptr, limits);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("more than the limit of 1000"), std::string::npos) << st.message();
  limits.max_table_bytes = 10 << 20;
  EXPECT_TRUE(BuildParseTables(g, &t, nullptr, limits).ok());
}

TEST(LalrLimits, TimeLimit) {
  const Grammar g = Read(ChainGrammar(50));
  LalrLimits limits;
  limits.max_seconds = 0;
  ParseTables t;
  Status st = BuildParseTables(g, &t, nullptr, limits);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("seconds"), std::string::npos) << st.message();
}

TEST(RegexLimits, HugeRepeatRefusedQuickly) {
  Nfa nfa;
  RegexWidth width;
  const auto t0 = std::chrono::steady_clock::now();
  Status st = CompileRegex("(ab{2000}){1000}", "", "BIG", &nfa, &width);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("terminal BIG"), std::string::npos) << st.message();
  EXPECT_TRUE(nfa.insts.empty());
  EXPECT_LT(seconds, 60.0);
  // Below the bound the same construct compiles.
  EXPECT_TRUE(CompileRegex("(ab{10}){10}", "", "SMALL", &nfa, &width).ok());
}

// Compiles `grammar` with the small tokenizer.
Status CompileText(const std::string& grammar, const CompileOptions& options, CompiledStore* s) {
  WriteTextFile(TempPath("g.lark"), grammar);
  WriteTextFile(TempPath("tok.json"), SmallTokenizerJson());
  return CompileStore(TempPath("g.lark"), TempPath("tok.json"), options, s);
}

TEST(CompileLimits, HugeRegexTerminalNamed) {
  CompiledStore s;
  Status st = CompileText("start: BIG\nBIG: /(xy{2000}){1000}/\n", CompileOptions(), &s);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("BIG"), std::string::npos) << st.message();
}

TEST(CompileLimits, ExponentialLexerAutomatonRefused) {
  // The classic exponential DFA: the lexer must remember the last 16 bytes.
  CompileOptions options;
  options.max_lexer_states = 2000;
  CompiledStore s;
  const auto t0 = std::chrono::steady_clock::now();
  Status st = CompileText("start: T+\nT: /[ab]*a[ab]{16}c/\n", options, &s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("2000"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("lexer states"), std::string::npos) << st.message();
  EXPECT_LT(seconds, 60.0);
}

const char kSmall[] = R"(start: x+
x: AB | A B | A
A: "a"
B: "b"
AB: "ab"
)";

// The bound is checked after every token: a limit below what a step needs
// refuses the step (limit 0: every step), and the session stays as it was.
TEST(SessionLimits, LiveStatesBoundEnforced) {
  CompiledStore s;
  ASSERT_TRUE(CompileText(kSmall, CompileOptions(), &s).ok());
  int32_t a = -1;
  for (int32_t t = 0; t < s.vocab_size; ++t) {
    if (s.TokenBytes(t) == "a") a = t;
  }
  ASSERT_GE(a, 0);
  {
    Session free_session(&s);
    ASSERT_TRUE(free_session.Advance(a).ok());
    ASSERT_GE(free_session.num_live(), 1u);
  }
  SessionLimits limits;
  limits.max_live_states = 0;
  Session bounded(&s, limits);
  const std::vector<uint32_t> mask = bounded.Mask();
  Status st = bounded.Advance(a);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find("more than 0 live"), std::string::npos) << st.message();
  // Refused, not half-done: the session is where it was.
  EXPECT_EQ(bounded.text(), "");
  EXPECT_EQ(bounded.HistoryLength(), 0);
  EXPECT_EQ(bounded.num_live(), 1u);
  EXPECT_EQ(bounded.Mask(), mask);
  EXPECT_EQ(bounded.AdvanceBytes("a").code(), ErrorCode::kResourceLimit);
  EXPECT_EQ(bounded.text(), "");
}

}  // namespace
}  // namespace cfgmask
