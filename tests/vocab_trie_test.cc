// Tests of lexer/vocab_trie.cc: the flat pre-order trie against brute force
// over the token list.  Small random vocabularies (short strings over a few
// bytes including 0x00 and 0xFF, duplicates, empty and special tokens) check
// every structural invariant and random prefix queries; the real tokenizer
// files (CFGMASK_TOK_*; skipped without them, failed under CI=true) check
// that every token is reachable and that subtree walks enumerate exactly the
// tokens with a given prefix.
#include "lexer/vocab_trie.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace cfgmask {
namespace {

Vocabulary MakeVocabulary(const std::vector<std::string>& tokens,
                          const std::vector<uint8_t>& special = {}) {
  Vocabulary v;
  v.tokens = tokens;
  v.special = special.empty() ? std::vector<uint8_t>(tokens.size(), 0) : special;
  v.identity = VocabularyIdentity(v);
  return v;
}

bool Included(const Vocabulary& v, int32_t id) { return !v.special[id] && !v.tokens[id].empty(); }

// Checks every invariant of `trie` against `vocab` by brute force.
void CheckTrie(const Vocabulary& vocab, const VocabTrie& trie) {
  const int32_t n = trie.num_nodes();
  ASSERT_GE(n, 1);
  EXPECT_EQ(trie.parent(0), -1);
  EXPECT_EQ(trie.depth(0), 0);
  EXPECT_EQ(trie.subtree_end(0), n);
  EXPECT_TRUE(trie.tokens_at(0).empty());

  // Parents precede children, depths step by one, labels are distinct and
  // increasing among siblings, and subtree_end(m) is one past the last node
  // whose ancestor chain contains m.
  std::vector<int32_t> last_descendant(n);
  for (int32_t m = 0; m < n; ++m) last_descendant[m] = m;
  for (int32_t m = 1; m < n; ++m) {
    int32_t p = trie.parent(m);
    ASSERT_GE(p, 0);
    ASSERT_LT(p, m);
    EXPECT_EQ(trie.depth(m), trie.depth(p) + 1);
    for (int32_t a = p; a >= 0; a = trie.parent(a)) last_descendant[a] = m;
  }
  std::vector<std::vector<int32_t>> expected_children(n);
  for (int32_t m = 1; m < n; ++m) expected_children[trie.parent(m)].push_back(m);
  for (int32_t m = 0; m < n; ++m) {
    ASSERT_EQ(trie.subtree_end(m), last_descendant[m] + 1) << "node " << m;
    std::vector<int32_t> children;
    for (int32_t c = trie.first_child(m); c >= 0; c = trie.next_sibling(c)) children.push_back(c);
    ASSERT_EQ(children, expected_children[m]) << "node " << m;
    for (size_t k = 1; k < children.size(); ++k) {
      EXPECT_LT(trie.byte(children[k - 1]), trie.byte(children[k]));
    }
    if (m > 0 && trie.first_child(m) < 0) {
      EXPECT_FALSE(trie.tokens_at(m).empty()) << "leaf without a token";
    }
  }

  // Every included token ends at the node spelling it; nothing else is there.
  int32_t included = 0;
  std::vector<int32_t> seen_at(vocab.size(), -1);
  for (int32_t m = 0; m < n; ++m) {
    std::span<const int32_t> ids = trie.tokens_at(m);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    for (int32_t id : ids) {
      ASSERT_TRUE(Included(vocab, id));
      EXPECT_EQ(trie.Prefix(m), vocab.tokens[id]);
      EXPECT_EQ(seen_at[id], -1) << "token " << id << " twice";
      seen_at[id] = m;
    }
  }
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (!Included(vocab, id)) continue;
    ++included;
    ASSERT_GE(seen_at[id], 0) << "token " << id << " unreachable";
    EXPECT_EQ(trie.Find(vocab.tokens[id]), seen_at[id]);
  }
  EXPECT_EQ(trie.num_tokens(), included);
}

