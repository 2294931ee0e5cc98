// No dead ends: every token a mask allows leaves a text that can still be
// completed (the contract's "prefix of some string of the language").
//
// The reference is a search over appended bytes: from the session after
// `prefix + token`, a breadth-first search over the grammar's alphabet, with
// configurations (every live hypothesis: lexer state, slots, column, parser
// stack, indenter) deduplicated, looks for a text the engine lets end
// (Session::CanEnd, whose whole-text verdicts the Lark differential tests
// check).  Pruning the search with the engine's own Advance is sound: a
// byte the engine refuses leaves the language (no false negatives, checked
// by the brute-force and differential tests).  A token is counted as a dead
// end only when the search exhausts every configuration within its bound and
// again within a four times larger one; every completion found is checked
// by Lark itself (tests/tools/lark_accepts.py) at the end.
//
// Grammars: the minimal cases the exactness contract failed on (LALR
// lookahead merging with a keyword retyped from NAME; a partial NAME that
// only a keyword it cannot become would have taken; a comment after an
// operator that needs its operand on the same line; a greedy terminal that
// swallows its only successor), and random grammars of keywords that are
// prefixes of one another and of NAME, punctuation, NAME and NUMBER,
// `%ignore " "`, some with a newline terminal and an %ignore'd comment (and
// some of those with classes above ASCII in NAME and the comment: what may
// follow a comment is judged on whole characters); each over a small byte-level vocabulary of its
// alphabet's bytes, literals, literals after a space and random strings.
// Random masked walks (fixed seeds) check every allowed token of every
// step, on the store as compiled and as streamlined (streamlining folds
// checks it proves always pass: a wrong proof is a dead end here).
// CFGMASK_QUICK keeps the run to CI size; CFGMASK_FULL=1 runs more grammars
// and longer walks.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/lark_reader.h"
#include "lexer/terminal_successors.h"
#include "runtime/compile/compile.h"
#include "parser/lalr.h"
#include "runtime/tools/sample.h"
#include "runtime/session.h"
#include "runtime/suffix_quotient.h"
#include "streamline/streamline.h"
#include "tests/exactness_harness.h"
#include "tests/random_lark_grammar.h"
#include "tests/small_tokenizer.h"
#include "tests/serving_corpus.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {


// The tokens after which pre* of the accepting configurations (an empty
// suffix's quotient) keeps some hypothesis of `s`, from every token: the
// tokens that still have a completion.
std::vector<uint32_t> PreStarKept(const Session& s, SuffixQuotient& ends) {
  const CompiledStore& store = *s.store();
  std::vector<uint32_t> kept(store.mask_words(), 0);
  for (int32_t t = 0; t < store.vocab_size; ++t) kept[t >> 5] |= 1u << (t & 31);
  ends.Filter(s.live(), kept.data(), [&](int32_t t) {
    Session n = s.Fork();
    if (!n.Advance(t).ok()) return false;
    for (const LiveState& l : n.live()) {
      if (ends.Viable(l)) return true;
    }
    return false;
  });
  return kept;
}

// The tokens `mask` allows, special tokens aside.
std::vector<int32_t> AllowedTokens(const CompiledStore& store, const std::vector<uint32_t>& mask) {
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < store.vocab_size; ++t) {
    if (((mask[t >> 5] >> (t & 31)) & 1) && !store.token_special[t]) allowed.push_back(t);
  }
  return allowed;
}

// Breadth-first search for a completion from `start`.
class CompletionOracle {
 public:
  CompletionOracle(std::string alphabet) : alphabet_(std::move(alphabet)) {}

  enum Verdict { kViable, kDead, kUnknown };

  // Searches texts of at most `bound` bytes, at most `max_nodes`
  // configurations.  On kViable, *completion is a text found.
  Verdict Search(const Session& start, int bound, int64_t max_nodes, std::string* completion) {
    const uint64_t k0 = SessionKey(start);
    auto it = viable_.find(k0);
    if (it != viable_.end()) {
      *completion = it->second;
      return kViable;
    }
    struct Node {
      Session s;
      std::string path;
    };
    std::deque<Node> queue;
    std::unordered_map<uint64_t, int> seen;  // config -> depth reached at
    queue.push_back(Node{start.Fork(), ""});
    seen[k0] = 0;
    bool truncated = false;
    int64_t nodes = 0;
    while (!queue.empty()) {
      Node n = std::move(queue.front());
      queue.pop_front();
      if (n.s.CanEnd()) {
        Remember(start, n.path);
        *completion = n.path;
        return kViable;
      }
      auto memo = viable_.find(SessionKey(n.s));
      if (memo != viable_.end()) {
        Remember(start, n.path + memo->second);
        *completion = n.path + memo->second;
        return kViable;
      }
      if (static_cast<int>(n.path.size()) >= bound) {
        truncated = true;
        continue;
      }
      if (++nodes > max_nodes) return kUnknown;
      for (char c : alphabet_) {
        Session next = n.s.Fork();
        if (!next.AdvanceBytes(std::string_view(&c, 1)).ok()) continue;
        const uint64_t k = SessionKey(next);
        if (seen.count(k)) continue;
        seen[k] = static_cast<int>(n.path.size()) + 1;
        queue.push_back(Node{std::move(next), n.path + c});
      }
    }
    return truncated ? kDead : kDead;  // exhausted within the bound
  }

 private:
  // Every configuration on the way to a found completion is viable.
  void Remember(const Session& start, const std::string& completion) {
    Session s = start.Fork();
    for (size_t i = 0; i <= completion.size(); ++i) {
      viable_.emplace(SessionKey(s), completion.substr(i));
      if (i < completion.size() && !s.AdvanceBytes(completion.substr(i, 1)).ok()) break;
    }
  }

  std::string alphabet_;
  std::unordered_map<uint64_t, std::string> viable_;
};

struct Case {
  std::string name;
  std::string grammar;
};

struct Totals {
  int64_t steps = 0, checked = 0, dead = 0, unknown = 0;
  int64_t walks = 0, walks_dead = 0;  // walks, and those where some allowed token was dead
  int64_t prestar = 0;  // verdicts of pre* (the empty suffix's quotient) compared
  std::vector<std::string> completed;  // texts for Lark
  std::vector<std::string> failures;
};

void WalkStore(const CompiledStore* store, const std::string& label, const std::string& alphabet,
               int walks, int steps, uint32_t seed, Totals* totals) {
  CompletionOracle oracle(alphabet);
  std::mt19937 rng(seed);
  const int32_t V = store->vocab_size;
  // The second oracle, exact and independent of the search: pre* of the
  // accepting configurations (SuffixQuotient with the empty suffix), which
  // says whether a hypothesis can still reach an accepted end.
  std::shared_ptr<SuffixQuotient> ends;
  ASSERT_TRUE(SuffixQuotient::Build(store, "", SuffixQuotientLimits{}, &ends).ok()) << label;
  // The store without the stack-viability check: what pre* keeps is asked
  // of its Advance, so that a token the check refuses wrongly shows.
  CompiledStore unchecked = *store;
  unchecked.viability = nullptr;
  for (int w = 0; w < walks; ++w) {
    Session s(store);
    ++totals->walks;
    const int64_t dead_before = totals->dead;
    for (int k = 0; k < steps; ++k) {
      std::vector<uint32_t> mask = s.Mask();
      const std::vector<int32_t> allowed = AllowedTokens(*store, mask);
      ++totals->steps;
      // The other way: a token pre* keeps (some hypothesis after it can
      // still end) must be in the mask.
      std::vector<uint32_t> kept;
      if (store->viability) {
        Session u(&unchecked);
        ASSERT_TRUE(u.AdvanceBytes(s.text()).ok()) << label;
        kept = PreStarKept(u, *ends);
      } else {
        kept = PreStarKept(s, *ends);
      }
      for (int32_t t = 0; t < V; ++t) {
        if (!store->token_special[t] && MaskAllows(kept, t) && !MaskAllows(mask, t)) {
          totals->failures.push_back(label + ": " + JsonQuote(s.text()) + " + token " +
                                     JsonQuote(std::string(store->TokenBytes(t))) +
                                     ": pre* finds an end, the mask refuses it");
        }
      }
      for (int32_t t : allowed) {
        Session next = s.Fork();
        if (!next.Advance(t).ok()) {
          totals->failures.push_back(label + ": " + JsonQuote(s.text()) + " + token " +
                                     JsonQuote(std::string(store->TokenBytes(t))) +
                                     ": in the mask, refused by Advance");
          continue;
        }
        ++totals->checked;
        std::string completion;
        auto v = oracle.Search(next, 12, 20000, &completion);
        if (v == CompletionOracle::kDead) v = oracle.Search(next, 48, 200000, &completion);
        bool viable = false;
        for (const LiveState& l : next.live()) viable = viable || ends->Viable(l);
        ++totals->prestar;
        if (!viable) {
          totals->failures.push_back(
              label + ": " + JsonQuote(s.text()) + " + token " +
              JsonQuote(std::string(store->TokenBytes(t))) +
              (v == CompletionOracle::kViable ? ": pre* refuses it, the search found " +
                                                    JsonQuote(completion)
                                              : ": pre* finds no accepted end (dead end)"));
        }
        if (v == CompletionOracle::kViable) {
          if (totals->completed.size() < 4000 && rng() % 4 == 0) {
            totals->completed.push_back(next.text() + completion);
          }
        } else if (v == CompletionOracle::kUnknown) {
          ++totals->unknown;
        } else {
          ++totals->dead;
          totals->failures.push_back(label + ": " + JsonQuote(s.text()) + " + token " +
                                     JsonQuote(std::string(store->TokenBytes(t))) +
                                     ": no completion (dead end)");
        }
      }
      // The EOS bit is exact by construction (CanEnd); a mask with nothing
      // but EOS ends the walk.
      if (allowed.empty()) {
        if (!s.CanEnd()) {
          totals->failures.push_back(label + ": " + JsonQuote(s.text()) +
                                     ": empty mask before the text can end");
        }
        break;
      }
      if (s.CanEnd() && rng() % 6 == 0) break;
      ASSERT_TRUE(s.Advance(allowed[rng() % allowed.size()]).ok());
    }
    if (totals->dead > dead_before) ++totals->walks_dead;
  }
}

