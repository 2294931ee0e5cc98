// Tests of runtime/batch.h: the batch bitmask equals Session::FillMask bit
// for bit, compared at every step
//  - for batches of 1, 7 and 64 sessions mixed over Python (python.lark,
//    file_input) and SQL (grammar/lark/sql.lark) stores, teacher-forced on
//    real texts (standard-library modules, harvested SQLite statements),
//    and for one Qwen2 (151,936-token) Python store;
//  - for batches of 1, 7 and 64 sessions mixed over two small stores (json
//    and traps grammars), advanced by random allowed tokens;
// the CPU twin of the CUDA OR kernel agrees on the same real rows;
// AdvanceBatch reports a bad token per session; the CPU logits masking (the
// twin of the CUDA logits kernel) writes -inf exactly where a bit is 0 (fp32,
// fp16, bf16; every vocabulary size 1..300 and larger ones).
// Needs real tokenizers ($CFGMASK_TOK_LLAMA_SPM, $CFGMASK_TOK_QWEN2), and
// $CFGMASK_PYTHON for the corpora.
#include "runtime/batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/or_reduce.h"
#include "runtime/session.h"
#include "tests/serving_corpus.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {

#define REQUIRE_ENV(var)                                                       \
  do {                                                                         \
    if (TestEnv(var).empty()) {                                                \
      if (TestEnv("CI") == "true") FAIL() << var " is not set (run setup.sh)"; \
      GTEST_SKIP() << var " is not set";                                       \
    }                                                                          \
  } while (0)

const CompiledStore* Store(const std::string& grammar) {
  Status st;
  const CompiledStore* s =
      CachedTestStore(std::string(CFGMASK_SOURCE_DIR) + "/tests/data/engine/" + grammar,
                      TestEnv("CFGMASK_TOK_LLAMA_SPM"), "", &st);
  EXPECT_TRUE(s != nullptr) << st.message();
  return s;
}

bool Bit(const uint32_t* m, int32_t t) { return (m[t >> 5] >> (t & 31)) & 1; }

