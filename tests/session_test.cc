// Exactness of the decoding session (runtime/session.cc) and of the store it
// reads (the compile, runtime/compile/compile.cc):
//  - differential against Lark itself: for texts generated at random (fixed
//    seed) from lexer-trap fragments, cfgmask accepts a text in full exactly
//    when Lark's LALR + contextual lexer parses it, and every prefix of a
//    text Lark accepts can be fed byte by byte;
//  - the store against the slow reference: the mask from the store rows
//    equals, bit for bit, the per-token simulation (Session::AllowsSlow)
//    over the whole vocabulary at random steps of teacher-forced texts;
//  - invalid tokens leave the session unchanged;
//  - with a suffix (completion in the middle of a file), EOS is in the mask
//    exactly where a copy of the session without the suffix reads the suffix
//    and can end, at random steps of random walks, across rollback and fork.
// Needs $CFGMASK_PYTHON (Lark) and a real tokenizer ($CFGMASK_TOK_LLAMA_SPM).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/compile/compile.h"
#include "runtime/completion.h"
#include "runtime/session.h"
#include "runtime/shared_session.h"
#include "tests/exactness_harness.h"

namespace cfgmask {
namespace {

std::string Env(const char* name) { return TestEnv(name); }
bool Quick() { return TestQuick(); }
#define REQUIRE_ENV(var) CFGMASK_REQUIRE_ENV(var)

class SessionTest : public ::testing::Test {
 protected:
  static const CompiledStore* Store(const std::string& grammar) {
    static std::map<std::string, std::unique_ptr<CompiledStore>> cache;
    auto it = cache.find(grammar);
    if (it != cache.end()) return it->second.get();
    auto store = std::make_unique<CompiledStore>();
    CompileOptions opt;
    Status st = CompileStore(std::string(CFGMASK_SOURCE_DIR) + "/tests/data/engine/" + grammar,
                             Env("CFGMASK_TOK_LLAMA_SPM"), opt, store.get());
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return nullptr;
    return cache.emplace(grammar, std::move(store)).first->second.get();
  }