// Every completion found is a sentence by Lark too: each grammar's texts
// asked of Lark (start rule `start`, no indenter).  Returns how many it took.
int64_t ConfirmedByLark(const std::vector<std::pair<std::string, std::vector<std::string>>>& lark) {
  int64_t confirmed = 0;
  for (const auto& [path, texts] : lark) {
    if (texts.empty()) continue;
    const std::vector<int> v = LarkVerdicts(path, "start", "none", texts);
    EXPECT_EQ(v.size(), texts.size()) << "Lark oracle failed on " << path;
    if (v.size() != texts.size()) continue;
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(v[i], 1) << path << ": " << JsonQuote(texts[i]);
      confirmed += v[i];
    }
  }
  return confirmed;
}

void CheckGrammar(const Case& c, std::mt19937& rng, int walks, int steps, Totals* totals,
                  std::vector<std::pair<std::string, std::vector<std::string>>>* lark_batches) {
  std::string alphabet;
  std::vector<std::string> tokens;
  Vocabulary(c.grammar, rng, &alphabet, &tokens);
  const std::string gpath = TempPath(c.name + ".lark");
  const std::string tpath = TempPath(c.name + ".tokenizer.json");
  WriteTextFile(gpath, c.grammar);
  WriteTextFile(tpath, ByteLevelTokenizerJson(tokens));
  CompiledStore raw;
  Status st = CompileStore(gpath, tpath, CompileOptions{}, &raw);
  if (!st.ok()) {
    // Random grammars may have reduce/reduce conflicts, which Lark refuses
    // too: not a case for this test.
    ASSERT_NE(st.message().find("conflict"), std::string::npos) << c.name << ": " << st.ToString();
    return;
  }
  CompiledStore streamlined = raw;
  ASSERT_TRUE(StreamlineStore(&streamlined, StreamlineOptions{}, nullptr).ok());
  Totals local;
  const uint32_t seed = static_cast<uint32_t>(rng());
  WalkStore(&raw, c.name + " (raw)", alphabet, walks, steps, seed, &local);
  WalkStore(&streamlined, c.name + " (streamlined)", alphabet, walks, steps, seed, &local);
  totals->steps += local.steps;
  totals->checked += local.checked;
  totals->dead += local.dead;
  totals->unknown += local.unknown;
  totals->prestar += local.prestar;
  for (auto& f : local.failures) totals->failures.push_back("\n  " + c.grammar + "  " + f);
  lark_batches->emplace_back(gpath, local.completed);
}

void ExpectNoDeadEnds(const std::vector<Case>& cases, int walks, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  Totals totals;
  std::vector<std::pair<std::string, std::vector<std::string>>> lark;
  for (const Case& c : cases) {
    CheckGrammar(c, rng, walks, steps, &totals, &lark);
  }
  std::string shown;
  for (size_t i = 0; i < totals.failures.size() && i < 12; ++i) shown += totals.failures[i] + "\n";
  EXPECT_EQ(totals.failures.size(), 0u) << shown;
  EXPECT_GT(totals.checked, 0);
  // A search that ran out of nodes says nothing; it must stay rare.
  EXPECT_LE(totals.unknown * 100, totals.checked) << totals.unknown << " of " << totals.checked;
  // Every completion found is a sentence by Lark too.
  const int64_t confirmed = ConfirmedByLark(lark);
  std::printf("%zu grammars, %lld steps, %lld tokens checked, %lld dead, %lld unknown, "
              "%lld completions confirmed by Lark, %lld pre* verdicts (all viable)\n",
              cases.size(), static_cast<long long>(totals.steps),
              static_cast<long long>(totals.checked), static_cast<long long>(totals.dead),
              static_cast<long long>(totals.unknown), static_cast<long long>(confirmed),
              static_cast<long long>(totals.prestar));
}

// LALR lookahead merging: after "public" at the top level the state also
// reduces on NAME (merged from the block context); a partial NAME must not be
// allowed there because NAME's keywords would be shifted: it cannot become one.
const char kMergedLookahead[] =
    "start: item*\n"
    "item: mods \"class\" NAME \";\"\n"
    "    | \"{\" mods NAME \";\" \"}\"\n"
    "mods: \"public\"+\n"
    "NAME: /[a-z]+/\n"
    "%ignore \" \"\n";

TEST(ViablePrefix, MergedLookaheadKeepsNoNameAfterTopLevelModifier) {
  const std::string gpath = TempPath("merged.lark"), tpath = TempPath("merged.json");
  WriteTextFile(gpath, kMergedLookahead);
  std::vector<std::string> tokens;
  for (const char* t : {"p", "u", "b", "l", "i", "c", "a", "s", "x", ";", "{", "}", "\xC4\xA0",
                        "public", "\xC4\xA0" "public", "class", "\xC4\xA0" "class", "\xC4\xA0" "x", "xy",
                        "cl", "\xC4\xA0" "cl", "ass", "pub"}) {
    tokens.push_back(t);
  }
  WriteTextFile(tpath, ByteLevelTokenizerJson(tokens));
  CompiledStore raw;
  Status compiled = CompileStore(gpath, tpath, CompileOptions{}, &raw);
  ASSERT_TRUE(compiled.ok()) << compiled.ToString();
  CompiledStore streamlined = raw;
  ASSERT_TRUE(StreamlineStore(&streamlined, StreamlineOptions{}, nullptr).ok());
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes("public").ok());
    // " x" and "x": a NAME that can never be "class" or "public".
    for (const char* bad : {" x", "x", " xy"}) {
      Session t = s.Fork();
      EXPECT_FALSE(t.AdvanceBytes(bad).ok()) << bad;
    }
    // Allowed: what can still become "class" or "public".
    for (const char* good : {" cl", " class", " pub", "class", "c"}) {
      Session t = s.Fork();
      EXPECT_TRUE(t.AdvanceBytes(good).ok()) << good;
    }
    std::vector<uint32_t> mask = s.Mask();
    auto allowed = [&](const std::string& bytes) {
      for (int32_t t = 0; t < store->vocab_size; ++t) {
        if (store->TokenBytes(t) == bytes) return ((mask[t >> 5] >> (t & 31)) & 1) != 0;
      }
      ADD_FAILURE() << "no token " << bytes;
      return false;
    };
    EXPECT_FALSE(allowed(" x"));
    EXPECT_FALSE(allowed("x"));
    EXPECT_FALSE(allowed("xy"));
    EXPECT_TRUE(allowed(" cl"));
    EXPECT_TRUE(allowed("class"));
  }
  // Inside a block NAME is taken after the modifiers.
  Session b(&streamlined);
  EXPECT_TRUE(b.AdvanceBytes("{public x;}").ok());
  EXPECT_TRUE(b.CanEnd());
  ExpectNoDeadEnds({{"merged", kMergedLookahead}}, 8, 14, 7);
}

// Compiles `grammar` with a byte-level vocabulary of `tokens` (GPT-2's byte
// alphabet: "\xC4\xA0" is a space, "\xC4\x8A" a newline); both the raw
// and the streamlined store.
void CompileBoth(const std::string& name, const std::string& grammar,
                 const std::vector<std::string>& tokens, CompiledStore* raw,
                 CompiledStore* streamlined) {
  const std::string gpath = TempPath(name + ".lark"), tpath = TempPath(name + ".json");
  WriteTextFile(gpath, grammar);
  WriteTextFile(tpath, ByteLevelTokenizerJson(tokens));
  Status compiled = CompileStore(gpath, tpath, CompileOptions{}, raw);
  ASSERT_TRUE(compiled.ok()) << compiled.ToString();
  *streamlined = *raw;
  ASSERT_TRUE(StreamlineStore(streamlined, StreamlineOptions{}, nullptr).ok());
}

