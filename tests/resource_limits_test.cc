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

#include "grammar/base/stop_check.h"
#include "grammar/lark_reader.h"
#include "lexer/terminal_automaton.h"
#include "lexer/regex/regex.h"
#include "maskstore/compiled_store.h"
#include "runtime/compile/compile.h"
#include "parser/lalr.h"
#include "runtime/session.h"
#include "streamline/streamline.h"
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

// Issue 34, items 8 and 11: the wall-clock budget and the interrupt (Python's
// signals, through the progress hook) are looked at inside the long loops of
// the automaton, LALR and streamline phases, not only as each phase ends.
// A StopCheck past its deadline stops each phase with the budget's message;
// a hook that throws at its n-th call, for every n up to the number of looks
// a phase makes, leaves that phase by the exception (with two streamlining
// threads too: the helper is joined first).
StopCheck ExpiredBudget() {
  return StopCheck(true, StopCheck::Clock::now() - std::chrono::seconds(1),
                   "limits.lark: compile exceeded 1 s (max_seconds, --max-seconds)", nullptr, 1);
}
struct Interrupted {};
// Calls the hook at every look (every poll reads the clock); it throws at
// call `throw_at` (0: never) and counts the calls.
StopCheck CountingHook(int throw_at, int* calls) {
  *calls = 0;
  return StopCheck(
      false, {}, "",
      [=](const char*) {
        if (++*calls == throw_at) throw Interrupted{};
      },
      1, 0.0);
}

TEST(CompileBudget, Item8BudgetAndInterruptInsideTheLalrPhase) {
  const Grammar g = Read(ChainGrammar(400));
  ParseTables t;
  LalrLimits limits;
  StopCheck expired = ExpiredBudget();
  limits.stop = &expired;
  const Status st = BuildParseTables(g, &t, nullptr, limits);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.message();
  EXPECT_EQ(st.message(),
            "limits.lark: compile exceeded 1 s (max_seconds, --max-seconds) in the lalr phase");
  int looks = 0;
  StopCheck counting = CountingHook(0, &looks);
  limits.stop = &counting;
  ASSERT_TRUE(BuildParseTables(g, &t, nullptr, limits).ok());
  EXPECT_GT(looks, 3 * 800);  // LR(0) states, lookahead sets and table rows
  for (int n : {1, looks / 3, 2 * looks / 3, looks}) {
    int calls = 0;
    StopCheck throwing = CountingHook(n, &calls);
    limits.stop = &throwing;
    EXPECT_THROW(BuildParseTables(g, &t, nullptr, limits), Interrupted) << n;
    EXPECT_EQ(calls, n);
  }
}

TEST(CompileBudget, Item8BudgetAndInterruptInsideTheAutomatonPhase) {
  const Grammar g = Read("start: A B C D\nA: \"a\"\nB: /b+/\nC: /[a-c]+d/\nD: \"d\"\n");
  TerminalAutomatonOptions options;
  StopCheck expired = ExpiredBudget();
  options.stop = &expired;
  std::unique_ptr<TerminalAutomaton> a;
  const Status st = TerminalAutomaton::Build(g, -1, options, &a);
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.message();
  EXPECT_EQ(st.message(),
            "limits.lark: compile exceeded 1 s (max_seconds, --max-seconds) in the automaton phase");
  int looks = 0;
  StopCheck counting = CountingHook(0, &looks);
  options.stop = &counting;
  ASSERT_TRUE(TerminalAutomaton::Build(g, -1, options, &a).ok());
  EXPECT_GE(looks, 2 * 4);  // per terminal, twice, and per pair
  for (int n = 1; n <= looks; ++n) {
    int calls = 0;
    StopCheck throwing = CountingHook(n, &calls);
    options.stop = &throwing;
    EXPECT_THROW(TerminalAutomaton::Build(g, -1, options, &a), Interrupted) << n;
  }
}

TEST(CompileBudget, Item8BudgetAndInterruptInsideTheStreamlinePhase) {
  CompiledStore built;
  ASSERT_TRUE(CompileText(kSmall, CompileOptions(), &built).ok());
  for (int32_t threads : {1, 2}) {
    StreamlineOptions options;
    options.num_threads = threads;
    StopCheck expired = ExpiredBudget();
    options.stop = &expired;
    CompiledStore s = built;
    const Status st = StreamlineStore(&s, options, nullptr);
    ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.message();
    EXPECT_EQ(st.message(),
              "limits.lark: compile exceeded 1 s (max_seconds, --max-seconds) in the streamline "
              "phase");
    int looks = 0;
    StopCheck counting = CountingHook(0, &looks);
    options.stop = &counting;
    s = built;
    ASSERT_TRUE(StreamlineStore(&s, options, nullptr).ok());
    EXPECT_GE(looks, 4);  // between the steps, and per row of the row steps
    for (int n = 1; n <= looks; ++n) {
      int calls = 0;
      StopCheck throwing = CountingHook(n, &calls);
      options.stop = &throwing;
      s = built;
      EXPECT_THROW(StreamlineStore(&s, options, nullptr), Interrupted) << threads << " " << n;
    }
  }
}

}  // namespace
}  // namespace cfgmask
