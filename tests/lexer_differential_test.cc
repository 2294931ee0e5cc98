// The lexer against Lark's: on CPython standard-library files that Lark
// parses (python.lark, contextual lexer, PythonIndenter, start file_input),
// the terminals cfgmask's session feeds to its parser while reading the file
// byte by byte (after its indenter: _NEWLINE, _INDENT, _DEDENT included,
// %ignore'd ones left out, the end-of-input _DEDENTs included) are exactly
// Lark's terminal stream, as tests/tools/lark_terminal_streams.py dumps it.
// Files Lark rejects must be rejected too.  Quick size (CFGMASK_QUICK=1):
// 120 files evenly spaced over the standard library; full size: all of them.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "tests/exactness_harness.h"

namespace cfgmask {
namespace {

TEST(LexerDifferential, StdlibTerminalStreamsEqualLarks) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store =
      CachedTestStore(TestEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark",
                      TestEnv("CFGMASK_TOK_LLAMA_SPM"), "file_input", &st);
  ASSERT_NE(store, nullptr) << st.message();
  std::unordered_map<std::string, int32_t> id_of;
  for (int32_t t = 0; t < store->num_terminals; ++t) id_of[store->terminal_names[t]] = t;

  std::string stdlib = TestEnv("CFGMASK_STDLIB");
  if (stdlib.empty()) stdlib = "/root/.pyenv/versions/3.11.7/lib/python3.11";
  const int files = TestQuick() ? 120 : 0;  // 0: every file
  const std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                          "/tests/tools/lark_terminal_streams.py " +
                          TestEnv("CFGMASK_LARK_GRAMMARS") + " " + std::to_string(files) + " 0";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string line;
  int checked = 0, accepted = 0, failures = 0;
  char buf[1 << 16];
  while (std::fgets(buf, sizeof buf, p)) {
    line += buf;
    if (line.empty() || line.back() != '\n') continue;
    std::istringstream in(line);
    line.clear();
    std::string kind, path;
    int index = 0, ok = 0;
    size_t count = 0;
    in >> kind >> index >> ok >> path >> count;
    if (kind != "F") continue;
    std::vector<int32_t> lark;
    for (std::string name; in >> name;) {
      auto it = id_of.find(name);
      ASSERT_NE(it, id_of.end()) << "unknown terminal " << name;
      lark.push_back(it->second);
    }
    std::ifstream f(stdlib + "/" + path, std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    ++checked;
    Session s(store);
    s.EnableTrace();
    const bool ours = s.AdvanceBytes(text.str()).ok() && s.CanEnd();
    if (ours != static_cast<bool>(ok)) {
      if (++failures <= 10) ADD_FAILURE() << path << ": Lark " << ok << ", cfgmask " << ours;
      continue;
    }
    if (!ok) continue;
    ++accepted;
    ASSERT_EQ(lark.size(), count) << path;
    const std::vector<int32_t> mine = s.TerminalTrace();
    if (mine != lark) {
      size_t i = 0;
      while (i < mine.size() && i < lark.size() && mine[i] == lark[i]) ++i;
      if (++failures <= 10) {
        ADD_FAILURE() << path << ": streams differ at terminal " << i << " of " << lark.size()
                      << ": Lark "
                      << (i < lark.size() ? store->terminal_names[lark[i]] : "<end>")
                      << ", cfgmask "
                      << (i < mine.size() ? store->terminal_names[mine[i]] : "<end>");
      }
    }
  }
  pclose(p);
  std::printf("lexer differential: %d files, %d accepted by Lark, %d differences\n", checked,
              accepted, failures);
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, TestQuick() ? 100 : 1000);
}

}  // namespace
}  // namespace cfgmask