bool InMask(const CompiledStore& store, const std::vector<uint32_t>& mask,
            const std::string& bytes) {
  for (int32_t t = 0; t < store.vocab_size; ++t) {
    if (store.TokenBytes(t) == bytes) return ((mask[t >> 5] >> (t & 31)) & 1) != 0;
  }
  ADD_FAILURE() << "no token " << bytes;
  return false;
}

// %ignore competition: the ignored WS is earlier in Lark's order than the
// string "\n" and matches it, so "\n" is never lexed after the comment and
// Lark's language is empty: no token, not even blank space, may be allowed.
const char kIgnoredSwallowsNewline[] =
    "start: \"a\" comment \"b\"\n"
    "comment: /#[^\\n]*\\n/ \"\\n\"\n"
    "WS: /[ \\t\\n]+/\n"
    "%ignore WS\n";

TEST(ViablePrefix, IgnoredTerminalSwallowingARequiredStringEmptiesTheLanguage) {
  CompiledStore raw, streamlined;
  CompileBoth("swallow", kIgnoredSwallowsNewline,
              {"a", "b", "#", "x", "a#", "#x", "x\xC4\x8A", "\xC4\x8A\xC4\x8A", "\xC4\x8A", "\xC4\xA0"}, &raw,
              &streamlined);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    std::vector<uint32_t> mask = s.Mask();
    for (uint32_t w : mask) EXPECT_EQ(w, 0u);
    EXPECT_FALSE(s.CanEnd());
    for (const char* text : {"a", " ", "\n", "a#x\n\nb"}) {
      Session t = s.Fork();
      EXPECT_FALSE(t.AdvanceBytes(text).ok()) << text;
    }
  }
}

// The same competition on one branch only: after "a" the comment branch is
// dead, the other one lives; a non-ignored regexp earlier in the order that
// matches a prefix of a string ("/a+/" before "ab") blocks it the same way.
const char kCompetingBranches[] =
    "start: \"a\" comment \"b\" | \"a\" \"c\" | \"x\" y\n"
    "comment: /#[^\\n]*\\n/ \"\\n\"\n"
    "y: AS | \"ab\" | \"z\"\n"
    "AS: /a+/\n"
    "WS: /[ \\t\\n]+/\n"
    "%ignore WS\n";

TEST(ViablePrefix, CompetingTerminalsCloseOnlyTheBranchesTheyStrand) {
  CompiledStore raw, streamlined;
  CompileBoth("compete", kCompetingBranches,
              {"a", "b", "c", "#", "x", "z", "\xC4\x8A", "\xC4\xA0", "#x", "x\xC4\x8A", "ab", "aa", "\xC4\xA0" "c",
               "\xC4\xA0#"}, &raw,
              &streamlined);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes("a").ok());
    std::vector<uint32_t> mask = s.Mask();
    EXPECT_FALSE(InMask(*store, mask, "#"));
    EXPECT_FALSE(InMask(*store, mask, " #"));
    EXPECT_FALSE(InMask(*store, mask, "#x"));
    EXPECT_TRUE(InMask(*store, mask, "c"));
    EXPECT_TRUE(InMask(*store, mask, " c"));
    EXPECT_TRUE(InMask(*store, mask, " "));
    Session x(store);
    ASSERT_TRUE(x.AdvanceBytes("x").ok());
    mask = x.Mask();
    EXPECT_TRUE(InMask(*store, mask, "a"));
    EXPECT_TRUE(InMask(*store, mask, "aa"));
    EXPECT_TRUE(InMask(*store, mask, "z"));
    EXPECT_FALSE(InMask(*store, mask, "ab"));  // /a+/ takes "a", then "b" cannot follow
    EXPECT_FALSE(InMask(*store, mask, "b"));
    Session done = x.Fork();
    EXPECT_TRUE(done.AdvanceBytes("aaa").ok());
    EXPECT_TRUE(done.CanEnd());
  }
  ExpectNoDeadEnds({{"compete", kCompetingBranches}}, 8, 10, 11);
}

// A nonterminal that derives no text (`x: "e" x`) behind a terminal: the
// states after "b" can never reach acceptance, whatever the stack below, so
// "b" is refused; so is a %declare'd terminal nothing produces.
TEST(ViablePrefix, StatesThatCannotAcceptAreClosed) {
  CompiledStore raw, streamlined;
  CompileBoth("unproductive",
              "start: \"b\" x \"d\" | \"c\" | \"f\" FOO\nx: \"e\" x\n%declare FOO\n",
              {"b", "c", "d", "e", "f", "be", "ee"}, &raw, &streamlined);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    std::vector<uint32_t> mask = s.Mask();
    EXPECT_TRUE(InMask(*store, mask, "c"));
    EXPECT_FALSE(InMask(*store, mask, "b"));
    EXPECT_FALSE(InMask(*store, mask, "be"));
    EXPECT_FALSE(InMask(*store, mask, "f"));
    Session t = s.Fork();
    EXPECT_FALSE(t.AdvanceBytes("b").ok());
    ASSERT_TRUE(s.AdvanceBytes("c").ok());
    EXPECT_TRUE(s.CanEnd());
  }
}

// A state that can accept with some stacks below it but not with the one at
// hand: LALR merges the state after `e` in both contexts, and in the `c`
// context it reduces only on `D`, which nothing produces (removed from the
// tables).  Each state passes the per-state fixpoint (CloseDeadStates), so
// only the stack-viability DFA (parser/stack_viability.h), which reads the
// whole stack, refuses `c`, `ce` and, in the variants, the tokens after the
// `c` context (deeper in the stack, through a left recursion).  With the
// check off (the store's viability dropped) each expectation below fails:
// `Refuses` asks both.
struct DeadContextCase {
  std::string name, grammar, prefix;
  std::vector<std::string> refused, allowed;
};

void ExpectDeadContextRefused(const DeadContextCase& c, const std::vector<std::string>& tokens) {
  CompiledStore raw, streamlined;
  CompileBoth(c.name, c.grammar, tokens, &raw, &streamlined);
  ASSERT_NE(raw.viability, nullptr) << c.name << ": the analysis found nothing to check";
  CompiledStore off = raw;
  off.viability = nullptr;
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes(c.prefix).ok()) << c.name;
    const std::vector<uint32_t> mask = s.Mask();
    for (const std::string& t : c.refused) {
      EXPECT_FALSE(InMask(*store, mask, t)) << c.name << ": " << c.prefix << " + " << t;
      Session n = s.Fork();
      EXPECT_FALSE(n.AdvanceBytes(t).ok()) << c.name << ": " << c.prefix << " + " << t;
    }
    for (const std::string& t : c.allowed) {
      EXPECT_TRUE(InMask(*store, mask, t)) << c.name << ": " << c.prefix << " + " << t;
    }
  }
  // Without the check the same tokens are allowed: the test can fail.
  Session u(&off);
  if (u.AdvanceBytes(c.prefix).ok()) {
    const std::vector<uint32_t> mask = u.Mask();
    bool any = false;
    for (const std::string& t : c.refused) any = any || InMask(off, mask, t);
    EXPECT_TRUE(any) << c.name << ": without the check nothing of the refused is allowed";
  }
  ExpectNoDeadEnds({{c.name, c.grammar}}, 8, 10, 23);
}

TEST(ViablePrefix, AStateLiveOnlyWithAnotherStackBelowIsRefused) {
  const std::vector<std::string> tokens = {"a", "b", "c", "e", "f", "g", "(", ")", "ce",
                                           "ae", "eb", "ee", "(e", "e)"};
  // The minimal case: `c` itself leads only to the dead context.
  ExpectDeadContextRefused({"dead_context",
                            "start: \"a\" x \"b\" | \"c\" x D\nx: \"e\"\n%declare D\n",
                            "",
                            {"c", "ce"},
                            {"a", "ae"}},
                           tokens);
  // After `c` the mask allows `f` and not `e` (the state after `c e` is
  // live through the `a` context only).
  ExpectDeadContextRefused({"dead_context_branch",
                            "start: \"a\" x \"b\" | \"c\" z\nz: x D | \"f\"\nx: \"e\"\n%declare D\n",
                            "c",
                            {"e", "ee", "eb"},
                            {"f"}},
                           tokens);
  // The entry that decides is deeper in the stack: brackets in between.
  ExpectDeadContextRefused({"dead_context_deep",
                            "start: \"a\" x \"b\" | \"c\" z\nz: x D | \"f\"\n"
                            "x: \"(\" x \")\" | \"e\"\n%declare D\n",
                            "c",
                            {"(", "(e", "e", "e)"},
                            {"f"}},
                           tokens);
  // Through a left recursion: `x g g g ...` in the dead context.
  ExpectDeadContextRefused({"dead_context_left",
                            "start: \"a\" x \"b\" | \"c\" z\nz: x D | \"f\" x \"b\"\n"
                            "x: x \"g\" | \"e\"\n%declare D\n",
                            "c",
                            {"e", "ee", "eb"},
                            {"f"}},
                           tokens);
}

