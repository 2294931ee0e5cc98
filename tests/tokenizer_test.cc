// Tests of lexer/tokenizer/tokenizer.cc, lexer/tokenizer/gguf_reader.cc, lexer/tokenizer/tokenizer_json.cc
// and lexer/tokenizer/tiktoken_reader.cc.
//
// The real tokenizer files named by CFGMASK_TOK_* are checked id by id
// against tests/tools/vocab_oracle.py, which reads them with the Python
// packages (gguf's GGUFReader, tiktoken's load_tiktoken_bpe) and its own copy
// of the decoding rules; HF tokenizer.json files are built from the GGUFs
// with the `tokenizers` library and must give the same bytes as the GGUF, and
// `tokenizers`' own decode of each single id must agree wherever a single id
// decodes to well-defined text.  Without the files or $CFGMASK_PYTHON these
// tests skip, or fail when CI=true.  Handmade files test every rule and every
// malformed-input path: truncation at every offset, flipped bytes, absurd
// lengths; each must end in an error Status, never a crash.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lexer/tokenizer/gguf_reader.h"
#include "lexer/tokenizer/tokenizer.h"

namespace cfgmask {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

bool FileExists(const std::string& path) { return !path.empty() && access(path.c_str(), R_OK) == 0; }

// Binds `var` to the file named by env var `env_name`, or skips the test
// (fails it when CI=true) when the variable, the file or Python is missing.
#define REQUIRE_TOKENIZER_FILE(var, env_name)                                             \
  const std::string var = Env(env_name);                                                  \
  do {                                                                                    \
    std::string why;                                                                      \
    if (!FileExists(var)) why = std::string("$") + env_name + " is unset or unreadable";  \
    if (!FileExists(Env("CFGMASK_PYTHON"))) why = "$CFGMASK_PYTHON is unset or missing"; \
    if (!why.empty()) {                                                                   \
      if (Env("CI") == "true") FAIL() << why << " (source .cache/env.sh)";                \
      GTEST_SKIP() << why << " (source .cache/env.sh)";                                   \
    }                                                                                     \
  } while (0)

// A fresh directory, in /dev/shm when there is one (the corruption tests
// write thousands of small files), removed when the tests end.
const std::string& TempDir() {
  static const std::string dir = [] {
    std::string base = Env("TEST_TMPDIR").empty() && access("/dev/shm", W_OK) == 0
                           ? std::string("/dev/shm/")
                           : testing::TempDir();
    std::string pattern = base + "cfgmask_tokenizer_XXXXXX";
    char* made = mkdtemp(pattern.data());
    return made == nullptr ? testing::TempDir() : std::string(made) + "/";
  }();
  return dir;
}

class RemoveTempDir : public testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(TempDir(), ignored);
  }
};
const testing::Environment* const kRemoveTempDir =
    testing::AddGlobalTestEnvironment(new RemoveTempDir);

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool RunOracle(const std::string& args) {
  std::string command = "'" + Env("CFGMASK_PYTHON") + "' '" CFGMASK_SOURCE_DIR
                        "/tests/tools/vocab_oracle.py' " + args;
  return std::system(command.c_str()) == 0;
}

std::string Hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Parses the oracle's dump format back into a Vocabulary.
Vocabulary ParseDump(const std::string& text) {
  Vocabulary v;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    size_t start = 0;
    for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
      fields.push_back(line.substr(start, tab - start));
    }
    fields.push_back(line.substr(start));
    if (fields[0] == "eos") {
      v.eos_ids.push_back(std::stoi(fields[1]));
      continue;
    }
    v.tokens.push_back(Unhex(fields[1]));
    v.special.push_back(fields.size() > 2 && fields[2] == "1");
  }
  return v;
}

// Expects the same tokens and special flags, reporting the first differences.
void ExpectSameTokens(const Vocabulary& expected, const Vocabulary& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  int mismatches = 0;
  for (int32_t id = 0; id < expected.size(); ++id) {
    if (expected.tokens[id] == actual.tokens[id] && expected.special[id] == actual.special[id]) {
      continue;
    }
    if (++mismatches <= 10) {
      ADD_FAILURE() << "id " << id << ": expected " << Hex(expected.tokens[id]) << " special "
                    << int{expected.special[id]} << ", got " << Hex(actual.tokens[id])
                    << " special " << int{actual.special[id]};
    }
  }
  EXPECT_EQ(mismatches, 0);
}

Vocabulary LoadTimed(const std::string& path, double* ms) {
  Vocabulary v;
  auto start = std::chrono::steady_clock::now();
  Status status = LoadVocabulary(path, &v);
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(status.ok()) << status.ToString();
  return v;
}

