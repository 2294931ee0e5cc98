// The session's row memo (SessionLimits::memo_bytes) against the same
// session without it: the mask of every step must be identical, bit for bit.
//  - teacher forcing of standard-library files and SQL corpus statements
//    (greedy and random segmentations) through one session that keeps its
//    memo across texts (Reset keeps it), so later texts hit entries made by
//    earlier ones in other contexts;
//  - random masked walks with rollbacks and forks (forks share the memo);
//  - a memo so small that it is emptied every few steps.
// Every comparison also requires the memo to have answered look-ups, so the
// test cannot pass with the memo unused.  Tokenizers: LLaMA SentencePiece
// (byte fallback, real) for Python and SQL, a 601-token slice of Qwen2's
// byte-level BPE for the simulated tokens; quick sizes under CFGMASK_QUICK=1.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "runtime/tools/sample.h"
#include "runtime/compile/compile.h"
#include "runtime/row_memo.h"
#include "tests/exactness_harness.h"
#include "tests/serving_corpus.h"
#include "tests/small_tokenizer.h"

namespace cfgmask {
namespace {

SessionLimits NoMemo() {
  SessionLimits l;
  l.memo_bytes = 0;
  return l;
}

SessionLimits Memo(int64_t bytes) {
  SessionLimits l;
  l.memo_bytes = bytes;
  return l;
}

// Teacher-forces every text through `memo` (kept across texts) and a fresh
// memo-less session; returns the steps compared.
int64_t CompareTexts(const CompiledStore* store, Session* memo,
                     const std::vector<std::string>& texts, uint64_t seed) {
  Segmenter seg(*store);
  std::mt19937_64 rng(seed);
  int64_t steps = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    memo->Reset();
    Session plain(store, NoMemo());
    const SegmentMode mode = i % 2 ? SegmentMode::kRandom : SegmentMode::kGreedy;
    for (const Segment& s : seg.Cut(text, mode, &rng)) {
      EXPECT_EQ(memo->Mask(), plain.Mask()) << "text " << i << " byte " << s.offset;
      if (testing::Test::HasFailure()) return steps;
      ++steps;
      const std::string_view bytes = std::string_view(text).substr(s.offset, s.length);
      Status a = s.token >= 0 ? memo->Advance(s.token) : memo->AdvanceBytes(bytes);
      Status b = s.token >= 0 ? plain.Advance(s.token) : plain.AdvanceBytes(bytes);
      EXPECT_EQ(a.ok(), b.ok());
      if (!a.ok()) break;
    }
    EXPECT_EQ(memo->Mask(), plain.Mask()) << "text " << i << " at the end";
    EXPECT_EQ(memo->CanEnd(), plain.CanEnd());
    if (testing::Test::HasFailure()) return steps;
  }
  return steps;
}

// Random walks over masked tokens; every few steps a rollback, and a fork
// that walks on its own for a while (sharing the memo) before being dropped.
int64_t CompareWalks(const CompiledStore* store, int64_t memo_bytes, int walks, int max_steps,
                     uint64_t seed, int64_t* hits) {
  std::mt19937_64 rng(seed);
  int64_t steps = 0;
  *hits = 0;
  Session memo(store, Memo(memo_bytes));
  for (int w = 0; w < walks; ++w) {
    memo.Reset();
    Session plain(store, NoMemo());
    for (int i = 0; i < max_steps; ++i) {
      const std::vector<uint32_t> m = plain.Mask();
      EXPECT_EQ(memo.Mask(), m) << "walk " << w << " step " << i << ": " << plain.text();
      if (testing::Test::HasFailure()) return steps;
      ++steps;
      const int32_t t = DrawToken(*store, m, 0.0, &rng, /*ascii_only=*/w % 2 == 0);
      if (t < 0 || store->token_special[t]) break;
      EXPECT_TRUE(memo.Advance(t).ok());
      EXPECT_TRUE(plain.Advance(t).ok());
      if (i % 7 == 6 && plain.HistoryLength() >= 2) {
        EXPECT_TRUE(memo.Rollback(2).ok());
        EXPECT_TRUE(plain.Rollback(2).ok());
      }
      if (i % 11 == 10) {
        Session fm = memo.Fork(), fp = plain.Fork();
        for (int j = 0; j < 5; ++j) {
          const std::vector<uint32_t> mf = fp.Mask();
          EXPECT_EQ(fm.Mask(), mf) << "fork of walk " << w << " step " << i << "+" << j;
          const int32_t u = DrawToken(*store, mf, 0.0, &rng, true);
          if (u < 0 || store->token_special[u]) break;
          EXPECT_TRUE(fm.Advance(u).ok());
          EXPECT_TRUE(fp.Advance(u).ok());
        }
      }
    }
  }
  *hits = memo.memo_hits();
  return steps;
}

// CompareTexts through one memo session on `store`; the memo must answer at
// least `min_hit_share` of the steps.
void ExpectTextsIdentical(const char* what, const CompiledStore* store,
                          const std::vector<std::string>& texts, uint64_t seed,
                          double min_hit_share) {
  Session memo(store);
  const int64_t steps = CompareTexts(store, &memo, texts, seed);
  std::printf("%s: %zu texts, %lld steps, memo %lld hits / %lld misses\n", what, texts.size(),
              static_cast<long long>(steps), static_cast<long long>(memo.memo_hits()),
              static_cast<long long>(memo.memo_misses()));
  EXPECT_GT(steps, 1000);
  EXPECT_GT(memo.memo_hits(), static_cast<int64_t>(min_hit_share * steps));
  EXPECT_GT(memo.memo_misses(), 0);
}

TEST(RowMemo, PythonTeacherForcedIdentical) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 5 : 60, 300, 20000);
  ASSERT_FALSE(texts.empty());
  ExpectTextsIdentical("python", store, texts, 3, 0.25);
}