// The indenter's %declare'd terminals are produced (by the indenter): the
// analysis must keep the stacks that need them.  Nothing is dead here, so
// the analysis finds nothing to check; blocks open and close as before.
TEST(ViablePrefix, TheIndentersDeclaredTerminalsAreProduced) {
  const char kIndented[] =
      "start: (_NEWLINE | stmt)*\n"
      "stmt: NAME \":\" _NEWLINE _INDENT stmt+ _DEDENT | NAME _NEWLINE\n"
      "NAME: /[a-z]+/\n"
      "_NEWLINE: /(\\r?\\n[\\t ]*)+/\n"
      "%ignore \" \"\n"
      "%declare _INDENT _DEDENT\n";
  CompiledStore raw, streamlined;
  CompileBoth("indented", kIndented,
              {"a", "b", ":", "\xC4\x8A", "\xC4\xA0", "\xC4\x8A\xC4\xA0\xC4\xA0", "a:", "b\xC4\x8A"},
              &raw, &streamlined);
  EXPECT_EQ(raw.viability, nullptr);
  // The same grammar with a dead context besides: the check is on, and the
  // indented blocks are still allowed and end.
  std::string dead = kIndented;
  dead.replace(dead.find("start: "), 7, "start: \"@\" stmt D | ");
  dead += "%declare D\n";
  CompileBoth("indented_dead", dead,
              {"a", "b", ":", "@", "\xC4\x8A", "\xC4\xA0", "\xC4\x8A\xC4\xA0\xC4\xA0", "a:", "b\xC4\x8A"},
              &raw, &streamlined);
  ASSERT_NE(raw.viability, nullptr);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    EXPECT_FALSE(InMask(*store, s.Mask(), "@"));
    ASSERT_TRUE(s.AdvanceBytes("a:\n  b\n  a:\n    b\n").ok());
    EXPECT_TRUE(s.CanEnd());
    EXPECT_TRUE(InMask(*store, s.Mask(), "b"));
    ASSERT_TRUE(s.AdvanceBytes("b\n").ok());
    EXPECT_TRUE(s.CanEnd());
  }
}

// The completion search (find_completion, the sampler's steering) stays
// within its node budget, finds shortest completions, and tells a dead end
// it proved from a budget that ran out.
TEST(ViablePrefix, CompletionSearchIsBoundedAndTellsDeadEndsFromBudget) {
  CompiledStore raw, streamlined;
  CompileBoth("nest", "start: \"(\" start \")\" | \"x\"\n",
              {"(", ")", "x", "((", "))", "(x", "x)"}, &raw, &streamlined);
  Session s(&streamlined);
  ASSERT_TRUE(s.AdvanceBytes("((((((((").ok());
  Completer completer(streamlined);
  std::string completion;
  int64_t used = 0;
  EXPECT_EQ(completer.Search(&s, 1000, &completion, &used), CompletionResult::kFound);
  EXPECT_EQ(completion, "x))))))))");
  EXPECT_LE(used, 1000);
  EXPECT_EQ(s.text(), "((((((((");  // the session is left as it was
  for (int64_t budget : {0, 1, 3, 5}) {
    EXPECT_EQ(completer.Search(&s, budget, &completion, &used), CompletionResult::kBudget)
        << budget;
    EXPECT_LE(used, budget);
  }

  // Adjacent NAMEs without a separator: Lark's greedy NAME takes every
  // letter, so no text ends: the search proves that nothing completes the
  // empty text instead of running out of budget (and the mask is empty:
  // AGreedyMatchThatSwallowsItsSuccessorIsRefused).
  CompiledStore nn_raw, nn;
  CompileBoth("adjacent", "start: NAME NAME\nNAME: /[a-z]+/\n", {"a", "b", "ab"}, &nn_raw, &nn);
  Session d(&nn);
  Completer dead(nn);
  EXPECT_EQ(dead.Search(&d, 200000, &completion, &used), CompletionResult::kNone);
  EXPECT_LT(used, 1000);
}

// A comment where the parser needs an operand on the same line: the
// comment's greedy match leaves only the newline (or the end of the text),
// which the parser cannot take after "/", so no token may start a comment
// there (`x / # c` in Python); after a complete expression one may.
const char kCommentAfterOperator[] =
    "start: (expr NL)*\n"
    "expr: NAME | expr \"/\" NAME\n"
    "NAME: /[a-z]+/\n"
    "NL: /\\n/\n"
    "COMMENT: /#[^\\n]*/\n"
    "%ignore COMMENT\n"
    "%ignore \" \"\n";

TEST(ViablePrefix, CommentWhereAnOperandMustFollowIsRefused) {
  CompiledStore raw, streamlined;
  CompileBoth("comment", kCommentAfterOperator,
              {"x", "y", "/", "#", "c", "\xC4\x8A", "\xC4\xA0", "\xC4\xA0#", "#c", "\xC4\xA0/",
               "#c\xC4\x8A", "x\xC4\xA0#", "/\xC4\xA0#"},
              &raw, &streamlined);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes("x /").ok());
    std::vector<uint32_t> mask = s.Mask();
    EXPECT_FALSE(InMask(*store, mask, " #"));
    EXPECT_FALSE(InMask(*store, mask, "#"));
    EXPECT_FALSE(InMask(*store, mask, "#c"));
    EXPECT_TRUE(InMask(*store, mask, "y"));
    EXPECT_TRUE(InMask(*store, mask, " "));
    Session t = s.Fork();
    EXPECT_FALSE(t.AdvanceBytes(" # c").ok());
    Session x(store);
    mask = x.Mask();
    EXPECT_TRUE(InMask(*store, mask, "x #"));
    EXPECT_FALSE(InMask(*store, mask, "/ #"));
    ASSERT_TRUE(x.AdvanceBytes("x").ok());
    mask = x.Mask();
    EXPECT_TRUE(InMask(*store, mask, " #"));
    EXPECT_TRUE(InMask(*store, mask, "#c"));
    ASSERT_TRUE(x.AdvanceBytes(" # c\n").ok());
    EXPECT_TRUE(x.CanEnd());
  }
  ExpectNoDeadEnds({{"comment", kCommentAfterOperator}}, 8, 12, 13);
}

// The same with names above ASCII: a name may start with a lead byte the
// comment's class `[^\n]` also takes, but only with its whole character, so
// after `/` a comment is still refused (`x = a / #c` in Python's strict
// grammar was allowed while NAME's lead byte counted as the comment's
// successor); a comment and a name above ASCII where they fit are taken.
const char kCommentBeforeNameAboveAscii[] =
    "start: (expr NL)*\n"
    "expr: NAME | expr \"/\" NAME\n"
    "NAME: /[a-z\\x80-\\U0010ffff]+/\n"
    "NL: /\\n/\n"
    "COMMENT: /#[^\\n]*/\n"
    "%ignore COMMENT\n"
    "%ignore \" \"\n";

TEST(ViablePrefix, CommentBeforeANameAboveAsciiIsRefusedWhereAnOperandMustFollow) {
  CompiledStore raw, streamlined;
  // Tokens in GPT-2's byte-level spelling (Gpt2ByteLevel): e-acute's bytes
  // C3 A9 are "\xC3\x83" "\xC2\xA9".
  const std::string e = Gpt2ByteLevel("\xC3\xA9"), lam = Gpt2ByteLevel("\xCE\xBB");
  CompileBoth("comment_above_ascii", kCommentBeforeNameAboveAscii,
              {"x", "/", "#", "c", "\xC4\x8A", "\xC4\xA0", "\xC4\xA0#", "#c", e, lam, "#" + e,
               "\xC4\xA0#" + e, "#c\xC4\x8A", e + "x", "\xC3\x83", "\xC2\xA9", "\xC4\xA0" + lam},
              &raw, &streamlined);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes("x /").ok());
    std::vector<uint32_t> mask = s.Mask();
    for (const char* bad : {"#", "#c", " #"}) EXPECT_FALSE(InMask(*store, mask, bad)) << bad;
    // The mask is read by the tokens' bytes (e-acute C3 A9, lambda CE BB).
    EXPECT_FALSE(InMask(*store, mask, "#\xC3\xA9"));
    EXPECT_FALSE(InMask(*store, mask, " #\xC3\xA9"));
    EXPECT_TRUE(InMask(*store, mask, "\xC3\xA9"));
    EXPECT_TRUE(InMask(*store, mask, "\xC3"));  // a lead byte of a name
    EXPECT_FALSE(InMask(*store, mask, "\xA9"));
    EXPECT_TRUE(InMask(*store, mask, " \xCE\xBB"));
    for (const char* text : {" #c", "#\xC3\xA9", " # \xCE\xBB"}) {
      Session t = s.Fork();
      EXPECT_FALSE(t.AdvanceBytes(text).ok()) << text;
    }
    Session x(store);
    ASSERT_TRUE(x.AdvanceBytes("\xC3\xA9x").ok());
    mask = x.Mask();
    EXPECT_TRUE(InMask(*store, mask, "#\xC3\xA9"));
    EXPECT_TRUE(InMask(*store, mask, " #\xC3\xA9"));
    ASSERT_TRUE(x.AdvanceBytes(" / \xCE\xBB # \xC3\xA9\xCE\xBB\n").ok());
    EXPECT_TRUE(x.CanEnd());
  }
  ExpectNoDeadEnds({{"comment_above_ascii", kCommentBeforeNameAboveAscii}}, 8, 12, 19);
}

