// Tests of the serving operations of a decoding session (runtime/session.h)
// and of jump-forward decoding (runtime/jump_forward.h), on the Python
// (python.lark, file_input) and SQL (grammar/lark/sql.lark) stores with the
// LLaMA SentencePiece tokenizer, teacher-forced on real texts:
//  - random interleavings (fixed seed) of Advance, Rollback(k), Fork(),
//    Reset() and EOS over several live sessions: after every operation a
//    session's mask, text and history equal those of a fresh session that
//    was only ever advanced by the same tokens, and re-advancing after a
//    rollback gives back the masks seen on the way forward, so forks are
//    independent of each other and of their origin;
//  - thread safety: several threads, each running its own sessions on the
//    two shared stores, produce the same masks as one thread;
//  - jump-forward: the forced text is tokenised into tokens the session
//    accepts in turn and that spell it, every step inside it is forced (all
//    allowed tokens start with the forced byte, EOS is not allowed), and
//    where it stops the grammar has a choice or the text may end.
// Quick sizes under CFGMASK_QUICK=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/jump_forward.h"
#include "runtime/session.h"
#include "tests/serving_corpus.h"
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

#define REQUIRE_CORPUS_ENV()              \
  do {                                    \
    REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM"); \
    REQUIRE_ENV("CFGMASK_PYTHON");        \
    REQUIRE_ENV("CFGMASK_LARK_GRAMMARS"); \
  } while (0)

bool Bit(const std::vector<uint32_t>& m, int32_t t) { return (m[t >> 5] >> (t & 31)) & 1; }

struct Language {
  const CompiledStore* store = nullptr;
  std::vector<ForcedText> texts;
};

// Python and SQL on the SentencePiece vocabulary, loaded once.
const std::vector<Language>& Languages() {
  static std::vector<Language> langs;
  if (langs.empty()) {
    Status st;
    Language py, sql;
    py.store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
    EXPECT_TRUE(py.store != nullptr) << st.message();
    sql.store = SqlStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
    EXPECT_TRUE(sql.store != nullptr) << st.message();
    if (!py.store || !sql.store) return langs;
    py.texts = ForceTexts(py.store, StdlibTexts(TestQuick() ? 8 : 40, 1500, 12000));
    sql.texts = ForceTexts(sql.store, SqlTexts(TestQuick() ? 40 : 400));
    EXPECT_FALSE(py.texts.empty());
    EXPECT_FALSE(sql.texts.empty());
    langs = {std::move(py), std::move(sql)};
  }
  return langs;
}

// A session under test with the token sequence it stands for.  While
// `tokens` is a prefix of the text's tokens (diverged == INT_MAX, or at
// least tokens.size()), Advance follows the text; a forked copy may wander
// off with random allowed tokens.
struct Cursor {
  const Language* lang;
  const ForcedText* text;
  std::unique_ptr<Session> session;
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint32_t>> masks;  // masks[i]: the mask after tokens[0..i)
  size_t diverged = SIZE_MAX;                // first index off the text
  bool wander = false;
  bool ended = false;                        // advanced by EOS
};

// The mask, text and history of `c` equal those of a session that was only
// ever advanced by c.tokens.
void ExpectMatchesReplay(const Cursor& c, const std::string& what) {
  Session fresh(c.lang->store);
  for (int32_t t : c.tokens) ASSERT_TRUE(fresh.Advance(t).ok()) << what;
  if (c.ended) {
    ASSERT_TRUE(fresh.CanEnd()) << what;
    ASSERT_TRUE(fresh.Advance(c.lang->store->eos_ids[0]).ok()) << what;
  }
  EXPECT_EQ(c.session->IsTerminated(), c.ended) << what;
  EXPECT_EQ(c.session->text(), fresh.text()) << what;
  EXPECT_EQ(c.session->HistoryLength(),
            static_cast<int32_t>(c.tokens.size()) + (c.ended ? 1 : 0))
      << what;
  ASSERT_EQ(c.session->Mask(), fresh.Mask()) << what << " at byte " << fresh.text().size();
}

TEST(ServingTest, RollbackForkResetRandomInterleavings) {
  REQUIRE_CORPUS_ENV();
  const std::vector<Language>& langs = Languages();
  ASSERT_EQ(langs.size(), 2u);
  std::mt19937 rng(2718);
  std::vector<Cursor> cursors;
  auto start = [&](Cursor* c, const Language* lang) {
    c->lang = lang;
    c->text = &lang->texts[rng() % lang->texts.size()];
    c->session = std::make_unique<Session>(lang->store);
    c->tokens.clear();
    c->masks = {c->session->Mask()};
    c->diverged = SIZE_MAX;
    c->wander = false;
    c->ended = false;
  };
  for (int i = 0; i < 4; ++i) {
    cursors.emplace_back();
    start(&cursors.back(), &langs[i % 2]);
  }
  const int ops = TestQuick() ? 400 : 4000;
  int counts[6] = {0, 0, 0, 0, 0, 0};  // advance, rollback, fork, reset, eos, re-advance
  for (int op = 0; op < ops; ++op) {
    Cursor& c = cursors[rng() % cursors.size()];
    const std::string what = "op " + std::to_string(op);
    const uint32_t kind = rng() % 16;
    if (c.ended || kind < 3) {
      // Rollback(k), then possibly re-advance by the same tokens: the masks
      // must be those recorded on the way forward.
      const int32_t history = c.session->HistoryLength();
      const int32_t k = static_cast<int32_t>(rng() % (std::min(history, 6) + 1));
      ASSERT_TRUE(c.session->Rollback(k).ok()) << what;
      EXPECT_FALSE(c.session->Rollback(c.session->HistoryLength() + 1).ok()) << what;
      int32_t token_k = k;
      if (c.ended && k > 0) {
        c.ended = false;
        --token_k;
      }
      const std::vector<int32_t> undone(c.tokens.end() - token_k, c.tokens.end());
      c.tokens.resize(c.tokens.size() - token_k);
      c.masks.resize(c.tokens.size() + 1);
      if (c.diverged >= c.tokens.size()) c.diverged = SIZE_MAX;
      ++counts[1];
      ASSERT_EQ(c.session->Mask(), c.masks.back()) << what << " after Rollback(" << k << ")";
      if (!c.ended && rng() % 2 == 0) {
        for (int32_t t : undone) {
          ASSERT_TRUE(c.session->Advance(t).ok()) << what;
          c.tokens.push_back(t);
          c.masks.push_back(c.session->Mask());
        }
        if (c.diverged == SIZE_MAX) {
          for (size_t i = 0; i < c.tokens.size(); ++i) {
            if (i >= c.text->tokens.size() || c.tokens[i] != c.text->tokens[i]) {
              c.diverged = i;
              break;
            }
          }
        }
        ++counts[5];
      }
    } else if (kind < 5) {
      // Fork: the copy wanders off on random tokens half of the time.  With
      // eight cursors live, the copy replaces another one.
      Cursor f;
      f.lang = c.lang;
      f.text = c.text;
      f.session = std::make_unique<Session>(c.session->Fork());
      f.tokens = c.tokens;
      f.masks = c.masks;
      f.diverged = c.diverged;
      f.wander = rng() % 2 == 0;
      f.ended = c.ended;
      if (cursors.size() < 8) {
        cursors.push_back(std::move(f));
      } else {
        size_t victim = rng() % cursors.size();
        if (&cursors[victim] == &c) victim = (victim + 1) % cursors.size();
        cursors[victim] = std::move(f);
      }
      ++counts[2];
      continue;  // `c` may have moved; both are checked by later operations
    } else if (kind < 6 || c.tokens.size() > 160) {
      // Reset, or a new session on either store (mostly SQL, whose short
      // statements reach their end and EOS).
      if (rng() % 2 == 0) {
        c.session->Reset();
        c.text = &c.lang->texts[rng() % c.lang->texts.size()];
        c.tokens.clear();
        c.masks = {c.session->Mask()};
        c.diverged = SIZE_MAX;
        c.wander = false;
        c.ended = false;
      } else {
        start(&c, &langs[rng() % 3 == 0 ? 0 : 1]);
      }
      ++counts[3];
    } else {
      // Advance by the text's next token, or a random allowed one.
      const bool on_text = c.diverged == SIZE_MAX && c.tokens.size() < c.text->tokens.size();
      const std::vector<uint32_t>& mask = c.masks.back();
      if (!c.wander && c.diverged == SIZE_MAX && c.tokens.size() == c.text->tokens.size()) {
        const int32_t eos = c.lang->store->eos_ids[0];
        ASSERT_TRUE(Bit(mask, eos)) << what;
        ASSERT_TRUE(c.session->Advance(eos).ok()) << what;
        EXPECT_TRUE(c.session->IsTerminated()) << what;
        EXPECT_FALSE(c.session->Advance(c.text->tokens[0]).ok()) << what;
        c.ended = true;
        ++counts[4];
      } else {
        int32_t token = -1;
        if (on_text && !(c.wander && rng() % 2 == 0)) {
          token = c.text->tokens[c.tokens.size()];
        } else {
          std::vector<int32_t> allowed;
          const CompiledStore& s = *c.lang->store;
          for (int32_t t = 0; t < s.vocab_size; ++t) {
            if (Bit(mask, t) && !s.token_special[t]) allowed.push_back(t);
          }
          if (!allowed.empty()) token = allowed[rng() % allowed.size()];
        }
        if (token < 0) continue;
        ASSERT_TRUE(Bit(mask, token)) << what;
        Status st = c.session->Advance(token);
        if (!st.ok()) {
          // Only a hypothesis limit may refuse an allowed token; the session
          // is then unchanged.
          ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << what << ": " << st.message();
        } else {
          const size_t i = c.tokens.size();
          if (c.diverged == SIZE_MAX &&
              (i >= c.text->tokens.size() || c.text->tokens[i] != token)) {
            c.diverged = i;
          }
          c.tokens.push_back(token);
          c.masks.push_back(c.session->Mask());
          ++counts[0];
        }
      }
    }
    ExpectMatchesReplay(c, what);
    if (HasFatalFailure()) return;
    // Now and then every cursor: the others were not disturbed.
    if (op % 50 == 49) {
      for (const Cursor& o : cursors) {
        ExpectMatchesReplay(o, what + " (all)");
        if (HasFatalFailure()) return;
      }
    }
  }
  for (int k = 0; k < 6; ++k) EXPECT_GT(counts[k], 0) << "operation kind " << k << " never ran";
  EXPECT_GT(counts[0], ops / 4);
}

// A mask digest per step of teacher-forcing `t` (FNV-1a over the words).
std::vector<uint64_t> MaskDigests(const CompiledStore* store, const ForcedText& t, size_t steps) {
  std::vector<uint64_t> out;
  Session s(store);
  std::vector<uint32_t> mask(store->mask_words());
  for (size_t i = 0; i <= std::min(steps, t.tokens.size()); ++i) {
    s.FillMask(mask.data());
    uint64_t h = 1469598103934665603ull;
    for (uint32_t w : mask) h = (h ^ w) * 1099511628211ull;
    out.push_back(h);
    if (i < t.tokens.size() && !s.Advance(t.tokens[i]).ok()) break;
  }
  return out;
}

TEST(ServingTest, ThreadsSharingStoresGiveSerialMasks) {
  REQUIRE_CORPUS_ENV();
  const std::vector<Language>& langs = Languages();
  ASSERT_EQ(langs.size(), 2u);
  struct Job {
    const CompiledStore* store;
    const ForcedText* text;
  };
  std::vector<Job> jobs;
  const size_t per_language = TestQuick() ? 8 : 40;
  for (size_t i = 0; i < per_language; ++i) {
    for (const Language& l : langs) jobs.push_back({l.store, &l.texts[i % l.texts.size()]});
  }
  const size_t steps = TestQuick() ? 60 : 400;
  std::vector<std::vector<uint64_t>> serial;
  for (const Job& j : jobs) serial.push_back(MaskDigests(j.store, *j.text, steps));
  // Each thread runs every job, starting at a different one, so that the
  // same store rows are read by several threads at once.
  const int kThreads = 4;
  std::vector<std::vector<std::vector<uint64_t>>> parallel(
      kThreads, std::vector<std::vector<uint64_t>>(jobs.size()));
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (size_t k = 0; k < jobs.size(); ++k) {
        const size_t j = (k + th * jobs.size() / kThreads) % jobs.size();
        parallel[th][j] = MaskDigests(jobs[j].store, *jobs[j].text, steps);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  size_t compared = 0;
  for (int th = 0; th < kThreads; ++th) {
    for (size_t j = 0; j < jobs.size(); ++j) {
      ASSERT_EQ(parallel[th][j], serial[j]) << "thread " << th << " job " << j;
      compared += serial[j].size();
    }
  }
  EXPECT_GT(compared, jobs.size() * kThreads * 10);
}

// Checks one jump-forward result on `session` (unchanged by it).
void CheckJumpForward(const JumpForwarder& jf, const Session& session, const std::string& what,
                      int* nonempty) {
  const std::string before = session.text();
  const JumpForwardResult r = jf.Compute(session);
  EXPECT_EQ(session.text(), before) << what;
  EXPECT_EQ(r.text, session.JumpForwardString()) << what;
  // A byte-fallback vocabulary spells every byte.
  ASSERT_EQ(r.covered, static_cast<int32_t>(r.text.size())) << what;
  const CompiledStore& store = *session.store();
  Session fork = session.Fork();
  std::string spelled;
  for (int32_t t : r.tokens) {
    // Inside the forced text every allowed token starts with the forced
    // byte, and EOS is not allowed.
    const std::vector<uint32_t> mask = fork.Mask();
    ASSERT_TRUE(Bit(mask, t)) << what;
    const char forced = r.text[spelled.size()];
    for (int32_t u = 0; u < store.vocab_size; ++u) {
      if (!Bit(mask, u)) continue;
      ASSERT_FALSE(store.token_special[u]) << what << ": EOS allowed inside forced text";
      ASSERT_FALSE(store.TokenBytes(u).empty()) << what;
      ASSERT_EQ(store.TokenBytes(u)[0], forced) << what << " token " << u;
    }
    ASSERT_TRUE(fork.Advance(t).ok()) << what;
    spelled += store.TokenBytes(t);
  }
  EXPECT_EQ(spelled, r.text) << what;
  EXPECT_EQ(fork.text(), before + r.text) << what;
  // Where it stops, the text may end, or two different bytes may follow.
  if (r.text.size() < 256) {
    const std::vector<uint32_t> mask = fork.Mask();
    bool can_end = false;
    std::vector<bool> first(256, false);
    int distinct = 0;
    for (int32_t u = 0; u < store.vocab_size; ++u) {
      if (!Bit(mask, u)) continue;
      if (store.token_special[u] || store.TokenBytes(u).empty()) {
        can_end = true;
        continue;
      }
      const uint8_t b = static_cast<uint8_t>(store.TokenBytes(u)[0]);
      if (!first[b]) ++distinct;
      first[b] = true;
    }
    EXPECT_TRUE(can_end || distinct >= 2 || fork.IsTerminated()) << what << " after '" << r.text << "'";
  }
  if (!r.text.empty()) ++*nonempty;
}

TEST(ServingTest, JumpForwardKnownTexts) {
  REQUIRE_CORPUS_ENV();
  const std::vector<Language>& langs = Languages();
  ASSERT_EQ(langs.size(), 2u);
  const JumpForwarder py(*langs[0].store);
  int nonempty = 0;
  struct Case {
    const char* prefix;
    const char* forced;
  };
  // After a complete condition of a conditional expression only `else` can
  // follow; a keyword cut in the middle is finished; after `from m ` a
  // space-led keyword is not forced, as `.` may also follow.
  for (const Case& c : {Case{"x = y if z el", "se"}, Case{"from os impo", "rt"},
                        Case{"x = 1\n", ""}, Case{"", ""}}) {
    Session s(langs[0].store);
    ASSERT_TRUE(s.AdvanceBytes(c.prefix).ok()) << c.prefix;
    EXPECT_EQ(s.JumpForwardString(), c.forced) << c.prefix;
    CheckJumpForward(py, s, c.prefix, &nonempty);
  }
  EXPECT_EQ(nonempty, 2);
}

TEST(ServingTest, JumpForwardOnCorpusPrefixes) {
  REQUIRE_CORPUS_ENV();
  const std::vector<Language>& langs = Languages();
  ASSERT_EQ(langs.size(), 2u);
  std::mt19937 rng(161);
  int nonempty = 0, checked = 0;
  for (const Language& l : langs) {
    const JumpForwarder jf(*l.store);
    const int n = TestQuick() ? 60 : 600;
    for (int i = 0; i < n; ++i) {
      // A byte prefix of a real text, cut at random or (every other one) one
      // byte into an ` import ` or ` in ` (of `from m import`, `for x in`),
      // where the rest of the keyword is forced.
      const ForcedText& t = l.texts[rng() % l.texts.size()];
      const size_t limit = std::min<size_t>(t.text.size(), 3000);
      size_t cut = rng() % (limit + 1);
      if (i % 2 == 1) {
        for (const char* word : {" import ", " in "}) {
          const size_t at = t.text.find(word, rng() % (limit + 1));
          if (at != std::string::npos && at + 2 <= limit) {
            cut = at + 2;
            break;
          }
        }
      }
      Session s(l.store);
      ASSERT_TRUE(s.AdvanceBytes(std::string_view(t.text).substr(0, cut)).ok());
      CheckJumpForward(jf, s, "cut " + std::to_string(cut), &nonempty);
      if (HasFatalFailure()) return;
      ++checked;
    }
  }
  ::testing::Test::RecordProperty("nonempty", nonempty);
  EXPECT_EQ(checked, TestQuick() ? 120 : 1200);
  EXPECT_GT(nonempty, 0);
}

TEST(ServingTest, JumpForwardTokensOnSmallVocabularyTrie) {
  REQUIRE_CORPUS_ENV();
  const std::vector<Language>& langs = Languages();
  ASSERT_EQ(langs.size(), 2u);
  // Tokenize() alone: greedy longest match spells any accepted text in
  // tokens the session takes, longest first.
  const JumpForwarder jf(*langs[0].store);
  Session s(langs[0].store);
  std::vector<int32_t> tokens;
  const std::string text = "import os\nimport sys\n";
  EXPECT_EQ(jf.Tokenize(s, text, &tokens), static_cast<int32_t>(text.size()));
  std::string spelled;
  for (int32_t t : tokens) spelled += langs[0].store->TokenBytes(t);
  EXPECT_EQ(spelled, text);
  EXPECT_LT(tokens.size(), text.size() / 2);  // whole words, not bytes
  // A text the grammar rejects is tokenised up to where it goes wrong.
  const std::string bad = "import os\n)))";
  const int32_t covered = jf.Tokenize(s, bad, &tokens);
  EXPECT_GE(covered, 10);
  EXPECT_LT(covered, static_cast<int32_t>(bad.size()));
}

}  // namespace
}  // namespace cfgmask
