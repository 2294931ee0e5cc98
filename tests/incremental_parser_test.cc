// IncrementalParser (parser/incremental_parser.cc) against a slow reference:
// the plain LR driver of Lark's ParserState.feed_token on a std::vector
// stack, copied for every question.  Random terminal sequences (mostly
// accepted terminals, some rejected ones) over textbook and random grammars
// and python.lark; at every step Accepts / AcceptsEnd / Consume / the stack
// must agree, and forks taken along the way must stay independent.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "gtest/gtest.h"
#include "parser/incremental_parser.h"
#include "parser/lalr.h"
#include "tests/parser_test_grammars.h"

#if __has_include("grammar/lark_reader.cc")
#include "grammar/lark_reader.h"
#define CFGMASK_HAVE_LARK_READER 1
#else
#define CFGMASK_HAVE_LARK_READER 0
#endif

namespace cfgmask {
namespace {

class ReferenceParser {
 public:
  ReferenceParser(const ParseTables* tables, int start_index)
      : tables_(tables), stack_{tables->start_state[start_index]} {}

  bool Accepts(int32_t terminal) const {
    std::vector<int32_t> stack = stack_;
    const Outcome outcome = Run(terminal, &stack);
    return outcome == (terminal == tables_->end_terminal ? kAccept : kShift);
  }
  bool Consume(int32_t terminal) {
    if (terminal == tables_->end_terminal) return Accepts(terminal);
    std::vector<int32_t> stack = stack_;
    if (Run(terminal, &stack) != kShift) return false;
    stack_ = stack;
    return true;
  }
  const std::vector<int32_t>& stack() const { return stack_; }

 private:
  enum Outcome { kReject, kShift, kAccept };
  // An endless reduction chain (cyclic grammars) is a rejection; no finite
  // chain in these grammars comes near 2^17 reductions.
  Outcome Run(int32_t terminal, std::vector<int32_t>* stack) const {
    for (int reductions = 0; reductions < (1 << 17); ++reductions) {
      const int32_t action = tables_->Action(stack->back(), terminal);
      if (action == 0) return kReject;
      if (action == kAcceptAction) return kAccept;
      if (action > 0) {
        stack->push_back(action - 1);
        return kShift;
      }
      const int32_t rule = -action - 1;
      stack->resize(stack->size() - tables_->rule_length[rule]);
      stack->push_back(tables_->Goto(stack->back(), tables_->rule_lhs[rule]));
    }
    return kReject;
  }