// What follows a comment, computed on the terminal automaton, against what
// the lexer can start after it (Lark's leftmost-first, greedy match): the
// name is a successor only where the comment can end before a character
// the name starts with.
TEST(ViablePrefix, TerminalSuccessorsReadACharacterAboveAsciiWhole) {
  struct Row {
    const char* comment;
    bool name_follows;
  };
  const Row rows[] = {
      {"/#[^\\n]*/", false},             // takes every character
      {"/#[^\\n\\u00e9]*/", true},       // ends before an e-acute
      {"/#(c|c\\u00e9)*/", true},        // `#c` then an e-acute: the first branch wins
      {"/#(c\\u00e9|c)*/", true},        // `#c` then a lambda
      {"/#[a-z\\u00e9\\u20ac]*/", true},  // ends before a lambda
      {"/#[^\\n\\u0080-\\U0010ffff]*/", true},
  };
  for (const char* name : {"/[a-z\\x80-\\U0010ffff]+/", "/[\\u00e9\\u03bb][a-z]*/"}) {
    for (const Row& row : rows) {
      std::string text = "start: (NAME NL)*\nNAME: " + std::string(name) +
                         "\nNL: /\\n/\nCOMMENT: " + row.comment + "\n%ignore COMMENT\n";
      Grammar g;
      ASSERT_TRUE(ReadLarkString(text, "succ.lark", LarkReaderOptions{}, &g).ok()) << text;
      TerminalSuccessors succ;
      ASSERT_TRUE(ComputeTerminalSuccessors(g, -1, kSuccessorMaxStates, &succ).ok());
      const int32_t comment = g.FindTerminal("COMMENT"), nl = g.FindTerminal("NL"),
                    nm = g.FindTerminal("NAME");
      ASSERT_GE(comment, 0);
      // any: every terminal may follow (then nothing is listed).
      const std::vector<int32_t>& next = succ.next[comment];
      auto follows = [&](int32_t u) {
        return succ.any[comment] != 0 || std::binary_search(next.begin(), next.end(), u);
      };
      EXPECT_TRUE(follows(nl)) << text;
      EXPECT_EQ(follows(nm), row.name_follows) << text;
    }
  }
}

// A terminal whose greedy match swallows every terminal that may follow
// it: NAME NAME without a separator is never lexed as two NAMEs, so Lark's
// language is empty and no token may be allowed.  With a separator as the
// other branch, a NAME may end only where the separator can come next.
TEST(ViablePrefix, AGreedyMatchThatSwallowsItsSuccessorIsRefused) {
  CompiledStore raw, streamlined;
  CompileBoth("adjacent", "start: NAME NAME\nNAME: /[a-z]+/\n", {"a", "b", "ab"}, &raw,
              &streamlined);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    for (uint32_t w : s.Mask()) EXPECT_EQ(w, 0u);
    EXPECT_FALSE(s.CanEnd());
    Session t = s.Fork();
    EXPECT_FALSE(t.AdvanceBytes("a").ok());
  }
  const char kSeparated[] = "start: NAME NAME | NAME \".\" NAME\nNAME: /[a-z]+/\n";
  CompileBoth("separated", kSeparated, {"a", "b", "ab", ".", "a.", ".b"}, &raw, &streamlined);
  for (const CompiledStore* store : {&raw, &streamlined}) {
    Session s(store);
    std::vector<uint32_t> mask = s.Mask();
    EXPECT_TRUE(InMask(*store, mask, "a"));
    EXPECT_TRUE(InMask(*store, mask, "a."));
    ASSERT_TRUE(s.AdvanceBytes("a.").ok());
    mask = s.Mask();
    EXPECT_TRUE(InMask(*store, mask, "b"));
    ASSERT_TRUE(s.AdvanceBytes("b").ok());
    EXPECT_TRUE(s.CanEnd());
  }
  ExpectNoDeadEnds({{"separated", kSeparated}}, 8, 8, 17);
}

// The completion search returns a shortest completion: on random grammars
// (with and without a newline terminal and an ignored comment), at every
// step of random masked walks, its length equals that of a plain
// breadth-first search over the grammar's alphabet (no memo, every
// configuration of each length expanded before the next length) whenever
// that search finds one within 10 bytes, and is longer than 10 bytes when
// the search proves none is that short.  The estimate (StackCost less the
// credit of the terminal in progress) must be a lower bound for this to
// hold, and is checked to be one directly: at the prefix and at every
// prefix of the completion found (Completer::Bound <= the bytes left).
int ShortestByBreadthFirst(const Session& start, const std::string& alphabet, int bound,
                           int64_t max_nodes) {
  if (start.Fork().CanEnd()) return 0;
  std::vector<Session> level;
  level.push_back(start.Fork());
  std::unordered_map<uint64_t, int> seen{{SessionKey(start), 0}};
  int64_t nodes = 0;
  for (int len = 1; len <= bound && !level.empty(); ++len) {
    std::vector<Session> next;
    for (const Session& s : level) {
      for (char c : alphabet) {
        Session n = s.Fork();
        if (!n.AdvanceBytes(std::string_view(&c, 1)).ok()) continue;
        if (n.CanEnd()) return len;
        const uint64_t k = SessionKey(n);
        if (!seen.emplace(k, len).second) continue;
        if (++nodes > max_nodes) return -2;  // unknown
        next.push_back(std::move(n));
      }
    }
    level.swap(next);
  }
  return -1;  // none of at most `bound` bytes
}

// Completer::Bound at `start` and along `completion` (a shortest one, of
// `want` bytes) never exceeds the bytes still to write.  Adds the bound at
// the start to *bound_sum.
void ExpectBoundBelowShortest(Completer* completer, const Session& start,
                              const std::string& completion, int want, int64_t* bound_sum,
                              const std::string& where) {
  Session s = start.Fork();
  const int32_t b0 = completer->Bound(s);
  EXPECT_LE(b0, want) << where << " text " << JsonQuote(s.text());
  *bound_sum += std::min<int32_t>(b0, want);
  for (size_t i = 0; i < completion.size(); ++i) {
    ASSERT_TRUE(s.AdvanceBytes(completion.substr(i, 1)).ok()) << where;
    EXPECT_LE(completer->Bound(s), want - static_cast<int>(i) - 1)
        << where << " text " << JsonQuote(s.text()) << " then " << JsonQuote(completion.substr(i + 1));
  }
}

// A random grammar (with a comment terminal when `comments`) and a random
// byte-level vocabulary over its alphabet, compiled and streamlined into
// *store; false where the grammar has conflicts (skipped).
bool RandomStreamlinedStore(std::mt19937& rng, bool comments, const std::string& name,
                            std::string* grammar, std::string* alphabet, CompiledStore* store) {
  *grammar = RandomLarkGrammar(rng, comments);
  std::vector<std::string> tokens;
  Vocabulary(*grammar, rng, alphabet, &tokens);
  const std::string gpath = TempPath(name + ".lark"), tpath = TempPath(name + ".json");
  WriteTextFile(gpath, *grammar);
  WriteTextFile(tpath, ByteLevelTokenizerJson(tokens));
  if (!CompileStore(gpath, tpath, CompileOptions{}, store).ok()) return false;  // conflicts
  EXPECT_TRUE(StreamlineStore(store, StreamlineOptions{}, nullptr).ok());
  return true;
}

