// The merge pass on compiled stores (streamline/streamline.h): masks are
// bit-identical with and without it — the seed's three experiments, on
// python.lark and sql.lark with a real byte-fallback tokenizer (LLaMA
// SentencePiece, 32,000 tokens):
//  - teacher forcing of real texts (standard-library files, SQL corpus
//    statements) with greedy and random segmentations into tokens;
//  - random walks over masked tokens (fixed seeds);
//  - and it must shrink the store.
// Also: the pass is idempotent and survives a store-file round trip.
// Quick sizes under CFGMASK_QUICK=1 (CI); full sizes otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/compile/store_writer.h"
#include "runtime/tools/sample.h"
#include "streamline/streamline.h"
#include "tests/exactness_harness.h"
#include "tests/serving_corpus.h"

namespace cfgmask {
namespace {

struct StorePair {
  const CompiledStore* plain = nullptr;
  std::unique_ptr<CompiledStore> streamlined;
  StreamlineStats stats;
};

std::unique_ptr<StorePair> MakePair(const std::string& grammar, const std::string& start) {
  Status st;
  auto p = std::make_unique<StorePair>();
  p->plain = CachedTestStore(grammar, TestEnv("CFGMASK_TOK_LLAMA_SPM"), start, &st);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!p->plain) return nullptr;
  p->streamlined = std::make_unique<CompiledStore>(*p->plain);
  st = StreamlineStore(p->streamlined.get(), StreamlineOptions{}, &p->stats);
  EXPECT_TRUE(st.ok()) << st.message();
  return p;
}

StorePair* PythonPair() {
  static std::unique_ptr<StorePair> p =
      MakePair(TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark", "file_input");
  return p.get();
}

StorePair* SqlPair() {
  static std::unique_ptr<StorePair> p =
      MakePair(std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/sql.lark", "start");
  return p.get();
}

// Teacher-forces `text` through both stores in lockstep; every step's masks
// must be equal.  Returns the number of steps compared.
int64_t CompareTeacherForced(const StorePair& p, const std::string& text, SegmentMode mode,
                             uint64_t seed) {
  Segmenter seg(*p.plain);
  std::mt19937_64 rng(seed);
  Session a(p.plain), b(p.streamlined.get());
  int64_t steps = 0;
  for (const Segment& s : seg.Cut(text, mode, &rng)) {
    EXPECT_EQ(a.Mask(), b.Mask()) << "step " << steps << " at byte " << s.offset;
    if (::testing::Test::HasFailure()) return steps;
    ++steps;
    Status sa = s.token >= 0 ? a.Advance(s.token)
                             : a.AdvanceBytes(std::string_view(text).substr(s.offset, s.length));
    Status sb = s.token >= 0 ? b.Advance(s.token)
                             : b.AdvanceBytes(std::string_view(text).substr(s.offset, s.length));
    EXPECT_EQ(sa.ok(), sb.ok());
    if (!sa.ok()) return steps;  // the text left the language (a text Lark rejects)
  }
  EXPECT_EQ(a.Mask(), b.Mask()) << "at the end";
  EXPECT_EQ(a.CanEnd(), b.CanEnd());
  return steps + 1;
}

// Random walks: each step draws a token from the plain store's mask.
int64_t CompareRandomWalks(const StorePair& p, int walks, int max_steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t steps = 0;
  for (int w = 0; w < walks; ++w) {
    Session a(p.plain), b(p.streamlined.get());
    for (int i = 0; i < max_steps; ++i) {
      const std::vector<uint32_t> ma = a.Mask(), mb = b.Mask();
      EXPECT_EQ(ma, mb) << "walk " << w << " step " << i << " text: " << a.text();
      EXPECT_TRUE(std::any_of(ma.begin(), ma.end(), [](uint32_t x) { return x != 0; }))
          << "dead end: empty mask after " << a.text();
      if (::testing::Test::HasFailure()) return steps;
      ++steps;
      const int32_t t = DrawToken(*p.plain, ma, /*eos_bias=*/0.0, &rng, /*ascii_only=*/w % 2 == 0);
      if (t < 0 || p.plain->token_special[t]) break;
      EXPECT_TRUE(a.Advance(t).ok());
      EXPECT_TRUE(b.Advance(t).ok());
    }
  }
  return steps;
}

TEST(StreamlineStore, PythonShrinksAndIsIdempotent) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  StorePair* p = PythonPair();
  ASSERT_NE(p, nullptr);
  const StreamlineStats& st = p->stats;
  std::printf("python.lark + LLaMA SPM: rows %lld -> %lld (%lld deleted, %lld folded), row bytes "
              "%lld -> %lld, %.2f s\n",
              static_cast<long long>(st.rows_before), static_cast<long long>(st.rows_after),
              static_cast<long long>(st.rows_deleted), static_cast<long long>(st.proved),
              static_cast<long long>(st.bytes_before), static_cast<long long>(st.bytes_after),
              st.seconds);
  EXPECT_EQ(st.rows_before, static_cast<int64_t>(p->plain->row_seq.size()));
  EXPECT_LT(st.rows_after, st.rows_before);
  EXPECT_GT(st.proved, 0);
  EXPECT_GT(st.rows_deleted, 0);
  // A second pass finds nothing more to fold.
  CompiledStore again = *p->streamlined;
  StreamlineStats st2;
  ASSERT_TRUE(StreamlineStore(&again, StreamlineOptions{}, &st2).ok());
  EXPECT_EQ(st2.rows_after, st.rows_after);
  EXPECT_EQ(again.row_seq, p->streamlined->row_seq);
  EXPECT_EQ(again.row_tokens, p->streamlined->row_tokens);
}

TEST(StreamlineStore, PythonTeacherForcedMasksIdentical) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  StorePair* p = PythonPair();
  ASSERT_NE(p, nullptr);
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 6 : 60, 300, 20000);
  ASSERT_FALSE(texts.empty());
  int64_t steps = 0;
  for (size_t i = 0; i < texts.size() && !HasFailure(); ++i) {
    steps += CompareTeacherForced(*p, texts[i], SegmentMode::kGreedy, i);
    steps += CompareTeacherForced(*p, texts[i], SegmentMode::kRandom, 100 + i);
  }
  std::printf("%zu files, %lld steps compared\n", texts.size(), static_cast<long long>(steps));
  EXPECT_GT(steps, 1000);
}

