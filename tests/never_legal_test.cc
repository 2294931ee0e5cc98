// Tests of streamline/never_legal.h: the KMP automaton against a direct
// substring check, the relation fixpoint against the reference Bar-Hillel
// construction on random small grammars and on python.lark, and both against
// sentences enumerated by a span recogniser.
#include "streamline/never_legal.h"
#include "tests/reference/bar_hillel.h"

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/lark_reader.h"
#include "tests/random_grammar.h"

namespace cfgmask {
namespace {


// Membership by dynamic programming over spans: d[sym][i][j] = sym derives
// w[i, j).  Within a span, ε and unit rules need a local fixpoint.
bool Recognize(const Grammar& g, SymbolId start, const std::vector<int32_t>& w) {
  const int n = static_cast<int>(w.size());
  const int num_s = g.num_symbols();
  auto idx = [&](int s, int i, int j) { return (static_cast<size_t>(s) * (n + 1) + i) * (n + 1) + j; };
  std::vector<bool> d(static_cast<size_t>(num_s) * (n + 1) * (n + 1), false);
  for (int i = 0; i < n; ++i) d[idx(w[i], i, i + 1)] = true;
  for (int len = 0; len <= n; ++len) {
    for (int i = 0; i + len <= n; ++i) {
      const int j = i + len;
      for (bool changed = true; changed;) {
        changed = false;
        for (const Rule& r : g.rules) {
          if (d[idx(r.lhs, i, j)]) continue;
          std::vector<bool> at(n + 1, false);  // positions reachable after a prefix of rhs
          at[i] = true;
          for (SymbolId s : r.rhs) {
            std::vector<bool> next(n + 1, false);
            for (int p = i; p <= j; ++p)
              if (at[p])
                for (int q = p; q <= j; ++q)
                  if (d[idx(s, p, q)]) next[q] = true;
            at.swap(next);
          }
          if (at[j]) {
            d[idx(r.lhs, i, j)] = true;
            changed = true;
          }
        }
      }
    }
  }
  return d[idx(start, 0, n)];
}

// All sentences of length <= max_len.
std::vector<std::vector<int32_t>> Sentences(const Grammar& g, int max_len) {
  std::vector<std::vector<int32_t>> out, frontier{{}};
  const SymbolId start = StartSymbol(g, 0);
  for (int len = 0; len <= max_len; ++len) {
    std::vector<std::vector<int32_t>> next;
    for (const auto& w : frontier) {
      if (Recognize(g, start, w)) out.push_back(w);
      if (len < max_len)
        for (int t = 0; t < g.num_terminals(); ++t) {
          next.push_back(w);
          next.back().push_back(t);
        }
    }
    frontier.swap(next);
  }
  return out;
}

bool Contains(const std::vector<int32_t>& w, const std::vector<int32_t>& pattern) {
  return std::search(w.begin(), w.end(), pattern.begin(), pattern.end()) != w.end();
}

TEST(SubstringDfaTest, AcceptsExactlyStringsContainingThePattern) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<int32_t> pattern(1 + rng() % 4), w(rng() % 12);
    for (auto& t : pattern) t = rng() % 2;
    for (auto& t : w) t = rng() % 2;
    const TerminalDfa dfa = SubstringDfa(2, pattern);
    int32_t q = dfa.start;
    for (int32_t t : w) q = dfa.next[q * 2 + t];
    EXPECT_EQ(dfa.accepting[q], Contains(w, pattern)) << round;
  }
}

TEST(NeverLegalTest, FixpointAgreesWithBarHillelAndEnumeration) {
  std::mt19937 rng(2024);
  int grammars = 0, never = 0, legal = 0, witnessed = 0;
  for (int round = 0; round < 120; ++round) {
    const int num_t = 2 + rng() % 2;
    Grammar g = RandomGrammar(rng, num_t, 2 + rng() % 3);
    NeverLegalAnalysis analysis(g, 0);
    const auto sentences = Sentences(g, 6);
    ++grammars;
    // All (X, S) with |S| <= 2.
    std::vector<std::vector<int32_t>> suffixes{{}};
    for (int a = 0; a < num_t; ++a) {
      suffixes.push_back({a});
      for (int b = 0; b < num_t; ++b) suffixes.push_back({a, b});
    }
    for (int x = 0; x < num_t; ++x) {
      for (const auto& s : suffixes) {
        const bool fast = analysis.IsNeverLegal(x, s);
        ASSERT_EQ(fast, BarHillelNeverLegal(g, StartSymbol(g, 0), x, s)) << g.DebugString();
        std::vector<int32_t> pattern{x};
        pattern.insert(pattern.end(), s.begin(), s.end());
        bool seen = false;
        for (const auto& w : sentences) seen |= Contains(w, pattern);
        if (seen) {
          ASSERT_FALSE(fast) << g.DebugString();
          ++witnessed;
        }
        (fast ? never : legal) += 1;
      }
    }
  }
  // The sample exercises both answers, and enumeration confirms many.
  EXPECT_GT(never, 200);
  EXPECT_GT(legal, 200);
  EXPECT_GT(witnessed, 200);
}