// Runs `batch` sessions (session b on store b % 2, so both stores mix in one
// batch) for `steps` steps; at each step the batch bitmask, and the twin of
// the CUDA kernel, must equal each session's FillMask.
void TeacherForce(int32_t batch, int32_t steps, uint32_t seed) {
  const CompiledStore* stores2[2] = {Store("json.lark"), Store("traps.lark")};
  ASSERT_TRUE(stores2[0] && stores2[1]);
  const std::vector<uint32_t> text0 = TextTokenMask(*stores2[0]);
  const std::vector<uint32_t> text1 = TextTokenMask(*stores2[1]);
  const kernels::StoreView views[2] = {HostStoreView(*stores2[0], text0.data()),
                                       HostStoreView(*stores2[1], text1.data())};
  std::vector<Session> owned;
  owned.reserve(batch);
  std::vector<Session*> sessions;
  std::vector<const CompiledStore*> stores;
  for (int32_t b = 0; b < batch; ++b) {
    owned.emplace_back(stores2[b % 2]);
    stores.push_back(stores2[b % 2]);
  }
  for (Session& s : owned) sessions.push_back(&s);
  // One padding word: it must come back zero.
  const int32_t words_per_row = std::max(stores2[0]->mask_words(), stores2[1]->mask_words()) + 1;
  std::vector<int32_t> bitmask(static_cast<size_t>(batch) * words_per_row);
  std::vector<uint32_t> twin(words_per_row);
  BatchMatcher matcher;
  BatchRows rows;
  std::mt19937 rng(seed);
  int64_t resets = 0;
  int64_t kinds[3] = {0, 0, 0};  // accepted rows seen, by RowKind
  for (int32_t step = 0; step < steps; ++step) {
    std::fill(bitmask.begin(), bitmask.end(), -1);
    Status st = matcher.FillNextTokenBitmask(sessions, stores, bitmask.data(), words_per_row);
    ASSERT_TRUE(st.ok()) << st.message();
    CollectAcceptedRows(sessions, &rows);
    for (int32_t b = 0; b < batch; ++b) {
      for (int32_t k = rows.row_begin[b]; k < rows.row_begin[b + 1]; ++k) {
        ++kinds[stores[b]->row_kind[rows.rows[k]]];
      }
    }
    std::vector<int32_t> tokens(batch);
    for (int32_t b = 0; b < batch; ++b) {
      const CompiledStore& store = *stores[b];
      std::vector<uint32_t> want = sessions[b]->Mask();
      want.resize(words_per_row, 0);
      const uint32_t* got = reinterpret_cast<const uint32_t*>(bitmask.data()) +
                            static_cast<size_t>(b) * words_per_row;
      ASSERT_EQ(std::vector<uint32_t>(got, got + words_per_row), want)
          << "session " << b << " step " << step << " text '" << sessions[b]->text() << "'";
      OrSessionRowsTwin(views[b % 2], rows.rows.data() + rows.row_begin[b],
                        rows.row_begin[b + 1] - rows.row_begin[b], rows.eos[b] != 0,
                        twin.data(), words_per_row);
      FinishBatchRow(rows, b, store.mask_words(), twin.data(), words_per_row);
      ASSERT_EQ(twin, want) << "twin, session " << b << " step " << step;
      // Next token: a random allowed non-EOS token; a session with none
      // starts over.
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < store.vocab_size; ++t) {
        if (Bit(want.data(), t) &&
            std::find(store.eos_ids.begin(), store.eos_ids.end(), t) == store.eos_ids.end()) {
          allowed.push_back(t);
        }
      }
      if (allowed.empty()) {
        sessions[b]->Reset();
        ++resets;
        tokens[b] = -1;
      } else {
        tokens[b] = allowed[rng() % allowed.size()];
      }
    }
    // Sessions that started over sit this step out.
    std::vector<Session*> moving;
    std::vector<int32_t> moving_tokens;
    for (int32_t b = 0; b < batch; ++b) {
      if (tokens[b] >= 0) {
        moving.push_back(sessions[b]);
        moving_tokens.push_back(tokens[b]);
      }
    }
    st = matcher.AdvanceBatch(moving, moving_tokens);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  ::testing::Test::RecordProperty("resets", static_cast<int>(resets));
  ::testing::Test::RecordProperty("list_rows", static_cast<int>(kinds[0]));
  ::testing::Test::RecordProperty("complement_rows", static_cast<int>(kinds[1]));
  ::testing::Test::RecordProperty("bitset_rows", static_cast<int>(kinds[2]));
  // Most steps must advance, or the comparison above saw only start states.
  EXPECT_LT(resets * 4, static_cast<int64_t>(batch) * steps);
}

TEST(BatchTest, OneSession) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  TeacherForce(1, 60, 1);
}

TEST(BatchTest, SevenSessions) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  TeacherForce(7, 40, 2);
}

TEST(BatchTest, SixtyFourSessions) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  TeacherForce(64, 25, 3);
}

// Teacher forcing of real texts through the batch API.  Slot b of the batch
// holds a session on the next text of a rotation that alternates the
// languages given (so one slot, too, sees both stores); when its text is
// done, EOS must be allowed and the slot takes the next text.  The first
// text of each slot starts at a random token offset, so that the slots are
// spread over the texts rather than all at their first lines, and near
// enough to its end that the slot reaches the other language.
struct CorpusLanguage {
  const CompiledStore* store;
  std::vector<ForcedText> texts;
};

// How the sessions' filters rode with the rows (BatchRows): rows filled whole
// by the CPU, and rows with tokens to clear.
struct FilterCounts {
  int64_t whole = 0, cleared = 0;
};