// Tokens in the subtree of Find(prefix), by the index-range walk.
std::vector<int32_t> TokensWithPrefix(const VocabTrie& trie, const std::string& prefix) {
  std::vector<int32_t> out;
  int32_t node = trie.Find(prefix);
  if (node < 0) return out;
  for (int32_t m = node; m < trie.subtree_end(node); ++m) {
    for (int32_t id : trie.tokens_at(m)) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Tokens that are prefixes of `text`, by walking down the trie.
std::vector<int32_t> TokensPrefixOf(const VocabTrie& trie, const std::string& text) {
  std::vector<int32_t> out;
  int32_t node = 0;
  for (char c : text) {
    node = trie.Child(node, static_cast<uint8_t>(c));
    if (node < 0) break;
    for (int32_t id : trie.tokens_at(node)) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void CheckPrefixQueries(const Vocabulary& vocab, const VocabTrie& trie, std::mt19937_64* rng,
                        int queries) {
  for (int q = 0; q < queries; ++q) {
    // Half the queries are prefixes of real tokens, half are random bytes.
    std::string prefix;
    int32_t id = static_cast<int32_t>((*rng)() % vocab.size());
    if (q % 2 == 0 && !vocab.tokens[id].empty()) {
      prefix = vocab.tokens[id].substr(0, (*rng)() % (vocab.tokens[id].size() + 1));
    } else {
      int len = static_cast<int>((*rng)() % 4);
      for (int k = 0; k < len; ++k) prefix.push_back(static_cast<char>((*rng)() % 256));
    }
    std::vector<int32_t> with_prefix, prefix_of;
    for (int32_t t = 0; t < vocab.size(); ++t) {
      if (!Included(vocab, t)) continue;
      const std::string& s = vocab.tokens[t];
      if (s.compare(0, prefix.size(), prefix) == 0) with_prefix.push_back(t);
      if (prefix.compare(0, s.size(), s) == 0) prefix_of.push_back(t);
    }
    ASSERT_EQ(TokensWithPrefix(trie, prefix), with_prefix) << "prefix of size " << prefix.size();
    ASSERT_EQ(TokensPrefixOf(trie, prefix), prefix_of);
  }
}

TEST(VocabTrie, EmptyVocabulary) {
  VocabTrie trie = VocabTrie::Build(MakeVocabulary({}));
  EXPECT_EQ(trie.num_nodes(), 1);
  EXPECT_EQ(trie.num_tokens(), 0);
  EXPECT_EQ(trie.Find(""), 0);
  EXPECT_EQ(trie.Find("a"), -1);
  VocabTrie root_only;
  EXPECT_EQ(root_only.num_nodes(), 1);
  EXPECT_EQ(root_only.subtree_end(0), 1);
}

TEST(VocabTrie, SmallExactLayout) {
  // ids:                        0     1     2    3     4    5   6 (special)  7
  Vocabulary v = MakeVocabulary({"ab", "a", "b", "abc", "a", "", "ab", "\xFF"},
                                {0, 0, 0, 0, 0, 0, 1, 0});
  VocabTrie trie = VocabTrie::Build(v);
  CheckTrie(v, trie);
  // Pre-order: root, a, ab, abc, b, \xFF.
  ASSERT_EQ(trie.num_nodes(), 6);
  EXPECT_EQ(trie.Prefix(1), "a");
  EXPECT_EQ(trie.Prefix(2), "ab");
  EXPECT_EQ(trie.Prefix(3), "abc");
  EXPECT_EQ(trie.Prefix(4), "b");
  EXPECT_EQ(trie.Prefix(5), "\xFF");
  EXPECT_EQ(std::vector<int32_t>(trie.tokens_at(1).begin(), trie.tokens_at(1).end()),
            (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(trie.subtree_end(1), 4);
  EXPECT_EQ(trie.subtree_end(2), 4);
  EXPECT_EQ(trie.subtree_end(4), 5);
  EXPECT_EQ(trie.next_sibling(1), 4);
  EXPECT_EQ(trie.next_sibling(4), 5);
  EXPECT_EQ(trie.next_sibling(5), -1);
  EXPECT_EQ(trie.max_depth(), 3);
  EXPECT_EQ(trie.num_tokens(), 6);
  EXPECT_NE(trie.DebugString().find("6 nodes, 6 tokens"), std::string::npos);

  // A subset build sees only the listed ids.
  std::vector<int32_t> subset = {3, 2, 6};
  VocabTrie part = VocabTrie::Build(v, subset);
  EXPECT_EQ(part.num_tokens(), 2);
  EXPECT_EQ(part.num_nodes(), 5);  // root, a, ab, abc, b
}

TEST(VocabTrie, RandomVocabulariesAgainstBruteForce) {
  std::mt19937_64 rng(20240611);
  const std::string alphabet("ab\x00\xff\x7f", 5);
  for (int round = 0; round < 300; ++round) {
    int size = static_cast<int>(rng() % 60);
    std::vector<std::string> tokens(size);
    std::vector<uint8_t> special(size);
    for (int i = 0; i < size; ++i) {
      int len = static_cast<int>(rng() % 6);
      for (int k = 0; k < len; ++k) tokens[i].push_back(alphabet[rng() % alphabet.size()]);
      special[i] = rng() % 10 == 0;
      if (i > 0 && rng() % 8 == 0) tokens[i] = tokens[rng() % i];  // duplicates
    }
    Vocabulary v = MakeVocabulary(tokens, special);
    VocabTrie trie = VocabTrie::Build(v);
    CheckTrie(v, trie);
    if (size > 0) CheckPrefixQueries(v, trie, &rng, 40);
  }
}

TEST(VocabTrie, RealTokenizers) {
  const char* kFiles[] = {"CFGMASK_TOK_QWEN2", "CFGMASK_TOK_LLAMA_SPM", "CFGMASK_TOK_SMOLLM2",
                          "CFGMASK_TOK_QWEN_TIKTOKEN"};
  std::mt19937_64 rng(7);
  for (const char* env : kFiles) {
    const char* path = std::getenv(env);
    if (path == nullptr || access(path, R_OK) != 0) {
      std::string why = std::string("$") + env + " is unset or unreadable (source .cache/env.sh)";
      const char* ci = std::getenv("CI");
      if (ci != nullptr && std::string(ci) == "true") FAIL() << why;
      GTEST_SKIP() << why;
    }
    Vocabulary v;
    Status status = LoadVocabulary(path, &v);
    ASSERT_TRUE(status.ok()) << status.ToString();
    auto start = std::chrono::steady_clock::now();
    VocabTrie trie = VocabTrie::Build(v);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("[   INFO   ] %s: trie of %d tokens, %d nodes, max depth %d, built in %.1f ms\n",
                v.name.c_str(), trie.num_tokens(), trie.num_nodes(), trie.max_depth(), ms);
    CheckTrie(v, trie);
    CheckPrefixQueries(v, trie, &rng, 200);
  }
}

}  // namespace
}  // namespace cfgmask