// Loads `path` with cfgmask and with the oracle; they must agree exactly.
void CheckAgainstOracle(const std::string& path, int32_t expected_size,
                        const std::vector<int32_t>& expected_eos) {
  double ms = 0;
  Vocabulary v = LoadTimed(path, &ms);
  testing::Test::RecordProperty("load_ms", std::to_string(ms));
  std::printf("[   INFO   ] %s: %d tokens, load %.1f ms, eos", v.name.c_str(), v.size(), ms);
  for (int32_t eos : v.eos_ids) std::printf(" %d", eos);
  std::printf(", identity %016llx\n", static_cast<unsigned long long>(v.identity));
  EXPECT_EQ(v.size(), expected_size);
  EXPECT_EQ(v.eos_ids, expected_eos);

  std::string dump = TempDir() + "oracle_dump.txt";
  ASSERT_TRUE(RunOracle("dump '" + path + "' '" + dump + "'"));
  Vocabulary oracle = ParseDump(ReadFile(dump));
  ExpectSameTokens(oracle, v);
  EXPECT_EQ(oracle.eos_ids, v.eos_ids);
  EXPECT_EQ(DumpVocabulary(v), ReadFile(dump));

  Vocabulary again;
  ASSERT_TRUE(LoadVocabulary(path, &again).ok());
  EXPECT_EQ(again.identity, v.identity);
}

TEST(TokenizerOracle, Qwen2Gguf) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_QWEN2");
  CheckAgainstOracle(path, 151936, {151643});
}

TEST(TokenizerOracle, LlamaSpmGguf) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_LLAMA_SPM");
  CheckAgainstOracle(path, 32000, {2});
}

// Gemma 4's 262,144-token vocabulary (GGUF model "gemma4": SentencePiece-
// style BPE with byte fallback), from llama.cpp's vocab files.
TEST(TokenizerOracle, Gemma4Gguf) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_GEMMA4");
  CheckAgainstOracle(path, 262144, {1});
}

TEST(TokenizerOracle, SmolLm2ModelGguf) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_SMOLLM2");
  CheckAgainstOracle(path, 49152, {2});
}

TEST(TokenizerOracle, QwenTiktoken) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_QWEN_TIKTOKEN");
  CheckAgainstOracle(path, 151644, {151643});
}

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                                : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// `bytes` as text the way `tokenizers` (Rust's String::from_utf8_lossy) and
// Python's errors="replace" make it: each maximal ill-formed subpart (Unicode
// 15, section 3.9, "U+FFFD substitution of maximal subparts") becomes one
// U+FFFD.
std::string Utf8Lossy(const std::string& bytes) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < bytes.size(); ++k) {
      const auto cc = static_cast<unsigned char>(bytes[i + k]);
      const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
      if (cc < l || cc > h) break;
    }
    if (k == len) {
      out.append(bytes, i, len);
    } else {
      out += kReplacement;
    }
    i += k;
  }
  return out;
}

TEST(Utf8Lossy, MaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(Utf8Lossy("ab"), "ab");
  EXPECT_EQ(Utf8Lossy("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(Utf8Lossy("\xE4\xB8"), r);              // truncated 3-byte sequence: one
  EXPECT_EQ(Utf8Lossy("\x80\x80"), r + r);          // lone continuations: one each
  EXPECT_EQ(Utf8Lossy("\xE0\x80"), r + r);          // E0 80 is not a prefix
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"), r);         // truncated emoji: one
  EXPECT_EQ(Utf8Lossy("\xC0\xAFx"), r + r + "x");   // C0 never valid
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), r + r + r); // surrogate
}

// Builds tokenizer.json from `gguf` with `tokenizers`, checks that it loads to
// the GGUF's bytes and flags, and that `tokenizers`' decode of every single id
// agrees: our bytes, made text as `tokenizers` does (invalid UTF-8 becomes
// U+FFFD), equal its decode (SentencePiece decoders strip the leading space
// of a sequence's first token, and the Metaspace decoder drops every "▁" of
// the first token).
void CheckTokenizerJson(const std::string& gguf, const std::string& style,
                        const std::vector<int32_t>& expected_eos) {
  std::string json = TempDir() + "from_gguf_" + style + ".json";
  ASSERT_TRUE(RunOracle("make-json '" + gguf + "' '" + json + "' " + style));
  Vocabulary from_gguf;
  ASSERT_TRUE(LoadVocabulary(gguf, &from_gguf).ok());
  double ms = 0;
  Vocabulary from_json = LoadTimed(json, &ms);
  std::printf("[   INFO   ] %s: %d tokens, load %.1f ms\n", from_json.name.c_str(),
              from_json.size(), ms);
  ExpectSameTokens(from_gguf, from_json);
  EXPECT_EQ(from_json.eos_ids, expected_eos);

  std::string decoded_path = TempDir() + "decoded_" + style + ".txt";
  ASSERT_TRUE(RunOracle("decode-json '" + json + "' '" + decoded_path + "'"));
  Vocabulary decoded = ParseDump(ReadFile(decoded_path));
  ASSERT_EQ(decoded.size(), from_json.size());
  bool strips_space = style != "bytelevel";
  int compared = 0;
  int mismatches = 0;
  int invalid = 0;
  for (int32_t id = 0; id < from_json.size(); ++id) {
    const bool valid = IsValidUtf8(from_json.tokens[id]);
    invalid += !valid;
    const std::string ours = valid ? from_json.tokens[id] : Utf8Lossy(from_json.tokens[id]);
    ++compared;
    const std::string& theirs = decoded.tokens[id];
    std::string without_spaces = ours;
    std::erase(without_spaces, ' ');
    bool same = theirs == ours ||
                (strips_space && !ours.empty() && ours[0] == ' ' && theirs == ours.substr(1)) ||
                (style == "metaspace" && theirs == without_spaces);
    if (!same && ++mismatches <= 10) {
      ADD_FAILURE() << "id " << id << ": ours " << Hex(ours) << ", tokenizers " << Hex(theirs);
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(compared, from_json.size());
  EXPECT_GT(invalid, 0) << "no token splits a UTF-8 character: the lossy path is untested";
}

TEST(TokenizerOracle, Qwen2TokenizerJsonByteLevel) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_QWEN2");
  // The naming rule makes both <|endoftext|> and <|im_end|> EOS.
  CheckTokenizerJson(path, "bytelevel", {151643, 151645});
}

TEST(TokenizerOracle, LlamaTokenizerJsonReplaceByteFallback) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_LLAMA_SPM");
  CheckTokenizerJson(path, "sequence", {2});
}