void TeacherForceCorpus(const std::vector<const CorpusLanguage*>& languages, int32_t batch,
                        int32_t steps, uint32_t seed, FilterCounts* filters = nullptr) {
  std::mt19937 rng(seed);
  int32_t words_per_row = 0;
  std::vector<std::vector<uint32_t>> text_masks;
  for (const CorpusLanguage* l : languages) {
    ASSERT_FALSE(l->texts.empty());
    words_per_row = std::max(words_per_row, l->store->mask_words());
    text_masks.push_back(TextTokenMask(*l->store));
  }
  ++words_per_row;  // one padding word: it must come back zero
  struct Slot {
    int32_t language;
    const ForcedText* text;
    size_t pos;
    std::unique_ptr<Session> session;
  };
  int64_t next_text = 0;
  auto load = [&](Slot* slot) {
    slot->language = static_cast<int32_t>(next_text % static_cast<int64_t>(languages.size()));
    const CorpusLanguage& l = *languages[slot->language];
    slot->text = &l.texts[(next_text / languages.size()) % l.texts.size()];
    ++next_text;
    slot->pos = 0;
    slot->session = std::make_unique<Session>(l.store);
  };
  std::vector<Slot> slots(batch);
  for (Slot& slot : slots) {
    load(&slot);
    // At most steps / 2 tokens left, so that every slot moves on to the
    // other language within the run.
    const size_t n = slot.text->tokens.size();
    const size_t start = n - std::min(n, 1 + rng() % (steps / 2 + 1));
    for (; slot.pos < start; ++slot.pos) {
      ASSERT_TRUE(slot.session->Advance(slot.text->tokens[slot.pos]).ok());
    }
  }
  std::vector<int32_t> bitmask(static_cast<size_t>(batch) * words_per_row);
  std::vector<uint32_t> twin(words_per_row);
  BatchMatcher matcher;
  BatchRows rows;
  int64_t compared = 0, completed = 0, rows_seen = 0;
  std::vector<int64_t> per_language(languages.size(), 0);
  for (int32_t step = 0; step < steps; ++step) {
    std::vector<Session*> sessions;
    std::vector<const CompiledStore*> stores;
    for (Slot& slot : slots) {
      sessions.push_back(slot.session.get());
      stores.push_back(languages[slot.language]->store);
    }
    std::fill(bitmask.begin(), bitmask.end(), -1);
    Status st = matcher.FillNextTokenBitmask(sessions, stores, bitmask.data(), words_per_row);
    ASSERT_TRUE(st.ok()) << st.message();
    CollectAcceptedRows(sessions, &rows);
    rows_seen += static_cast<int64_t>(rows.rows.size());
    std::vector<Session*> moving;
    std::vector<int32_t> tokens;
    for (int32_t b = 0; b < batch; ++b) {
      Slot& slot = slots[b];
      const CompiledStore& store = *stores[b];
      std::vector<uint32_t> want = slot.session->Mask();
      want.resize(words_per_row, 0);
      const uint32_t* got = reinterpret_cast<const uint32_t*>(bitmask.data()) +
                            static_cast<size_t>(b) * words_per_row;
      ASSERT_EQ(std::vector<uint32_t>(got, got + words_per_row), want)
          << "session " << b << " step " << step << " at byte " << slot.session->text().size();
      const kernels::StoreView view = HostStoreView(store, text_masks[slot.language].data());
      OrSessionRowsTwin(view, rows.rows.data() + rows.row_begin[b],
                        rows.row_begin[b + 1] - rows.row_begin[b], rows.eos[b] != 0, twin.data(),
                        words_per_row);
      FinishBatchRow(rows, b, store.mask_words(), twin.data(), words_per_row);
      ASSERT_EQ(twin, want) << "twin, session " << b << " step " << step << " at byte "
                            << slot.session->text().size();
      if (filters != nullptr) {
        filters->whole += rows.whole[b] >= 0;
        filters->cleared += rows.clear_begin[b + 1] > rows.clear_begin[b];
      }
      ++compared;
      ++per_language[slot.language];
      if (slot.pos == slot.text->tokens.size()) {
        // The text is complete: EOS is allowed; the slot starts the next one.
        ASSERT_FALSE(store.eos_ids.empty());
        EXPECT_TRUE(Bit(want.data(), store.eos_ids[0])) << "session " << b << " step " << step;
        ++completed;
        load(&slot);
        continue;
      }
      const int32_t token = slot.text->tokens[slot.pos++];
      ASSERT_TRUE(Bit(want.data(), token)) << "session " << b << " step " << step;
      moving.push_back(slot.session.get());
      tokens.push_back(token);
    }
    st = matcher.AdvanceBatch(moving, tokens);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  ::testing::Test::RecordProperty("compared", static_cast<int>(compared));
  ::testing::Test::RecordProperty("completed_texts", static_cast<int>(completed));
  EXPECT_EQ(compared, static_cast<int64_t>(batch) * steps);
  EXPECT_GT(rows_seen, compared);  // most steps accept some rows
  for (size_t l = 0; l < languages.size(); ++l) {
    EXPECT_GT(per_language[l], 0) << "language " << l << " never compared";
  }
}

// The Python and SQL languages on the LLaMA SentencePiece stores.
const std::vector<const CorpusLanguage*>& SpmLanguages() {
  static CorpusLanguage python, sql;
  static std::vector<const CorpusLanguage*> both;
  if (both.empty()) {
    Status st;
    python.store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
    EXPECT_TRUE(python.store != nullptr) << st.message();
    sql.store = SqlStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
    EXPECT_TRUE(sql.store != nullptr) << st.message();
    if (!python.store || !sql.store) return both;
    python.texts = ForceTexts(python.store, StdlibTexts(TestQuick() ? 12 : 60, 1500, 12000));
    sql.texts = ForceTexts(sql.store, SqlTexts(TestQuick() ? 60 : 600));
    both = {&python, &sql};
  }
  return both;
}

#define REQUIRE_CORPUS_ENV()                      \
  do {                                            \
    REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");         \
    REQUIRE_ENV("CFGMASK_PYTHON");                \
    REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");         \
  } while (0)

