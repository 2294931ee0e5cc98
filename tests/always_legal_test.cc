// Tests of streamline/always_legal.h: the seed's a^n b^n example, and
// soundness on random small grammars: whenever a pair (X, S) is proved, every
// viable prefix P X found by enumeration is continued by S, which is decided
// exactly by the Bar-Hillel emptiness test of L ∩ P X S Σ*.
#include "streamline/always_legal.h"
#include "tests/reference/symbol_always_legal.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/lark_reader.h"
#include "tests/random_grammar.h"
#include "streamline/never_legal.h"
#include "tests/reference/bar_hillel.h"

namespace cfgmask {
namespace {


// Is w a prefix of a sentence?  Exact: L ∩ w Σ* ≠ ∅.
bool Viable(const Grammar& g, const std::vector<int32_t>& w) {
  return BarHillelNonEmpty(g, StartSymbol(g, 0), PrefixDfa(g.num_terminals(), w));
}

// Viable prefixes of length <= max_len, by extending viable ones.
std::vector<std::vector<int32_t>> ViablePrefixes(const Grammar& g, int max_len) {
  std::vector<std::vector<int32_t>> out, frontier{{}};
  if (!Viable(g, {})) return out;
  for (int len = 1; len <= max_len; ++len) {
    std::vector<std::vector<int32_t>> next;
    for (const auto& w : frontier)
      for (int t = 0; t < g.num_terminals(); ++t) {
        auto v = w;
        v.push_back(t);
        if (Viable(g, v)) next.push_back(v);
      }
    out.insert(out.end(), next.begin(), next.end());
    frontier.swap(next);
  }
  return out;
}

struct Counts {
  int proved = 0, refuted_by_enumeration = 0, prefixes_checked = 0;
};

// Checks every proof of `prove` against the viable prefixes of g.
template <typename Prove>
void CheckSoundness(const Grammar& g, Prove&& prove, Counts* counts) {
  const int num_t = g.num_terminals();
  const auto prefixes = ViablePrefixes(g, 6);
  std::vector<std::vector<int32_t>> suffixes;
  for (int a = 0; a < num_t; ++a) {
    suffixes.push_back({a});
    for (int b = 0; b < num_t; ++b) suffixes.push_back({a, b});
  }
  for (int x = 0; x < num_t; ++x) {
    for (const auto& s : suffixes) {
      const bool proved = prove(x, s);
      counts->proved += proved;
      for (const auto& p : prefixes) {
        if (p.back() != x) continue;
        auto ps = p;
        ps.insert(ps.end(), s.begin(), s.end());
        const bool ok = Viable(g, ps);
        if (proved) {
          ++counts->prefixes_checked;
          ASSERT_TRUE(ok) << "proved (" << x << ", |S|=" << s.size() << ") but prefix of length "
                          << p.size() << " cannot continue\n"
                          << g.DebugString();
        } else if (!ok) {
          ++counts->refuted_by_enumeration;
        }
      }
    }
  }
}

TEST(AlwaysLegalTest, SymbolAutomatonIsSoundOnRandomGrammars) {
  std::mt19937 rng(99);
  Counts counts;
  for (int round = 0; round < 50; ++round) {
    Grammar g = RandomGrammar(rng, 2 + rng() % 2, 2 + rng() % 3);
    AlwaysLegalAnalysis analysis(g, 0, {.max_stack = 5, .max_nodes = 20000});
    CheckSoundness(g, [&](int32_t x, const std::vector<int32_t>& s) {
      return analysis.IsAlwaysLegal(x, s);
    }, &counts);
    if (HasFatalFailure()) return;
  }
  std::printf("symbol: %d proved, %d prefixes checked, %d refuted\n", counts.proved,
              counts.prefixes_checked, counts.refuted_by_enumeration);
  EXPECT_GT(counts.proved, 100);
  EXPECT_GT(counts.prefixes_checked, 300);
  EXPECT_GT(counts.refuted_by_enumeration, 100);
}

TEST(AlwaysLegalTest, LrAutomatonIsSoundOnRandomConflictFreeGrammars) {
  std::mt19937 rng(5);
  Counts counts;
  int grammars = 0;
  for (int round = 0; round < 5000 && grammars < 40; ++round) {
    Grammar g = RandomGrammar(rng, 2 + rng() % 2, 2 + rng() % 3);
    ParseTables tables;
    // The LR proof speaks of the parser's language, which is the grammar's
    // when no conflict had to be resolved.
    if (!BuildParseTables(g, &tables).ok() || !tables.resolved_conflicts.empty()) continue;
    if (!Viable(g, {})) continue;
    ++grammars;
    LrAlwaysLegalAnalysis analysis(g, tables, 0, {.max_stack = 6, .max_nodes = 20000});
    CheckSoundness(g, [&](int32_t x, const std::vector<int32_t>& s) {
      return analysis.IsAlwaysLegal(x, s);
    }, &counts);
    if (HasFatalFailure()) return;
  }
  std::printf("LR: %d grammars, %d proved, %d prefixes checked\n", grammars, counts.proved,
              counts.prefixes_checked);
  EXPECT_GE(grammars, 30);
  EXPECT_GT(counts.proved, 50);
  EXPECT_GT(counts.prefixes_checked, 300);
}

struct AnBn {
  Grammar grammar;
  int32_t a = -1, b = -1;
};

AnBn LoadAnBn(const std::string& text) {
  AnBn g;
  Status st = ReadLarkString(text, "anbn.lark", {}, &g.grammar);
  EXPECT_TRUE(st.ok()) << st.ToString();
  g.a = g.grammar.FindTerminal("A");
  g.b = g.grammar.FindTerminal("B");
  EXPECT_GE(g.a, 0);
  EXPECT_GE(g.b, 0);
  return g;
}

// The seed's worked example, S -> a S b | ε: (a, a) and (a, b) are proved,
// (b, a) and (b, b) are not (and are false).
TEST(AlwaysLegalTest, SeedExampleWithEpsilonRule) {
  AnBn g = LoadAnBn("start: (\"a\" start \"b\")?\n");
  AlwaysLegalAnalysis symbol(g.grammar, 0);
  ParseTables tables;
  ASSERT_TRUE(BuildParseTables(g.grammar, &tables).ok());
  LrAlwaysLegalAnalysis lr(g.grammar, tables, 0);
  const std::vector<int32_t> sa{g.a}, sb{g.b}, sab{g.a, g.b}, sbb{g.b, g.b};
  for (auto* prove : {+[](AlwaysLegalAnalysis* s, LrAlwaysLegalAnalysis*, int32_t x,
                          std::span<const int32_t> seq) { return s->IsAlwaysLegal(x, seq); },
                      +[](AlwaysLegalAnalysis*, LrAlwaysLegalAnalysis* l, int32_t x,
                          std::span<const int32_t> seq) { return l->IsAlwaysLegal(x, seq); }}) {
    EXPECT_TRUE(prove(&symbol, &lr, g.a, sa));
    EXPECT_TRUE(prove(&symbol, &lr, g.a, sb));
    EXPECT_TRUE(prove(&symbol, &lr, g.a, sab));   // a^k a b
    EXPECT_FALSE(prove(&symbol, &lr, g.b, sa));
    EXPECT_FALSE(prove(&symbol, &lr, g.b, sb));
    EXPECT_FALSE(prove(&symbol, &lr, g.a, sbb));  // false after "a"
  }
}

// S -> a S b | a b.  After `a` the symbol automaton cannot tell S -> a . S b
// from S -> a . b, each of which blocks one continuation, so it proves
// nothing; the LR automaton has a single state after `a` and proves both.
TEST(AlwaysLegalTest, SeedExampleWithoutEpsilonRule) {
  AnBn g = LoadAnBn("start: \"a\" start \"b\" | \"a\" \"b\"\n");
  ParseTables tables;
  ASSERT_TRUE(BuildParseTables(g.grammar, &tables).ok());
  LrAlwaysLegalAnalysis lr(g.grammar, tables, 0);
  AlwaysLegalAnalysis symbol(g.grammar, 0);
  const std::vector<int32_t> sa{g.a}, sb{g.b}, sbb{g.b, g.b};
  EXPECT_TRUE(lr.IsAlwaysLegal(g.a, sa));
  EXPECT_TRUE(lr.IsAlwaysLegal(g.a, sb));
  EXPECT_FALSE(lr.IsAlwaysLegal(g.b, sa));
  EXPECT_FALSE(lr.IsAlwaysLegal(g.b, sb));
  EXPECT_FALSE(lr.IsAlwaysLegal(g.a, sbb));
  EXPECT_FALSE(symbol.IsAlwaysLegal(g.a, sa));
  EXPECT_FALSE(symbol.IsAlwaysLegal(g.a, sb));
  EXPECT_FALSE(symbol.IsAlwaysLegal(g.b, sa));
  EXPECT_FALSE(symbol.IsAlwaysLegal(g.b, sb));
}

// SuffixAnswers (streamline/exploration.h), the cache of both steps: two
// suffixes get the same id exactly when their items are equal (against maps
// keyed by the items themselves, on random sequences over a small alphabet
// so that suffixes repeat), and each suffix is asked once, its answer
// returned from the cache after.
TEST(SuffixAnswersTest, SameIdExactlyForEqualSuffixesAskedOnce) {
  AnBn g = LoadAnBn("start: (\"a\" start \"b\")?\n");
  ParseTables tables;
  ASSERT_TRUE(BuildParseTables(g.grammar, &tables).ok());
  TerminalExploration x(tables, tables.start_state.at(0), ExplorationOptions{});
  std::mt19937 rng(33);
  SuffixAnswers answers;
  std::map<std::vector<int32_t>, int32_t> id_of;
  std::map<int32_t, std::vector<int32_t>> suffix_of;
  std::vector<int32_t> ids;
  int64_t asked = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<int32_t> seq(rng() % 10);
    for (int32_t& v : seq) v = static_cast<int32_t>(rng() % 4);
    answers.SuffixIds(seq.data(), static_cast<int32_t>(seq.size()), &ids);
    ASSERT_EQ(ids.size(), seq.size());
    for (size_t j = 0; j < seq.size(); ++j) {
      const std::vector<int32_t> suffix(seq.begin() + j, seq.end());
      const auto [it, first] = id_of.emplace(suffix, ids[j]);
      EXPECT_EQ(it->second, ids[j]);
      const auto [jt, first_id] = suffix_of.emplace(ids[j], suffix);
      EXPECT_EQ(jt->second, suffix);
      EXPECT_EQ(first, first_id);
      const bool want = (suffix.size() + suffix[0]) % 2 == 1;
      bool called = false;
      EXPECT_EQ(answers.Get(ids[j], x, [&] {
        called = true;
        ++asked;
        return want;
      }), want);
      EXPECT_EQ(called, first);
    }
  }
  EXPECT_EQ(asked, static_cast<int64_t>(id_of.size()));
  EXPECT_EQ(answers.counts().queries, asked);
  EXPECT_GT(answers.counts().cache_hits, 0);
}

TEST(AlwaysLegalTest, PythonSeedExamples) {
  const char* dir = std::getenv("CFGMASK_LARK_GRAMMARS");
  if (!dir) GTEST_SKIP() << "CFGMASK_LARK_GRAMMARS not set";
  Grammar g;
  LarkReaderOptions options;
  options.start = {"file_input"};
  ASSERT_TRUE(ReadLarkFile(std::string(dir) + "/python.lark", options, &g).ok());
  ParseTables tables;
  ASSERT_TRUE(BuildParseTables(g, &tables).ok());
  AlwaysLegalAnalysis symbol(g, 0);
  LrAlwaysLegalAnalysis lr(g, tables, 0);
  const int32_t def = g.FindTerminal("DEF"), name = g.FindTerminal("NAME"),
                minus = g.FindTerminal("MINUS"), cls = g.FindTerminal("CLASS");
  ASSERT_GE(def, 0);
  ASSERT_GE(name, 0);
  ASSERT_GE(minus, 0);
  ASSERT_GE(cls, 0);
  const std::vector<int32_t> s_name{name}, s_minus{minus}, s_class{cls};
  // Seed: DEF NAME and MINUS MINUS are always legal; DEF CLASS never is.
  for (bool use_lr : {false, true}) {
    auto prove = [&](int32_t x, std::span<const int32_t> s) {
      return use_lr ? lr.IsAlwaysLegal(x, s) : symbol.IsAlwaysLegal(x, s);
    };
    EXPECT_TRUE(prove(def, s_name)) << use_lr;
    EXPECT_TRUE(prove(minus, s_minus)) << use_lr;
    EXPECT_FALSE(prove(def, s_class)) << use_lr;
    EXPECT_FALSE(prove(name, s_name)) << use_lr;
  }
}

}  // namespace
}  // namespace cfgmask