TEST(TokenizerOracle, LlamaTokenizerJsonMetaspace) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_LLAMA_SPM");
  CheckTokenizerJson(path, "metaspace", {2});
}

TEST(TokenizerOracle, IdentitiesDiffer) {
  REQUIRE_TOKENIZER_FILE(qwen2, "CFGMASK_TOK_QWEN2");
  REQUIRE_TOKENIZER_FILE(tiktoken, "CFGMASK_TOK_QWEN_TIKTOKEN");
  REQUIRE_TOKENIZER_FILE(llama, "CFGMASK_TOK_LLAMA_SPM");
  Vocabulary a, b, c;
  ASSERT_TRUE(LoadVocabulary(qwen2, &a).ok());
  ASSERT_TRUE(LoadVocabulary(tiktoken, &b).ok());
  ASSERT_TRUE(LoadVocabulary(llama, &c).ok());
  EXPECT_NE(a.identity, b.identity);
  EXPECT_NE(a.identity, c.identity);
  EXPECT_NE(b.identity, c.identity);
  // The GGUF's first 151,643 tokens are the tiktoken ranks.
  for (int32_t id = 0; id < 151643; ++id) ASSERT_EQ(a.tokens[id], b.tokens[id]) << id;
}

// ---------------------------------------------------------------------------
// Byte maps.

TEST(ByteLevel, InvertsGpt2Map) {
  // bytes_to_unicode written out independently of the loader.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    uint32_t cp = printable ? b : next++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 = std::string(1, static_cast<char>(cp));
    } else {
      utf8 = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    std::string bytes;
    EXPECT_TRUE(DecodeByteLevel(utf8, &bytes)) << b;
    EXPECT_EQ(bytes, std::string(1, static_cast<char>(b))) << b;
  }
  std::string bytes;
  EXPECT_TRUE(DecodeByteLevel("\xC4\xA0hello\xC4\x8A", &bytes));  // "Ġhello" + "Ċ"
  EXPECT_EQ(bytes, " hello\n");
  EXPECT_FALSE(DecodeByteLevel("\xE4\xBD\xA0", &bytes));  // a CJK character: not in the map
  EXPECT_EQ(bytes, "\xE4\xBD\xA0");
  EXPECT_FALSE(DecodeByteLevel("a\xFF", &bytes));  // invalid UTF-8 stays as is
  EXPECT_EQ(bytes, "a\xFF");
}

TEST(SentencePiece, MetaspaceAndByteTokens) {
  EXPECT_EQ(DecodeMetaspace("\xE2\x96\x81hello\xE2\x96\x81\xE2\x96\x81x"), " hello  x");
  EXPECT_EQ(ParseByteToken("<0x0A>"), 10);
  EXPECT_EQ(ParseByteToken("<0xff>"), 255);
  EXPECT_EQ(ParseByteToken("<0xFG>"), -1);
  EXPECT_EQ(ParseByteToken("<0x0A"), -1);
  EXPECT_EQ(ParseByteToken("0x0A>"), -1);
}

// ---------------------------------------------------------------------------
// Handmade GGUF files.

