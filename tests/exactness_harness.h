// Shared checks of the exactness tests (session_test.cc,
// python_exactness_test.cc, sql_exactness_test.cc): Lark as the reference for
// full-text acceptance (tests/tools/lark_accepts.py), teacher forcing of real
// texts, random mutations, and the store's mask against the per-token slow
// reference (Session::AllowsSlow).
#ifndef CFGMASK_TESTS_EXACTNESS_HARNESS_H_
#define CFGMASK_TESTS_EXACTNESS_HARNESS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/session.h"
#include "tests/test_store_cache.h"

namespace cfgmask {

// Skips (fails under CI=true) when a required environment variable is unset.
#define CFGMASK_REQUIRE_ENV(var)                                                   \
  do {                                                                             \
    if (::cfgmask::TestEnv(var).empty()) {                                         \
      if (::cfgmask::TestEnv("CI") == "true") FAIL() << var " is not set (run setup.sh)"; \
      GTEST_SKIP() << var " is not set";                                           \
    }                                                                              \
  } while (0)

inline std::string JsonQuote(const std::string& s) {
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

// Lark's verdict (1 = parses in full) on each text.
inline std::vector<int> LarkVerdicts(const std::string& grammar, const std::string& start,
                                     const std::string& indenter,
                                     const std::vector<std::string>& texts) {
  char in_path[] = "/tmp/cfgmask_lark_in_XXXXXX";
  int fd = mkstemp(in_path);
  close(fd);
  {
    std::ofstream f(in_path);
    for (const auto& t : texts) f << JsonQuote(t) << "\n";
  }
  std::string cmd = TestEnv("CFGMASK_PYTHON") + " " + CFGMASK_SOURCE_DIR +
                    "/tests/tools/lark_accepts.py " + grammar + " " + start + " " + indenter +
                    " < " + in_path;
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<int> out;
  char line[16];
  while (p && std::fgets(line, sizeof line, p)) out.push_back(line[0] == '1');
  if (p) pclose(p);
  std::remove(in_path);
  return out;
}

// cfgmask's verdict: the whole text is a valid prefix and may end there.
inline bool AcceptsText(const CompiledStore* store, const std::string& text) {
  Session s(store);
  return s.AdvanceBytes(text).ok() && s.CanEnd();
}

// Every text is accepted exactly when Lark accepts it; each accepted one is
// teacher-forced with a greedy (longest token first) segmentation, and every
// token must be in its step's mask, EOS at the end.  Returns how many Lark
// accepted.
inline int ExpectTextsExact(const CompiledStore* store, const std::vector<std::string>& texts,
                            const std::vector<int>& lark) {
  EXPECT_EQ(lark.size(), texts.size());
  if (lark.size() != texts.size()) return 0;
  std::unordered_map<std::string, int32_t> by_bytes;
  for (int32_t t = 0; t < store->vocab_size; ++t) {
    if (!store->token_special[t] && !store->TokenBytes(t).empty()) {
      by_bytes.emplace(std::string(store->TokenBytes(t)), t);
    }
  }
  int accepted = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    EXPECT_EQ(AcceptsText(store, text), static_cast<bool>(lark[i])) << JsonQuote(text.substr(0, 200));
    if (!lark[i]) continue;
    ++accepted;
    Session s(store);
    size_t pos = 0;
    while (pos < text.size()) {
      int32_t tok = -1;
      for (size_t len = std::min<size_t>(24, text.size() - pos); len > 0 && tok < 0; --len) {
        auto it = by_bytes.find(text.substr(pos, len));
        if (it != by_bytes.end()) tok = it->second;
      }
      if (tok < 0) {
        ADD_FAILURE() << "no token for offset " << pos;
        return accepted;
      }
      std::vector<uint32_t> mask = s.Mask();
      if (!((mask[tok >> 5] >> (tok & 31)) & 1)) {
        ADD_FAILURE() << "text " << i << " offset " << pos << ": token "
                      << JsonQuote(std::string(store->TokenBytes(tok))) << " not in the mask";
        return accepted;
      }
      EXPECT_TRUE(s.Advance(tok).ok());
      pos += store->TokenBytes(tok).size();
    }
    EXPECT_TRUE(s.CanEnd()) << "text " << i;
  }
  return accepted;
}

// Mutations of `bases` (insert a fragment, delete 1-3 bytes, insert one of
// `chars`), with a fixed seed: full-text acceptance must equal Lark's.
// Returns how many Lark accepted.
inline int ExpectMutationsAgree(const CompiledStore* store, const std::vector<std::string>& bases,
                                const std::vector<std::string>& frags, const std::string& chars,
                                int n, uint32_t seed, const std::string& grammar,
                                const std::string& start, const std::string& indenter) {
  std::mt19937 rng(seed);
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    std::string t = bases[rng() % bases.size()];
    int muts = rng() % 3;
    for (int m = 0; m < muts && !t.empty(); ++m) {
      size_t pos = rng() % (t.size() + 1);
      switch (rng() % 3) {
        case 0: t.insert(pos, frags[rng() % frags.size()]); break;
        case 1: t.erase(std::min(pos, t.size() - 1), 1 + rng() % 3); break;
        default: t.insert(pos, std::string(1, chars[rng() % chars.size()])); break;
      }
    }
    texts.push_back(t);
  }
  std::vector<int> lark = LarkVerdicts(grammar, start, indenter, texts);
  EXPECT_EQ(lark.size(), texts.size());
  if (lark.size() != texts.size()) return 0;
  int mismatches = 0, accepted = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    bool ours = AcceptsText(store, texts[i]);
    accepted += lark[i];
    if (ours != static_cast<bool>(lark[i]) && ++mismatches <= 10) {
      ADD_FAILURE() << JsonQuote(texts[i]) << ": Lark " << lark[i] << ", cfgmask " << ours;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts, " << accepted
                           << " accepted by Lark";
  return accepted;
}

// From each prefix, `steps` random allowed tokens; at each step the mask
// from the store equals Session::AllowsSlow on every allowed token and on a
// sample (quick) or all (full) of the others.
inline void ExpectMaskEqualsSlow(const CompiledStore* store, const std::vector<std::string>& prefixes,
                                 int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const std::string& prefix : prefixes) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes(prefix).ok()) << JsonQuote(prefix);
    for (int step = 0; step < steps; ++step) {
      std::vector<uint32_t> mask = s.Mask();
      std::vector<int32_t> allowed;
      int mismatches = 0;
      for (int32_t t = 0; t < store->vocab_size; ++t) {
        bool fast = (mask[t >> 5] >> (t & 31)) & 1;
        if (!fast && TestQuick() && rng() % 8 != 0) continue;
        bool slow = s.AllowsSlow(t);
        if (fast != slow && ++mismatches <= 5) {
          ADD_FAILURE() << "after " << JsonQuote(s.text()) << ": token " << t << " "
                        << JsonQuote(std::string(store->TokenBytes(t))) << " fast " << fast
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

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_EXACTNESS_HARNESS_H_