TEST(RowMemo, SqlTeacherForcedIdentical) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = SqlStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = SqlTexts(TestQuick() ? 50 : 100000);
  ASSERT_GT(texts.size(), 20u);
  ExpectTextsIdentical("sql", store, texts, 4, 0.25);
}

TEST(RowMemo, RandomWalksWithRollbackAndForkIdentical) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* py = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(py, nullptr) << st.message();
  int64_t hits = 0;
  const int walks = TestQuick() ? 12 : 120;
  EXPECT_GT(CompareWalks(py, SessionLimits{}.memo_bytes, walks, 60, 21, &hits), 300);
  EXPECT_GT(hits, 0);
  // A memo of a few entries: emptied again and again, still exact.
  EXPECT_GT(CompareWalks(py, 4096, walks, 60, 22, &hits), 300);
  EXPECT_GT(hits, 0);
}

// Simulated tokens (checked at run time, Session::CheckSimulated) read the
// parser stack too: python.lark with a small byte-level tokenizer and every
// branching token simulated (max_walk_hypotheses 1) compiles in seconds.
TEST(RowMemo, SimulatedTokenWalksIdentical) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  const std::string tok = TempPath("row_memo_small_tokenizer.json");
  WriteTextFile(tok, SmallTokenizerJson());
  CompileOptions o;
  o.start = "file_input";
  o.max_walk_hypotheses = 1;
  CompiledStore store;
  Status st = CompileStore(PythonGrammarPath(), tok, o, &store);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_GT(store.sim_token.size(), 100u);
  int64_t hits = 0;
  EXPECT_GT(CompareWalks(&store, SessionLimits{}.memo_bytes, TestQuick() ? 200 : 1000, 60, 31, &hits),
            300);
  EXPECT_GT(hits, 0);
}