class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3) : version_(version) {}

  void Raw(const std::string& bytes) { body_ += bytes; }
  template <typename T>
  void Put(T v) {
    body_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Str(const std::string& s) {
    Put<uint64_t>(s.size());
    body_ += s;
  }
  void Key(const std::string& key, GgufType type) {
    ++kv_count_;
    Str(key);
    Put<uint32_t>(static_cast<uint32_t>(type));
  }
  void KvString(const std::string& key, const std::string& value) {
    Key(key, GgufType::kString);
    Str(value);
  }
  void KvU32(const std::string& key, uint32_t value) {
    Key(key, GgufType::kUint32);
    Put(value);
  }
  void KvStrings(const std::string& key, const std::vector<std::string>& values) {
    Key(key, GgufType::kArray);
    Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
    Put<uint64_t>(values.size());
    for (const std::string& s : values) Str(s);
  }
  void KvI32s(const std::string& key, const std::vector<int32_t>& values) {
    Key(key, GgufType::kArray);
    Put<uint32_t>(static_cast<uint32_t>(GgufType::kInt32));
    Put<uint64_t>(values.size());
    for (int32_t v : values) Put(v);
  }
  std::string Build(int64_t kv_count_override = -1) const {
    std::string out = "GGUF";
    out.append(reinterpret_cast<const char*>(&version_), 4);
    uint64_t tensors = 0;
    uint64_t kvs = kv_count_override >= 0 ? kv_count_override : kv_count_;
    out.append(reinterpret_cast<const char*>(&tensors), 8);
    out.append(reinterpret_cast<const char*>(&kvs), 8);
    return out + body_;
  }

 private:
  uint32_t version_;
  uint64_t kv_count_ = 0;
  std::string body_;
};

// A small but complete gpt2-model GGUF with every kind of metadata value.
std::string SmallGpt2Gguf() {
  GgufBuilder b;
  b.KvString("general.architecture", "test");
  b.Key("general.some_float", GgufType::kFloat32);
  b.Put<float>(1.5f);
  b.Key("general.flag", GgufType::kBool);
  b.Put<uint8_t>(1);
  b.Key("general.nested", GgufType::kArray);  // array of arrays of uint8
  b.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
  b.Put<uint64_t>(2);
  for (int k = 0; k < 2; ++k) {
    b.Put<uint32_t>(static_cast<uint32_t>(GgufType::kUint8));
    b.Put<uint64_t>(3);
    b.Raw("xyz");
  }
  b.KvString("tokenizer.ggml.model", "gpt2");
  b.KvStrings("tokenizer.ggml.tokens",
              {"a", "\xC4\xA0" "b", "\xC4\x8A", "<|endoftext|>", "<tool>", "<|eot|>", "[unused]",
               "\xE4\xBD\xA0"});
  b.KvI32s("tokenizer.ggml.token_type", {1, 1, 1, 3, 4, 3, 5, 1});
  b.KvStrings("tokenizer.ggml.merges", {"a b", "\xC4\xA0 b"});
  b.KvU32("tokenizer.ggml.eos_token_id", 3);
  b.KvU32("tokenizer.ggml.eot_token_id", 5);
  b.Key("tokenizer.ggml.bos_token_id", GgufType::kUint64);
  b.Put<uint64_t>(3);
  return b.Build();
}

Status LoadFromBytes(const std::string& name, const std::string& bytes, Vocabulary* v) {
  std::string path = TempDir() + name;
  WriteFile(path, bytes);
  return LoadVocabulary(path, v);
}

TEST(Gguf, SmallGpt2) {
  Vocabulary v;
  Status status = LoadFromBytes("small.gguf", SmallGpt2Gguf(), &v);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(v.size(), 8);
  EXPECT_EQ(v.tokens[0], "a");
  EXPECT_EQ(v.tokens[1], " b");
  EXPECT_EQ(v.tokens[2], "\n");
  EXPECT_EQ(v.tokens[3], "");  // control
  EXPECT_EQ(v.tokens[4], "<tool>");  // user-defined: verbatim, normal text
  EXPECT_EQ(v.tokens[7], "\xE4\xBD\xA0");  // outside the byte map: its own UTF-8
  EXPECT_EQ(v.special, (std::vector<uint8_t>{0, 0, 0, 1, 0, 1, 1, 0}));
  EXPECT_EQ(v.eos_ids, (std::vector<int32_t>{3, 5}));  // eos + eot
  EXPECT_EQ(v.identity, VocabularyIdentity(v));

  GgufMetadata meta;
  ASSERT_TRUE(ReadGgufMetadata(TempDir() + "small.gguf", nullptr, &meta).ok());
  EXPECT_EQ(meta.version, 3u);
  EXPECT_EQ(meta.Find("general.nested")->array_length, 2u);
  EXPECT_EQ(meta.Find("general.some_float")->real, 1.5);
  EXPECT_EQ(meta.Find("general.flag")->integer, 1);
  EXPECT_EQ(meta.Find("tokenizer.ggml.merges")->strings.size(), 2u);
  EXPECT_EQ(meta.metadata_end, meta.file_size);
}

