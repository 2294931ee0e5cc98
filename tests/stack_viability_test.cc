// The stack-viability analysis (parser/stack_viability.h) against its slow
// references, and its verdict on the shipped grammars.
//  - The walk that decides "nothing to check" keeps, per stack summary,
//    only the entries a later push can read; the reference keeps the top
//    max_depth entries of every stack.  Both give the same verdict on
//    seeded random grammars, with and without a %declare'd dead context
//    (both verdicts must occur), and the reduced walk never visits more
//    summaries.
//  - sql.lark and the strict Python grammar, analysed without the load-time
//    limits: every stack their tables can build completes (nothing to
//    check), so the runtime, which does not analyse them at load, is exact
//    for this class there.  sql.lark at CI size (not under the sanitizer);
//    the strict Python grammar (about 1.2 GB and 15-25 s) with
//    CFGMASK_FULL=1.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/lark_reader.h"
#include "parser/stack_viability.h"
#include "runtime/compile/compile.h"
#include "tests/exactness_harness.h"
#include "tests/random_lark_grammar.h"
#include "tests/serving_corpus.h"
#include "tests/small_tokenizer.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {

// A random grammar; with `dead`, one with a dead context
// (RandomGrammarWithDeadContext).
std::string Grammar(std::mt19937& rng, bool dead, bool comments) {
  return dead ? RandomGrammarWithDeadContext(rng, comments) : RandomLarkGrammar(rng, comments);
}

TEST(StackViability, ReducedWalkAgreesWithTheWholeWindowWalk) {
  const bool full = TestEnv("CFGMASK_FULL") == "1";
  const int grammars = full ? 3000 : TestSanitized() ? 60 : TestQuick() ? 300 : 600;
  std::mt19937 rng(20261127);
  const std::string tpath = TempPath("small.tokenizer.json");
  WriteTextFile(tpath, SmallTokenizerJson());
  int compiled = 0, checked = 0, walked_to_nothing = 0, trivial = 0, compared = 0;
  int64_t walked_reduced = 0, walked_whole = 0;
  for (int i = 0; i < grammars; ++i) {
    const std::string grammar = Grammar(rng, i % 2 == 1, i % 3 == 2);
    const std::string gpath = TempPath("sv" + std::to_string(i) + ".lark");
    WriteTextFile(gpath, grammar);
    CompiledStore store;
    if (!CompileStore(gpath, tpath, CompileOptions{}, &store).ok()) continue;  // conflicts
    ++compiled;
    StackViabilityLimits reduced, whole;
    reduced.max_walk = whole.max_walk = int64_t{1} << 18;
    whole.whole_window_walk = true;
    StackViabilityStats rs, ws;
    const auto r = StackViability::Build(store.lr(), store.start_state, reduced, &rs);
    const auto w = StackViability::Build(store.lr(), store.start_state, whole, &ws);
    ASSERT_FALSE(rs.over_limits || ws.over_limits) << grammar;
    EXPECT_LE(rs.walked, ws.walked) << grammar;
    // The reference passed its cap: its verdict is "check" by default.
    if (ws.walked > whole.max_walk) continue;
    ++compared;
    EXPECT_EQ(r != nullptr, w != nullptr) << grammar << "reduced walk " << rs.walked
                                          << " summaries, whole-window walk " << ws.walked;
    walked_reduced += rs.walked;
    walked_whole += ws.walked;
    if (r) {
      ++checked;
    } else if (rs.unsure_states > 0) {
      ++walked_to_nothing;
    } else {
      ++trivial;
    }
  }
  std::printf("%d grammars compiled, %d compared: %d checked, %d nothing to check after the walk, "
              "%d by the lower bound; %lld summaries walked (the whole-window walk: %lld)\n",
              compiled, compared, checked, walked_to_nothing, trivial,
              static_cast<long long>(walked_reduced), static_cast<long long>(walked_whole));
  // Both verdicts of the walk occur.
  EXPECT_GT(checked, 0);
  EXPECT_GT(walked_to_nothing, 0);
}

void ExpectNothingToCheck(const CompiledStore& store, const char* name) {
  StackViabilityLimits limits;
  limits.max_lr_states = 1 << 30;
  limits.max_transitions = int64_t{1} << 40;
  limits.max_walk = int64_t{1} << 20;
  StackViabilityStats st;
  const auto v = StackViability::Build(store.lr(), store.start_state, limits, &st);
  EXPECT_EQ(v, nullptr) << name << ": some stack its tables can build cannot complete (or the walk "
                        << "passed its cap: " << st.walked << " summaries)";
  EXPECT_FALSE(st.over_limits);
  std::printf("%s: %d LR states, nothing to check: %lld transitions, %lld states the lower bound "
              "leaves open, %lld stack summaries walked, %.2f s (saturation %.2f, walk %.2f)\n",
              name, store.lr().num_states, static_cast<long long>(st.transitions),
              static_cast<long long>(st.unsure_states), static_cast<long long>(st.walked), st.seconds,
              st.saturation_seconds, st.walk_seconds);
}

TEST(StackViability, SqlHasNothingToCheck) {
  // Under the sanitizer the same code runs on the random grammars above;
  // 1.3 M transitions there would cost minutes.
  if (TestSanitized()) GTEST_SKIP() << "the optimised build checks sql.lark";
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = SqlStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  ExpectNothingToCheck(*store, "sql.lark");
}

TEST(StackViability, StrictPythonHasNothingToCheck) {
  if (TestEnv("CFGMASK_FULL") != "1") GTEST_SKIP() << "about 1.2 GB and 15-25 s: CFGMASK_FULL=1";
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  ExpectNothingToCheck(*store, "strict python.lark");
}

}  // namespace
}  // namespace cfgmask
