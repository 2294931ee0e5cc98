// Exactness on grammar/lark/sql.lark (SQLite's dialect: case-insensitive
// keywords with look-aheads, reserved words kept out of identifiers) with a
// real byte-fallback tokenizer (LLaMA SentencePiece, 32,000 tokens):
//  - real SQLite statements (harvested by tests/corpus/harvest_sql.py from
//    CPython's test_sqlite3 and sqlite3-doc): cfgmask accepts a statement in
//    full exactly when Lark does, and then every token of a greedy
//    segmentation is in its step's mask and EOS is allowed at the end;
//  - random mutations (fixed seed): full-text acceptance equals Lark's;
//  - the store's mask equals the per-token slow reference at random steps.
// The corpus and the slow reference run again with a byte-level BPE
// tokenizer (SmolLM2, 49,152 tokens), whose runs like "========" are checked
// by simulation (CompiledStore::sim_token).
// Quick sizes under CFGMASK_QUICK=1 (CI); full sizes otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/exactness_harness.h"

namespace cfgmask {
namespace {

std::string SqlGrammar() { return std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/sql.lark"; }

const CompiledStore* SqlStore(const char* tokenizer_env = "CFGMASK_TOK_LLAMA_SPM") {
  Status st;
  const CompiledStore* s = CachedTestStore(SqlGrammar(), TestEnv(tokenizer_env), "start", &st);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

// n of the harvested statements (valid for SQLite's parser), evenly spaced.
std::vector<std::string> SqlCorpus(size_t n) {
  static std::vector<std::string> all;
  if (all.empty()) {
    char dir[] = "/tmp/cfgmask_sqlcorpus_XXXXXX";
    if (!mkdtemp(dir)) return {};
    std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                      "/tests/corpus/harvest_sql.py --quiet " + dir + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) return {};
    std::vector<std::string> paths;
    for (const auto& e : std::filesystem::directory_iterator(std::string(dir) + "/sql/valid")) {
      paths.push_back(e.path().string());
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      std::ifstream f(p, std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      all.push_back(ss.str());
    }
    std::filesystem::remove_all(dir);
  }
  std::vector<std::string> out;
  const size_t stride = std::max<size_t>(1, all.size() / std::max<size_t>(1, n));
  for (size_t i = 0; i < all.size() && out.size() < n; i += stride) out.push_back(all[i]);
  return out;
}

TEST(SqlExactness, CorpusTeacherForced) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = SqlStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> texts = SqlCorpus(TestQuick() ? 150 : 1500);
  ASSERT_FALSE(texts.empty());
  int accepted = ExpectTextsExact(store, texts, LarkVerdicts(SqlGrammar(), "start", "none", texts));
  EXPECT_GT(accepted, static_cast<int>(texts.size()) * 9 / 10);
}

TEST(SqlExactness, MutationsAgreeWithLark) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = SqlStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> bases = SqlCorpus(300);
  ASSERT_FALSE(bases.empty());
  const std::vector<std::string> frags = {
      "select", "SELECT", "selectx", "from", "FROM t", "in", "insert", "IN", "x'", "X'00'",
      "'", "''", "\"", "`", "[", "]", "(", ")", ",", ";", " ", "\n", "--c\n", "/*c*/", "*",
      "1", "1.5e3", "0x1F", ".5", "?", "?1", ":a", "@a", "$a", "||", "->", "->>", "<>", "!=",
      "not", "null", "is", "between", "and", "or", "where", "order by", "limit", "\xc3\xa9", "_"};
  const int n = TestQuick() ? 800 : 6000;
  int accepted = ExpectMutationsAgree(store, bases, frags, " ;(),'\"*", n, 2024, SqlGrammar(),
                                      "start", "none");
  EXPECT_GT(accepted, n / 20);
}

TEST(SqlExactness, StoreMaskEqualsSlowReference) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = SqlStore();
  ASSERT_NE(store, nullptr);
  ExpectMaskEqualsSlow(store,
                       {"", "SELECT a, b FRO", "select * from t where x in (1,",
                        "INSERT INTO t VALUES ('a''", "create table t(x int"},
                       TestQuick() ? 3 : 10, 99);
}

TEST(SqlExactness, ByteLevelBpeCorpusAndSlowReference) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_SMOLLM2");
  const CompiledStore* store = SqlStore("CFGMASK_TOK_SMOLLM2");
  ASSERT_NE(store, nullptr);
  EXPECT_GT(store->sim_token.size(), 0u);
  std::vector<std::string> texts = SqlCorpus(TestQuick() ? 60 : 1500);
  ASSERT_FALSE(texts.empty());
  int accepted = ExpectTextsExact(store, texts, LarkVerdicts(SqlGrammar(), "start", "none", texts));
  EXPECT_GT(accepted, static_cast<int>(texts.size()) * 9 / 10);
  ExpectMaskEqualsSlow(store,
                       {"", "SELECT a, b FRO", "select * from t where x ==", "SELECT 1 <<", "SELECT 1;\n\nInsert",
                        "INSERT INTO t VALUES ('a''", "create virtual table v using m(a ="},
                       TestQuick() ? 3 : 10, 17);
}

// Random walks over everything the mask allows, bytes that begin UTF-8
// characters included: the mask never leads to a step with nothing allowed
// (a token must not end where no text can go on, e.g. "Insert" + 0xC4 at a
// statement start: 0xC4 begins only "İ"/"ı", whose completion vetoes
// INSERT's look-ahead).
TEST(SqlExactness, ByteLevelBpeNoDeadEnds) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_SMOLLM2");
  const CompiledStore* store = SqlStore("CFGMASK_TOK_SMOLLM2");
  ASSERT_NE(store, nullptr);
  {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes("SELECT 1;\n\nInsert").ok());
    EXPECT_FALSE(s.AdvanceBytes("\xc4").ok());
    EXPECT_TRUE(s.AdvanceBytes(" INTO t VALUES(1)").ok());
  }
  std::mt19937 rng(5);
  const int walks = TestQuick() ? 40 : 400;
  int steps = 0;
  for (int w = 0; w < walks; ++w) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes(w % 2 ? "SELECT a FROM t;\n" : "").ok());
    for (int i = 0; i < 40; ++i) {
      const std::vector<uint32_t> mask = s.Mask();
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < store->vocab_size; ++t) {
        if (((mask[t >> 5] >> (t & 31)) & 1) && !store->token_special[t]) allowed.push_back(t);
      }
      ASSERT_TRUE(!allowed.empty() || s.CanEnd()) << "dead end after " << JsonQuote(s.text());
      if (allowed.empty()) break;
      // Every other step a token with a byte >= 0x80 when one is allowed.
      std::vector<int32_t> high;
      if (i % 2) {
        for (int32_t t : allowed) {
          for (unsigned char c : store->TokenBytes(t)) {
            if (c >= 0x80) {
              high.push_back(t);
              break;
            }
          }
        }
      }
      const std::vector<int32_t>& pool = high.empty() ? allowed : high;
      ASSERT_TRUE(s.Advance(pool[rng() % pool.size()]).ok());
      ++steps;
    }
  }
  EXPECT_GT(steps, walks * 10);
}

}  // namespace
}  // namespace cfgmask