TEST(BatchTest, CorpusOneSession) {
  REQUIRE_CORPUS_ENV();
  const auto& languages = SpmLanguages();
  ASSERT_EQ(languages.size(), 2u);
  TeacherForceCorpus(languages, 1, TestQuick() ? 300 : 3000, 11);
}

TEST(BatchTest, CorpusSevenSessions) {
  REQUIRE_CORPUS_ENV();
  const auto& languages = SpmLanguages();
  ASSERT_EQ(languages.size(), 2u);
  TeacherForceCorpus(languages, 7, TestQuick() ? 120 : 1200, 12);
}

TEST(BatchTest, CorpusSixtyFourSessions) {
  REQUIRE_CORPUS_ENV();
  const auto& languages = SpmLanguages();
  ASSERT_EQ(languages.size(), 2u);
  TeacherForceCorpus(languages, 64, TestQuick() ? 30 : 300, 13);
}

// A 151,936-token byte-level BPE vocabulary (4,748 mask words, bitset and
// complement rows of real width) beside the SQL store of another tokenizer.
TEST(BatchTest, CorpusQwen2PythonWithSpmSql) {
  REQUIRE_CORPUS_ENV();
  REQUIRE_ENV("CFGMASK_TOK_QWEN2");
  const auto& spm = SpmLanguages();
  ASSERT_EQ(spm.size(), 2u);
  Status st;
  CorpusLanguage qwen;
  qwen.store = PythonStore(TestEnv("CFGMASK_TOK_QWEN2"), &st);
  ASSERT_TRUE(qwen.store != nullptr) << st.message();
  qwen.texts = ForceTexts(qwen.store, StdlibTexts(TestQuick() ? 6 : 30, 1500, 12000));
  TeacherForceCorpus({&qwen, spm[1]}, 9, TestQuick() ? 40 : 400, 14);
}

