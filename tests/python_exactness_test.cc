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
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/exactness_harness.h"

namespace cfgmask {
namespace {

std::string PythonGrammar() { return TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark"; }

const CompiledStore* PythonStore() {
  Status st;
  const CompiledStore* s =
      CachedTestStore(PythonGrammar(), TestEnv("CFGMASK_TOK_LLAMA_SPM"), "file_input", &st);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

// The n smallest standard-library modules over 300 bytes.
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

TEST(PythonExactness, StdlibFilesTeacherForced) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = PythonStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> files = SmallStdlibFiles(TestQuick() ? 25 : 400);
  int accepted =
      ExpectTextsExact(store, files, LarkVerdicts(PythonGrammar(), "file_input", "python", files));
  EXPECT_GT(accepted, static_cast<int>(files.size()) / 2);
}

TEST(PythonExactness, MutationsAgreeWithLark) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = PythonStore();
  ASSERT_NE(store, nullptr);
  // Windows of 1-6 consecutive lines of real modules.
  std::vector<std::string> lines;
  for (const std::string& f : SmallStdlibFiles(60)) {
    std::stringstream ss(f);
    std::string line;
    while (std::getline(ss, line)) lines.push_back(line + "\n");
  }
  std::mt19937 rng(2024);
  std::vector<std::string> bases;
  for (int i = 0; i < 2000; ++i) {
    size_t start = rng() % lines.size();
    std::string t;
    for (size_t j = start; j < std::min(lines.size(), start + 1 + rng() % 6); ++j) t += lines[j];
    bases.push_back(t);
  }
  const std::vector<std::string> frags = {
      "if", "ifx", "0", "01", "1.e5", "1j", "0x1f", "'", "\"", "\"\"\"", "'''", "\\\n", "(",
      ")", "[", "]", ":", "\n", "    ", "  ", "\t", "#c", "b'x'", "rb'", "f", "=", "==",
      "->", "**", "//=", "lambda", "not", "is", "in", " ", ",", ".", "...", "pass\n",
      "else:\n", "def f():\n", "    return 1\n", "@d\n", "async", "await", "_", "\xc3\xa9"};
  const int n = TestQuick() ? 800 : 6000;
  int accepted = ExpectMutationsAgree(store, bases, frags, " \n:()'\"#\\", n, 2024,
                                      PythonGrammar(), "file_input", "python");
  EXPECT_GT(accepted, n / 20);
}

TEST(PythonExactness, StoreMaskEqualsSlowReference) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = PythonStore();
  ASSERT_NE(store, nullptr);
  ExpectMaskEqualsSlow(store,
                       {"", "def f(x", "class A:\n    x = [1,", "if a:\n  b = 'x", "x = 1\n",
                        "import os\nfor i in range(3):\n    pri"},
                       TestQuick() ? 3 : 10, 99);
}

}  // namespace
}  // namespace cfgmask
