// Test helper: a small byte-level BPE tokenizer.json (printable ASCII, space,
// newline and a few multi-byte pieces, then <|endoftext|> as EOS), enough to
// compile small grammars in a fraction of a second.
#ifndef CFGMASK_TESTS_SMALL_TOKENIZER_H_
#define CFGMASK_TESTS_SMALL_TOKENIZER_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace cfgmask {

// A byte-level BPE tokenizer.json over `tokens` (GPT-2 byte map: space is
// U+0120, newline U+010A), ids in order, then <|endoftext|> as EOS.
inline std::string ByteLevelTokenizerJson(const std::vector<std::string>& tokens) {
  std::string vocab;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string escaped;
    for (char c : tokens[i]) {
      if (c == '"' || c == '\\') escaped += '\\';
      escaped += c;
    }
    vocab += (i ? ", \"" : "\"") + escaped + "\": " + std::to_string(i);
  }
  return R"({"added_tokens": [{"id": )" + std::to_string(tokens.size()) +
         R"(, "content": "<|endoftext|>", "special": true}],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []}})";
}

inline std::string SmallTokenizerJson() {
  std::vector<std::string> tokens;
  for (int c = 33; c < 127; ++c) tokens.push_back(std::string(1, static_cast<char>(c)));
  for (const char* t : {"\xC4\xA0", "\xC4\x8A", "true", "false", "null", "\xC4\xA0\"", "\":",
                        "12", "ab", "\xC4\xA0\xC4\xA0", "if", "def", "\xC4\x8A\xC4\xA0"}) {
    tokens.push_back(t);
  }
  return ByteLevelTokenizerJson(tokens);
}

inline void WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A path in this test binary's own temporary folder, made on first use and
// removed when the tests end.
inline std::string TempPath(const std::string& name) {
  static const std::string dir = [] {
    std::string pattern = testing::TempDir() + "cfgmask_test_XXXXXX";
    char* made = mkdtemp(pattern.data());
    return made ? std::string(made) + "/" : testing::TempDir();
  }();
  return dir + name;
}

class RemoveTempDir : public testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(TempPath("x")).parent_path(), ignored);
  }
};
inline const testing::Environment* const kRemoveTempDir =
    testing::AddGlobalTestEnvironment(new RemoveTempDir);

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_SMALL_TOKENIZER_H_