  const ParseTables* tables_;
  std::vector<int32_t> stack_;
};

void ExpectAgree(const IncrementalParser& p, const ReferenceParser& r, const ParseTables& t,
                 const std::string& where) {
  ASSERT_EQ(p.StateStack(), r.stack()) << where;
  ASSERT_EQ(p.State(), r.stack().back()) << where;
  ASSERT_EQ(p.Depth(), r.stack().size()) << where;
  for (int32_t term = 0; term < t.num_terminals; ++term) {
    ASSERT_EQ(p.Accepts(term), r.Accepts(term)) << where << ", terminal " << term;
  }
  ASSERT_EQ(p.AcceptsEnd(), r.Accepts(t.end_terminal)) << where;
}

// A random walk of `steps` terminals from `start_index`, forking now and then.
void RandomWalk(const ParseTables& t, int start_index, uint32_t seed, int steps,
                const std::string& label) {
  std::mt19937 rng(seed);
  IncrementalParser p(&t, start_index);
  ReferenceParser r(&t, start_index);
  std::vector<int32_t> accepted;
  for (int step = 0; step < steps; ++step) {
    const std::string where = label + ", step " + std::to_string(step);
    ExpectAgree(p, r, t, where);
    if (::testing::Test::HasFatalFailure()) return;
    accepted.clear();
    for (int32_t term = 0; term < t.end_terminal; ++term) {
      if (r.Accepts(term)) accepted.push_back(term);
    }
    const bool pick_accepted = !accepted.empty() && rng() % 4 != 0;
    const int32_t terminal = pick_accepted ? accepted[rng() % accepted.size()]
                                           : static_cast<int32_t>(rng() % t.num_terminals);
    if (rng() % 5 == 0) {
      // Fork: the copy walks on, the original must not move.
      const std::vector<int32_t> before = p.StateStack();
      IncrementalParser fork = p;
      ReferenceParser fork_reference = r;
      EXPECT_TRUE(fork == p);
      EXPECT_EQ(fork.Hash(), p.Hash());
      for (int k = 0; k < 3; ++k) {
        const int32_t term = static_cast<int32_t>(rng() % t.num_terminals);
        ASSERT_EQ(fork.Consume(term), fork_reference.Consume(term)) << where << " (fork)";
        ASSERT_EQ(fork.StateStack(), fork_reference.stack()) << where << " (fork)";
      }
      ASSERT_EQ(p.StateStack(), before) << where;
    }
    const std::vector<int32_t> before = p.StateStack();
    const bool consumed = p.Consume(terminal);
    ASSERT_EQ(consumed, r.Consume(terminal)) << where << ", terminal " << terminal;
    if (!consumed) {
      ASSERT_EQ(p.StateStack(), before) << where;
    }
  }
}

TEST(IncrementalParserTest, AgreesWithReferenceOnTextbookGrammars) {
  for (const std::string& spec : parser_test::TextbookGrammars()) {
    const Grammar g = parser_test::MakeGrammar(spec);
    ParseTables t;
    if (!BuildParseTables(g, &t).ok()) continue;
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      RandomWalk(t, 0, seed, 60, spec + ", seed " + std::to_string(seed));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(IncrementalParserTest, AgreesWithReferenceOnRandomGrammars) {
  int walked = 0;
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    const Grammar g = parser_test::RandomGrammar(seed);
    ParseTables t;
    if (!BuildParseTables(g, &t).ok()) continue;
    ++walked;
    for (uint32_t walk = 1; walk <= 5; ++walk) {
      RandomWalk(t, 0, seed * 100 + walk, 40,
                 "random grammar " + std::to_string(seed) + ", walk " + std::to_string(walk));
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(walked, 150);
}

TEST(IncrementalParserTest, SecondStartSymbol) {
  Grammar g = parser_test::MakeGrammar("a: X b | Y; b: Z | a");
  g.start = {"a", "b"};
  ParseTables t;
  ASSERT_TRUE(BuildParseTables(g, &t).ok());
  IncrementalParser p(&t, 1);
  EXPECT_EQ(p.State(), t.start_state[1]);
  EXPECT_TRUE(p.Accepts(2));  // Z
  EXPECT_TRUE(p.Consume(2));
  EXPECT_TRUE(p.AcceptsEnd());
  IncrementalParser q(&t, 0);
  EXPECT_FALSE(q.Accepts(2));
  EXPECT_FALSE(p == q);
  for (uint32_t seed = 1; seed <= 10; ++seed) RandomWalk(t, 1, seed, 30, "start b");
}

TEST(IncrementalParserTest, EqualStacksCompareAndHashEqual) {
  const Grammar g = parser_test::MakeGrammar("E: E + T | T; T: T * F | F; F: ( E ) | id");
  ParseTables t;
  ASSERT_TRUE(BuildParseTables(g, &t).ok());
  const int32_t plus = 0, times = 1, lpar = 2, rpar = 3, id = 4;
  ASSERT_EQ(g.terminals[id].name, "id");
  auto parse = [&](const std::vector<int32_t>& terminals) {
    IncrementalParser p(&t);
    for (int32_t term : terminals) EXPECT_TRUE(p.Consume(term));
    return p;
  };
  // "id +" and "id * id +" reduce to the same stack [0, E, +].
  IncrementalParser a = parse({id, plus});
  const IncrementalParser b = parse({id, times, id, plus});
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.Hash(), b.Hash());
  EXPECT_EQ(a.Depth(), 3u);
  const IncrementalParser c = parse({lpar, id, plus});
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.Hash(), c.Hash());
  EXPECT_EQ(a.DebugString(), b.DebugString());

  IncrementalParser d = a;
  EXPECT_TRUE(d == a);
  ASSERT_TRUE(d.Consume(id));
  EXPECT_FALSE(d == a);
  EXPECT_EQ(a.Depth(), 3u);
  EXPECT_TRUE(d.AcceptsEnd());
  EXPECT_FALSE(a.AcceptsEnd());
  EXPECT_TRUE(d.Accepts(rpar) == false);
  // Consuming $END reports acceptance and changes nothing.
  EXPECT_TRUE(d.Consume(t.end_terminal));
  EXPECT_EQ(d.Depth(), 4u);
  EXPECT_FALSE(a.Consume(t.end_terminal));

  std::unordered_set<uint64_t> hashes = {a.Hash(), c.Hash(), d.Hash(), IncrementalParser(&t).Hash()};
  EXPECT_EQ(hashes.size(), 4u);

  IncrementalParser moved = std::move(d);
  EXPECT_TRUE(moved.AcceptsEnd());
  IncrementalParser assigned(&t);
  assigned = moved;
  EXPECT_TRUE(assigned == moved);
  IncrementalParser& alias = assigned;
  assigned = alias;
  EXPECT_TRUE(assigned == moved);
}

TEST(IncrementalParserTest, LongEpsilonChainSpillsOverlay) {
  // s: a0 a1 ... a199 X with every ai nullable: accepting X pushes 200 goto
  // states above the start state, more than the inline overlay holds.
  std::string spec = "s:";
  for (int i = 0; i < 200; ++i) spec += " a" + std::to_string(i);
  spec += " X";
  for (int i = 0; i < 200; ++i) spec += "; a" + std::to_string(i) + ": y" + std::to_string(i) + " |";
  const Grammar g = parser_test::MakeGrammar(spec);
  ParseTables t;
  ASSERT_TRUE(BuildParseTables(g, &t).ok());
  const int32_t x = 0;  // first terminal to appear
  ASSERT_EQ(g.terminals[x].name, "X");
  IncrementalParser p(&t);
  ReferenceParser r(&t, 0);
  EXPECT_TRUE(p.Accepts(x));
  ASSERT_TRUE(p.Consume(x));
  ASSERT_TRUE(r.Consume(x));
  EXPECT_EQ(p.StateStack(), r.stack());
  EXPECT_EQ(p.Depth(), 202u);
  EXPECT_TRUE(p.AcceptsEnd());
  for (uint32_t seed = 1; seed <= 5; ++seed) RandomWalk(t, 0, seed, 250, "epsilon chain");
}

TEST(IncrementalParserTest, DeepStacksAreReleasedIteratively) {
  // Right recursion keeps every item on the stack.
  const Grammar g = parser_test::MakeGrammar("L: e , L | e");
  ParseTables t;
  ASSERT_TRUE(BuildParseTables(g, &t).ok());
  auto p = std::make_unique<IncrementalParser>(&t);
  for (int i = 0; i < 300000; ++i) {
    ASSERT_TRUE(p->Consume(0));
    ASSERT_TRUE(p->Consume(1));
  }
  EXPECT_EQ(p->Depth(), 600001u);
  IncrementalParser copy = *p;
  p.reset();
  EXPECT_TRUE(copy.Consume(0));
  EXPECT_TRUE(copy.AcceptsEnd());
}

#if CFGMASK_HAVE_LARK_READER
// python.lark: agreement on long walks, and the cost of Accepts.
TEST(IncrementalParserTest, PythonGrammar) {
  const char* grammars = std::getenv("CFGMASK_LARK_GRAMMARS");
  if (grammars == nullptr) GTEST_SKIP() << "CFGMASK_LARK_GRAMMARS not set (source .cache/env.sh)";
  LarkReaderOptions options;
  options.start = {"file_input"};
  Grammar g;
  const Status read = ReadLarkFile(std::string(grammars) + "/python.lark", options, &g);
  if (!read.ok()) GTEST_SKIP() << "the .lark reader cannot read python.lark yet: " << read.message();
  ParseTables t;
  ASSERT_TRUE(BuildParseTables(g, &t).ok());
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    RandomWalk(t, 0, seed, 300, "python.lark, seed " + std::to_string(seed));
    if (HasFatalFailure()) return;
  }

  // Collect parser configurations along accepted walks, then time Accepts
  // for every terminal in each.
  std::mt19937 rng(7);
  std::vector<IncrementalParser> configurations;
  IncrementalParser p(&t);
  for (int step = 0; step < 2000; ++step) {
    configurations.push_back(p);
    std::vector<int32_t> accepted;
    for (int32_t term = 0; term < t.end_terminal; ++term) {
      if (p.Accepts(term)) accepted.push_back(term);
    }
    if (accepted.empty() || p.Depth() > 200) {
      p = IncrementalParser(&t);
      continue;
    }
    p.Consume(accepted[rng() % accepted.size()]);
  }
  const auto begin = std::chrono::steady_clock::now();
  int64_t calls = 0, yes = 0;
  for (int round = 0; round < 20; ++round) {
    for (const IncrementalParser& c : configurations) {
      for (int32_t term = 0; term < t.num_terminals; ++term) {
        yes += c.Accepts(term);
        ++calls;
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("python.lark: %lld Accepts calls, %.1f ns each (%.1f%% accepted)\n",
              static_cast<long long>(calls), 1e9 * seconds / calls, 100.0 * yes / calls);
  EXPECT_GT(yes, 0);
}
#endif

}  // namespace
}  // namespace cfgmask
