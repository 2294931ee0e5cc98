// The figures of `cfgmask reduction` (runtime/tools/reduction.h) against independent
// counts, and each streamlining step alone against the masks of the store
// without it (streamline/streamline.h).
//
//  - Session::set_counters: the parser checks and ORed rows of a step are
//    recounted from a "prefix store", a copy whose every row group holds one
//    row per distinct prefix of its sequences: the rows that copy accepts are
//    exactly the prefixes a hypothesis accepts, so the trie walk's checks are
//    the prefixes whose parent prefix is accepted, and its ORed rows the
//    sequences accepted in full.
//  - The seed's keys per step: the first against TerminalSequenceKeys
//    (maskstore/row_codec.h), counted per group by its own code.
//  - Shared row groups: every lexer state still has the same rows, as sets of
//    (item sequence, tokens).
//  - Each step alone (never legal, always legal, lexing conditions, shared
//    row groups) keeps every mask of random walks and teacher-forced texts.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "maskstore/row_codec.h"
#include "runtime/tools/sample.h"
#include "runtime/segment.h"
#include "runtime/session.h"
#include "streamline/streamline.h"
#include "tests/exactness_harness.h"
#include "tests/serving_corpus.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {

const CompiledStore* JsonStore() {
  Status st;
  const CompiledStore* s = CachedTestStore(std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/json.lark",
                                           TestEnv("CFGMASK_TOK_LLAMA_SPM"), "", &st);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

const CompiledStore* PythonStore() {
  Status st;
  const CompiledStore* s = CachedTestStore(TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark",
                                           TestEnv("CFGMASK_TOK_LLAMA_SPM"), "file_input", &st);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

std::vector<int32_t> Seq(const CompiledStore& s, int32_t seq) {
  return std::vector<int32_t>(s.seq_data.begin() + s.seq_offsets[seq],
                              s.seq_data.begin() + s.seq_offsets[seq + 1]);
}

// The prefix store of `s` (see the header comment); `prefix_of[g]` lists,
// per group, the prefixes in row order.
CompiledStore PrefixStore(const CompiledStore& s, std::vector<std::vector<std::vector<int32_t>>>* prefix_of) {
  CompiledStore p = s;
  p.row_seq.clear();
  p.row_kind.clear();
  p.row_offset.clear();
  p.row_length.clear();
  p.row_tokens.clear();
  p.row_bits.clear();
  p.root_row_offsets.assign(1, 0);
  const int32_t text = TextTokenCount(s);
  int32_t some_token = 0;
  while (s.token_special[some_token]) ++some_token;
  prefix_of->assign(s.num_roots, {});
  for (int32_t g = 0; g < s.num_roots; ++g) {
    std::set<std::vector<int32_t>> prefixes;
    for (int32_t r = s.root_row_offsets[g]; r < s.root_row_offsets[g + 1]; ++r) {
      const std::vector<int32_t> items = Seq(s, s.row_seq[r]);
      for (size_t n = 0; n <= items.size(); ++n)
        prefixes.insert(std::vector<int32_t>(items.begin(), items.begin() + n));
    }
    for (const std::vector<int32_t>& v : prefixes) {
      p.seq_data.insert(p.seq_data.end(), v.begin(), v.end());
      p.seq_offsets.push_back(static_cast<int32_t>(p.seq_data.size()));
      AppendRow(static_cast<int32_t>(p.seq_offsets.size()) - 2, {some_token}, text, &p);
      (*prefix_of)[g].push_back(v);
    }
    p.root_row_offsets.push_back(static_cast<int32_t>(p.row_seq.size()));
  }
  return p;
}

void CheckCountersOnWalks(const CompiledStore& s, int walks, int max_steps, uint64_t seed) {
  ASSERT_TRUE(s.sim_token.empty()) << "the recount does not cover simulated tokens";
  std::vector<std::vector<std::vector<int32_t>>> prefix_of;
  const CompiledStore p = PrefixStore(s, &prefix_of);
  SessionLimits no_memo;
  no_memo.memo_bytes = 0;
  std::mt19937_64 rng(seed);
  int64_t compared = 0, total_checks = 0;
  for (int w = 0; w < walks; ++w) {
    Session a(&s, no_memo), b(&p, no_memo);
    StepCounters c;
    a.set_counters(&c);
    for (int i = 0; i < max_steps; ++i) {
      const StepCounters before = c;
      const std::vector<uint32_t> mask = a.Mask();
      const int64_t checks = c.parser_checks - before.parser_checks;
      const int64_t ored = c.rows_accepted - before.rows_accepted;
      EXPECT_EQ(c.calls, before.calls + 1);
      if (a.num_live() == 1 && s.root_index[a.live()[0].q] >= 0) {
        const int32_t g = s.root_index[a.live()[0].q];
        std::vector<int32_t> rows;
        bool eos = false;
        b.AcceptedRows(&rows, &eos);
        std::set<std::vector<int32_t>> accepted;
        for (int32_t r : rows) accepted.insert(Seq(p, p.row_seq[r]));
        int64_t want_checks = 0, want_ored = 0;
        for (const std::vector<int32_t>& v : prefix_of[g]) {
          if (v.empty()) continue;
          want_checks += accepted.count(std::vector<int32_t>(v.begin(), v.end() - 1)) > 0;
        }
        for (int32_t r = s.root_row_offsets[g]; r < s.root_row_offsets[g + 1]; ++r)
          want_ored += accepted.count(Seq(s, s.row_seq[r])) > 0;
        EXPECT_EQ(checks, want_checks) << "walk " << w << " step " << i << ": " << a.text();
        EXPECT_EQ(ored, want_ored) << "walk " << w << " step " << i << ": " << a.text();
        ++compared;
        total_checks += checks;
      }
      if (::testing::Test::HasFailure()) return;
      const int32_t t = DrawToken(s, mask, 0.0, &rng, /*ascii_only=*/true);
      if (t < 0 || s.token_special[t]) break;
      ASSERT_TRUE(a.Advance(t).ok());
      ASSERT_TRUE(b.Advance(t).ok());
    }
  }
  EXPECT_GT(compared, walks * 5);
  EXPECT_GT(total_checks, compared);  // not a vacuous agreement on zeros
}

TEST(Reduction, StepCountersMatchAPrefixStore) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* plain = JsonStore();
  ASSERT_NE(plain, nullptr);
  CheckCountersOnWalks(*plain, 20, 40, 7);
  CompiledStore lean = *plain;
  ASSERT_TRUE(StreamlineStore(&lean, StreamlineOptions{}, nullptr).ok());
  CheckCountersOnWalks(lean, 20, 40, 8);
}

TEST(Reduction, SeedKeysPerStep) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  for (const CompiledStore* plain : {JsonStore(), PythonStore()}) {
    ASSERT_NE(plain, nullptr);
    CompiledStore lean = *plain;
    StreamlineStats st;
    ASSERT_TRUE(StreamlineStore(&lean, StreamlineOptions{}, &st).ok());
    ASSERT_EQ(st.steps.size(), 5u);
    EXPECT_EQ(st.steps[0].name, "every lexing");
    EXPECT_EQ(st.steps[0].keys, TerminalSequenceKeys(*plain));
    EXPECT_EQ(st.steps[0].rows, static_cast<int64_t>(plain->row_seq.size()));
    // Before sharing, one group per state: the per-group count is the seed's.
    EXPECT_EQ(st.steps[1].name, "lexing conditions");
    EXPECT_EQ(st.steps[3].name, "always legal");
    EXPECT_EQ(st.steps[4].name, "shared row groups");
    EXPECT_EQ(st.steps[4].keys, st.steps[3].keys);
    EXPECT_EQ(st.steps[4].rows, static_cast<int64_t>(lean.row_seq.size()));
    EXPECT_EQ(st.steps[4].groups, lean.num_roots);
    EXPECT_LT(lean.num_roots, plain->num_roots);
    for (size_t i = 1; i < st.steps.size(); ++i) {
      EXPECT_LE(st.steps[i].rows, st.steps[i - 1].rows) << st.steps[i].name;
      EXPECT_LE(st.steps[i].keys, st.steps[i - 1].keys) << st.steps[i].name;
    }
    // Until rows are shared, a key has at least one row of its own.
    for (size_t i = 0; i < 4; ++i) EXPECT_LE(st.steps[i].keys, st.steps[i].rows) << st.steps[i].name;
  }
}

