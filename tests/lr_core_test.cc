// The LR core (parser/lr_core.h): the persistent stack (sharing, order,
// hashing), the overlay and scratch views against plain vector stepping,
// the known-top stack's kBelow, and the predecessor frontier against a
// breadth-first search.
#include "parser/lr_core.h"

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parser/lalr.h"
#include "tests/parser_test_grammars.h"

namespace cfgmask {
namespace {

// The plain reference: a vector stack, no views.  A cyclic grammar's
// endless reductions are cut after 2^17 actions (no finite chain in these
// grammars comes near), as LrScratch cuts them.
struct VectorStack {
  std::vector<int32_t> v;
  int64_t steps = 0;
  int32_t Top() const { return v.back(); }
  bool Pop(int32_t n) {
    v.resize(v.size() - n);
    return true;
  }
  bool Push(int32_t s) {
    v.push_back(s);
    return true;
  }
  bool Step() { return ++steps <= (1 << 17); }
};

TEST(LrCoreTest, PersistentStackSharesOrdersAndHashes) {
  LrStack a(0);
  const LrStack b = a.Pushed(5).Pushed(7);
  const LrStack c = a.Pushed(5).Pushed(7);  // built apart, equal
  const LrStack d = a.Pushed(5).Pushed(3);
  EXPECT_EQ(b.States(), (std::vector<int32_t>{0, 5, 7}));
  EXPECT_TRUE(b == c);
  EXPECT_EQ(b.Hash(), c.Hash());
  EXPECT_FALSE(b == d);
  EXPECT_NE(b.Hash(), d.Hash());
  EXPECT_EQ(b.Depth(), 3u);
  EXPECT_EQ(a.Depth(), 1u);  // a is unchanged by the pushes
  // Compare is the lexicographic order of States().
  std::mt19937 rng(7);
  std::vector<LrStack> stacks;
  for (int i = 0; i < 60; ++i) {
    LrStack s(static_cast<int32_t>(rng() % 2));
    const int depth = static_cast<int>(rng() % 5);
    for (int k = 0; k < depth; ++k) s = s.Pushed(static_cast<int32_t>(rng() % 3));
    stacks.push_back(s);
    if (i % 3 == 0) stacks.push_back(s.Pushed(1));  // shares its nodes
  }
  for (const LrStack& x : stacks) {
    for (const LrStack& y : stacks) {
      const auto vx = x.States(), vy = y.States();
      const int want = vx < vy ? -1 : (vy < vx ? 1 : 0);
      ASSERT_EQ(LrStack::Compare(x, y), want) << x.DebugString() << " " << y.DebugString();
      ASSERT_EQ(x == y, vx == vy);
    }
  }
  // Build shares the base's nodes.
  const int32_t more[] = {9, 10};
  const LrStack e = LrStack::Build(b.top_node(), more, 2);
  EXPECT_EQ(e.States(), (std::vector<int32_t>{0, 5, 7, 9, 10}));
  EXPECT_EQ(e.top_node()->parent->parent, b.top_node());
}

// Random walks on random grammars: the overlay (committed after each feed),
// the scratch view's answer, and the plain vector stack agree.
TEST(LrCoreTest, ViewsAgreeWithVectorStepping) {
  for (uint32_t seed = 1; seed <= 80; ++seed) {
    const Grammar g = parser_test::RandomGrammar(seed);
    ParseTables tables;
    if (!BuildParseTables(g, &tables).ok()) continue;
    const LrTables t = LrTables::Of(tables);
    std::mt19937 rng(seed);
    LrStack stack(tables.start_state[0]);
    VectorStack ref{{tables.start_state[0]}};
    for (int step = 0; step < 40; ++step) {
      std::vector<int32_t> taken;
      for (int32_t term = 0; term < t.num_terminals; ++term) {
        LrOverlay view(stack);
        const bool scratch = LrWouldTake(t, view, term);
        VectorStack copy = ref;
        copy.steps = 0;
        const bool plain = LrTaken(LrFeed(t, term, &copy));
        ASSERT_EQ(scratch, plain) << seed << " " << step << " " << term;
        if (plain && term != t.end_terminal()) taken.push_back(term);
      }
      if (taken.empty()) break;
      const int32_t term = taken[rng() % taken.size()];
      LrOverlay view(stack);
      ASSERT_EQ(LrFeed(t, term, &view).outcome, LrOutcome::kShift);
      ref.steps = 0;
      ASSERT_EQ(LrFeed(t, term, &ref).outcome, LrOutcome::kShift);
      stack = view.Commit();
      ASSERT_EQ(stack.States(), ref.v) << seed << " " << step;
    }
  }
}

// A stack that knows only its top `known` states reports the reduction that
// would pop below them, and leaves itself as it was before that reduction.
TEST(LrCoreTest, KnownTopStopsBelow) {
  const Grammar g = parser_test::MakeGrammar("s: a b c");
  ParseTables tables;
  ASSERT_TRUE(BuildParseTables(g, &tables).ok());
  const LrTables t = LrTables::Of(tables);
  struct Known {
    std::vector<int32_t> v;
    int32_t Top() const { return v.back(); }
    bool Pop(int32_t n) {
      if (n >= static_cast<int32_t>(v.size())) return false;
      v.resize(v.size() - n);
      return true;
    }
    bool Push(int32_t s) {
      v.push_back(s);
      return true;
    }
    static bool Step() { return true; }
  };
  VectorStack full{{tables.start_state[0]}};
  for (int32_t term : {0, 1, 2}) ASSERT_EQ(LrFeed(t, term, &full).outcome, LrOutcome::kShift);
  // Only the state after c is known: $END reduces s -> a b c, 3 states.
  Known known{{full.v.back()}};
  const LrResult r = LrFeed(t, t.end_terminal(), &known);
  ASSERT_EQ(r.outcome, LrOutcome::kBelow);
  EXPECT_EQ(t.rule_length[r.rule], 3);
  EXPECT_EQ(known.v.size(), 1u);
  // The whole stack accepts.
  EXPECT_EQ(LrFeed(t, t.end_terminal(), &full).outcome, LrOutcome::kAccept);
}

// Frontier(q, d) is the set of reachable states with a path of exactly d
// transitions to q: checked by forward enumeration of all paths.
TEST(LrCoreTest, FrontierIsEveryPathOfThatLength) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const Grammar g = parser_test::RandomGrammar(seed);
    ParseTables tables;
    if (!BuildParseTables(g, &tables).ok()) continue;
    const LrTables t = LrTables::Of(tables);
    const LrPredecessors preds(t, tables.start_state[0]);
    const int32_t n = t.num_states;
    std::vector<std::vector<int32_t>> succ(n);
    for (int32_t q = 0; q < n; ++q) {
      for (int32_t sym = 0; sym < t.num_terminals + t.num_nonterminals; ++sym) {
        const int32_t to = t.Transition(q, sym);
        if (to >= 0) succ[q].push_back(to);
      }
    }
    for (int32_t target = 0; target < n; ++target) {
      for (int32_t d = 0; d <= 3; ++d) {
        std::set<int32_t> want;
        for (int32_t p = 0; p < n; ++p) {
          if (!preds.reachable()[p]) continue;
          std::set<int32_t> at = {p};
          for (int32_t k = 0; k < d; ++k) {
            std::set<int32_t> next;
            for (int32_t q : at) next.insert(succ[q].begin(), succ[q].end());
            at.swap(next);
          }
          if (at.count(target)) want.insert(p);
        }
        const std::vector<int32_t> got = preds.Frontier(target, d);
        if (d == 0) {
          EXPECT_EQ(got, std::vector<int32_t>{target});
        } else {
          EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), want) << seed << " " << target;
        }
      }
    }
    // EnteredBy(a): the reachable states' shift targets on a.
    for (int32_t a = 0; a < t.num_terminals; ++a) {
      std::set<int32_t> want;
      for (int32_t q = 0; q < n; ++q)
        if (preds.reachable()[q] && t.ShiftTo(q, a) >= 0) want.insert(t.ShiftTo(q, a));
      const auto& got = preds.EnteredBy(a);
      EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), want);
      EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
    }
  }
}

}  // namespace
}  // namespace cfgmask