  static bool AcceptsText(const CompiledStore* store, const std::string& text, bool* prefixes_ok) {
    Session s(store);
    *prefixes_ok = true;
    for (char c : text) {
      if (!s.AdvanceBytes(std::string_view(&c, 1)).ok()) {
        *prefixes_ok = false;
        return false;
      }
    }
    return s.CanEnd();
  }
};

TEST_F(SessionTest, TrapsAgreeWithLark) {
  REQUIRE_ENV("CFGMASK_PYTHON");
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = Store("traps.lark");
  ASSERT_NE(store, nullptr);
  const std::vector<std::string> frags = {
      "if",  "ifx", " ",  "x",    "=",     "==",  "=<",   "<",   "1",   "0",  "1.",   ".5",
      "e5",  "\"",  "\\", "\"\"", "#c\n",  "{",   "}",    "(",   ")",   ";",  ":",    "print",
      "not", "nota", "+", "-",    "\n",    "a1",  "\"a\"", "\\\"", "01", "1.e5", "e",  "2"};
  std::mt19937 rng(12345);
  std::vector<std::string> texts = {
      "x = 1;", "if x == 1: { print x; }", "x=1.e5;", "ifx = 2;", "print \"a\\\"b\";",
      "print \"\";", "x = 0 + .5;", "nota = not a;", "x = 01;", "x = 1 =< 2;", "# c\nx=1;",
      "print \"a\"\"b\";", "print x\n;", "if(x):{}", "x = \"\\\\\";"};
  const int n = Quick() ? 1500 : 8000;
  for (int i = 0; i < n; ++i) {
    std::string t;
    int k = 1 + rng() % 12;
    for (int j = 0; j < k; ++j) t += frags[rng() % frags.size()];
    texts.push_back(t);
  }
  // Mutations of valid programs: many of them valid too.
  const std::vector<std::string> valid = {"x = 1;", "if x == 1: { print x; }", "x = (a + 1.5e3);",
                                          "print \"q\\\"\"; # end\n", "y = not x =< 2;"};
  for (int i = 0; i < n / 2; ++i) {
    std::string t = valid[rng() % valid.size()] + valid[rng() % valid.size()];
    int pos = rng() % (t.size() + 1);
    t.insert(pos, frags[rng() % frags.size()]);
    texts.push_back(t);
  }
  std::vector<int> lark = LarkVerdicts(std::string(CFGMASK_SOURCE_DIR) +
                                           "/tests/data/engine/traps.lark",
                                       "start", "none", texts);
  ASSERT_EQ(lark.size(), texts.size());
  int mismatches = 0, accepted = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    bool prefixes_ok = false;
    bool ours = AcceptsText(store, texts[i], &prefixes_ok);
    accepted += lark[i];
    if (ours != static_cast<bool>(lark[i]) || (lark[i] && !prefixes_ok)) {
      if (++mismatches <= 10) {
        ADD_FAILURE() << "text " << JsonQuote(texts[i]) << ": Lark " << lark[i] << ", cfgmask "
                      << ours << (prefixes_ok ? "" : " (a prefix was rejected)");
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts, " << accepted
                           << " accepted by Lark";
  EXPECT_GT(accepted, 50);
}

TEST_F(SessionTest, StoreMaskEqualsSlowReference) {
  REQUIRE_ENV("CFGMASK_PYTHON");
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  for (const char* g : {"traps.lark", "json.lark"}) {
    const CompiledStore* store = Store(g);
    ASSERT_NE(store, nullptr);
    std::mt19937 rng(7);
    const int walks = Quick() ? 3 : 20;
    for (int w = 0; w < walks; ++w) {
      Session s(store);
      for (int step = 0; step < 12; ++step) {
        std::vector<uint32_t> mask = s.Mask();
        std::vector<int32_t> allowed;
        int mismatches = 0;
        // Every token the mask allows, and (quick size) a random sample of
        // the others; every token at full size.
        std::vector<int32_t> probe;
        for (int32_t t = 0; t < store->vocab_size; ++t) {
          bool fast = (mask[t >> 5] >> (t & 31)) & 1;
          if (fast || !Quick() || rng() % 16 == 0) probe.push_back(t);
        }
        for (int32_t t : probe) {
          bool fast = (mask[t >> 5] >> (t & 31)) & 1;
          bool slow = s.AllowsSlow(t);
          if (fast != slow && ++mismatches <= 5) {
            ADD_FAILURE() << g << " after " << JsonQuote(s.text()) << ": token " << t << " "
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
}

TEST_F(SessionTest, InvalidTokenLeavesSessionUnchanged) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = Store("json.lark");
  ASSERT_NE(store, nullptr);
  Session s(store);
  ASSERT_TRUE(s.AdvanceBytes("[1, ").ok());
  std::vector<uint32_t> before = s.Mask();
  EXPECT_EQ(s.Advance(-1).code(), ErrorCode::kInvalidToken);
  EXPECT_EQ(s.Advance(store->vocab_size).code(), ErrorCode::kInvalidToken);
  EXPECT_FALSE(s.AdvanceBytes("]").ok());
  EXPECT_EQ(s.text(), "[1, ");
  EXPECT_EQ(s.Mask(), before);
  EXPECT_FALSE(s.CanEnd());
  ASSERT_TRUE(s.AdvanceBytes("2]").ok());
  EXPECT_TRUE(s.CanEnd());
}

TEST_F(SessionTest, RollbackAndForkAreExact) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  for (const char* g : {"traps.lark", "json.lark"}) {
    const CompiledStore* store = Store(g);
    ASSERT_NE(store, nullptr);
    std::mt19937 rng(31);
    for (int walk = 0; walk < 6; ++walk) {
      Session s(store);
      std::vector<std::vector<uint32_t>> masks;
      std::vector<int32_t> tokens;
      for (int step = 0; step < 16; ++step) {
        masks.push_back(s.Mask());
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < store->vocab_size; ++t) {
          if (((masks.back()[t >> 5] >> (t & 31)) & 1) && !store->token_special[t]) {
            allowed.push_back(t);
          }
        }
        if (allowed.empty()) break;
        tokens.push_back(allowed[rng() % allowed.size()]);
        ASSERT_TRUE(s.Advance(tokens.back()).ok());
      }
      // A fork taken now is independent of what the original does next.
      Session fork = s.Fork();
      const std::vector<uint32_t> fork_mask = fork.Mask();
      const std::string fork_text = fork.text();
      // Roll back k steps: the masks are those seen on the way forward, and
      // re-advancing gives them again.
      const int32_t k = 1 + static_cast<int32_t>(rng() % tokens.size());
      ASSERT_TRUE(s.Rollback(k).ok());
      const size_t back = tokens.size() - k;
      EXPECT_EQ(s.Mask(), masks[back]) << g;
      for (size_t i = back; i < tokens.size(); ++i) {
        EXPECT_EQ(s.Mask(), masks[i]);
        ASSERT_TRUE(s.Advance(tokens[i]).ok());
      }
      EXPECT_EQ(fork.Mask(), fork_mask);
      EXPECT_EQ(fork.text(), fork_text);
      EXPECT_EQ(s.text(), fork_text);
      EXPECT_FALSE(s.Rollback(s.HistoryLength() + 1).ok());
    }
  }
}

TEST_F(SessionTest, JumpForwardReturnsForcedText) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = Store("json.lark");
  ASSERT_NE(store, nullptr);
  Session s(store);
  ASSERT_TRUE(s.AdvanceBytes("{\"a\": tr").ok());
  EXPECT_EQ(s.JumpForwardString(), "ue");
  ASSERT_TRUE(s.AdvanceBytes("ue").ok());
  EXPECT_EQ(s.JumpForwardString(), "");  // "," or "}" or whitespace
  Session n(store);
  ASSERT_TRUE(n.AdvanceBytes("[nu").ok());
  EXPECT_EQ(n.JumpForwardString(), "ll");
  EXPECT_EQ(n.text(), "[nu");  // the session itself is unchanged
}

TEST_F(SessionTest, SuffixDecidesWhereTheTextEnds) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = Store("json.lark");
  ASSERT_NE(store, nullptr);
  const int32_t eos = store->eos_ids.at(0);
  auto eos_in_mask = [&](Session& s) {
    const std::vector<uint32_t> m = s.Mask();
    return ((m[eos >> 5] >> (eos & 31)) & 1) != 0;
  };
  Session s(store);
  s.SetSuffix("]}");
  EXPECT_EQ(s.suffix(), "]}");
  ASSERT_TRUE(s.AdvanceBytes("{\"a\": [1").ok());
  EXPECT_TRUE(s.CanEnd());  // {"a": [1]}
  EXPECT_TRUE(eos_in_mask(s));
  ASSERT_TRUE(s.AdvanceBytes(",").ok());
  EXPECT_FALSE(s.CanEnd());  // {"a": [1,]} is not JSON
  EXPECT_FALSE(eos_in_mask(s));
  EXPECT_FALSE(s.Advance(eos).ok());
  ASSERT_TRUE(s.AdvanceBytes(" 2").ok());
  EXPECT_TRUE(s.CanEnd());
  // Rollback and a fork keep the suffix and answer for their own text.
  Session fork = s.Fork();
  ASSERT_TRUE(s.Rollback(1).ok());
  EXPECT_FALSE(s.CanEnd());
  EXPECT_TRUE(fork.CanEnd());
  EXPECT_EQ(fork.suffix(), "]}");
  // Without the suffix the same text cannot end; the suffix is not text.
  fork.SetSuffix("");
  EXPECT_FALSE(fork.CanEnd());
  EXPECT_EQ(fork.text(), "{\"a\": [1, 2");
  // A suffix that no text completes: EOS never.
  Session none(store);
  none.SetSuffix("]]]x");
  EXPECT_FALSE(none.CanEnd());
  ASSERT_TRUE(none.AdvanceBytes("[").ok());
  EXPECT_FALSE(none.CanEnd());
  // Teacher forcing the middle of a document: EOS allowed after it.
  const std::string doc = "{\"k\": [true, null, {\"x\": \"y\"}], \"n\": -1.5e3}";
  for (size_t cut = 0; cut <= doc.size(); cut += 7) {
    for (size_t end = cut; end <= doc.size(); end += 5) {
      Session m(store);
      ASSERT_TRUE(m.AdvanceBytes(doc.substr(0, cut)).ok());
      m.SetSuffix(doc.substr(end));
      ASSERT_TRUE(m.AdvanceBytes(doc.substr(cut, end - cut)).ok()) << cut << " " << end;
      EXPECT_TRUE(m.CanEnd()) << cut << " " << end;
      EXPECT_TRUE(eos_in_mask(m)) << cut << " " << end;
    }
  }
}

TEST_F(SessionTest, SuffixEndMatchesSlowReference) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  for (const char* g : {"traps.lark", "json.lark"}) {
    const CompiledStore* store = Store(g);
    ASSERT_NE(store, nullptr);
    const int32_t eos = store->eos_ids.at(0);
    std::mt19937 rng(47);
    int ends = 0, checks = 0;
    // Under the sanitizer half of the walks (each a few hundred
    // thousand session steps).
    const int walks = TestSanitized() ? 16 : 32;
    for (int walk = 0; walk < walks; ++walk) {
      // A complete text (a random walk steered to its end by the shortest
      // completion), cut in three: the session reads the head, the tail is
      // the suffix, the middle is forced at first and then walked at random.
      Session donor(store);
      for (int step = 0; step < 10; ++step) {
        const std::vector<uint32_t> m = donor.Mask();
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < store->vocab_size; ++t) {
          if (((m[t >> 5] >> (t & 31)) & 1) && !store->token_special[t]) allowed.push_back(t);
        }
        if (allowed.empty()) break;
        ASSERT_TRUE(donor.Advance(allowed[rng() % allowed.size()]).ok());
      }
      std::string completion;
      if (!Completer(*store).Find(&donor, 200000, &completion)) continue;
      const std::string text = donor.text() + completion;
      const size_t cut = rng() % (text.size() + 1);
      const size_t end = cut + rng() % (text.size() - cut + 1);
      const std::string suffix = text.substr(end);
      Session s(store);
      ASSERT_TRUE(s.AdvanceBytes(text.substr(0, cut)).ok());
      s.SetSuffix(suffix);
      ASSERT_TRUE(s.AdvanceBytes(text.substr(cut, end - cut)).ok());
      EXPECT_TRUE(s.CanEnd()) << g << " " << text << " at " << cut << ".." << end;
      for (int step = 0; step < 16; ++step) {
        Session plain = s.Fork();
        plain.SetSuffix("");
        const bool want = plain.AdvanceBytes(suffix).ok() && plain.CanEnd();
        const std::vector<uint32_t> m = s.Mask();
        EXPECT_EQ(s.CanEnd(), want) << g << " " << s.text() << " | " << suffix;
        EXPECT_EQ(((m[eos >> 5] >> (eos & 31)) & 1) != 0, want) << g;
        ends += want;
        ++checks;
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < store->vocab_size; ++t) {
          if (((m[t >> 5] >> (t & 31)) & 1) && !store->token_special[t]) allowed.push_back(t);
        }
        if (allowed.empty()) break;
        ASSERT_TRUE(s.Advance(allowed[rng() % allowed.size()]).ok());
        if (step % 5 == 4) {
          ASSERT_TRUE(s.Rollback(1).ok());
        }
      }
    }
    EXPECT_GT(checks, 50) << g;
    EXPECT_GT(ends, 0) << g;
    EXPECT_LT(ends, checks) << g;
  }
}

// Issue 34, item 1, in the decode library: a shared session held by one call
// answers every other call with kBusy ("in use by another thread"), never a
// refusal (kInvalidToken) and never a change; two threads on one session see
// only successes and kBusy for "[", valid whatever the other thread did.
TEST_F(SessionTest, SharedSessionBusyIsAnErrorNeverARefusal) {
  REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  const CompiledStore* store = Store("json.lark");
  ASSERT_NE(store, nullptr);
  SharedSession shared(store);
  std::vector<uint32_t> mask(store->mask_words());
  ASSERT_TRUE(shared.FillMask(mask.data()).ok());
  int32_t valid = -1;
  for (int32_t t = 0; t < store->vocab_size && valid < 0; ++t) {
    if (MaskAllows(mask, t) && store->TokenBytes(t) == "[") valid = t;
  }
  ASSERT_GE(valid, 0);
  {
    SharedSession::Hold held = shared.Take();
    ASSERT_TRUE(held.ok());
    EXPECT_FALSE(shared.Take().ok());
    for (const Status& st :
         {shared.Advance(valid), shared.AdvanceBytes("["), shared.Rollback(0),
          shared.FillMask(mask.data()), shared.Reset(), shared.SetSuffix("]")}) {
      EXPECT_EQ(st.code(), ErrorCode::kBusy);
      EXPECT_NE(st.message().find("in use by another thread"), std::string::npos) << st.message();
    }
    bool b = false;
    std::string text;
    std::unique_ptr<SharedSession> fork;
    int32_t n = 0;
    EXPECT_EQ(shared.CanEnd(&b).code(), ErrorCode::kBusy);
    EXPECT_EQ(shared.IsTerminated(&b).code(), ErrorCode::kBusy);
    EXPECT_EQ(shared.JumpForwardString(8, &text).code(), ErrorCode::kBusy);
    EXPECT_EQ(shared.Text(&text).code(), ErrorCode::kBusy);
    EXPECT_EQ(shared.HistoryLength(&n).code(), ErrorCode::kBusy);
    EXPECT_EQ(shared.Fork(&fork).code(), ErrorCode::kBusy);
    EXPECT_EQ(fork, nullptr);
    EXPECT_EQ(held->text(), "");
    EXPECT_EQ(held->HistoryLength(), 0);
  }
  ASSERT_TRUE(shared.Advance(valid).ok());
  ASSERT_TRUE(shared.Rollback(1).ok());
  // Two threads: each advances by the valid token and rolls it back.
  std::atomic<int64_t> refused{0}, busy{0}, other{0};
  auto run = [&] {
    for (int i = 0; i < (Quick() ? 2000 : 20000); ++i) {
      const Status st = shared.Advance(valid);
      if (st.code() == ErrorCode::kBusy) {
        ++busy;
        continue;
      }
      if (st.code() == ErrorCode::kInvalidToken) ++refused;
      if (!st.ok()) {
        ++other;
        continue;
      }
      Status back;
      while ((back = shared.Rollback(1)).code() == ErrorCode::kBusy) ++busy;
      if (!back.ok()) ++other;
    }
  };
  std::thread a(run), b(run);
  a.join();
  b.join();
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(other.load(), 0);
  int32_t n = -1;
  ASSERT_TRUE(shared.HistoryLength(&n).ok());
  EXPECT_EQ(n, 0);
}

}  // namespace
}  // namespace cfgmask
