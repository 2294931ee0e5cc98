// The vocabulary walk of maskstore/vocab_walk.cc against slow references:
//
//  - Brute force: for small grammars and a 2,000-token slice of the Qwen2
//    vocabulary (fixed seed, plus every single-byte token), every
//    nfa_transition entry (root q, token t) -> {(q', S)} the trie walk
//    records equals what stepping t's bytes one at a time through the
//    terminal automaton from q gives (the simulation below shares nothing
//    with the walk: no trie, no interning, no suspension, no merge), less
//    the hypotheses that end in a dead end (no text goes on from there,
//    found breadth-first over all 4-byte continuations).  Both ways: no
//    entry missing, none extra.
//  - Determinism: the store compiled with 1 thread and with several is
//    byte-identical (the recorded timings aside).
//  - Resource limits of CompileOptions: each one stops the compile with
//    kResourceLimit and a message naming the limit.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "lexer/terminal_automaton.h"
#include "lexer/tokenizer/tokenizer.h"
#include "maskstore/compiled_store.h"
#include "maskstore/row_codec.h"
#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"
#include "streamline/streamline.h"
#include "tests/small_tokenizer.h"
#include "tests/test_store_cache.h"

namespace cfgmask {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

#define REQUIRE_ENV(var, name)                                              \
  const std::string var = Env(name);                                        \
  if (var.empty()) GTEST_SKIP() << name << " not set (source .cache/env.sh)"

std::string GrammarFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  WriteTextFile(path, text);
  return path;
}

// Keywords against names, "=" against "==", a float against an int, and
// %ignore between any two terminals.
const char kExprGrammar[] = R"lark(start: stmt+
stmt: "let" NAME "=" expr ";"
    | "if" expr "then" stmt
    | expr ";"
?expr: expr "+" atom
     | expr "==" atom
     | atom
?atom: NAME
     | NUMBER
     | "(" expr ")"
NAME: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+(\.[0-9]+)?/
%ignore /[ \t\n]+/
)lark";

// A Python subset with the indenter: _NEWLINE carries comments and the next
// line's indentation; brackets make newlines vanish.
const char kPySubsetGrammar[] = R"lark(start: (_NEWLINE | stmt)*
?stmt: simple_stmt | if_stmt
simple_stmt: expr _NEWLINE
           | "pass" _NEWLINE
if_stmt: "if" expr ":" suite
suite: simple_stmt | _NEWLINE _INDENT stmt+ _DEDENT
expr: term ("+" term)*
term: NAME | NUMBER | "(" expr ")"
NAME: /[a-zA-Z_]\w*/
NUMBER: /\d+/
COMMENT: /#[^\n]*/
_NEWLINE: ( /\r?\n[\t ]*/ | COMMENT )+
%ignore /[\t \f]+/
%ignore COMMENT
%declare _INDENT _DEDENT
)lark";

std::string JsonGrammarPath() { return std::string(CFGMASK_SOURCE_DIR) + "/grammar/lark/json.lark"; }