// S -> a S b | ε: a b a never occurs, b a never occurs, a a b b does.
TEST(NeverLegalTest, AnBn) {
  Grammar g;
  ASSERT_TRUE(ReadLarkString("start: (\"a\" start \"b\")?\n", "anbn.lark", {}, &g).ok());
  const int32_t a = g.FindTerminal("A"), b = g.FindTerminal("B");
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  NeverLegalAnalysis analysis(g, 0);
  const std::vector<int32_t> sa{a}, sb{b}, sab{a, b}, sbb{b, b}, sabb{a, b, b};
  EXPECT_TRUE(analysis.IsNeverLegal(b, sa));
  EXPECT_FALSE(analysis.IsNeverLegal(a, sab));          // a a b
  EXPECT_FALSE(analysis.IsNeverLegal(a, sabb));          // a a b b
  EXPECT_TRUE(analysis.IsNeverLegal(b, sab));            // b a b
  EXPECT_FALSE(analysis.IsNeverLegal(b, sbb));           // a a a b b b
  EXPECT_FALSE(analysis.IsNeverLegal(a, sb));
}

class PythonNeverLegalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* dir = std::getenv("CFGMASK_LARK_GRAMMARS");
    if (!dir) return;
    grammar_ = new Grammar;
    LarkReaderOptions options;
    options.start = {"file_input"};
    if (!ReadLarkFile(std::string(dir) + "/python.lark", options, grammar_).ok()) {
      delete grammar_;
      grammar_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete grammar_;
    grammar_ = nullptr;
  }
  static Grammar* grammar_;
};
Grammar* PythonNeverLegalTest::grammar_ = nullptr;

TEST_F(PythonNeverLegalTest, SeedExamplesAndAgreementWithBarHillel) {
  if (!grammar_) GTEST_SKIP() << "CFGMASK_LARK_GRAMMARS / python.lark not available";
  const Grammar& g = *grammar_;
  NeverLegalAnalysis analysis(g, 0);
  const int32_t def = g.FindTerminal("DEF"), name = g.FindTerminal("NAME"),
                cls = g.FindTerminal("CLASS"), lpar = g.FindTerminal("LPAR"),
                async = g.FindTerminal("ASYNC");
  ASSERT_GE(def, 0);
  ASSERT_GE(name, 0);
  ASSERT_GE(cls, 0);
  ASSERT_GE(lpar, 0);
  ASSERT_GE(async, 0);
  // Seed: only NAME, "match" and "case" follow DEF.
  const std::vector<int32_t> s_name{name}, s_class{cls}, s_async{async}, s_name_lpar{name, lpar},
      s_name_name{name, name};
  EXPECT_FALSE(analysis.IsNeverLegal(def, s_name));
  EXPECT_TRUE(analysis.IsNeverLegal(def, s_class));
  EXPECT_TRUE(analysis.IsNeverLegal(def, s_async));
  EXPECT_FALSE(analysis.IsNeverLegal(def, s_name_lpar));
  EXPECT_TRUE(analysis.IsNeverLegal(def, s_name_name));
  int followers = 0;
  for (int32_t y = 0; y < g.num_terminals(); ++y) {
    const std::vector<int32_t> s{y};
    followers += !analysis.IsNeverLegal(def, s);
  }
  EXPECT_EQ(followers, 3);  // NAME, MATCH, CASE

  // Every pair with the fast path; the reference on a sample of pairs and on
  // triples that pass the pair filter (the only ones that reach a fixpoint).
  const int32_t num_t = g.num_terminals();
  auto t0 = std::chrono::steady_clock::now();
  int never_pairs = 0;
  for (int32_t x = 0; x < num_t; ++x)
    for (int32_t y = 0; y < num_t; ++y) {
      const std::vector<int32_t> s{y};
      never_pairs += analysis.IsNeverLegal(x, s);
    }
  const double pair_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("python.lark: %d terminals, %d of %d pairs never legal (%.3f s)\n", num_t,
              never_pairs, num_t * num_t, pair_seconds);
  EXPECT_GT(never_pairs, num_t * num_t / 2);

  std::mt19937 rng(11);
  int checked = 0, fixpoint_checked = 0, never_triples = 0;
  auto t1 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < 5) {
    const int32_t x = rng() % num_t;
    std::vector<int32_t> s{static_cast<int32_t>(rng() % num_t)};
    if (checked % 2 == 1) {
      // A triple x y z with x y and y z both adjacent somewhere.
      std::vector<int32_t> ys, zs;
      for (int32_t y = 0; y < num_t; ++y)
        if (analysis.CanBeAdjacent(x, y)) ys.push_back(y);
      if (ys.empty()) continue;
      s[0] = ys[rng() % ys.size()];
      for (int32_t z = 0; z < num_t; ++z)
        if (analysis.CanBeAdjacent(s[0], z)) zs.push_back(z);
      if (zs.empty()) continue;
      s.push_back(zs[rng() % zs.size()]);
      ++fixpoint_checked;
    }
    const bool fast = analysis.IsNeverLegal(x, s);
    ASSERT_EQ(fast, BarHillelNeverLegal(g, StartSymbol(g, 0), x, s))
        << g.terminals[x].name << " " << g.terminals[s[0]].name;
    never_triples += s.size() == 2 && fast;
    ++checked;
  }
  std::printf("python.lark: %d queries checked against Bar-Hillel (%d triples past the pair "
              "filter, %d of them never legal); fixpoint time %.3f s over %lld fixpoints\n",
              checked, fixpoint_checked, never_triples, analysis.stats().fixpoint_seconds,
              static_cast<long long>(analysis.stats().fixpoints));
  EXPECT_GT(fixpoint_checked, 20);
  EXPECT_GT(never_triples, 0);
}

}  // namespace
}  // namespace cfgmask
