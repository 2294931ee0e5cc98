// Exactness on the real python.lark (start file_input, PythonIndenter) with a
// real byte-fallback tokenizer (LLaMA SentencePiece, 32,000 tokens):
//  - CPython standard-library files: cfgmask accepts a file in full exactly
//    when Lark does, and when it does, every token of a greedy segmentation
//    is in the mask of its step and EOS is allowed at the end;
//  - random mutations (fixed seed) of standard-library snippets with Python
//    lexer and indentation traps: full-text acceptance equals Lark's;
//  - the store's mask equals the per-token slow reference at random steps.
// Quick sizes under CFGMASK_QUICK=1 (CI); full sizes otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
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
  char in_path[] = "/tmp/cfgmask_py_in_XXXXXX";
  int fd = mkstemp(in_path);
  close(fd);
  {
    std::ofstream f(in_path);
    for (const auto& t : texts) f << Quote(t) << "\n";
  }
  std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                    "/tests/tools/lark_accepts.py " + TestEnv("CFGMASK_LARK_GRAMMARS") +
                    "/python.lark file_input python < " + in_path;
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<int> out;
  char line[16];
  while (p && std::fgets(line, sizeof line, p)) out.push_back(line[0] == '1');
  if (p) pclose(p);
  std::remove(in_path);
  return out;
}

const CompiledStore* PythonStore() {
  Status st;
  const CompiledStore* s = CachedTestStore(TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark",
                                           TestEnv("CFGMASK_TOK_LLAMA_SPM"), "file_input", &st);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

std::vector<std::string> SmallStdlibFiles(size_t n) {
  std::string dir = TestEnv("CFGMASK_STDLIB");
  if (dir.empty()) dir = "/root/.pyenv/versions/3.11.7/lib/python3.11";
  std::vector<std::pair<uintmax_t, std::string>> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".py" && e.file_size() > 300) {
      files.emplace_back(e.file_size(), e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < files.size() && out.size() < n; ++i) {
    std::ifstream f(files[i].second, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

bool AcceptsText(const CompiledStore* store, const std::string& text) {
  Session s(store);
  return s.AdvanceBytes(text).ok() && s.CanEnd();
}

TEST(PythonExactness, StdlibFilesTeacherForced) {
  REQUIRE_ENV("CFGMASK_PYTHON");
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = PythonStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> files = SmallStdlibFiles(TestQuick() ? 25 : 400);
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
  EXPECT_GT(accepted, static_cast<int>(files.size()) / 2);
}

TEST(PythonExactness, MutationsAgreeWithLark) {
  REQUIRE_ENV("CFGMASK_PYTHON");
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = PythonStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> lines;
  for (const std::string& f : SmallStdlibFiles(60)) {
    std::stringstream ss(f);
    std::string line;
    while (std::getline(ss, line)) lines.push_back(line + "\n");
  }
  const std::vector<std::string> frags = {
      "if", "ifx", "0", "01", "1.e5", "1j", "0x1f", "'", "\"", "\"\"\"", "'''", "\\\n", "(",
      ")", "[", "]", ":", "\n", "    ", "  ", "\t", "#c", "b'x'", "rb'", "f", "=", "==",
      "->", "**", "//=", "lambda", "not", "is", "in", " ", ",", ".", "...", "pass\n",
      "else:\n", "def f():\n", "    return 1\n", "@d\n", "async", "await", "_", "é"};
  std::mt19937 rng(2024);
  std::vector<std::string> texts;
  const int n = TestQuick() ? 800 : 6000;
  for (int i = 0; i < n; ++i) {
    size_t start = rng() % lines.size();
    size_t k = 1 + rng() % 6;
    std::string t;
    for (size_t j = start; j < std::min(lines.size(), start + k); ++j) t += lines[j];
    int muts = rng() % 3;
    for (int m = 0; m < muts && !t.empty(); ++m) {
      size_t pos = rng() % (t.size() + 1);
      switch (rng() % 3) {
        case 0: t.insert(pos, frags[rng() % frags.size()]); break;
        case 1: t.erase(std::min(pos, t.size() - 1), 1 + rng() % 3); break;
        default: t.insert(pos, std::string(1, " \n:()'\"#\\"[rng() % 9])); break;
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

TEST(PythonExactness, StoreMaskEqualsSlowReference) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = PythonStore();
  ASSERT_NE(store, nullptr);
  std::mt19937 rng(99);
  const std::vector<std::string> prefixes = {"", "def f(x", "class A:\n    x = [1,", "if a:\n  b = 'x",
                                             "x = 1\n", "import os\nfor i in range(3):\n    pri"};
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