// Per lexer state: its rows as a set of (item sequence, tokens).
std::set<std::pair<std::vector<int32_t>, std::vector<int32_t>>> StateRows(const CompiledStore& s,
                                                                          int32_t q) {
  std::set<std::pair<std::vector<int32_t>, std::vector<int32_t>>> out;
  const int32_t g = s.root_index[q];
  if (g < 0) return out;
  for (int32_t r = s.root_row_offsets[g]; r < s.root_row_offsets[g + 1]; ++r) {
    std::vector<int32_t> toks;
    DecodeRow(s, r, &toks);
    out.emplace(Seq(s, s.row_seq[r]), toks);
  }
  return out;
}

TEST(Reduction, SharedGroupsKeepEveryStatesRows) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  const CompiledStore* plain = PythonStore();
  ASSERT_NE(plain, nullptr);
  StreamlineOptions unshared;
  unshared.share = false;
  CompiledStore a = *plain, b = *plain;
  ASSERT_TRUE(StreamlineStore(&a, unshared, nullptr).ok());
  ASSERT_TRUE(StreamlineStore(&b, StreamlineOptions{}, nullptr).ok());
  ASSERT_LT(b.num_roots, a.num_roots);
  ASSERT_LT(b.row_seq.size(), a.row_seq.size());
  for (int32_t q = 0; q < plain->num_lex_states; ++q) {
    ASSERT_EQ(a.root_index[q] >= 0, b.root_index[q] >= 0);
    // Compared by the items' content, not their ids.
    auto content = [](const CompiledStore& s, const std::set<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& rows) {
      std::set<std::pair<std::vector<std::vector<int32_t>>, std::vector<int32_t>>> out;
      for (const auto& [items, toks] : rows) {
        std::vector<std::vector<int32_t>> c;
        for (int32_t i : items)
          c.push_back({s.item_kind[i], s.item_terminal[i], s.item_blockers[i], s.item_full[i],
                       s.item_col_abs[i], s.item_col[i], s.item_slot[i]});
        out.emplace(c, toks);
      }
      return out;
    };
    ASSERT_EQ(content(a, StateRows(a, q)), content(b, StateRows(b, q))) << "lexer state " << q;
  }
  // The simulated tokens of every state are kept too.
  for (int32_t q = 0; q < plain->num_lex_states; ++q) {
    const int32_t ga = a.root_index[q], gb = b.root_index[q];
    if (ga < 0 || a.root_sim_offsets.empty()) continue;
    std::vector<int32_t> ta(a.sim_token.begin() + a.root_sim_offsets[ga],
                            a.sim_token.begin() + a.root_sim_offsets[ga + 1]);
    std::vector<int32_t> tb(b.sim_token.begin() + b.root_sim_offsets[gb],
                            b.sim_token.begin() + b.root_sim_offsets[gb + 1]);
    ASSERT_EQ(ta, tb) << "lexer state " << q;
  }
}