// 2,000 text tokens drawn with a fixed seed, plus every single-byte token.
std::vector<int32_t> VocabularySlice(const Vocabulary& v, int32_t count) {
  std::vector<int32_t> single, rest;
  for (int32_t t = 0; t < v.size(); ++t) {
    if (v.special[t] || v.tokens[t].empty()) continue;
    (v.tokens[t].size() == 1 ? single : rest).push_back(t);
  }
  std::mt19937 rng(20240611);
  std::shuffle(rest.begin(), rest.end(), rng);
  rest.resize(std::min<size_t>(rest.size(), count));
  std::vector<int32_t> out = single;
  out.insert(out.end(), rest.begin(), rest.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::string ItemKey(const LexItem& it) {
  std::ostringstream os;
  os << static_cast<int>(it.kind) << ',' << it.terminal << ',' << it.blockers << ','
     << it.full_match << ',' << it.col_absolute << ',' << it.col << ',' << it.slot << ';';
  return os.str();
}

std::string EntryKey(int32_t to, const std::vector<LexItem>& items) {
  std::string key = std::to_string(to) + ":";
  for (const LexItem& it : items) key += ItemKey(it);
  return key;
}

// The brute-force reference: the token's bytes one at a time, every lexing
// hypothesis kept (continue the current terminal, or end a candidate
// terminal first), deduplicated by (state, items, column).  No pruning of
// Emit pairs: the walk under test runs with keep_impossible_pairs.
struct Hypothesis {
  int32_t q;
  std::vector<LexItem> items;
  ColumnDelta col;
  std::string Key() const {
    std::string k = std::to_string(q) + "|" + std::to_string(col.absolute) + "|" +
                    std::to_string(col.value) + "|";
    for (const LexItem& it : items) k += ItemKey(it);
    return k;
  }
};

// A token may not end in a dead end: a state where the text cannot end,
// nor within the next 3 bytes, and from which no 4-byte string leads
// anywhere.  Breadth-first over the sets of states 0..4 bytes away.
bool DeadEndUncached(TerminalAutomaton* a, int32_t q) {
  std::set<int32_t> level = {q};
  for (int depth = 0; depth < 4; ++depth) {
    std::set<int32_t> next;
    for (int32_t s : level) {
      if (!a->EndOfInput(s).empty()) return false;
      std::vector<LexItem> hits;
      const std::vector<int32_t> candidates = a->BoundaryCandidates(s);
      for (int b = 0; b < 256; ++b) {
        const int32_t s2 = a->Step(s, static_cast<uint8_t>(b), &hits);
        if (s2 >= 0) next.insert(s2);
        for (int32_t t : candidates) {
          for (int32_t mode : a->ModesAfter(s, t)) {
            LexItem emit;
            const int32_t s1 = a->Boundary(s, t, mode, &emit);
            if (s1 < 0) continue;
            const int32_t s3 = a->Step(s1, static_cast<uint8_t>(b), &hits);
            if (s3 >= 0) next.insert(s3);
          }
        }
      }
    }
    level.swap(next);
  }
  return level.empty();
}

// Per automaton: cleared by CheckAgainstBruteForce.
std::map<int32_t, bool> dead_end_memo;

bool DeadEnd(TerminalAutomaton* a, int32_t q) {
  auto [it, inserted] = dead_end_memo.emplace(q, false);
  if (inserted) it->second = DeadEndUncached(a, q);
  return it->second;
}

std::set<std::string> BruteForce(TerminalAutomaton* a, int32_t nl, int32_t root,
                                 const std::string& bytes) {
  std::vector<Hypothesis> hyps = {{root, {}, ColumnDelta{false, 0}}};
  for (char ch : bytes) {
    const uint8_t b = static_cast<uint8_t>(ch);
    std::map<std::string, Hypothesis> next;
    for (const Hypothesis& h : hyps) {
      std::vector<LexItem> hits;
      const int32_t q2 = a->Step(h.q, b, &hits);
      if (q2 >= 0) {
        Hypothesis n{q2, h.items, h.col};
        n.items.insert(n.items.end(), hits.begin(), hits.end());
        n.col.Feed(b);
        next.emplace(n.Key(), n);
      }
      const std::vector<int32_t> candidates = a->BoundaryCandidates(h.q);
      for (int32_t t : candidates) {
        for (int32_t mode : a->ModesAfter(h.q, t)) {
          LexItem emit;
          const int32_t q1 = a->Boundary(h.q, t, mode, &emit);
          if (q1 < 0) continue;
          if (t == nl) {
            emit.col_absolute = h.col.absolute;
            emit.col = h.col.value;
          }
          hits.clear();
          const int32_t q3 = a->Step(q1, b, &hits);
          if (q3 < 0) continue;
          Hypothesis n{q3, h.items, ColumnDelta::TerminalStart()};
          n.items.push_back(emit);
          n.items.insert(n.items.end(), hits.begin(), hits.end());
          n.col.Feed(b);
          next.emplace(n.Key(), n);
        }
      }
    }
    hyps.clear();
    for (auto& [k, h] : next) hyps.push_back(h);
    if (hyps.empty()) break;
  }
  std::set<std::string> out;
  std::vector<int32_t> slot_map;
  for (const Hypothesis& h : hyps) {
    std::vector<LexItem> items = h.items;
    items.push_back(a->Tail(h.q));
    const int32_t to = a->CompactSlots(h.q, &slot_map);
    if (DeadEnd(a, to)) continue;
    out.insert(EntryKey(to, items));
  }
  return out;
}

struct Slice {
  Vocabulary vocab;
  std::vector<int32_t> ids;
};

const Slice* QwenSlice() {
  static Slice* slice = [] {
    auto* s = new Slice;
    const std::string path = Env("CFGMASK_TOK_QWEN2");
    if (path.empty() || !LoadVocabulary(path, &s->vocab).ok()) return static_cast<Slice*>(nullptr);
    s->ids = VocabularySlice(s->vocab, 2000);
    return s;
  }();
  return slice;
}

// Compiles `grammar` on the slice with the walk recorded, then compares
// every (root, token) pair with the brute force.
void CheckAgainstBruteForce(const std::string& grammar, const std::string& start) {
  const Slice* slice = QwenSlice();
  ASSERT_NE(slice, nullptr);
  dead_end_memo.clear();
  WalkRecord record;
  record.keep_impossible_pairs = true;
  CompileOptions options;
  options.start = start;
  options.vocab_subset = slice->ids;
  options.record = &record;
  CompiledStore store;
  Status st = CompileStore(grammar, Env("CFGMASK_TOK_QWEN2"), options, &store);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(record.automaton);
  ASSERT_FALSE(record.roots.empty());
  EXPECT_EQ(static_cast<int32_t>(record.roots.size()), store.num_roots);

  std::map<std::pair<int32_t, int32_t>, std::set<std::string>> walked;
  for (const NfaTransitionEntry& e : record.entries) {
    ASSERT_GE(e.root, 0);
    ASSERT_LT(e.root, static_cast<int32_t>(record.roots.size()));
    const bool fresh = walked[{e.root, e.token}].insert(EntryKey(e.to, e.items)).second;
    EXPECT_TRUE(fresh) << "entry recorded twice: root " << e.root << " token " << e.token;
  }
  EXPECT_EQ(static_cast<int64_t>(record.entries.size()), store.stats.nfa_transition_entries);

  int64_t compared = 0, nonempty = 0, mismatches = 0;
  for (int32_t r = 0; r < static_cast<int32_t>(record.roots.size()); ++r) {
    for (int32_t t : slice->ids) {
      const std::set<std::string> brute =
          BruteForce(record.automaton.get(), record.indenter_nl, record.roots[r],
                     slice->vocab.tokens[t]);
      auto it = walked.find({r, t});
      const std::set<std::string> empty;
      const std::set<std::string>& walk = it == walked.end() ? empty : it->second;
      ++compared;
      nonempty += !brute.empty();
      if (brute != walk && ++mismatches <= 5) {
        std::vector<std::string> only_brute, only_walk;
        std::set_difference(brute.begin(), brute.end(), walk.begin(), walk.end(),
                            std::back_inserter(only_brute));
        std::set_difference(walk.begin(), walk.end(), brute.begin(), brute.end(),
                            std::back_inserter(only_walk));
        ADD_FAILURE() << "root " << r << " (lexer state " << record.roots[r] << ") token " << t << " '" << slice->vocab.tokens[t] << "': "
                      << only_brute.size() << " entries missing from the walk (first "
                      << (only_brute.empty() ? "" : only_brute[0]) << "), " << only_walk.size()
                      << " extra (first " << (only_walk.empty() ? "" : only_walk[0]) << ")";
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  // Every walked pair was compared (root and token in range).
  for (const auto& [key, set] : walked) {
    EXPECT_TRUE(std::binary_search(slice->ids.begin(), slice->ids.end(), key.second))
        << "token " << key.second << " outside the slice";
  }
  // The comparison is not vacuous.
  EXPECT_GT(nonempty, 1000) << compared << " pairs compared";
  EXPECT_GT(record.roots.size(), 2u);
}

TEST(VocabWalkBruteForce, Json) {
  REQUIRE_ENV(tok, "CFGMASK_TOK_QWEN2");
  CheckAgainstBruteForce(JsonGrammarPath(), "start");
}

TEST(VocabWalkBruteForce, KeywordsNamesIgnore) {
  REQUIRE_ENV(tok, "CFGMASK_TOK_QWEN2");
  CheckAgainstBruteForce(GrammarFile("expr.lark", kExprGrammar), "start");
}

TEST(VocabWalkBruteForce, PythonSubsetWithIndenter) {
  REQUIRE_ENV(tok, "CFGMASK_TOK_QWEN2");
  CheckAgainstBruteForce(GrammarFile("py.lark", kPySubsetGrammar), "start");
}

// With FOLLOW pruning on (the default), every walked entry is one of the
// brute force's, and the brute force's extra entries all have two or more
// Emits (pruning drops impossible consecutive terminals only).
TEST(VocabWalkBruteForce, PruningOnlyDropsMultiEmitEntries) {
  REQUIRE_ENV(tok, "CFGMASK_TOK_QWEN2");
  const Slice* slice = QwenSlice();
  ASSERT_NE(slice, nullptr);
  dead_end_memo.clear();
  WalkRecord record;
  CompileOptions options;
  options.vocab_subset = slice->ids;
  options.record = &record;
  CompiledStore store;
  Status st = CompileStore(GrammarFile("expr2.lark", kExprGrammar), tok, options, &store);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::map<std::pair<int32_t, int32_t>, std::set<std::string>> walked;
  for (const NfaTransitionEntry& e : record.entries) {
    walked[{e.root, e.token}].insert(EntryKey(e.to, e.items));
  }
  int64_t kept = 0, dropped = 0;
  for (int32_t r = 0; r < static_cast<int32_t>(record.roots.size()); ++r) {
    for (int32_t t : slice->ids) {
      // The brute force again, keeping the items to count Emits.
      const std::set<std::string> brute = BruteForce(
          record.automaton.get(), record.indenter_nl, record.roots[r], slice->vocab.tokens[t]);
      const std::set<std::string>& walk = walked[{r, t}];
      for (const std::string& e : walk) {
        ++kept;
        EXPECT_TRUE(brute.count(e)) << "root " << r << " token " << t << ": " << e;
      }
      for (const std::string& e : brute) {
        if (walk.count(e)) continue;
        ++dropped;
        // Items are "kind,..;" with kind 0 = Emit.
        int emits = 0;
        for (size_t p = e.find(':') + 1; p < e.size(); p = e.find(';', p) + 1) {
          if (e.compare(p, 2, "0,") == 0) ++emits;
        }
        EXPECT_GE(emits, 2) << "root " << r << " token " << t << ": dropped " << e;
      }
    }
  }
  EXPECT_GT(kept, 1000);
  EXPECT_GT(dropped, 0) << "the grammar no longer exercises the pruning";
}

// ---------------------------------------------------------------- threads

std::string StoreBytes(CompiledStore store, const std::string& name) {
  // Timings are the only fields that may differ between two compiles.
  store.stats.seconds_grammar = store.stats.seconds_lalr = 0;
  store.stats.seconds_automaton = store.stats.seconds_store = 0;
  store.stats.seconds_tokenizer = store.stats.seconds_streamline = 0;
  const std::string path = TempPath(name);
  Status st = WriteStoreFile(store, path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The store, and the streamlined store, are the same bytes for any number of
// threads, and whether or not the walk keeps sub-walks across batches (the
// last run keeps none: every batch walks again what it needs).
// Rows by reference: every distinct payload is stored once, and the
// payload arrays hold nothing else.
void ExpectPayloadsStoredOnce(const CompiledStore& s, const std::string& tag) {
  std::set<std::tuple<bool, int32_t, int32_t>> used;
  for (size_t r = 0; r < s.row_seq.size(); ++r) {
    used.insert({s.row_kind[r] == static_cast<int32_t>(RowKind::kBitset), s.row_offset[r],
                 s.row_length[r]});
  }
  size_t list_words = 0, bit_words = 0;
  for (const auto& [bits, off, len] : used) (bits ? bit_words : list_words) += len;
  EXPECT_EQ(static_cast<int64_t>(used.size()), DistinctRowPayloads(s)) << tag;
  EXPECT_EQ(list_words, s.row_tokens.size()) << tag;
  EXPECT_EQ(bit_words, s.row_bits.size()) << tag;
}

void CheckThreadsByteIdentical(const std::string& grammar, const std::string& tokenizer,
                               const std::string& tag) {
  std::string reference, streamlined_reference;
  const std::pair<int32_t, int64_t> runs[] = {{1, CompileOptions().walk_memo_bytes},
                                              {3, CompileOptions().walk_memo_bytes},
                                              {0, CompileOptions().walk_memo_bytes},
                                              {2, 0}};
  for (const auto& [threads, memo] : runs) {
    // Under the sanitizer, not "all cores" (two in CI): three threads run
    // the same threaded walk (the optimised build compiles all four).
    if (threads == 0 && TestSanitized()) continue;
    CompileOptions options;
    options.num_threads = threads;
    options.walk_memo_bytes = memo;
    CompiledStore store;
    Status st = CompileStore(grammar, tokenizer, options, &store);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_GT(store.num_roots, 1);
    const std::string name = tag + std::to_string(threads) + "-" + std::to_string(memo);
    ExpectPayloadsStoredOnce(store, name);
    CompiledStore copy = store;
    const std::string bytes = StoreBytes(std::move(store), name + ".cfgm");
    ASSERT_GT(bytes.size(), 1000u);
    StreamlineOptions so;
    so.num_threads = threads;
    ASSERT_TRUE(StreamlineStore(&copy, so, nullptr).ok());
    ExpectPayloadsStoredOnce(copy, name + "-s");
    const std::string streamlined = StoreBytes(std::move(copy), name + "-s.cfgm");
    if (threads == 1) {
      reference = bytes;
      streamlined_reference = streamlined;
    } else {
      EXPECT_TRUE(bytes == reference)
          << tag << ": " << threads << " threads, memo " << memo << " differ from 1 thread";
      EXPECT_TRUE(streamlined == streamlined_reference)
          << tag << ": streamlined with " << threads << " threads differs from 1 thread";
    }
  }
}

TEST(VocabWalkThreads, ByteIdenticalJsonLlamaSpm) {
  REQUIRE_ENV(tok, "CFGMASK_TOK_LLAMA_SPM");
  CheckThreadsByteIdentical(JsonGrammarPath(), tok, "json");
}

TEST(VocabWalkThreads, ByteIdenticalPythonSubsetLlamaSpm) {
  REQUIRE_ENV(tok, "CFGMASK_TOK_LLAMA_SPM");
  CheckThreadsByteIdentical(GrammarFile("pyt.lark", kPySubsetGrammar), tok, "py");
}

TEST(VocabWalkThreads, ByteIdenticalSmallTokenizer) {
  const std::string tok = TempPath("small.json");
  WriteTextFile(tok, SmallTokenizerJson());
  CheckThreadsByteIdentical(GrammarFile("exprt.lark", kExprGrammar), tok, "expr");
}

// ---------------------------------------------------------------- limits

Status CompileExpr(const CompileOptions& options) {
  const std::string tok = TempPath("small_l.json");
  WriteTextFile(tok, SmallTokenizerJson());
  CompiledStore store;
  return CompileStore(GrammarFile("exprl.lark", kExprGrammar), tok, options, &store);
}

void ExpectLimit(const Status& st, const std::string& option, const std::string& value) {
  ASSERT_EQ(st.code(), ErrorCode::kResourceLimit) << st.ToString();
  EXPECT_NE(st.message().find(option), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(value), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("exprl.lark"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
}

TEST(VocabWalkLimits, DefaultsAccept) { EXPECT_TRUE(CompileExpr(CompileOptions()).ok()); }

TEST(VocabWalkLimits, LexerStates) {
  CompileOptions options;
  options.max_lexer_states = 12;
  ExpectLimit(CompileExpr(options), "max_lexer_states", "12");
}

TEST(VocabWalkLimits, Roots) {
  CompileOptions options;
  options.max_roots = 2;
  ExpectLimit(CompileExpr(options), "max_roots", "2");
}

TEST(VocabWalkLimits, Entries) {
  CompileOptions options;
  options.max_store_entries = 50;
  ExpectLimit(CompileExpr(options), "max_store_entries", "50");
}

TEST(VocabWalkLimits, Rows) {
  CompileOptions options;
  options.max_store_rows = 3;
  ExpectLimit(CompileExpr(options), "max_store_rows", "3");
}

TEST(VocabWalkLimits, Seconds) {
  CompileOptions options;
  options.max_seconds = 1e-9;
  ExpectLimit(CompileExpr(options), "max_seconds", "1e-09");
}

TEST(VocabWalkLimits, JustAboveTheNeedIsAccepted) {
  // The limits count what the compile really builds: set to the measured
  // sizes, the compile succeeds.
  const std::string tok = TempPath("small_m.json");
  WriteTextFile(tok, SmallTokenizerJson());
  CompiledStore store;
  ASSERT_TRUE(CompileStore(GrammarFile("exprm.lark", kExprGrammar), tok, CompileOptions(), &store)
                  .ok());
  CompileOptions options;
  options.max_roots = store.num_roots;
  options.max_store_entries = store.stats.nfa_transition_entries;
  options.max_store_rows = store.stats.rows_before_streamlining;
  options.max_lexer_states = store.num_lex_states + 1;
  CompiledStore again;
  Status st = CompileStore(GrammarFile("exprm.lark", kExprGrammar), tok, options, &again);
  EXPECT_TRUE(st.ok()) << st.ToString();
  options.max_store_rows = store.stats.rows_before_streamlining - 1;
  EXPECT_EQ(CompileStore(GrammarFile("exprm.lark", kExprGrammar), tok, options, &again).code(),
            ErrorCode::kResourceLimit);
}

}  // namespace
}  // namespace cfgmask
