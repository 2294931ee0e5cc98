// Tests of streamline/interchangeable.h: against a whole-multiset swap check
// and against the language (sentences enumerated up to a length) on random
// grammars, and the seed's seven classes on python.lark.
#include "streamline/interchangeable.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/lark_reader.h"
#include "tests/random_grammar.h"
#include "streamline/never_legal.h"
#include "tests/reference/bar_hillel.h"

namespace cfgmask {
namespace {


int32_t Swap(int32_t s, int32_t x, int32_t y) { return s == x ? y : s == y ? x : s; }

bool NaiveSwapInvariant(const Grammar& g, int32_t x, int32_t y) {
  std::multiset<std::vector<int32_t>> before, after;
  for (const Rule& r : g.rules) {
    std::vector<int32_t> text{r.lhs}, swapped{r.lhs};
    for (SymbolId s : r.rhs) {
      text.push_back(s);
      swapped.push_back(Swap(s, x, y));
    }
    before.insert(text);
    after.insert(swapped);
  }
  return before == after;
}

// Sentences of length <= max_len, by extending viable prefixes (exact
// Bar-Hillel tests from never_legal.h).
std::set<std::vector<int32_t>> Sentences(const Grammar& g, int max_len) {
  std::set<std::vector<int32_t>> out;
  const SymbolId start = StartSymbol(g, 0);
  const int num_t = g.num_terminals();
  std::vector<std::vector<int32_t>> frontier{{}};
  for (int len = 0; len <= max_len && !frontier.empty(); ++len) {
    std::vector<std::vector<int32_t>> next;
    for (const auto& w : frontier) {
      // w is a sentence iff L ∩ {w} ≠ ∅: the prefix DFA of w with only the
      // end of w accepting and the loop there removed.
      TerminalDfa exact = PrefixDfa(num_t, w);
      for (int t = 0; t < num_t; ++t) exact.next[w.size() * num_t + t] = static_cast<int32_t>(w.size()) + 1;
      if (BarHillelNonEmpty(g, start, exact)) out.insert(w);
      if (len == max_len) continue;
      for (int t = 0; t < num_t; ++t) {
        auto v = w;
        v.push_back(t);
        if (BarHillelNonEmpty(g, start, PrefixDfa(num_t, v))) next.push_back(v);
      }
    }
    frontier.swap(next);
  }
  return out;
}

TEST(InterchangeableTest, AgreesWithSwapOfWholeMultisetAndPreservesLanguage) {
  std::mt19937 rng(3);
  int pairs = 0, interchangeable = 0, language_checks = 0;
  for (int round = 0; round < 150; ++round) {
    const int num_t = 3 + rng() % 2;
    Grammar g = RandomGrammar(rng, num_t, 2 + rng() % 3);
    if (round % 2 == 0) {
      // Close the rules under swapping terminals 0 and 1.
      const size_t n = g.rules.size();
      for (size_t r = 0; r < n; ++r) {
        Rule image = g.rules[r];
        for (SymbolId& s : image.rhs) s = Swap(s, 0, 1);
        g.rules.push_back(image);
      }
    }
    for (int32_t x = 0; x < num_t; ++x)
      for (int32_t y = x + 1; y < num_t; ++y) {
        ++pairs;
        ASSERT_EQ(AreInterchangeable(g, x, y), NaiveSwapInvariant(g, x, y)) << g.DebugString();
      }
    const auto classes = InterchangeableClasses(g);
    if (classes.empty()) continue;
    const auto sentences = Sentences(g, 5);
    for (const auto& cls : classes) {
      for (size_t i = 1; i < cls.size(); ++i) {
        ++interchangeable;
        ASSERT_TRUE(AreInterchangeable(g, cls[0], cls[i]));
        for (const auto& w : sentences) {
          auto image = w;
          for (int32_t& t : image) t = Swap(t, cls[0], cls[i]);
          ASSERT_TRUE(sentences.count(image)) << g.DebugString();
          ++language_checks;
        }
      }
    }
  }
  EXPECT_GT(interchangeable, 50);
  EXPECT_GT(language_checks, 200);
}

std::vector<std::set<std::string>> NamedClasses(const Grammar& g) {
  std::vector<std::set<std::string>> out;
  for (const auto& cls : InterchangeableClasses(g)) {
    std::set<std::string> names;
    for (int32_t t : cls) names.insert(g.terminals[t].kind == PatternKind::kString
                                           ? g.terminals[t].value
                                           : g.terminals[t].name);
    out.push_back(names);
  }
  return out;
}

// Seed: "With the Python grammar, there are seven sets of mutually
// interchangeable terminals, containing 35 terminals in total".
TEST(InterchangeableTest, PythonHasTheSeedsSevenClasses) {
  const char* dir = std::getenv("CFGMASK_LARK_GRAMMARS");
  if (!dir) GTEST_SKIP() << "CFGMASK_LARK_GRAMMARS not set";
  Grammar g;
  LarkReaderOptions options;
  options.start = {"file_input"};
  ASSERT_TRUE(ReadLarkFile(std::string(dir) + "/python.lark", options, &g).ok());
  auto t0 = std::chrono::steady_clock::now();
  const auto classes = NamedClasses(g);
  std::printf("python.lark: %zu classes in %.4f s\n", classes.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const std::vector<std::set<std::string>> expected = {
      {"/=", "%=", "^=", "**=", "*=", ">>=", "|=", "-=", "+=", "//=", "<<=", "@=", "&="},
      {"False", "None", "True"},
      {"+", "-"},
      {"<<", ">>"},
      {"//", "%"},
      {"!=", "<", ">=", "==", "<=", ">", "<>"},
      {"HEX_NUMBER", "FLOAT_NUMBER", "BIN_NUMBER", "OCT_NUMBER", "DEC_NUMBER", "IMAG_NUMBER"}};
  EXPECT_EQ(std::set<std::set<std::string>>(classes.begin(), classes.end()),
            std::set<std::set<std::string>>(expected.begin(), expected.end()));
  size_t total = 0;
  for (const auto& c : classes) total += c.size();
  EXPECT_EQ(total, 35u);
}

TEST(InterchangeableTest, JsonLiteralsAndNumber) {
  Grammar g;
  ASSERT_TRUE(ReadLarkFile(std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/json.lark", {}, &g).ok());
  const auto classes = NamedClasses(g);
  ASSERT_EQ(classes.size(), 1u);
  // value: ... | NUMBER | "true" | "false" | "null", and nowhere else.
  EXPECT_EQ(classes[0], (std::set<std::string>{"true", "false", "null", "NUMBER"}));
}

}  // namespace
}  // namespace cfgmask