// Sessions sharing one memo, on two threads at once, each teacher-forcing
// its own texts: every mask equals a memo-less session's, and the second
// pass over the texts is answered from entries the other sessions made.
TEST(RowMemo, SharedAcrossSessionsAndThreads) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 6 : 30, 300, 8000);
  ASSERT_GE(texts.size(), 2u);
  auto memo = std::make_shared<RowMemo>(store, SessionLimits{}.memo_bytes);
  std::vector<int64_t> steps(2, 0);
  std::vector<int> failures(2, 0);
  auto worker = [&](int w) {
    Segmenter seg(*store);
    for (size_t i = w; i < texts.size(); i += 2) {
      Session shared(store, SessionLimits{}, memo), plain(store, NoMemo());
      for (const Segment& s : seg.Cut(texts[i], SegmentMode::kGreedy, nullptr)) {
        if (shared.Mask() != plain.Mask()) ++failures[w];
        ++steps[w];
        if (!shared.Advance(s.token).ok() || !plain.Advance(s.token).ok()) break;
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures[0] + failures[1], 0);
  // The two threads walked with one row prefix table, the memo's (filled
  // from both at once), and a session with its own saw the same masks.
  EXPECT_GT(memo->row_prefixes()->bytes(), 0);
  EXPECT_GT(steps[0] + steps[1], 500);
  const int64_t hits_before = memo->hits();
  int64_t second = 0;
  {
    Segmenter seg(*store);
    Session again(store, SessionLimits{}, memo), plain(store, NoMemo());
    for (const Segment& s : seg.Cut(texts[0], SegmentMode::kGreedy, nullptr)) {
      ASSERT_EQ(again.Mask(), plain.Mask());
      ++second;
      if (!again.Advance(s.token).ok() || !plain.Advance(s.token).ok()) break;
    }
  }
  // Every step of a text seen before is a hit (each step looks up one hypothesis).
  EXPECT_GE(memo->hits() - hits_before, second - 1);
  EXPECT_GT(memo->bytes(), 0);
}

// The row prefix table depends on the store alone: sessions that share a
// memo share it (a server's sessions do not each hold a byte per row); a
// session without a memo, or with another cap, has its own; Fork keeps it.
TEST(RowMemo, SessionsOfAMemoShareTheRowPrefixTable) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  auto memo = std::make_shared<RowMemo>(store, SessionLimits{}.memo_bytes);
  Session a(store, SessionLimits{}, memo), b(store, SessionLimits{}, memo);
  EXPECT_EQ(a.row_prefixes(), memo->row_prefixes().get());
  EXPECT_EQ(b.row_prefixes(), a.row_prefixes());
  Session fork = a.Fork();
  EXPECT_EQ(fork.row_prefixes(), a.row_prefixes());
  Session own(store, NoMemo());
  EXPECT_NE(own.row_prefixes(), a.row_prefixes());
  SessionLimits capped;
  capped.row_prefix_cap = 2;
  Session other_cap(store, capped, memo);
  EXPECT_NE(other_cap.row_prefixes(), a.row_prefixes());
  EXPECT_EQ(other_cap.row_prefixes()->cap(), 2);
  // b at the same text: answered from what a made (memo or table), nothing new.
  ASSERT_TRUE(a.AdvanceBytes("def f(x):\n    return x\n").ok());
  a.Mask();
  const int64_t made = memo->row_prefixes()->bytes();
  EXPECT_GT(made, 0);
  ASSERT_TRUE(b.AdvanceBytes("def f(x):\n    return x\n").ok());
  EXPECT_EQ(b.Mask(), own.AdvanceBytes("def f(x):\n    return x\n").ok() ? own.Mask()
                                                                               : std::vector<uint32_t>());
  EXPECT_EQ(memo->row_prefixes()->bytes(), made);
}

TEST(RowMemoDeathTest, AMemoServesOneStore) {
  CompiledStore one, other;
  auto memo = std::make_shared<RowMemo>(&other, 1 << 20);
  EXPECT_DEATH(Session(&one, SessionLimits{}, memo), "");
}

TEST(RowMemo, OffMeansNoLookups) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  Session s(store, NoMemo());
  s.Mask();
  ASSERT_TRUE(s.AdvanceBytes("x = 1\n").ok());
  s.Mask();
  EXPECT_EQ(s.memo_hits() + s.memo_misses(), 0);
}

}  // namespace
}  // namespace cfgmask