// The strict Python grammar's scope layer filters the OR of a session's
// rows (Session::FilterMask); the batch's rows carry that filter (tokens to
// clear, or the row filled whole by the CPU where the filter needs the
// mask), so the CUDA path's twin gives every session's mask too.  Texts that
// arm the layer's checks (parameter and keyword lists, global, nonlocal,
// walrus, async, annotations) beside standard-library modules.
TEST(BatchTest, CorpusStrictPythonScopeFilter) {
  REQUIRE_CORPUS_ENV();
  static CorpusLanguage strict;
  Status st;
  strict.store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_TRUE(strict.store != nullptr) << st.message();
  std::vector<std::string> texts = {
      "def f(a, b=1, *args, c, **kw):\n    global g\n    g = a + b\n"
      "    return f(a=1, b=2, c=3, d=4)\n",
      "def outer():\n    x = 1\n    def inner(y):\n        nonlocal x\n        x += y\n"
      "        return [v for v in range(y) if (w := v)]\n    return inner\n",
      "async def h(q, *, k: int = 2) -> None:\n    async for i in q:\n"
      "        print(await i, sep='', end=k)\n",
      "class C(object, metaclass=type):\n    z: int = 1\n\n"
      "    def m(self, /, p, *, k=2):\n        return lambda u, v=3: u + v + p\n",
      "import os\nglobal_name = 1\n\ndef g():\n    global global_name, other\n"
      "    other = global_name\n    return os.path.join(a='x', b='y')\n",
  };
  const std::vector<std::string> stdlib = StdlibTexts(TestQuick() ? 4 : 24, 1500, 8000);
  texts.insert(texts.end(), stdlib.begin(), stdlib.end());
  strict.texts = ForceTexts(strict.store, texts);
  ASSERT_GE(strict.texts.size(), 5u);
  FilterCounts filters;
  TeacherForceCorpus({&strict}, 5, TestQuick() ? 160 : 1600, 15, &filters);
  ::testing::Test::RecordProperty("whole_rows", static_cast<int>(filters.whole));
  ::testing::Test::RecordProperty("rows_with_clears", static_cast<int>(filters.cleared));
  EXPECT_GT(filters.whole, 0);    // a check armed: the CPU filled the row
  EXPECT_GT(filters.cleared, 0);  // listed tokens cleared after the OR
}

// With an exact suffix (runtime/suffix_quotient.h) the filter needs the
// mask: the batch's rows hold the session's whole row, equal to its mask.
TEST(BatchTest, ExactSuffixRowsComeWhole) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = Store("json.lark");
  ASSERT_TRUE(store != nullptr);
  const std::string prefix = "{\"a\": [1, 2", suffix = "], \"b\": null}";
  Session plain(store), fim(store);
  fim.SetSuffix(suffix);
  ASSERT_TRUE(fim.suffix_exact());
  const Segmenter segmenter(*store);
  for (const Segment& seg : segmenter.Cut(prefix, SegmentMode::kGreedy, nullptr)) {
    ASSERT_GE(seg.token, 0);
    ASSERT_TRUE(plain.Advance(seg.token).ok());
    ASSERT_TRUE(fim.Advance(seg.token).ok());
  }
  std::vector<Session*> sessions = {&plain, &fim};
  BatchRows rows;
  CollectAcceptedRows(sessions, &rows);
  EXPECT_EQ(rows.whole[0], -1);
  ASSERT_GE(rows.whole[1], 0);
  const std::vector<uint32_t> text = TextTokenMask(*store);
  const kernels::StoreView view = HostStoreView(*store, text.data());
  const int32_t words = store->mask_words();
  for (int32_t b = 0; b < 2; ++b) {
    std::vector<uint32_t> twin(words);
    OrSessionRowsTwin(view, rows.rows.data() + rows.row_begin[b],
                      rows.row_begin[b + 1] - rows.row_begin[b], rows.eos[b] != 0, twin.data(),
                      words);
    FinishBatchRow(rows, b, words, twin.data(), words);
    EXPECT_EQ(twin, sessions[b]->Mask()) << "session " << b;
  }
  // The suffix's mask differs from the prefix mask here (`]` then `}` would
  // leave the suffix unmet); otherwise the case shows nothing.
  EXPECT_NE(plain.Mask(), fim.Mask());
}

