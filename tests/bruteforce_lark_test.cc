// Brute-force agreement with Lark on small grammars and real tokens.
//
// For each grammar of tests/data/bruteforce/ (literal terminals without
// spaces, NAME /[a-z]+/, NUMBER /[0-9]+/, %ignore " "), a slice of the Qwen2
// byte-level BPE vocabulary — every single-byte token of the grammar's
// alphabet, every token that is a literal (with or without a leading space),
// and a fixed-seed sample of the other tokens spelled in that alphabet, a few
// hundred in all — is written as a tokenizer.json with an EOS token and
// compiled into a store, which is also streamlined (streamline/streamline.h).
// Random walks drawn from the raw store's masks (uniform, or preferring
// operators and brackets, or closers) then check, at every step, both
// stores' masks (EOS bit included) against tests/tools/lark_prefix_oracle.py,
// which tries every token of the slice with Lark's interactive parser (its
// docstring explains why that is exact for this grammar class).  One Python
// process answers all grammars' queries.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "lexer/tokenizer/tokenizer.h"
#include "runtime/compile/compile.h"
#include "runtime/session.h"
#include "streamline/streamline.h"
#include "tests/exactness_harness.h"

namespace cfgmask {
namespace {

constexpr size_t kSliceSize = 300;

struct BruteForceGrammar {
  const char* file;  // under tests/data/bruteforce/
  uint32_t seed;
  int walk_factor;   // values complete within a few tokens: walk more of them
};

constexpr BruteForceGrammar kGrammars[] = {
    {"statements.lark", 11, 1},
    {"values.lark", 22, 4},
    {"operators.lark", 33, 1},
};

std::string GrammarPath(const char* file) {
  return std::string(CFGMASK_SOURCE_DIR) + "/tests/data/bruteforce/" + file;
}

// The string literals of a grammar of this class (comment lines skipped) and
// its alphabet: their bytes, a-z with NAME, 0-9 with NUMBER, and the space.
void ScanGrammar(const std::string& path, std::vector<std::string>* literals,
                 std::set<char>* alphabet) {
  std::ifstream in(path);
  std::string line;
  alphabet->insert(' ');
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line.compare(first, 2, "//") == 0) continue;
    if (line.find("/[a-z]+/") != std::string::npos) {
      for (char c = 'a'; c <= 'z'; ++c) alphabet->insert(c);
    }
    if (line.find("/[0-9]+/") != std::string::npos) {
      for (char c = '0'; c <= '9'; ++c) alphabet->insert(c);
    }
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] != '"') continue;
      std::string lit;
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        lit += line[i];
      }
      if (lit == " ") continue;
      for (char c : lit) alphabet->insert(c);
      literals->push_back(lit);
    }
  }
}

// The slice of `vocab` for a grammar: token bytes, in vocabulary id order.
std::vector<std::string> VocabularySlice(const Vocabulary& vocab, const std::string& grammar,
                                         uint32_t seed) {
  std::vector<std::string> literals;
  std::set<char> alphabet;
  ScanGrammar(grammar, &literals, &alphabet);
  std::set<std::string> wanted;
  for (const std::string& lit : literals) {
    wanted.insert(lit);
    wanted.insert(" " + lit);
  }
  std::vector<int32_t> chosen, others;
  for (int32_t t = 0; t < vocab.size(); ++t) {
    const std::string& b = vocab.tokens[t];
    if (vocab.special[t] || b.empty()) continue;
    if (!std::all_of(b.begin(), b.end(), [&](char c) { return alphabet.count(c) > 0; })) continue;
    (b.size() == 1 || wanted.count(b) ? chosen : others).push_back(t);
  }
  std::mt19937 rng(seed);
  std::shuffle(others.begin(), others.end(), rng);
  for (size_t i = 0; i < others.size() && chosen.size() < kSliceSize; ++i) {
    chosen.push_back(others[i]);
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::string> out;
  for (int32_t t : chosen) out.push_back(vocab.tokens[t]);
  return out;
}

// A byte-level BPE tokenizer.json with these tokens (ASCII without control
// bytes: only the space needs GPT-2's byte map, U+0120) and <|endoftext|>.
std::string SliceTokenizerJson(const std::vector<std::string>& tokens) {
  std::string vocab;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string text;
    for (char c : tokens[i]) {
      if (c == ' ') {
        text += "\xC4\xA0";
      } else {
        text += c;
      }
    }
    vocab += (i ? ", " : "") + JsonQuote(text) + ": " + std::to_string(i);
  }
  return R"({"added_tokens": [{"id": )" + std::to_string(tokens.size()) +
         R"(, "content": "<|endoftext|>", "special": true}],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []}})";
}