void ExpectShortestCompletions(bool comments, int grammars, int walks, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  int64_t compared = 0, longer = 0, unknown = 0, bound_sum = 0, want_sum = 0;
  std::vector<int64_t> nodes_used;
  for (int g = 0; g < grammars; ++g) {
    std::string grammar, alphabet;
    CompiledStore store;
    if (!RandomStreamlinedStore(rng, comments, (comments ? "shortest_c" : "shortest") + std::to_string(g),
                                &grammar, &alphabet, &store)) {
      continue;
    }
    ASSERT_FALSE(testing::Test::HasFailure());
    Completer completer(store);
    for (int w = 0; w < walks; ++w) {
      Session s(&store);
      for (int k = 0; k < steps; ++k) {
        const int want = ShortestByBreadthFirst(s, alphabet, 10, 200000);
        std::string got;
        int64_t used = 0;
        const CompletionResult r = completer.Search(&s, 1000000, &got, &used);
        nodes_used.push_back(used);
        if (want == -2) {
          ++unknown;
        } else if (want >= 0) {
          ++compared;
          ASSERT_EQ(r, CompletionResult::kFound) << grammar << JsonQuote(s.text());
          EXPECT_EQ(static_cast<int>(got.size()), want)
              << grammar << "text " << JsonQuote(s.text()) << " completion " << JsonQuote(got);
          Session end = s.Fork();
          ASSERT_TRUE(end.AdvanceBytes(got).ok());
          EXPECT_TRUE(end.CanEnd()) << grammar << JsonQuote(s.text() + got);
          want_sum += want;
          ExpectBoundBelowShortest(&completer, s, got, want, &bound_sum, grammar);
        } else {
          ++longer;
          if (r == CompletionResult::kFound) EXPECT_GT(got.size(), 10u) << JsonQuote(s.text());
        }
        if (::testing::Test::HasFailure()) return;
        std::vector<uint32_t> mask = s.Mask();
        const std::vector<int32_t> allowed = AllowedTokens(store, mask);
        if (allowed.empty()) break;
        ASSERT_TRUE(s.Advance(allowed[rng() % allowed.size()]).ok());
      }
    }
  }
  std::sort(nodes_used.begin(), nodes_used.end());
  const auto at = [&](double p) {
    return nodes_used.empty() ? 0 : nodes_used[static_cast<size_t>(p * (nodes_used.size() - 1))];
  };
  std::printf("%lld prefixes with a completion of at most 10 bytes, all shortest; %lld longer; "
              "%lld unknown; search nodes p50 %lld p99 %lld max %lld; estimate at the prefix "
              "%lld bytes of %lld\n",
              static_cast<long long>(compared), static_cast<long long>(longer),
              static_cast<long long>(unknown), static_cast<long long>(at(0.5)),
              static_cast<long long>(at(0.99)), static_cast<long long>(at(1.0)),
              static_cast<long long>(bound_sum), static_cast<long long>(want_sum));
  EXPECT_GT(compared, 50);
  EXPECT_LE(unknown * 20, compared);
}

TEST(ViablePrefix, CompletionSearchFindsShortestCompletions) {
  const bool quick = TestQuick();
  ExpectShortestCompletions(false, quick ? 20 : 200, quick ? 2 : 6, quick ? 10 : 24, 20261127);
  ExpectShortestCompletions(true, quick ? 20 : 200, quick ? 2 : 6, quick ? 10 : 24, 20261128);
}

// With a suffix: on random grammars, sentences (a random masked walk, then
// its shortest completion) are cut in three, prefix | middle | suffix; with
// the suffix set, the search's middle is as short as a breadth-first search
// over the alphabet finds (at most 8 bytes; Session::CanEnd reads the
// suffix), and Completer::Bound stays below the bytes left at the prefix
// and along the middle found.
void ExpectShortestMiddles(bool comments, int grammars, int cuts, uint32_t seed) {
  std::mt19937 rng(seed);
  int64_t compared = 0, exact = 0, bound_sum = 0, want_sum = 0;
  std::vector<int64_t> nodes_used;
  for (int g = 0; g < grammars; ++g) {
    std::string grammar, alphabet;
    CompiledStore store;
    if (!RandomStreamlinedStore(rng, comments, (comments ? "middle_c" : "middle") + std::to_string(g),
                                &grammar, &alphabet, &store)) {
      continue;
    }
    ASSERT_FALSE(testing::Test::HasFailure());
    Completer completer(store);
    for (int c = 0; c < cuts; ++c) {
      // A sentence.
      Session w(&store);
      const int steps = static_cast<int>(rng() % 12);
      for (int k = 0; k < steps; ++k) {
        const std::vector<int32_t> allowed = AllowedTokens(store, w.Mask());
        if (allowed.empty()) break;
        ASSERT_TRUE(w.Advance(allowed[rng() % allowed.size()]).ok());
      }
      std::string rest;
      if (completer.Search(&w, 200000, &rest) != CompletionResult::kFound) continue;
      const std::string sentence = w.text() + rest;
      if (sentence.size() < 2) continue;
      const size_t i = rng() % sentence.size();
      const size_t j = std::min(sentence.size(), i + 1 + rng() % 8);
      Session s(&store);
      ASSERT_TRUE(s.AdvanceBytes(sentence.substr(0, i)).ok()) << grammar << JsonQuote(sentence);
      s.SetSuffix(sentence.substr(j));
      const std::string where = grammar + "prefix " + JsonQuote(sentence.substr(0, i)) +
                                " suffix " + JsonQuote(sentence.substr(j));
      const int want = ShortestByBreadthFirst(s, alphabet, 8, 200000);
      ASSERT_NE(want, -1) << where;  // the cut's own middle has at most 8 bytes
      if (want < 0) continue;         // unknown
      std::string got;
      int64_t used = 0;
      ASSERT_EQ(completer.Search(&s, 2000000, &got, &used), CompletionResult::kFound) << where;
      nodes_used.push_back(used);
      ++compared;
      EXPECT_EQ(static_cast<int>(got.size()), want) << where << " middle " << JsonQuote(got);
      exact += static_cast<int>(got.size()) == want;
      Session end = s.Fork();
      ASSERT_TRUE(end.AdvanceBytes(got).ok());
      EXPECT_TRUE(end.CanEnd()) << where << " middle " << JsonQuote(got);
      want_sum += want;
      ExpectBoundBelowShortest(&completer, s, got, want, &bound_sum, where);
      if (::testing::Test::HasFailure()) return;
    }
  }
  std::sort(nodes_used.begin(), nodes_used.end());
  const auto at = [&](double p) {
    return nodes_used.empty() ? 0 : nodes_used[static_cast<size_t>(p * (nodes_used.size() - 1))];
  };
  std::printf("%lld cuts with a suffix, %lld middles shortest; search nodes p50 %lld p99 %lld "
              "max %lld; estimate at the prefix %lld bytes of %lld\n",
              static_cast<long long>(compared), static_cast<long long>(exact),
              static_cast<long long>(at(0.5)), static_cast<long long>(at(0.99)),
              static_cast<long long>(at(1.0)), static_cast<long long>(bound_sum),
              static_cast<long long>(want_sum));
  EXPECT_GT(compared, 30);
}

TEST(ViablePrefix, CompletionSearchWithASuffixFindsShortestMiddles) {
  const bool quick = TestQuick();
  ExpectShortestMiddles(false, quick ? 16 : 160, quick ? 4 : 12, 20261129);
  ExpectShortestMiddles(true, quick ? 16 : 160, quick ? 4 : 12, 20261130);
}

// The same on the strict Python grammar with LLaMA's vocabulary: along
// random masked walks, the completion search's answer is never longer than
// one a breadth-first search finds over a few bytes (the closers, quotes,
// a digit, a letter, newline and space), and it completes the text.
TEST(ViablePrefix, CompletionSearchIsShortestOnStrictPython) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::string alphabet = "\n )]}'\"0a:";
  Completer completer(*store);
  std::mt19937 rng(20261127);
  int64_t compared = 0;
  const int walks = TestQuick() ? 6 : 40;
  for (int w = 0; w < walks; ++w) {
    Session s(store);
    for (int k = 0; k < 40; ++k) {
      std::vector<uint32_t> mask = s.Mask();
      const std::vector<int32_t> allowed = AllowedTokens(*store, mask);
      if (allowed.empty()) break;
      // Short tokens, as a sampler at high temperature writes them.
      int32_t pick = allowed[rng() % allowed.size()];
      for (int tries = 0; tries < 8 && store->TokenBytes(pick).size() > 2; ++tries) {
        pick = allowed[rng() % allowed.size()];
      }
      ASSERT_TRUE(s.Advance(pick).ok());
      if (k % 4 != 3) continue;
      const int bfs = ShortestByBreadthFirst(s, alphabet, 4, 100000);
      if (bfs < 0) continue;
      std::string got;
      ASSERT_EQ(completer.Search(&s, 200000, &got, nullptr), CompletionResult::kFound)
          << JsonQuote(s.text());
      EXPECT_LE(static_cast<int>(got.size()), bfs)
          << JsonQuote(s.text()) << " completed by " << JsonQuote(got);
      Session end = s.Fork();
      ASSERT_TRUE(end.AdvanceBytes(got).ok());
      EXPECT_TRUE(end.CanEnd()) << JsonQuote(s.text() + got);
      // The estimate at the prefix and along the completion stays below the
      // bytes left (the completion is a shortest one if it is a lower bound;
      // its length is checked against the breadth-first search above).
      int64_t bound_sum = 0;
      ExpectBoundBelowShortest(&completer, s, got, static_cast<int>(got.size()), &bound_sum,
                               "strict python");
      ++compared;
    }
  }
  std::printf("%lld prefixes compared\n", static_cast<long long>(compared));
  EXPECT_GT(compared, walks * 3);
}