TEST(Gguf, SmallLlama) {
  GgufBuilder b(2);
  b.KvString("tokenizer.ggml.model", "llama");
  b.KvStrings("tokenizer.ggml.tokens",
              {"<unk>", "<s>", "</s>", "<0x0A>", "<0xE2>", "\xE2\x96\x81hi", "x\xE2\x96\x81",
               "<0x41>"});
  b.KvI32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 1, 1, 1});
  b.KvU32("tokenizer.ggml.eos_token_id", 2);
  Vocabulary v;
  Status status = LoadFromBytes("small_llama.gguf", b.Build(), &v);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"", "", "", "\n", "\xE2", " hi", "x ", "<0x41>"}));
  EXPECT_EQ(v.special, (std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(v.eos_ids, std::vector<int32_t>{2});
}

void ExpectTokenizerError(const std::string& name, const std::string& bytes,
                          const std::string& fragment) {
  Vocabulary v;
  Status status = LoadFromBytes(name, bytes, &v);
  EXPECT_FALSE(status.ok()) << name;
  EXPECT_EQ(status.code(), ErrorCode::kTokenizer) << status.ToString();
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "'" << status.message() << "' lacks '" << fragment << "'";
}

TEST(Gguf, TruncatedAtEveryOffset) {
  const std::string full = SmallGpt2Gguf();
  for (size_t n = 0; n < full.size(); ++n) {
    Vocabulary v;
    Status status = LoadFromBytes("truncated.gguf", full.substr(0, n), &v);
    ASSERT_FALSE(status.ok()) << "truncated at " << n;
    EXPECT_EQ(status.code(), ErrorCode::kTokenizer) << status.ToString();
  }
}

TEST(Gguf, FlippedBytesNeverCrash) {
  const std::string full = SmallGpt2Gguf();
  int errors = 0;
  for (size_t at = 0; at < full.size(); ++at) {
    for (uint8_t mask : {0x01, 0x80, 0xFF, 0x40}) {
      std::string bad = full;
      bad[at] = static_cast<char>(bad[at] ^ mask);
      Vocabulary v;
      Status status = LoadFromBytes("flipped.gguf", bad, &v);
      if (!status.ok()) {
        ++errors;
        EXPECT_TRUE(status.code() == ErrorCode::kTokenizer) << status.ToString();
      } else {
        EXPECT_LE(v.size(), 8);
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(Gguf, AbsurdLengthsAndTypes) {
  {
    GgufBuilder b;
    b.KvString("tokenizer.ggml.model", "gpt2");
    b.Key("tokenizer.ggml.tokens", GgufType::kArray);
    b.Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
    b.Put<uint64_t>(uint64_t{1} << 62);
    ExpectTokenizerError("huge_array.gguf", b.Build(), "array length 4611686018427387904");
  }
  {
    GgufBuilder b;
    b.Key("general.name", GgufType::kString);
    b.Put<uint64_t>(~uint64_t{0});
    ExpectTokenizerError("huge_string.gguf", b.Build(), "offset 48: string value length");
  }
  {
    GgufBuilder b;
    b.Key("x", GgufType::kArray);
    b.Put<uint32_t>(static_cast<uint32_t>(GgufType::kInt64));
    b.Put<uint64_t>(1000);
    b.Put<int64_t>(1);
    ExpectTokenizerError("short_array.gguf", b.Build(), "array length 1000 exceeds");
  }
  ExpectTokenizerError("huge_kv.gguf", GgufBuilder().Build(int64_t{1} << 40), "key/value count");
  {
    GgufBuilder b;
    b.Key("x", static_cast<GgufType>(99));
    b.Put<uint32_t>(0);
    ExpectTokenizerError("bad_type.gguf", b.Build(), "unknown value type 99");
  }
  {
    GgufBuilder b;
    b.Key("x", GgufType::kArray);
    b.Put<uint32_t>(77);
    b.Put<uint64_t>(0);
    ExpectTokenizerError("bad_element.gguf", b.Build(), "unknown array element type 77");
  }
  {
    GgufBuilder b;
    b.Key("x", GgufType::kArray);
    for (int k = 0; k < 20; ++k) {
      b.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
      b.Put<uint64_t>(1);
    }
    b.Put<uint32_t>(0);
    b.Put<uint64_t>(0);
    ExpectTokenizerError("deep.gguf", b.Build(), "nested deeper");
  }
  {
    GgufBuilder b;
    b.Key("x", GgufType::kBool);
    b.Put<uint8_t>(7);
    ExpectTokenizerError("bad_bool.gguf", b.Build(), "bool value 7");
  }
  ExpectTokenizerError("v1.gguf", GgufBuilder(1).Build(), "version 1");
  ExpectTokenizerError("v9.gguf", GgufBuilder(9).Build(), "unsupported GGUF version 9");
  ExpectTokenizerError("big_endian.gguf", GgufBuilder(0x03000000).Build(), "big-endian");
  ExpectTokenizerError("no_model.gguf", GgufBuilder().Build(), "no tokenizer.ggml.model");
  {
    GgufBuilder b;
    b.KvString("tokenizer.ggml.model", "bert");
    b.KvStrings("tokenizer.ggml.tokens", {"a"});
    ExpectTokenizerError("bert.gguf", b.Build(), "unsupported tokenizer model 'bert'");
  }
  {
    GgufBuilder b;
    b.KvString("tokenizer.ggml.model", "gpt2");
    b.KvStrings("tokenizer.ggml.tokens", {"a", "b"});
    b.KvI32s("tokenizer.ggml.token_type", {1});
    ExpectTokenizerError("types.gguf", b.Build(), "token_type has 1 entries for 2 tokens");
  }
  {
    GgufBuilder b;
    b.KvString("tokenizer.ggml.model", "gpt2");
    b.KvStrings("tokenizer.ggml.tokens", {"a", "b"});
    b.KvI32s("tokenizer.ggml.token_type", {1, 42});
    ExpectTokenizerError("type42.gguf", b.Build(), "unknown token type 42");
  }
  {
    GgufBuilder b;
    b.KvString("tokenizer.ggml.model", "gpt2");
    b.KvStrings("tokenizer.ggml.tokens", {"a", "b"});
    b.KvU32("tokenizer.ggml.eos_token_id", 2);
    ExpectTokenizerError("eos.gguf", b.Build(), "eos_token_id 2 is not a token id");
  }
  {
    GgufBuilder b;
    b.KvString("tokenizer.ggml.model", "gpt2");
    b.KvString("tokenizer.ggml.model", "gpt2");
    ExpectTokenizerError("dup.gguf", b.Build(), "duplicate key");
  }
}

TEST(Gguf, RealFileTruncatedAndFlipped) {
  REQUIRE_TOKENIZER_FILE(path, "CFGMASK_TOK_LLAMA_SPM");
  const std::string full = ReadFile(path);
  GgufMetadata meta;
  ASSERT_TRUE(ReadGgufMetadata(path, nullptr, &meta).ok());
  ASSERT_LE(meta.metadata_end, full.size());
  // 200 truncation points: the first 64 bytes one by one, the rest spread
  // over the metadata.  Anything cut before the end of the metadata fails.
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 64; ++n) cuts.push_back(n);
  std::mt19937_64 rng(1234);
  while (cuts.size() < 200) cuts.push_back(64 + rng() % (meta.metadata_end - 64));
  for (size_t n : cuts) {
    Vocabulary v;
    Status status = LoadFromBytes("real_truncated.gguf", full.substr(0, n), &v);
    ASSERT_FALSE(status.ok()) << "truncated at " << n;
    EXPECT_EQ(status.code(), ErrorCode::kTokenizer) << status.ToString();
  }
  // Flips in the header and the first records, then anywhere.
  for (int trial = 0; trial < 200; ++trial) {
    std::string bad = full;
    size_t at = trial < 100 ? rng() % 1024 : rng() % full.size();
    bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    Vocabulary v;
    Status status = LoadFromBytes("real_flipped.gguf", bad, &v);
    if (!status.ok()) {
      EXPECT_TRUE(status.code() == ErrorCode::kTokenizer) << status.ToString();
    } else {
      EXPECT_LE(v.size(), 32000);
    }
  }
}

// ---------------------------------------------------------------------------
// Handmade tokenizer.json files.

const char kByteLevelJson[] = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 4, "content": "<|endoftext|>", "single_word": false, "special": true},
    {"id": 5, "content": "<tool\u00e9>", "special": false},
    {"id": 6, "content": "<|im_end|>", "special": true},
    {"id": 8, "content": "<|im_start|>", "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated"},
    {"type": "ByteLevel", "add_prefix_space": false}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "vocab": {
      "a": 0, "\u0120b": 1, "\u010a\u010a": 2, "\ud83d\ude00": 3},
    "merges": [["a", "b"], "\u0120 b"]}
})";