// One step of a walk: the text so far and each store's verdict per slice
// token, then EOS, as '0'/'1'.
struct Step {
  int walk;
  std::string text;
  std::string raw, streamlined;
};

struct GrammarRun {
  std::string path;
  std::vector<std::string> tokens;
  std::vector<Step> steps;
};

std::string Verdicts(Session* s, int32_t n) {
  std::vector<uint32_t> mask = s->Mask();
  std::string out;
  for (int32_t t = 0; t <= n; ++t) out += ((mask[t >> 5] >> (t & 31)) & 1) ? '1' : '0';
  return out;
}

// Compiles the slice store for `run`, streamlines a copy and records the
// walks (drawn from the raw store's mask).
void Walk(GrammarRun* run, int walks, int steps, uint32_t seed) {
  char dir[] = "/tmp/cfgmask_bruteforce_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string tok_path = std::string(dir) + "/tokenizer.json";
  { std::ofstream(tok_path, std::ios::binary) << SliceTokenizerJson(run->tokens); }
  CompiledStore raw;
  Status st = CompileStore(run->path, tok_path, CompileOptions{}, &raw);
  std::remove(tok_path.c_str());
  rmdir(dir);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const int32_t n = static_cast<int32_t>(run->tokens.size());
  ASSERT_EQ(raw.vocab_size, n + 1);
  ASSERT_EQ(raw.eos_ids, std::vector<int32_t>{n});
  for (int32_t t = 0; t < n; ++t) ASSERT_EQ(raw.TokenBytes(t), run->tokens[t]) << t;
  CompiledStore streamlined = raw;
  st = StreamlineStore(&streamlined, StreamlineOptions{}, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();

  std::mt19937 rng(seed);
  for (int w = 0; w < walks; ++w) {
    Session a(&raw), b(&streamlined);
    for (int k = 0; k < steps; ++k) {
      Step step{w, a.text(), Verdicts(&a, n), Verdicts(&b, n)};
      // Pools to draw from: every allowed token; those without letters or
      // digits (or with a quote: the keys of values.lark) that are not all
      // spaces; those of them that close something.
      std::vector<int32_t> allowed, punct, closing;
      bool only_spaces = true;
      for (int32_t t = 0; t < n; ++t) {
        if (step.raw[t] != '1') continue;
        allowed.push_back(t);
        const std::string& bytes = run->tokens[t];
        if (bytes.find_first_not_of(' ') == std::string::npos) continue;
        only_spaces = false;
        if (bytes.find('"') == std::string::npos &&
            std::any_of(bytes.begin(), bytes.end(), [](char c) { return std::isalnum(c); })) {
          continue;
        }
        punct.push_back(t);
        if (bytes.find_first_of(")]};") != std::string::npos) closing.push_back(t);
      }
      run->steps.push_back(std::move(step));
      if (only_spaces) break;  // the text is complete (or dead): nothing new to see
      // Walks of three kinds: uniform over the mask; mostly operators and
      // brackets (nesting); mostly closers (completing statements and values).
      const std::vector<int32_t>* pool = &allowed;
      if (w % 3 == 1 && !punct.empty() && rng() % 4 != 0) pool = &punct;
      if (w % 3 == 2) {
        if (!closing.empty() && rng() % 2 == 0) {
          pool = &closing;
        } else if (!punct.empty() && rng() % 4 != 0) {
          pool = &punct;
        }
      }
      const int32_t next = (*pool)[rng() % pool->size()];
      ASSERT_TRUE(a.Advance(next).ok()) << JsonQuote(a.text()) << " + " << JsonQuote(run->tokens[next]);
      ASSERT_TRUE(b.Advance(next).ok()) << JsonQuote(b.text()) << " + " << JsonQuote(run->tokens[next]);
    }
  }
}

// Lark's verdicts for every recorded step of every run, one line per step,
// from one oracle process.
std::vector<std::string> OracleVerdicts(const std::vector<GrammarRun>& runs) {
  char in_path[] = "/tmp/cfgmask_bruteforce_in_XXXXXX";
  int fd = mkstemp(in_path);
  close(fd);
  {
    std::ofstream f(in_path, std::ios::binary);
    for (const GrammarRun& run : runs) {
      f << "{\"grammar\": " << JsonQuote(run.path) << ", \"start\": \"start\", \"tokens\": [";
      for (size_t i = 0; i < run.tokens.size(); ++i) f << (i ? ", " : "") << JsonQuote(run.tokens[i]);
      f << "]}\n";
      for (const Step& step : run.steps) f << "{\"prefix\": " << JsonQuote(step.text) << "}\n";
    }
  }
  const std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                          "/tests/tools/lark_prefix_oracle.py < " + in_path;
  std::vector<std::string> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p) {
    std::string line;
    int c;
    while ((c = std::fgetc(p)) != EOF) {
      if (c == '\n') {
        out.push_back(line);
        line.clear();
      } else {
        line += static_cast<char>(c);
      }
    }
    pclose(p);
  }
  std::remove(in_path);
  return out;
}