// The prefixes the estimate used to miss by several bytes (keywords past
// three letters cost one byte; `x if y` needed 57,000 nodes, `@a -`
// 138,956), and escapes the search once called dead ends: each shortest
// completion (its length from a search without a budget on the earlier
// estimate; for the escapes, the digits, the quote and the newline, and
// `{OX}` for `\N`) is found within 10,000 nodes.
TEST(ViablePrefix, CompletionSearchFindsHardPythonCompletionsWithinBudget) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  Completer completer(*store);
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"x if y", 8}, {"@a -", 12}, {"f(g(h(i(j(k(l", 7}, {"try:\n  x\n", 9}, {"x = [1, {2: (3", 4},
      // Inside an escape the lexer's state does not change, only the scope
      // layer's: the search reported these as dead ends before its key held
      // the layer's reading state (ScopeLayer::ReadingHash).
      {"x = \"\\u", 6}, {"x = b\"\\x4", 3}, {"x = '\\U001", 7}, {"x = \"\\N", 6},
      {"x = f\"{y!r:\\x4", 4},
      // Where a name decides (a declaration, a repeated parameter), the key
      // holds the names too (ScopeLayer::NamesHash): without them every name
      // shared the key of the first one tried (`A`, unbound; `x`, the
      // repeated parameter) and the search answered "none".
      {"def g():\n    x = 1\n    def h():\n        nonlocal ", 2},
      {"def g():\n    x = 1\n    def h():\n        x = 2\n        nonlocal ", 2},
      {"def f(x, *, x", 5}, {"lambda x, x", 4},
      // A method's nonlocal can only name the class cell (ScopeLayer::Feed
      // refuses a word that leaves `__class__`'s prefix).
      {"class C:\n    def f(self):\n        nonlocal ", 10}};
  for (const auto& [text, want] : cases) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes(text).ok()) << JsonQuote(text);
    std::string got;
    int64_t used = 0;
    ASSERT_EQ(completer.Search(&s, 10000, &got, &used), CompletionResult::kFound) << JsonQuote(text);
    EXPECT_EQ(got.size(), want) << JsonQuote(text) << " completed by " << JsonQuote(got);
    Session end = s.Fork();
    ASSERT_TRUE(end.AdvanceBytes(got).ok());
    EXPECT_TRUE(end.CanEnd()) << JsonQuote(text + got);
    int64_t bound_sum = 0;
    ExpectBoundBelowShortest(&completer, s, got, static_cast<int>(want), &bound_sum, text);
    std::printf("%s: %lld nodes, %s\n", JsonQuote(text).c_str(), static_cast<long long>(used),
                JsonQuote(got).c_str());
  }
}

// After an operand inside a list, set or dict outside an async function,
// a word that is a proper prefix of `async` (`as`, `asy`, `asyn`) can only
// become the keyword `async`, which the scope layer refuses there
// (asynchronous comprehension): the engine refuses the word
// (Session::WordLeadsNowhere), and a session that does not ask
// (set_dead_word_check(false)) reads it, from where the completion search
// proves it dead.  Where the word still has a way on (an async function, a
// generator expression, `as` of a with item, an import or a pattern,
// `a` -> `and`, a list inside a generator expression) the engine takes it and
// the search completes it within 10,000 nodes (test_dead_ends.py has CPython
// compile the completions).
TEST(ViablePrefix, PrefixesOfARefusedAsyncAreDeadEnds) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  Completer completer(*store);
  // Each dead prefix with the text before its last word: there the word's
  // token (if the vocabulary has it whole) is out of the mask.
  const std::vector<std::pair<std::string, std::string>> dead = {
      {"[x as", "[x"}, {"[x asy", "[x"}, {"[x asyn", "[x"}, {"{x asy", "{x"}, {"{x: y as", "{x: y"},
      {"x = [1 as", "x = [1"}, {"x = [(y) as", "x = [(y)"}, {"x = ['s' as", "x = ['s'"},
      {"x = [... as", "x = [..."}, {"[x\n as", "[x\n"}, {"[x for y in z as", "[x for y in z"},
      {"def f():\n    return [x as", "def f():\n    return [x"},
      {"async def f():\n    def g():\n        return [x asy", "async def f():\n    def g():\n        return [x"},
      {"async def f():\n    lambda: [x as", "async def f():\n    lambda: [x"}};
  for (const auto& [text, before] : dead) {
    Session s(store);
    EXPECT_FALSE(s.AdvanceBytes(text).ok()) << JsonQuote(text);
    Session off(store);
    off.set_dead_word_check(false);
    ASSERT_TRUE(off.AdvanceBytes(text).ok()) << JsonQuote(text);
    std::string got;
    EXPECT_EQ(completer.Search(&off, 200000, &got), CompletionResult::kNone)
        << JsonQuote(text) << " completed by " << JsonQuote(got);
    Session at(store);
    ASSERT_TRUE(at.AdvanceBytes(before).ok()) << JsonQuote(before);
    const std::string word = text.substr(before.size());
    const std::vector<uint32_t> mask = at.Mask();
    for (int32_t t = 0; t < store->vocab_size; ++t) {
      if (store->token_special[t] || store->TokenBytes(t) != word) continue;
      const std::string_view b = store->TokenBytes(t);
      Session off_at = at.Fork();
      off_at.set_dead_word_check(false);
      EXPECT_TRUE(off_at.AllowsSlow(t)) << JsonQuote(before) << " + " << JsonQuote(std::string(b));
      EXPECT_FALSE(MaskAllows(mask, t)) << JsonQuote(before) << " + " << JsonQuote(std::string(b));
      EXPECT_FALSE(at.AllowsSlow(t)) << JsonQuote(before) << " + " << JsonQuote(std::string(b));
    }
  }
  const std::vector<std::string> live = {
      "async def f():\n    return [x as", "async def f():\n    return {x asyn", "(x as", "f(x as",
      "def f():\n    return (x asy", "with (x as", "from m import (x as", "[x a", "{x: y a",
      "match z:\n    case [x as", "async def f():\n    [[x as", "try:\n    pass\nexcept (E as"};
  for (const std::string& text : live) {
    Session s(store);
    ASSERT_TRUE(s.AdvanceBytes(text).ok()) << JsonQuote(text);
    std::string got;
    int64_t used = 0;
    EXPECT_EQ(completer.Search(&s, 10000, &got, &used), CompletionResult::kFound) << JsonQuote(text);
    std::printf("%s: %lld nodes, %s\n", JsonQuote(text).c_str(), static_cast<long long>(used),
                JsonQuote(got).c_str());
  }
}

TEST(ViablePrefix, RandomGrammarsHaveNoDeadEnds) {
  const bool quick = TestQuick();
  const int grammars = quick ? 32 : 400;
  std::mt19937 rng(20261125);
  std::vector<Case> cases;
  for (int i = 0; i < grammars; ++i) {
    cases.push_back({"random" + std::to_string(i), RandomLarkGrammar(rng)});
  }
  ExpectNoDeadEnds(cases, quick ? 3 : 10, quick ? 10 : 24, 99);
}

// The same with a newline terminal and an %ignore'd line comment in every
// grammar: the comment may start only where the newline or the end of the
// text can come next.
TEST(ViablePrefix, RandomGrammarsWithCommentsHaveNoDeadEnds) {
  const bool quick = TestQuick();
  // CI size: 14 (30 less 6 for the stack-viability tests' time, and less 10
  // for the grammars with classes above ASCII below, which are of the same
  // class, with comments).
  const int grammars = quick ? 14 : 300;
  std::mt19937 rng(20261126);
  std::vector<Case> cases;
  for (int i = 0; i < grammars; ++i) {
    cases.push_back({"commented" + std::to_string(i), RandomLarkGrammar(rng, true)});
  }
  ExpectNoDeadEnds(cases, quick ? 3 : 10, quick ? 10 : 24, 101);
}

// The same with classes above ASCII in NAME and the comment
// (RandomLarkGrammar's above_ascii): a comment that takes every character,
// one that ends before some, one whose leftmost-first alternation leaves a
// character to the next terminal; names that start with any character
// above ASCII or some.  The vocabulary has the characters whole, split
// (the random strings' bytes) and after `#`.
TEST(ViablePrefix, RandomGrammarsWithCommentsAndNamesAboveAsciiHaveNoDeadEnds) {
  const bool quick = TestQuick();
  const int grammars = quick ? 16 : 200;
  std::mt19937 rng(20261127);
  std::vector<Case> cases;
  for (int i = 0; i < grammars; ++i) {
    cases.push_back({"above_ascii" + std::to_string(i), RandomLarkGrammar(rng, true, true)});
  }
  ExpectNoDeadEnds(cases, quick ? 3 : 10, quick ? 10 : 24, 103);
}