const char kSentencePieceJson[] = R"({
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                   {"id": 2, "content": "</s>", "special": true}],
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "byte_fallback": true, "vocab": {
    "<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xF0>": 4, "\u2581hi": 5, "x": 6},
    "merges": []}
})";

TEST(TokenizerJson, ByteLevel) {
  Vocabulary v;
  Status status = LoadFromBytes("bytelevel.json", kByteLevelJson, &v);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(v.size(), 9);
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"a", " b", "\n\n", "\xF0\x9F\x98\x80", "",
                                                "<tool\xC3\xA9>", "", "", ""}));
  EXPECT_EQ(v.special, (std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 1, 1, 1}));  // 7: unnamed
  EXPECT_EQ(v.eos_ids, (std::vector<int32_t>{4, 6}));
}

TEST(TokenizerJson, SentencePiece) {
  Vocabulary v;
  Status status = LoadFromBytes("spm.json", kSentencePieceJson, &v);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"", "<s>", "", "\n", "\xF0", " hi", "x"}));
  EXPECT_EQ(v.special, (std::vector<uint8_t>{1, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(v.eos_ids, std::vector<int32_t>{2});
}

TEST(TokenizerJson, TruncatedAtEveryOffset) {
  for (const std::string& full : {std::string(kByteLevelJson), std::string(kSentencePieceJson)}) {
    for (size_t n = 1; n < full.size(); ++n) {
      Vocabulary v;
      Status status = LoadFromBytes("truncated.json", full.substr(0, n), &v);
      ASSERT_FALSE(status.ok()) << "truncated at " << n;
      EXPECT_EQ(status.code(), ErrorCode::kTokenizer) << status.ToString();
    }
  }
}

TEST(TokenizerJson, FlippedBytesNeverCrash) {
  const std::string full = kByteLevelJson;
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = full;
    for (int k = 0; k < 3; ++k) {
      size_t at = rng() % bad.size();
      bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    }
    Vocabulary v;
    Status status = LoadFromBytes("flipped.json", bad, &v);
    if (!status.ok()) {
      EXPECT_NE(status.code(), ErrorCode::kOk);
    } else {
      EXPECT_LE(v.size(), static_cast<int32_t>(full.size()));
    }
  }
}

TEST(TokenizerJson, MalformedInputs) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}})";
  ExpectTokenizerError("deep.json",
                       "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                       "nested too deeply");
  ExpectTokenizerError("escape.json", "{\"x\": \"\\q\", " + model + "}", "1:8: invalid escape");
  ExpectTokenizerError("surrogate.json", "{\"x\": \"\\ud800\", " + model + "}",
                       "lone high surrogate");
  ExpectTokenizerError("low.json", "{\"x\": \"\\udc00\", " + model + "}", "lone low surrogate");
  ExpectTokenizerError("utf8.json", "{\"x\": \"\xC0\xAF\", " + model + "}", "invalid UTF-8");
  ExpectTokenizerError("control.json", "{\"x\": \"\n\", " + model + "}", "control character");
  ExpectTokenizerError("comma.json", "{" + model + ",}", "expected a string key");
  ExpectTokenizerError("trailing.json", "{" + model + "} x", "unexpected text after");
  ExpectTokenizerError("number.json", "{\"x\": 01, " + model + "}", "expected ',' or '}'");
  ExpectTokenizerError("minus.json", "{\"x\": -, " + model + "}", "invalid number");
  ExpectTokenizerError("lines.json", "{\n\n  \"x\": tru, " + model + "}", "3:8: invalid literal");
  ExpectTokenizerError("no_model.json", "{}", "no \"model\" object");
  ExpectTokenizerError("wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {}}})",
                       "unsupported model type 'WordPiece'");
  ExpectTokenizerError("float_id.json", R"({"model": {"type": "BPE", "vocab": {"a": 1.5}}})",
                       "token id is not an integer");
  ExpectTokenizerError("huge_id.json", R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}}})",
                       "token id 2000000000 is out of range");
  ExpectTokenizerError("negative_id.json", R"({"model": {"type": "BPE", "vocab": {"a": -1}}})",
                       "token id -1 is out of range");
  ExpectTokenizerError("dup_id.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}}})",
                       "duplicate token id");
  ExpectTokenizerError("added.json",
                       R"({"added_tokens": [{"id": "x"}], "model": {"type": "BPE", "vocab": {}}})",
                       "added token needs");
  ExpectTokenizerError("empty.json", R"({"model": {"type": "BPE", "vocab": {}}})",
                       "empty vocabulary");
}