TEST(StreamlineStore, PythonRandomWalkMasksIdentical) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  StorePair* p = PythonPair();
  ASSERT_NE(p, nullptr);
  const int64_t steps = CompareRandomWalks(*p, TestQuick() ? 20 : 200, 60, 11);
  EXPECT_GT(steps, 200);
}

TEST(StreamlineStore, SqlMasksIdentical) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  StorePair* p = SqlPair();
  ASSERT_NE(p, nullptr);
  std::printf("sql.lark + LLaMA SPM: rows %lld -> %lld\n",
              static_cast<long long>(p->stats.rows_before),
              static_cast<long long>(p->stats.rows_after));
  EXPECT_LT(p->stats.rows_after, p->stats.rows_before);
  const std::vector<std::string> texts = SqlTexts(TestQuick() ? 60 : 100000);
  ASSERT_GT(texts.size(), 20u);
  int64_t steps = 0;
  for (size_t i = 0; i < texts.size() && !HasFailure(); ++i)
    steps += CompareTeacherForced(*p, texts[i], i % 2 ? SegmentMode::kRandom : SegmentMode::kGreedy,
                                  i);
  if (!HasFailure()) steps += CompareRandomWalks(*p, TestQuick() ? 20 : 200, 40, 5);
  std::printf("%zu statements + walks, %lld steps compared\n", texts.size(),
              static_cast<long long>(steps));
  EXPECT_GT(steps, 1000);
}

// The walk drops lexings whose adjacent terminals can never touch (FOLLOW);
// without that (CompileOptions::prune_pairs = false, `cfgmask compile
// --no-pair-pruning`) the store holds every lexing of the terminal automaton,
// as the design's does, and the never-legal step must delete them instead:
// more rows before the pass, the same masks after it as the pruned store's.
TEST(StreamlineStore, WithoutPairPruningTheNeverLegalStepDeletesTheSameLexings) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  StorePair* pruned = PythonPair();
  ASSERT_NE(pruned, nullptr);
  CompileOptions options;
  options.start = "file_input";
  options.prune_pairs = false;
  CompiledStore unpruned;
  Status st = CompileStore(TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark",
                           TestEnv("CFGMASK_TOK_LLAMA_SPM"), options, &unpruned);
  ASSERT_TRUE(st.ok()) << st.message();
  const size_t rows_unpruned = unpruned.row_seq.size();
  // Lexings such as NAME NAME or RPAR NAME are in the store now.
  EXPECT_GT(rows_unpruned, pruned->plain->row_seq.size() * 5 / 4);
  StorePair p;
  p.plain = pruned->plain;
  p.streamlined = std::make_unique<CompiledStore>(std::move(unpruned));
  ASSERT_TRUE(StreamlineStore(p.streamlined.get(), StreamlineOptions{}, &p.stats).ok());
  auto after_never = [](const StreamlineStats& st) {
    for (const StreamlineStep& step : st.steps)
      if (step.name == "never legal") return step.rows;
    return int64_t{-1};
  };
  std::printf("python.lark + LLaMA SPM without pair pruning: rows %zu -> %lld after never legal "
              "-> %lld (pruned walk: %zu -> %lld)\n",
              rows_unpruned, static_cast<long long>(after_never(p.stats)),
              static_cast<long long>(p.stats.rows_after), pruned->plain->row_seq.size(),
              static_cast<long long>(pruned->stats.rows_after));
  // Every lexing the walk would have dropped is refuted by the pass.  (A few
  // tokens that branch past the walk's hypothesis limit without the pruning
  // are simulated instead of stored, so the counts need not be equal.)
  EXPECT_LE(after_never(p.stats), after_never(pruned->stats));
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 3 : 30, 300, 20000);
  ASSERT_FALSE(texts.empty());
  int64_t steps = 0;
  for (size_t i = 0; i < texts.size() && !HasFailure(); ++i)
    steps += CompareTeacherForced(p, texts[i], i % 2 ? SegmentMode::kRandom : SegmentMode::kGreedy,
                                  i);
  if (!HasFailure()) steps += CompareRandomWalks(p, TestQuick() ? 10 : 100, 60, 23);
  EXPECT_GT(steps, 500);
}

TEST(StreamlineStore, RoundTripThroughStoreFile) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  StorePair* p = PythonPair();
  ASSERT_NE(p, nullptr);
  const std::string path = ::testing::TempDir() + "/streamlined.cfgm";
  ASSERT_TRUE(WriteStoreFile(*p->streamlined, path).ok());
  CompiledStore back;
  Status st = ReadStoreFile(path, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.row_seq.size(), p->streamlined->row_seq.size());
  Session a(p->streamlined.get()), b(&back);
  const std::string text = "def f(x):\n    return x + 1\n";
  for (char c : text) {
    ASSERT_EQ(a.Mask(), b.Mask());
    ASSERT_TRUE(a.AdvanceBytes(std::string(1, c)).ok());
    ASSERT_TRUE(b.AdvanceBytes(std::string(1, c)).ok());
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace cfgmask