// Random grammars with a dead context: `start: n0 | "@" nK DX` with DX
// %declare'd (nothing produces it, so the tables lose it), sometimes with
// a live `"@" nJ "!"` beside it.  The states inside nK are shared with its
// live contexts, so every per-state check passes after `@`: only the
// stack-viability check refuses what leads into the dead context.  Walked
// with the check (0 dead ends, both oracles) and without it (the dead ends
// it prevents are counted: the test fails if none appears).
std::string WithDeadContext(std::mt19937& rng, bool comments) {
  for (;;) {
    const std::string out = RandomGrammarWithDeadContext(rng, comments);
    Grammar parsed;
    if (!ReadLarkString(out, "random.lark", LarkReaderOptions{}, &parsed).ok()) continue;
    ParseTables tables;
    LalrStats stats;
    if (!BuildParseTables(parsed, &tables, &stats).ok() || stats.shift_reduce > 0) continue;
    return out;
  }
}

TEST(ViablePrefix, RandomGrammarsWithADeadContextHaveNoDeadEnds) {
  const bool quick = TestQuick();
  const int grammars = quick ? 16 : 240;
  std::mt19937 rng(20261127);
  Totals on, off;
  int64_t checked_stores = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> lark;
  for (int i = 0; i < grammars; ++i) {
    const std::string grammar = WithDeadContext(rng, i % 3 == 2);
    const std::string name = "deadctx" + std::to_string(i);
    std::string alphabet;
    std::vector<std::string> tokens;
    Vocabulary(grammar, rng, &alphabet, &tokens);
    const std::string gpath = TempPath(name + ".lark"), tpath = TempPath(name + ".json");
    WriteTextFile(gpath, grammar);
    WriteTextFile(tpath, ByteLevelTokenizerJson(tokens));
    CompiledStore raw;
    if (!CompileStore(gpath, tpath, CompileOptions{}, &raw).ok()) continue;  // conflicts
    CompiledStore streamlined = raw;
    ASSERT_TRUE(StreamlineStore(&streamlined, StreamlineOptions{}, nullptr).ok());
    CompiledStore without = raw;
    without.viability = nullptr;
    checked_stores += raw.viability != nullptr;
    const uint32_t seed = static_cast<uint32_t>(rng());
    Totals local;
    WalkStore(&raw, name + " (raw)", alphabet, 3, quick ? 8 : 20, seed, &local);
    WalkStore(&streamlined, name + " (streamlined)", alphabet, 3, quick ? 8 : 20, seed, &local);
    on.steps += local.steps;
    on.checked += local.checked;
    on.dead += local.dead;
    on.unknown += local.unknown;
    for (auto& f : local.failures) on.failures.push_back("\n  " + grammar + "  " + f);
    lark.emplace_back(gpath, local.completed);
    Totals w;
    WalkStore(&without, name + " (no check)", alphabet, 3, quick ? 8 : 20, seed, &w);
    off.walks += w.walks;
    off.walks_dead += w.walks_dead;
    off.dead += w.dead;
    off.checked += w.checked;
  }
  std::string shown;
  for (size_t i = 0; i < on.failures.size() && i < 12; ++i) shown += on.failures[i] + "\n";
  EXPECT_EQ(on.failures.size(), 0u) << shown;
  EXPECT_LE(on.unknown * 100, on.checked) << on.unknown << " of " << on.checked;
  const int64_t confirmed = ConfirmedByLark(lark);
  // The class is there: without the check, walks meet dead ends.
  EXPECT_GT(off.walks_dead, 0);
  std::printf("%d grammars, %lld with the check on; with it: %lld tokens checked, %lld dead, "
              "%lld completions confirmed by Lark; without it: %lld of %lld walks met a dead "
              "end (%lld of %lld tokens)\n",
              grammars, static_cast<long long>(checked_stores),
              static_cast<long long>(on.checked), static_cast<long long>(on.dead),
              static_cast<long long>(confirmed), static_cast<long long>(off.walks_dead),
              static_cast<long long>(off.walks), static_cast<long long>(off.dead),
              static_cast<long long>(off.checked));
}

// Real grammars with a real vocabulary: the shipped json.lark and Lark's own
// lark.lark with the 32k SentencePiece vocabulary (byte fallback), random
// walks biased toward short tokens (punctuation, blanks, single letters, as
// a sampler at a high temperature would take them), every step's mask
// filtered by pre* of the accepting configurations: a token the mask allows
// and the filter drops is a dead end.  Grammars that do not fit the
// pushdown system (SuffixQuotient::Fits: sql.lark, the strict Python
// grammar) are not covered here.
TEST(ViablePrefix, RealGrammarsThatFitHaveNoDeadEndsByPreStar) {
  const std::string tok = TestEnv("CFGMASK_TOK_LLAMA_SPM");
  if (tok.empty()) {
    if (TestEnv("CI") == "true") FAIL() << "CFGMASK_TOK_LLAMA_SPM is not set (run setup.sh)";
    GTEST_SKIP() << "CFGMASK_TOK_LLAMA_SPM is not set";
  }
  const bool quick = TestQuick();
  struct Grammar {
    std::string path, start;
  };
  std::vector<Grammar> grammars = {{std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/json.lark", ""}};
  if (!TestEnv("CFGMASK_LARK_GRAMMARS").empty()) {
    grammars.push_back({TestEnv("CFGMASK_LARK_GRAMMARS") + "/lark.lark", "start"});
  }
  std::mt19937 rng(20261127);
  int64_t steps = 0, allowed_total = 0, dead = 0, refused = 0, covered = 0;
  std::vector<std::string> shown;
  for (const Grammar& g : grammars) {
    Status st;
    const CompiledStore* store = CachedTestStore(g.path, tok, g.start, &st);
    ASSERT_TRUE(store != nullptr) << g.path << ": " << st.message();
    if (!SuffixQuotient::Fits(store, SuffixQuotientLimits{}).ok()) {
      std::printf("%s: does not fit the pushdown system, not checked\n", g.path.c_str());
      continue;
    }
    std::shared_ptr<SuffixQuotient> ends;
    ASSERT_TRUE(SuffixQuotient::Build(store, "", SuffixQuotientLimits{}, &ends).ok()) << g.path;
    ++covered;
    std::vector<int32_t> short_tokens;
    for (int32_t t = 0; t < store->vocab_size; ++t) {
      if (!store->token_special[t] && store->TokenBytes(t).size() <= 2) short_tokens.push_back(t);
    }
    for (int w = 0; w < (quick ? 12 : 100); ++w) {
      Session s(store);
      for (int k = 0; k < (quick ? 40 : 120); ++k) {
        // pre* from every token, not only the mask's: the tokens after
        // which some hypothesis can still end.  The mask must be exactly
        // those (a token outside it that pre* keeps would be a refusal of a
        // token that has a completion).
        const std::vector<uint32_t> mask = s.Mask(), kept = PreStarKept(s, *ends);
        ++steps;
        for (int32_t t = 0; t < store->vocab_size; ++t) {
          if (!store->token_special[t] && MaskAllows(kept, t) && !MaskAllows(mask, t)) {
            ++refused;
            if (shown.size() < 8) {
              shown.push_back(g.path + ": " + JsonQuote(s.text()) + " + token " +
                              JsonQuote(std::string(store->TokenBytes(t))) +
                              ": pre* finds an end, the mask refuses it");
            }
          }
        }
        std::vector<int32_t> allowed, short_allowed;
        for (int32_t t = 0; t < store->vocab_size; ++t) {
          if (!MaskAllows(mask, t) || store->token_special[t]) continue;
          allowed.push_back(t);
          if (!MaskAllows(kept, t)) {
            ++dead;
            if (shown.size() < 8) {
              shown.push_back(g.path + ": " + JsonQuote(s.text()) + " + token " +
                              JsonQuote(std::string(store->TokenBytes(t))));
            }
          }
        }
        allowed_total += static_cast<int64_t>(allowed.size());
        for (int32_t t : short_tokens) {
          if (MaskAllows(mask, t)) short_allowed.push_back(t);
        }
        if (allowed.empty() || (s.CanEnd() && rng() % 16 == 0)) break;
        const std::vector<int32_t>& pick =
            !short_allowed.empty() && rng() % 4 != 0 ? short_allowed : allowed;
        ASSERT_TRUE(s.Advance(pick[rng() % pick.size()]).ok());
      }
    }
  }
  std::string text;
  for (const std::string& x : shown) text += "\n  " + x;
  EXPECT_EQ(dead, 0) << text;
  EXPECT_EQ(refused, 0) << text;
  EXPECT_GT(covered, 0);
  std::printf("%lld grammars fit, %lld steps, %lld allowed tokens, %lld dead ends by pre*, "
              "%lld viable tokens refused\n",
              static_cast<long long>(covered), static_cast<long long>(steps),
              static_cast<long long>(allowed_total), static_cast<long long>(dead),
              static_cast<long long>(refused));
}

}  // namespace
}  // namespace cfgmask