TEST(BatchTest, ArgumentErrors) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = Store("json.lark");
  ASSERT_TRUE(store);
  Session a(store), b(store);
  std::vector<Session*> sessions = {&a, &b};
  std::vector<const CompiledStore*> stores = {store, store};
  BatchMatcher matcher;
  std::vector<int32_t> bitmask(2 * store->mask_words());
  EXPECT_EQ(matcher.FillNextTokenBitmask(sessions, stores, bitmask.data(), store->mask_words() - 1)
                .code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(matcher.FillNextTokenBitmask(sessions, std::span<const CompiledStore* const>(stores).first(1),
                                         bitmask.data(), store->mask_words())
                .code(),
            ErrorCode::kInvalidArgument);

  // A bad token in one session: the batch is all or nothing, so neither
  // session moves (AdvanceBatchAllOrNothing).
  std::vector<uint32_t> mask = a.Mask();
  int32_t good = -1;
  for (int32_t t = 0; t < store->vocab_size && good < 0; ++t) {
    if (Bit(mask.data(), t)) good = t;
  }
  ASSERT_GE(good, 0);
  const std::vector<int32_t> tokens = {good, store->vocab_size};
  Status st = matcher.AdvanceBatch(sessions, tokens);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidToken);
  EXPECT_EQ(st.message().rfind("session 1: ", 0), 0u) << st.message();
  EXPECT_TRUE(a.text().empty());
  EXPECT_EQ(a.HistoryLength(), 0);
  EXPECT_TRUE(b.text().empty());
  EXPECT_EQ(a.Mask(), mask);  // a is where it was: the same mask
  // The good token alone still moves it.
  ASSERT_TRUE(matcher.AdvanceBatch(std::span<Session* const>(sessions).first(1),
                                   std::span<const int32_t>(tokens).first(1))
                  .ok());
  EXPECT_FALSE(a.text().empty());
}

// Logits masking on the CPU: -inf exactly where the bit is 0 (and past the
// bitmask), every other logit unchanged, for each dtype.
template <typename Bits>
void CheckApply(LogitsDType dtype, Bits neg_inf) {
  std::mt19937 rng(static_cast<uint32_t>(dtype) + 11);
  std::vector<int32_t> sizes;
  for (int32_t v = 1; v <= 300; ++v) sizes.push_back(v);
  for (int32_t v : {1000, 32000, 32003, 151936, 152064}) sizes.push_back(v);
  for (int32_t vocab : sizes) {
    const int32_t batch = vocab % 2 ? 1 : 3;  // one row runs without the thread pool
    // Rows one word short of the logits for the odd sizes: padding logits.
    const int32_t words = (vocab + 31) / 32 - (vocab > 64 && vocab % 2 ? 1 : 0);
    std::vector<int32_t> bitmask(static_cast<size_t>(batch) * words);
    // Words that allow nothing and words that allow everything take their
    // own paths in the kernel; mix them with random ones.
    for (int32_t& w : bitmask) {
      const uint32_t kind = rng() % 4;
      w = kind == 0 ? 0 : kind == 1 ? -1 : static_cast<int32_t>(rng());
    }
    std::vector<Bits> logits(static_cast<size_t>(batch) * vocab);
    for (Bits& x : logits) x = static_cast<Bits>(rng());
    const std::vector<Bits> before = logits;
    Status st = ApplyTokenBitmaskInplaceCpu(logits.data(), dtype, batch, vocab, bitmask.data(), words);
    ASSERT_TRUE(st.ok()) << st.message();
    for (int32_t b = 0; b < batch; ++b) {
      for (int32_t t = 0; t < vocab; ++t) {
        const size_t i = static_cast<size_t>(b) * vocab + t;
        const bool allowed =
            t < 32 * words &&
            ((static_cast<uint32_t>(bitmask[static_cast<size_t>(b) * words + (t >> 5)]) >> (t & 31)) & 1);
        ASSERT_EQ(logits[i], allowed ? before[i] : neg_inf)
            << "dtype " << static_cast<int>(dtype) << " vocab " << vocab << " b " << b << " t " << t;
      }
    }
  }
}

