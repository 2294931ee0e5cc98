// Exactness on grammar/lark/sql.lark (SQLite's dialect: case-insensitive
// keywords with look-aheads, reserved words kept out of identifiers) with a
// real byte-fallback tokenizer (LLaMA SentencePiece, 32,000 tokens):
//  - real SQLite statements (harvested by tests/corpus/harvest_sql.py from
//    CPython's test_sqlite3 and sqlite3-doc): cfgmask accepts a statement in
//    full exactly when Lark does, and then every token of a greedy
//    segmentation is in its step's mask and EOS is allowed at the end;
//  - random mutations (fixed seed): full-text acceptance equals Lark's;
//  - the store's mask equals the per-token slow reference at random steps.
// Quick sizes under CFGMASK_QUICK=1 (CI); full sizes otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <cstdlib>
#include <unordered_map>

#include "runtime/session.h"
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

std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

std::vector<int> LarkVerdicts(const std::vector<std::string>& texts) {
  char in_path[] = "/tmp/cfgmask_sql_in_XXXXXX";
  int fd = mkstemp(in_path);
  close(fd);
  {
    std::ofstream f(in_path);
    for (const auto& t : texts) f << Quote(t) << "\n";
  }
  std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                    "/tests/tools/lark_accepts.py " + CFGMASK_SOURCE_DIR +
                    "/grammar/lark/sql.lark start none < " + in_path;
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<int> out;
  char line[16];
  while (p && std::fgets(line, sizeof line, p)) out.push_back(line[0] == '1');
  if (p) pclose(p);
  std::remove(in_path);
  return out;
}

const CompiledStore* SqlStore() {
  Status st;
  const CompiledStore* s =
      CachedTestStore(std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/sql.lark",
                      TestEnv("CFGMASK_TOK_LLAMA_SPM"), "start", &st);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

// The harvested statements (valid for SQLite's parser), in a fixed order.
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

bool AcceptsText(const CompiledStore* store, const std::string& text) {
  Session s(store);
  return s.AdvanceBytes(text).ok() && s.CanEnd();
}

TEST(SqlExactness, CorpusTeacherForced) {
  REQUIRE_ENV("CFGMASK_PYTHON");
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = SqlStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> files = SqlCorpus(TestQuick() ? 150 : 1500);
  ASSERT_FALSE(files.empty());
  std::vector<int> lark = LarkVerdicts(files);
  ASSERT_EQ(lark.size(), files.size());
  std::unordered_map<std::string, int32_t> by_bytes;
  for (int32_t t = 0; t < store->vocab_size; ++t) {
    if (!store->token_special[t] && !store->TokenBytes(t).empty()) {
      by_bytes.emplace(std::string(store->TokenBytes(t)), t);
    }
  }
  int accepted = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& text = files[i];
    EXPECT_EQ(AcceptsText(store, text), static_cast<bool>(lark[i])) << "file " << i;
    if (!lark[i]) continue;
    ++accepted;
    Session s(store);
    size_t pos = 0;
    while (pos < text.size()) {
      int32_t tok = -1;
      size_t len = std::min<size_t>(24, text.size() - pos);
      for (; len > 0 && tok < 0; --len) {
        auto it = by_bytes.find(text.substr(pos, len));
        if (it != by_bytes.end()) tok = it->second;
      }
      ASSERT_GE(tok, 0);
      std::vector<uint32_t> mask = s.Mask();
      ASSERT_TRUE((mask[tok >> 5] >> (tok & 31)) & 1)
          << "file " << i << " offset " << pos << ": token " << Quote(std::string(store->TokenBytes(tok)))
          << " not in the mask";
      ASSERT_TRUE(s.Advance(tok).ok());
      pos += store->TokenBytes(tok).size();
    }
    EXPECT_TRUE(s.CanEnd()) << "file " << i;
  }
  EXPECT_GT(accepted, static_cast<int>(files.size()) * 9 / 10);
}

TEST(SqlExactness, MutationsAgreeWithLark) {
  REQUIRE_ENV("CFGMASK_PYTHON");
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = SqlStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> lines = SqlCorpus(300);
  ASSERT_FALSE(lines.empty());
  const std::vector<std::string> frags = {
      "select", "SELECT", "selectx", "from", "FROM t", "in", "insert", "IN", "x'", "X'00'",
      "'", "''", "\"", "`", "[", "]", "(", ")", ",", ";", " ", "\n", "--c\n", "/*c*/", "*",
      "1", "1.5e3", "0x1F", ".5", "?", "?1", ":a", "@a", "$a", "||", "->", "->>", "<>", "!=",
      "not", "null", "is", "between", "and", "or", "where", "order by", "limit", "\xc3\xa9", "_"};
  std::mt19937 rng(2024);
  std::vector<std::string> texts;
  const int n = TestQuick() ? 800 : 6000;
  for (int i = 0; i < n; ++i) {
    std::string t = lines[rng() % lines.size()];
    int muts = rng() % 3;
    for (int m = 0; m < muts && !t.empty(); ++m) {
      size_t pos = rng() % (t.size() + 1);
      switch (rng() % 3) {
        case 0: t.insert(pos, frags[rng() % frags.size()]); break;
        case 1: t.erase(std::min(pos, t.size() - 1), 1 + rng() % 3); break;
        default: t.insert(pos, std::string(1, " ;(),'\"*"[rng() % 8])); break;
      }
    }
    texts.push_back(t);
  }
  std::vector<int> lark = LarkVerdicts(texts);
  ASSERT_EQ(lark.size(), texts.size());
  int mismatches = 0, accepted = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    bool ours = AcceptsText(store, texts[i]);
    accepted += lark[i];
    if (ours != static_cast<bool>(lark[i]) && ++mismatches <= 10) {
      ADD_FAILURE() << Quote(texts[i]) << ": Lark " << lark[i] << ", cfgmask " << ours;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts, " << accepted
                           << " accepted by Lark";
  EXPECT_GT(accepted, n / 20);
}

TEST(SqlExactness, StoreMaskEqualsSlowReference) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = SqlStore();
  ASSERT_NE(store, nullptr);
  std::mt19937 rng(99);
  const std::vector<std::string> prefixes = {"", "SELECT a, b FRO", "select * from t where x in (1,",
                                             "INSERT INTO t VALUES ('a''", "create table t(x int"};
  for (const std::string& prefix : prefixes) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes(prefix).ok()) << prefix;
    for (int step = 0; step < (TestQuick() ? 3 : 10); ++step) {
      std::vector<uint32_t> mask = s.Mask();
      std::vector<int32_t> allowed;
      int mismatches = 0;
      for (int32_t t = 0; t < store->vocab_size; ++t) {
        bool fast = (mask[t >> 5] >> (t & 31)) & 1;
        if (!fast && TestQuick() && rng() % 8 != 0) continue;
        bool slow = s.AllowsSlow(t);
        if (fast != slow && ++mismatches <= 5) {
          ADD_FAILURE() << "after " << Quote(s.text()) << ": token " << t << " "
                        << Quote(std::string(store->TokenBytes(t))) << " fast " << fast
                        << " slow " << slow;
        }
        if (fast && !store->token_special[t]) allowed.push_back(t);
      }
      ASSERT_EQ(mismatches, 0);
      if (allowed.empty()) break;
      ASSERT_TRUE(s.Advance(allowed[rng() % allowed.size()]).ok());
    }
  }
}

}  // namespace
}  // namespace cfgmask