TEST(TokenizerJson, UnigramVocabulary) {
  Vocabulary v;
  Status status = LoadFromBytes(
      "unigram.json",
      R"({"decoder": {"type": "Metaspace", "replacement": "\u2581"},
          "added_tokens": [{"id": 1, "content": "</s>", "special": true}],
          "model": {"type": "Unigram", "vocab": [["<pad>", 0.0], ["</s>", 0.0], ["\u2581a", -1.5]]}})",
      &v);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"<pad>", "", " a"}));
  EXPECT_EQ(v.eos_ids, std::vector<int32_t>{1});
}

// ---------------------------------------------------------------------------
// tiktoken files and options.

TEST(Tiktoken, RanksAndOptions) {
  const std::string file = "YQ== 0\nIGI= 1\n\nCgo= 3\r\n";  // "a", " b", gap, "\n\n"
  std::string path = TempDir() + "small.tiktoken";
  WriteFile(path, file);
  Vocabulary v;
  ASSERT_TRUE(LoadVocabulary(path, &v).ok());
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"a", " b", "", "\n\n"}));
  EXPECT_EQ(v.special, (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_TRUE(v.eos_ids.empty());

  VocabularyOptions options;
  options.extra_special = {"<|endoftext|>", "<|fim_prefix|>", "<|im_end|>"};
  Vocabulary with_specials;
  ASSERT_TRUE(LoadVocabulary(path, &with_specials, options).ok());
  EXPECT_EQ(with_specials.size(), 7);
  EXPECT_EQ(with_specials.special[5], 1);
  EXPECT_EQ(with_specials.eos_ids, (std::vector<int32_t>{4, 6}));
  EXPECT_NE(with_specials.identity, v.identity);

  options.eos_id = 5;
  Vocabulary overridden;
  ASSERT_TRUE(LoadVocabulary(path, &overridden, options).ok());
  EXPECT_EQ(overridden.eos_ids, std::vector<int32_t>{5});
  EXPECT_NE(overridden.identity, with_specials.identity);

  options.eos_id = 7;
  Status status = LoadVocabulary(path, &overridden, options);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.ToString();

  // Overriding a normal token makes it special and empty.
  VocabularyOptions eos_a;
  eos_a.eos_id = 0;
  ASSERT_TRUE(LoadVocabulary(path, &overridden, eos_a).ok());
  EXPECT_EQ(overridden.special[0], 1);
  EXPECT_EQ(overridden.tokens[0], "");
}

TEST(Tiktoken, Malformed) {
  ExpectTokenizerError("space.tiktoken", "YQ==0\n", "1:1: expected 'BASE64 RANK'");
  ExpectTokenizerError("b64.tiktoken", "YQ== 0\nY!== 1\n", "2:2: invalid base64");
  ExpectTokenizerError("b64len.tiktoken", "YQ= 0\n", "1:4: invalid base64");
  ExpectTokenizerError("pad.tiktoken", "Y=Q= 0\n", "1:2: invalid base64");
  ExpectTokenizerError("rank.tiktoken", "YQ== x\n", "1:6: invalid rank");
  ExpectTokenizerError("dup.tiktoken", "YQ== 0\nYg== 0\n", "2:6: duplicate rank");
  ExpectTokenizerError("huge.tiktoken", "YQ== 999999999\n", "exceeds what the file can hold");
  ExpectTokenizerError("blank.tiktoken", "\n\n", "no tokens");
  Vocabulary v;
  EXPECT_EQ(LoadVocabulary(TempDir() + "does_not_exist", &v).code(), ErrorCode::kIo);
  EXPECT_EQ(LoadFromBytes("empty_file", "", &v).code(), ErrorCode::kTokenizer);
}

TEST(Identity, SensitiveToEveryField) {
  Vocabulary v;
  v.tokens = {"a", "b", ""};
  v.special = {0, 0, 1};
  v.eos_ids = {2};
  uint64_t base = VocabularyIdentity(v);
  Vocabulary w = v;
  w.tokens[1] = "c";
  EXPECT_NE(VocabularyIdentity(w), base);
  w = v;
  w.special[1] = 1;
  EXPECT_NE(VocabularyIdentity(w), base);
  w = v;
  w.eos_ids = {};
  EXPECT_NE(VocabularyIdentity(w), base);
  w = v;
  w.tokens = {"ab", "", ""};  // same concatenation, different split
  EXPECT_NE(VocabularyIdentity(w), base);
}

// The command line on malformed tokenizer files: exit status 2, one line
// "cfgmask: ..." naming the file, and no output file left behind.
std::string CfgmaskBinary() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const auto bin = exe.parent_path().parent_path() / "cfgmask";
  return std::filesystem::exists(bin) ? bin.string() : "";
}