TEST(BatchTest, ApplyTokenBitmaskFloat32) {
  CheckApply<uint32_t>(LogitsDType::kFloat32, kernels::kNegInfFloat32Bits);
  // And as floats: the masked value is -inf, the kept one exact.
  float logits[2] = {1.5f, -2.25f};
  int32_t mask = 0b10;
  ASSERT_TRUE(ApplyTokenBitmaskInplaceCpu(logits, LogitsDType::kFloat32, 1, 2, &mask, 1).ok());
  EXPECT_EQ(logits[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(logits[1], -2.25f);
}

TEST(BatchTest, ApplyTokenBitmaskFloat16) {
  CheckApply<uint16_t>(LogitsDType::kFloat16, kernels::kNegInfFloat16Bits);
}

TEST(BatchTest, ApplyTokenBitmaskBFloat16) {
  CheckApply<uint16_t>(LogitsDType::kBFloat16, kernels::kNegInfBFloat16Bits);
  // bf16 -inf is the top half of fp32 -inf.
  EXPECT_EQ(static_cast<uint32_t>(kernels::kNegInfBFloat16Bits) << 16, kernels::kNegInfFloat32Bits);
}

// The strided row (llama-cpp-python's logits field of a record array)
// against the contiguous kernel: the same logits end up -inf, the elements
// between the strided ones are never written, and nothing past the last
// logit is touched (the buffer ends there, so the sanitizers see any access
// past it).
template <typename Bits>
void CheckApplyStrided(LogitsDType dtype) {
  std::mt19937 rng(static_cast<uint32_t>(dtype) + 29);
  for (int32_t vocab : {1, 31, 32, 33, 64, 65, 95, 97, 300, 32003, 49152, 151936, 262144}) {
    for (int64_t stride : {1, 2, 3, 4, 6}) {
      const int32_t words = (vocab + 31) / 32 - (vocab > 64 && vocab % 2 ? 1 : 0);
      std::vector<int32_t> bitmask(static_cast<size_t>(words));
      for (int32_t& w : bitmask) {
        const uint32_t kind = rng() % 4;
        w = kind == 0 ? 0 : kind == 1 ? -1 : static_cast<int32_t>(rng());
      }
      std::vector<Bits> flat(static_cast<size_t>(vocab));
      for (Bits& x : flat) x = static_cast<Bits>(rng());
      std::vector<Bits> strided(static_cast<size_t>(vocab - 1) * stride + 1);
      for (Bits& x : strided) x = static_cast<Bits>(rng());
      const std::vector<Bits> before = strided;
      for (int32_t t = 0; t < vocab; ++t) strided[t * stride] = flat[t];
      ASSERT_TRUE(ApplyTokenBitmaskInplaceCpu(flat.data(), dtype, 1, vocab, bitmask.data(), words).ok());
      ASSERT_TRUE(
          ApplyTokenBitmaskStridedCpu(strided.data(), dtype, vocab, stride, bitmask.data(), words).ok());
      for (int64_t i = 0; i < static_cast<int64_t>(strided.size()); ++i) {
        const Bits want = i % stride == 0 ? flat[i / stride] : before[i];
        ASSERT_EQ(strided[i], want) << "dtype " << static_cast<int>(dtype) << " vocab " << vocab
                                    << " stride " << stride << " element " << i;
      }
    }
  }
}

TEST(BatchTest, ApplyTokenBitmaskStrided) {
  CheckApplyStrided<uint32_t>(LogitsDType::kFloat32);
  CheckApplyStrided<uint16_t>(LogitsDType::kFloat16);
  CheckApplyStrided<uint16_t>(LogitsDType::kBFloat16);
  int32_t mask = 1;
  EXPECT_FALSE(ApplyTokenBitmaskStridedCpu(&mask, LogitsDType::kFloat32, 1, 0, &mask, 1).ok());
}

}  // namespace
}  // namespace cfgmask
