// Grammar analyses (grammar/analysis.h) on a hand-checked grammar and, for
// FIRST/FOLLOW, against the definitions by enumeration of short sentential
// forms on random grammars.
#include "grammar/analysis.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/parser_test_grammars.h"

namespace cfgmask {
namespace {

// Terminals a(0) b(1) c(2) d(3) e(4); nonterminals s(5) x(6) y(7) z(8).
// x is nullable, y unproductive, z unreachable.
Grammar Sample() { return parser_test::MakeGrammar("s: a x b | y ; x: c x | ; y: y d ; z: e"); }

TEST(GrammarAnalysisTest, HandChecked) {
  const Grammar g = Sample();
  ASSERT_EQ(g.num_terminals(), 5);
  const SymbolId s = 5, x = 6, y = 7, z = 8;
  EXPECT_EQ(StartSymbol(g, 0), s);

  const std::vector<bool> productive = ProductiveSymbols(g);
  EXPECT_TRUE(productive[s] && productive[x] && productive[z]);
  EXPECT_FALSE(productive[y]);
  const std::vector<bool> useful = UsefulRules(g, s);
  int32_t n_useful = 0;
  for (size_t r = 0; r < g.rules.size(); ++r) {
    n_useful += useful[r];
    if (useful[r]) {
      EXPECT_TRUE(g.rules[r].lhs == s || g.rules[r].lhs == x) << r;
    }
  }
  EXPECT_EQ(n_useful, 3);  // s: a x b, x: c x, x:

  const std::vector<uint8_t> nullable = NullableSymbols(g);
  for (SymbolId v = 0; v < g.num_symbols(); ++v) EXPECT_EQ(nullable[v] != 0, v == x) << v;

  const auto first = FirstSets(g, nullable);
  auto set_of = [&](const std::vector<uint8_t>& bits) {
    std::set<int32_t> out;
    for (int32_t t = 0; t < g.num_terminals(); ++t)
      if (bits[t]) out.insert(t);
    return out;
  };
  EXPECT_EQ(set_of(first[s]), (std::set<int32_t>{0}));
  EXPECT_EQ(set_of(first[x]), (std::set<int32_t>{2}));
  EXPECT_EQ(set_of(first[y]), (std::set<int32_t>{}));
  EXPECT_EQ(set_of(first[z]), (std::set<int32_t>{4}));
  EXPECT_EQ(set_of(first[3]), (std::set<int32_t>{3}));

  const auto follow = FollowSets(g, nullable, first);
  EXPECT_EQ(set_of(follow[x]), (std::set<int32_t>{1}));
  EXPECT_EQ(set_of(follow[0]), (std::set<int32_t>{1, 2}));  // a: then x (nullable), then b
  EXPECT_EQ(set_of(follow[2]), (std::set<int32_t>{1, 2}));  // c: then x, or what follows x
  EXPECT_EQ(set_of(follow[y]), (std::set<int32_t>{3}));
  EXPECT_EQ(set_of(follow[1]), (std::set<int32_t>{}));

  const std::vector<int32_t> shortest = ShortestDerivations(g);
  EXPECT_EQ(shortest[s], 2);
  EXPECT_EQ(shortest[x], 0);
  EXPECT_EQ(shortest[y], kNoDerivation);
  EXPECT_EQ(shortest[z], 1);
  EXPECT_EQ(shortest[0], 1);
}

// By definition on random grammars: the strings of up to 4 terminals each
// nonterminal derives, enumerated by a bounded fixpoint.  Every first
// terminal of such a string is in FIRST and every adjacent pair in FOLLOW
// (the enumeration may miss longer derivations, so these are inclusions);
// nullable must agree exactly (an empty derivation needs no length).
TEST(GrammarAnalysisTest, FirstAndFollowAgreeWithEnumeration) {
  for (uint32_t iter = 1; iter <= 60; ++iter) {
    const Grammar g = parser_test::RandomGrammar(iter);
    const auto nullable = NullableSymbols(g);
    const auto first = FirstSets(g, nullable);
    const auto follow = FollowSets(g, nullable, first);
    const int32_t T = g.num_terminals();
    // Strings of terminals each nonterminal derives, up to length 4, by a
    // bounded fixpoint.
    std::vector<std::set<std::vector<int32_t>>> lang(g.num_symbols());
    for (int32_t t = 0; t < T; ++t) lang[t].insert({t});
    for (int round = 0; round < 8; ++round) {
      for (const Rule& r : g.rules) {
        std::set<std::vector<int32_t>> acc = {{}};
        for (SymbolId v : r.rhs) {
          std::set<std::vector<int32_t>> next;
          for (const auto& p : acc)
            for (const auto& w : lang[v]) {
              if (p.size() + w.size() > 4) continue;
              std::vector<int32_t> pw = p;
              pw.insert(pw.end(), w.begin(), w.end());
              next.insert(pw);
            }
          acc.swap(next);
        }
        lang[r.lhs].insert(acc.begin(), acc.end());
      }
    }
    for (SymbolId v = T; v < g.num_symbols(); ++v) {
      EXPECT_EQ(nullable[v] != 0, lang[v].count({}) == 1) << iter << " " << v;
      for (const auto& w : lang[v]) {
        if (!w.empty()) {
          EXPECT_TRUE(first[v][w[0]]) << iter << " FIRST " << v << " " << w[0];
        }
      }
    }
    // Every pair (a, b) adjacent in a derived string is in FOLLOW(a).
    for (SymbolId v = T; v < g.num_symbols(); ++v)
      for (const auto& w : lang[v])
        for (size_t i = 0; i + 1 < w.size(); ++i)
          EXPECT_TRUE(follow[w[i]][w[i + 1]]) << iter << " FOLLOW " << w[i] << " " << w[i + 1];
  }
}

}  // namespace
}  // namespace cfgmask