// Masks of `plain` and `lean` in lockstep on random walks and texts.
int64_t CompareMasks(const CompiledStore& plain, const CompiledStore& lean,
                     const std::vector<std::string>& texts, int walks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t steps = 0;
  for (int w = 0; w < walks; ++w) {
    Session a(&plain), b(&lean);
    for (int i = 0; i < 50; ++i) {
      const std::vector<uint32_t> ma = a.Mask();
      EXPECT_EQ(ma, b.Mask()) << "walk " << w << " step " << i << ": " << a.text();
      if (::testing::Test::HasFailure()) return steps;
      ++steps;
      const int32_t t = DrawToken(plain, ma, 0.0, &rng, w % 2 == 0);
      if (t < 0 || plain.token_special[t]) break;
      EXPECT_TRUE(a.Advance(t).ok());
      EXPECT_TRUE(b.Advance(t).ok());
    }
  }
  Segmenter seg(plain);
  for (size_t f = 0; f < texts.size(); ++f) {
    Session a(&plain), b(&lean);
    for (const Segment& s : seg.Cut(texts[f], f % 2 ? SegmentMode::kRandom : SegmentMode::kGreedy, &rng)) {
      EXPECT_EQ(a.Mask(), b.Mask()) << "text " << f << " at byte " << s.offset;
      if (::testing::Test::HasFailure()) return steps;
      ++steps;
      const std::string_view bytes = std::string_view(texts[f]).substr(s.offset, s.length);
      const bool ok = (s.token >= 0 ? a.Advance(s.token) : a.AdvanceBytes(bytes)).ok();
      EXPECT_EQ(ok, (s.token >= 0 ? b.Advance(s.token) : b.AdvanceBytes(bytes)).ok());
      if (!ok) break;
    }
    EXPECT_EQ(a.CanEnd(), b.CanEnd());
  }
  return steps;
}

TEST(Reduction, EachStepAloneKeepsTheMasks) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  struct Only {
    const char* name;
    StreamlineOptions o;
  };
  auto only = [](bool never, bool fold, bool lexing, bool share) {
    StreamlineOptions o;
    o.delete_never = never;
    o.fold = fold;
    o.lexing_conditions = lexing;
    o.share = share;
    return o;
  };
  const std::vector<Only> steps = {{"never legal", only(true, false, false, false)},
                                   {"always legal", only(false, true, false, false)},
                                   {"lexing conditions", only(false, false, true, false)},
                                   {"shared row groups", only(false, false, false, true)}};
  const std::vector<std::string> json_texts = {"{\"a\": [1, 2.5e3, true, null], \"b\": {}}",
                                               "[\"x\\u00e9\", -0.1, false, {\"k\": []}]"};
  const std::vector<std::string> py_texts = StdlibTexts(TestQuick() ? 2 : 10, 300, 6000);
  for (const Only& step : steps) {
    for (const CompiledStore* plain : {JsonStore(), PythonStore()}) {
      ASSERT_NE(plain, nullptr);
      CompiledStore lean = *plain;
      StreamlineStats st;
      ASSERT_TRUE(StreamlineStore(&lean, step.o, &st).ok());
      const bool json = plain == JsonStore();
      // Each step does something on python.lark (lexing conditions: little).
      if (!json && !step.o.lexing_conditions)
        EXPECT_LT(lean.row_seq.size(), plain->row_seq.size()) << step.name;
      const int64_t n = CompareMasks(*plain, lean, json ? json_texts : py_texts,
                                     TestQuick() ? 6 : 30, 17);
      EXPECT_GT(n, 100) << step.name;
      if (HasFailure()) {
        ADD_FAILURE() << "with only the step " << step.name << ", python: " << !json;
        return;
      }
    }
  }
}

}  // namespace
}  // namespace cfgmask