TEST(TokenizerCli, MalformedFilesExitTwo) {
  const std::string bin = CfgmaskBinary();
  if (bin.empty()) {
    if (Env("CI") == "true") FAIL() << "the cfgmask binary is not built beside the tests";
    GTEST_SKIP() << "cfgmask not built";
  }
  const std::string grammar = TempDir() + "cli.lark";
  WriteFile(grammar, "start: WORD+\nWORD: /[a-z]+/\n%ignore \" \"\n");
  std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.json", ""},
      {"half_bytelevel.json", std::string(kByteLevelJson).substr(0, sizeof(kByteLevelJson) / 2)},
      {"half_sentencepiece.json",
       std::string(kSentencePieceJson).substr(0, sizeof(kSentencePieceJson) / 2)},
      {"half_small.gguf", SmallGpt2Gguf().substr(0, SmallGpt2Gguf().size() / 2)},
      {"header_only.gguf", SmallGpt2Gguf().substr(0, 12)},
      {"bad.tiktoken", "YQ== 0\nY!== 1\n"},
  };
  const std::string llama = Env("CFGMASK_TOK_LLAMA_SPM");
  if (FileExists(llama)) {
    const std::string real = ReadFile(llama);
    cases.emplace_back("llama_half.gguf", real.substr(0, real.size() / 2));
    cases.emplace_back("llama_minus_one.gguf", real.substr(0, real.size() - 1));
    cases.emplace_back("llama_first_kib.gguf", real.substr(0, 1024));
  }
  for (const auto& [name, content] : cases) {
    const std::string tok = TempDir() + name;
    WriteFile(tok, content);
    const std::string out = TempDir() + "cli_out.cfgm";
    const std::string err = TempDir() + "cli_err.txt";
    std::filesystem::remove(out);
    const std::string command = "'" + bin + "' compile '" + grammar + "' --tokenizer '" + tok +
                                "' --quiet -o '" + out + "' 2>'" + err + "'";
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << name << ": " << status;
    EXPECT_EQ(WEXITSTATUS(status), 2) << name;
    std::string message = ReadFile(err);
    ASSERT_FALSE(message.empty()) << name;
    EXPECT_EQ(message.find('\n'), message.size() - 1) << name << ": " << message;
    EXPECT_EQ(message.rfind("cfgmask: ", 0), 0u) << name << ": " << message;
    EXPECT_NE(message.find(name), std::string::npos) << name << ": " << message;
    EXPECT_FALSE(std::filesystem::exists(out)) << name;
  }
}

}  // namespace
}  // namespace cfgmask