TEST(BruteForceLark, MaskEqualsInteractiveParserOnEveryToken) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_QWEN2");
  const bool full = TestEnv("CFGMASK_FULL") == "1";
  const int walks = full ? 80 : 16;
  const int steps = full ? 48 : 24;

  Vocabulary qwen;
  Status st = LoadVocabulary(TestEnv("CFGMASK_TOK_QWEN2"), &qwen);
  ASSERT_TRUE(st.ok()) << st.ToString();

  std::vector<GrammarRun> runs;
  for (const BruteForceGrammar& g : kGrammars) {
    GrammarRun run;
    run.path = GrammarPath(g.file);
    run.tokens = VocabularySlice(qwen, run.path, g.seed);
    ASSERT_GE(run.tokens.size(), 100u) << g.file;
    Walk(&run, walks * g.walk_factor, steps, g.seed);
    if (HasFatalFailure()) return;
    runs.push_back(std::move(run));
  }

  std::vector<std::string> lark = OracleVerdicts(runs);
  size_t total_steps = 0;
  for (const GrammarRun& run : runs) total_steps += run.steps.size();
  ASSERT_EQ(lark.size(), total_steps) << "the oracle answered " << lark.size() << " of "
                                      << total_steps << " queries";

  size_t at = 0;
  int reported = 0;
  for (const GrammarRun& run : runs) {
    const size_t n = run.tokens.size();
    int64_t checked = 0, mismatches = 0, allowed = 0, eos_allowed = 0;
    for (const Step& step : run.steps) {
      const std::string& ref = lark[at++];
      ASSERT_EQ(ref.size(), n + 1) << run.path;
      allowed += std::count(ref.begin(), ref.end() - 1, '1');
      eos_allowed += ref[n] == '1';
      for (const auto& [name, ours] : {std::pair<const char*, const std::string*>{"raw", &step.raw},
                                       {"streamlined", &step.streamlined}}) {
        for (size_t t = 0; t <= n; ++t) {
          ++checked;
          if ((*ours)[t] == ref[t]) continue;
          ++mismatches;
          if (++reported <= 20) {
            ADD_FAILURE() << run.path << " (" << name << " store), walk " << step.walk
                          << ": after " << JsonQuote(step.text) << ", token "
                          << (t == n ? std::string("<EOS>") : JsonQuote(run.tokens[t]))
                          << ": cfgmask " << (*ours)[t] << ", Lark " << ref[t];
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << run.path;
    EXPECT_GT(allowed, static_cast<int64_t>(run.steps.size())) << run.path;
    EXPECT_GT(eos_allowed, 0) << run.path;
    std::printf("%s: %zu tokens, %zu steps, %lld verdicts compared (both stores), "
                "%lld tokens allowed by Lark, EOS allowed at %lld steps, %lld mismatches\n",
                run.path.c_str(), n, run.steps.size(), static_cast<long long>(checked),
                static_cast<long long>(allowed), static_cast<long long>(eos_allowed),
                static_cast<long long>(mismatches));
  }
}

}  // namespace
}  // namespace cfgmask
