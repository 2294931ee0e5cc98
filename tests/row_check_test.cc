// The row check's fast path against its slow reference: HypothesisParser::
// ItemOk (an item's answer without applying it, which the session's row
// walk uses for the last item of every sequence) must equal Item applied to
// a copy, for every item of every row of every live hypothesis' lexer state,
// at every step of teacher-forced files and of random walks over the masks;
// the rows the session's walk accepts must be those whose every item Item
// accepts on copies; the walks also check that the session's mask equals the slow reference
// (Session::AllowsSlow) on a sample of tokens.  Grammars: Lark's python.lark,
// the strict python.lark, sql.lark (LLaMA SentencePiece with byte fallback,
// real) and python.lark with a 601-token slice of Qwen2's byte-level BPE;
// quick sizes under CFGMASK_QUICK=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "maskstore/hypothesis_parser.h"
#include "runtime/compile/compile.h"
#include "runtime/tools/sample.h"
#include "tests/exactness_harness.h"
#include "tests/serving_corpus.h"
#include "tests/small_tokenizer.h"

namespace cfgmask {
namespace {

struct Counts {
  int64_t items = 0, accepted = 0, rejected = 0;
};

// Every row of every live hypothesis' root, item by item: ItemOk on the
// parser before the item against Item on a copy of it; and the rows the
// session's walk accepts (Session::AcceptedRows: a trie over the rows, the
// last item by ItemOk, Accepts answered once per prefix) against the rows
// whose every item Item accepts on copies.
void CompareRows(const CompiledStore& s, Session* session, Counts* c) {
  std::vector<int32_t> fast, slow_rows;
  bool eos = false;
  session->AcceptedRows(&fast, &eos);
  // Rows past the roots' are the simulated tokens' (CheckSimulated).
  fast.erase(std::remove_if(fast.begin(), fast.end(),
                            [&](int32_t r) { return r >= s.root_row_offsets[s.num_roots]; }),
             fast.end());
  std::sort(fast.begin(), fast.end());
  fast.erase(std::unique(fast.begin(), fast.end()), fast.end());
  for (const LiveState& l : session->live()) {
    const int32_t root = s.root_index[l.q];
    if (root < 0) continue;
    for (int32_t r = s.root_row_offsets[root]; r < s.root_row_offsets[root + 1]; ++r) {
      const int32_t seq = s.row_seq[r];
      HypothesisParser p{&s, s.lr(), LrOverlay(l.stack), l.indent, l.paren, l.slot_bits};
      for (int32_t i = s.seq_offsets[seq]; i < s.seq_offsets[seq + 1]; ++i) {
        const int32_t item = s.seq_data[i];
        HypothesisParser applied = p;
        const bool fast = p.ItemOk(item, l.col);
        const bool slow = applied.Item(item, l.col);
        ++c->items;
        if (fast != slow) {
          ADD_FAILURE() << "row " << r << " item " << item << " (kind " << s.item_kind[item]
                        << ") at text offset " << session->text().size() << ": ItemOk " << fast
                        << ", Item " << slow << "\n"
                        << session->text();
          return;
        }
        if (!slow) {
          ++c->rejected;
          break;
        }
        if (i + 1 == s.seq_offsets[seq + 1]) {
          ++c->accepted;
          slow_rows.push_back(r);
        }
        p = applied;
      }
    }
  }
  std::sort(slow_rows.begin(), slow_rows.end());
  slow_rows.erase(std::unique(slow_rows.begin(), slow_rows.end()), slow_rows.end());
  EXPECT_EQ(fast, slow_rows) << "accepted rows at text offset " << session->text().size() << "\n"
                             << session->text();
}

SessionLimits NoMemo() {
  SessionLimits l;
  l.memo_bytes = 0;
  return l;
}

// Teacher forcing (greedy segmentation) of `texts`, at most `max_steps` steps each.
Counts ForceTexts(const CompiledStore* store, const std::vector<std::string>& texts,
                  int max_steps) {
  Counts c;
  Segmenter seg(*store);
  for (const std::string& text : texts) {
    Session session(store, NoMemo());
    int steps = 0;
    for (const Segment& s : seg.Cut(text, SegmentMode::kGreedy, nullptr)) {
      if (++steps > max_steps) break;
      CompareRows(*store, &session, &c);
      if (testing::Test::HasFailure()) return c;
      const std::string_view bytes = std::string_view(text).substr(s.offset, s.length);
      if (!(s.token >= 0 ? session.Advance(s.token) : session.AdvanceBytes(bytes)).ok()) break;
    }
  }
  return c;
}

// Random walks over the masks; every few steps, the mask against the slow
// reference on a few allowed and refused tokens.
Counts Walks(const CompiledStore* store, int walks, int max_steps, uint64_t seed) {
  Counts c;
  std::mt19937_64 rng(seed);
  for (int w = 0; w < walks; ++w) {
    Session session(store, NoMemo());
    for (int i = 0; i < max_steps; ++i) {
      CompareRows(*store, &session, &c);
      if (testing::Test::HasFailure()) return c;
      const std::vector<uint32_t> m = session.Mask();
      if (i % 5 == 0) {
        for (int k = 0; k < 8; ++k) {
          const int32_t t = static_cast<int32_t>(rng() % store->vocab_size);
          EXPECT_EQ(MaskAllows(m, t), session.AllowsSlow(t))
              << "walk " << w << " step " << i << " token " << t << ": " << session.text();
        }
      }
      const int32_t t = DrawToken(*store, m, 0.0, &rng, /*ascii_only=*/w % 2 == 0);
      if (t < 0 || store->token_special[t]) break;
      EXPECT_TRUE(session.Advance(t).ok());
    }
  }
  return c;
}

void ExpectCompared(const char* what, const Counts& c, int64_t min_items = 10000,
                    int64_t min_each = 1000) {
  std::printf("%s: %lld items compared, %lld rows accepted, %lld rejected\n", what,
              static_cast<long long>(c.items), static_cast<long long>(c.accepted),
              static_cast<long long>(c.rejected));
  EXPECT_GT(c.items, min_items);
  EXPECT_GT(c.accepted, min_each);
  EXPECT_GT(c.rejected, min_each);
}

TEST(RowCheck, LarkPythonItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 3 : 20, 300, 6000);
  ASSERT_FALSE(texts.empty());
  ExpectCompared("python.lark, files", ForceTexts(store, texts, TestQuick() ? 300 : 2000));
  ExpectCompared("python.lark, walks", Walks(store, TestQuick() ? 4 : 30, 60, 5));
}

TEST(RowCheck, StrictPythonItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 3 : 20, 300, 6000);
  ASSERT_FALSE(texts.empty());
  ExpectCompared("strict python.lark, files", ForceTexts(store, texts, TestQuick() ? 300 : 2000));
  ExpectCompared("strict python.lark, walks", Walks(store, TestQuick() ? 4 : 30, 60, 6));
}

TEST(RowCheck, SqlItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = SqlStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = SqlTexts(TestQuick() ? 40 : 400);
  ASSERT_GT(texts.size(), 20u);
  ExpectCompared("sql.lark, statements", ForceTexts(store, texts, 400));
  ExpectCompared("sql.lark, walks", Walks(store, TestQuick() ? 4 : 30, 60, 7));
}

// A byte-level BPE slice: tokens that end inside a newline's indentation
// (an Emit of the newline whose column is relative to the carried one).
TEST(RowCheck, ByteLevelSliceItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  const std::string tok = TempPath("row_check_small_tokenizer.json");
  WriteTextFile(tok, SmallTokenizerJson());
  CompileOptions o;
  o.start = "file_input";
  CompiledStore store;
  Status st = CompileStore(PythonGrammarPath(), tok, o, &store);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 3 : 20, 300, 6000);
  ASSERT_FALSE(texts.empty());
  // Few rows per lexer state with 601 tokens.
  ExpectCompared("python.lark x byte-level slice, files",
                 ForceTexts(&store, texts, TestQuick() ? 400 : 3000), 2000, 200);
  ExpectCompared("python.lark x byte-level slice, walks",
                 Walks(&store, TestQuick() ? 40 : 200, 60, 8), 500, 20);
}

}  // namespace
}  // namespace cfgmask
