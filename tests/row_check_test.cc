// The row check's fast path against its slow reference: HypothesisParser::
// ItemOk (an item's answer without applying it, which the session's row
// walk uses for the last item of every sequence) must equal Item applied to
// a copy, for every item of every row of every live hypothesis' lexer state,
// at every step of teacher-forced files and of random walks over the masks;
// the rows the session's walk accepts must be those whose every item Item
// accepts on copies; the walks also check that the session's mask equals the slow reference
// (Session::AllowsSlow) on a sample of tokens.  Grammars: Lark's python.lark,
// the strict python.lark, sql.lark (LLaMA SentencePiece with byte fallback,
// real) and python.lark with a 601-token slice of Qwen2's byte-level BPE;
// quick sizes under CFGMASK_QUICK=1.
// The strict grammar's scope-layer filter (ScopeLayer::Filter: per-vocabulary
// token lists and masks instead of scans) against its slow reference, every
// token the grammar's rows allow fed to a copy of the layer: ScopeFilter;
// also on a small byte-level vocabulary whose tokens end a name above ASCII
// that NFKC changes (its programs both ways against CPython's compile()).
// The memo of long reduction chains (ChainMemo, maskstore/hypothesis_parser.h)
// against the same sessions with it off, on generated long tables (masks,
// and the answers and depth read of every terminal at the tables' ends),
// and the step's work (reductions, counted) independent of a table's
// length: ChainMemo.
// The row walk's table of shared prefixes (RowPrefixes, runtime/session.h)
// against the sequences on every root, and the walk with a small cap
// (longer prefixes read from the sequences) against the slow reference:
// RowCheck.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "maskstore/hypothesis_parser.h"
#include "runtime/completion.h"
#include "runtime/scope_layer.h"
#include "runtime/segment.h"
#include "runtime/compile/compile.h"
#include "runtime/tools/sample.h"
#include "tests/exactness_harness.h"
#include "tests/random_lark_grammar.h"
#include "tests/serving_corpus.h"
#include "tests/small_tokenizer.h"

namespace cfgmask {
namespace {

struct Counts {
  int64_t items = 0, accepted = 0, rejected = 0;
};

// Every row of every live hypothesis' root, item by item: ItemOk on the
// parser before the item against Item on a copy of it; and the rows the
// session's walk accepts (Session::AcceptedRows: a trie over the rows, the
// last item by ItemOk, Accepts answered once per prefix) against the rows
// whose every item Item accepts on copies.
void CompareRows(const CompiledStore& s, Session* session, Counts* c) {
  std::vector<int32_t> fast, slow_rows;
  bool eos = false;
  session->AcceptedRows(&fast, &eos);
  // Rows past the roots' are the simulated tokens' (CheckSimulated).
  fast.erase(std::remove_if(fast.begin(), fast.end(),
                            [&](int32_t r) { return r >= s.root_row_offsets[s.num_roots]; }),
             fast.end());
  std::sort(fast.begin(), fast.end());
  fast.erase(std::unique(fast.begin(), fast.end()), fast.end());
  for (const LiveState& l : session->live()) {
    const int32_t root = s.root_index[l.q];
    if (root < 0) continue;
    for (int32_t r = s.root_row_offsets[root]; r < s.root_row_offsets[root + 1]; ++r) {
      const int32_t seq = s.row_seq[r];
      HypothesisParser p{&s, s.lr(), LrOverlay(l.stack), l.indent, l.paren, l.slot_bits};
      for (int32_t i = s.seq_offsets[seq]; i < s.seq_offsets[seq + 1]; ++i) {
        const int32_t item = s.seq_data[i];
        HypothesisParser applied = p;
        const bool fast = p.ItemOk(item, l.col);
        const bool slow = applied.Item(item, l.col);
        ++c->items;
        if (fast != slow) {
          ADD_FAILURE() << "row " << r << " item " << item << " (kind " << s.item_kind[item]
                        << ") at text offset " << session->text().size() << ": ItemOk " << fast
                        << ", Item " << slow << "\n"
                        << session->text();
          return;
        }
        if (!slow) {
          ++c->rejected;
          break;
        }
        if (i + 1 == s.seq_offsets[seq + 1]) {
          ++c->accepted;
          slow_rows.push_back(r);
        }
        p = applied;
      }
    }
  }
  std::sort(slow_rows.begin(), slow_rows.end());
  slow_rows.erase(std::unique(slow_rows.begin(), slow_rows.end()), slow_rows.end());
  EXPECT_EQ(fast, slow_rows) << "accepted rows at text offset " << session->text().size() << "\n"
                             << session->text();
}

SessionLimits NoMemo() {
  SessionLimits l;
  l.memo_bytes = 0;
  return l;
}

// Teacher forcing (greedy segmentation) of `texts`, at most `max_steps` steps each.
Counts ForceTexts(const CompiledStore* store, const std::vector<std::string>& texts,
                  int max_steps) {
  Counts c;
  Segmenter seg(*store);
  for (const std::string& text : texts) {
    Session session(store, NoMemo());
    int steps = 0;
    for (const Segment& s : seg.Cut(text, SegmentMode::kGreedy, nullptr)) {
      if (++steps > max_steps) break;
      CompareRows(*store, &session, &c);
      if (testing::Test::HasFailure()) return c;
      const std::string_view bytes = std::string_view(text).substr(s.offset, s.length);
      if (!(s.token >= 0 ? session.Advance(s.token) : session.AdvanceBytes(bytes)).ok()) break;
    }
  }
  return c;
}

// Random walks over the masks; every few steps, the mask against the slow
// reference on a few allowed and refused tokens.
Counts Walks(const CompiledStore* store, int walks, int max_steps, uint64_t seed) {
  Counts c;
  std::mt19937_64 rng(seed);
  for (int w = 0; w < walks; ++w) {
    Session session(store, NoMemo());
    for (int i = 0; i < max_steps; ++i) {
      CompareRows(*store, &session, &c);
      if (testing::Test::HasFailure()) return c;
      const std::vector<uint32_t> m = session.Mask();
      if (i % 5 == 0) {
        for (int k = 0; k < 8; ++k) {
          const int32_t t = static_cast<int32_t>(rng() % store->vocab_size);
          EXPECT_EQ(MaskAllows(m, t), session.AllowsSlow(t))
              << "walk " << w << " step " << i << " token " << t << ": " << session.text();
        }
      }
      const int32_t t = DrawToken(*store, m, 0.0, &rng, /*ascii_only=*/w % 2 == 0);
      if (t < 0 || store->token_special[t]) break;
      EXPECT_TRUE(session.Advance(t).ok());
    }
  }
  return c;
}

// ---------------------------------------------------------------- row prefixes

// RowPrefixes (runtime/session.h) against the sequences: for every row of
// every root, the prefix it shares with the row before it, counted item by
// item here, capped as asked (the cap the sessions use, a small one that
// leaves many prefixes to the walk's own read, and 0).
void ExpectPrefixesOfSequences(const CompiledStore& s, const char* what) {
  int64_t rows = 0, long_prefixes = 0;
  for (int32_t cap : {RowPrefixes::kCap, 2, 0}) {
    RowPrefixes table(s.num_roots, cap);
    for (int32_t root = 0; root < s.num_roots; ++root) {
      const uint8_t* got = table.For(s, root);
      ASSERT_EQ(got, table.For(s, root)) << "root " << root << ": computed twice";
      for (int32_t r = s.root_row_offsets[root]; r < s.root_row_offsets[root + 1]; ++r) {
        int32_t want = 0;
        if (r > s.root_row_offsets[root]) {
          const int32_t a = s.row_seq[r - 1], b = s.row_seq[r];
          while (s.seq_offsets[a] + want < s.seq_offsets[a + 1] &&
                 s.seq_offsets[b] + want < s.seq_offsets[b + 1] &&
                 s.seq_data[s.seq_offsets[a] + want] == s.seq_data[s.seq_offsets[b] + want]) {
            ++want;
          }
        }
        if (cap == RowPrefixes::kCap) ++rows;
        if (cap == 2 && want > 2) ++long_prefixes;
        ASSERT_EQ(got[r - s.root_row_offsets[root]], std::min(want, cap))
            << what << ": root " << root << " row " << r << " cap " << cap;
      }
    }
  }
  std::printf("%s: %lld rows, %lld share more than 2 items with the row before\n", what,
              static_cast<long long>(rows), static_cast<long long>(long_prefixes));
  EXPECT_GT(rows, 1000);
  EXPECT_GT(long_prefixes, 10);  // the small cap's read of the sequences is exercised
}

// The session's accepted rows with the table (as shipped), with a cap of 2
// (longer shared prefixes read from the sequences) and with none (every
// prefix read from the sequences: the walk before the table), in lockstep at
// every step of teacher-forced texts and of random walks over the masks.
struct PrefixRun {
  int64_t steps = 0, rows = 0;
};
void ExpectWalksEqual(const CompiledStore* store, const std::vector<std::string>& texts,
                      int max_steps, int walks, uint64_t seed, PrefixRun* run) {
  auto limits = [](int32_t cap) {
    SessionLimits l = NoMemo();
    l.row_prefix_cap = cap;
    return l;
  };
  auto compare = [&](std::vector<Session>* s, const std::string& where) {
    std::vector<int32_t> want, got;
    bool eos = false;
    (*s)[2].AcceptedRows(&want, &eos);
    for (size_t k = 0; k < 2; ++k) {
      (*s)[k].AcceptedRows(&got, &eos);
      if (got != want) {
        ADD_FAILURE() << "cap " << (k == 0 ? RowPrefixes::kCap : 2) << ": " << got.size()
                      << " rows, reading every prefix " << want.size() << " at " << where;
        return;
      }
    }
    ++run->steps;
    run->rows += static_cast<int64_t>(want.size());
  };
  auto three = [&] {
    std::vector<Session> s;
    s.reserve(3);
    for (int32_t cap : {RowPrefixes::kCap, 2, 0}) s.emplace_back(store, limits(cap));
    return s;
  };
  Segmenter seg(*store);
  for (const std::string& text : texts) {
    std::vector<Session> s = three();
    int steps = 0;
    for (const Segment& g : seg.Cut(text, SegmentMode::kGreedy, nullptr)) {
      if (++steps > max_steps || testing::Test::HasFailure()) break;
      compare(&s, "byte " + std::to_string(g.offset) + " of\n" + text.substr(0, g.offset));
      const std::string_view bytes = std::string_view(text).substr(g.offset, g.length);
      for (Session& x : s) ASSERT_TRUE((g.token >= 0 ? x.Advance(g.token) : x.AdvanceBytes(bytes)).ok());
    }
  }
  std::mt19937_64 rng(seed);
  for (int w = 0; w < walks && !testing::Test::HasFailure(); ++w) {
    std::vector<Session> s = three();
    for (int i = 0; i < 60 && !testing::Test::HasFailure(); ++i) {
      compare(&s, "walk " + std::to_string(w) + ":\n" + s[0].text());
      const int32_t t = DrawToken(*store, s[0].Mask(), 0.0, &rng, /*ascii_only=*/w % 2 == 0);
      if (t < 0 || store->token_special[t]) break;
      for (Session& x : s) ASSERT_TRUE(x.Advance(t).ok());
    }
  }
}

void ExpectCompared(const char* what, const Counts& c, int64_t min_items = 10000,
                    int64_t min_each = 1000) {
  std::printf("%s: %lld items compared, %lld rows accepted, %lld rejected\n", what,
              static_cast<long long>(c.items), static_cast<long long>(c.accepted),
              static_cast<long long>(c.rejected));
  EXPECT_GT(c.items, min_items);
  EXPECT_GT(c.accepted, min_each);
  EXPECT_GT(c.rejected, min_each);
}

TEST(RowCheck, LarkPythonItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = PythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 3 : 20, 300, 6000);
  ASSERT_FALSE(texts.empty());
  ExpectCompared("python.lark, files", ForceTexts(store, texts, TestQuick() ? 300 : 2000));
  ExpectCompared("python.lark, walks", Walks(store, TestQuick() ? 4 : 30, 60, 5));
}

TEST(RowCheck, StrictPythonItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 3 : 20, 300, 6000);
  ASSERT_FALSE(texts.empty());
  ExpectCompared("strict python.lark, files", ForceTexts(store, texts, TestQuick() ? 300 : 2000));
  ExpectCompared("strict python.lark, walks", Walks(store, TestQuick() ? 4 : 30, 60, 6));
  // The walk's table of shared prefixes (RowPrefixes).
  ExpectPrefixesOfSequences(*store, "strict python.lark");
  PrefixRun run;
  ExpectWalksEqual(store, StdlibTexts(TestQuick() ? 2 : 12, 300, 6000), TestQuick() ? 150 : 1500,
                   TestQuick() ? 4 : 30, 41, &run);
  std::printf("strict python.lark: %lld steps, %lld rows accepted, equal with every cap\n",
              static_cast<long long>(run.steps), static_cast<long long>(run.rows));
  EXPECT_GT(run.steps, TestQuick() ? 200 : 2000);
}

TEST(RowCheck, SqlItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = SqlStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  const std::vector<std::string> texts = SqlTexts(TestQuick() ? 40 : 400);
  ASSERT_GT(texts.size(), 20u);
  ExpectCompared("sql.lark, statements", ForceTexts(store, texts, 400));
  ExpectCompared("sql.lark, walks", Walks(store, TestQuick() ? 4 : 30, 60, 7));
  // The walk's table of shared prefixes (RowPrefixes).
  ExpectPrefixesOfSequences(*store, "sql.lark");
  PrefixRun run;
  ExpectWalksEqual(store, SqlTexts(TestQuick() ? 20 : 200), 400, TestQuick() ? 4 : 30, 42, &run);
  std::printf("sql.lark: %lld steps, %lld rows accepted, equal with every cap\n",
              static_cast<long long>(run.steps), static_cast<long long>(run.rows));
  EXPECT_GT(run.steps, TestQuick() ? 200 : 2000);
}

// A byte-level BPE slice: tokens that end inside a newline's indentation
// (an Emit of the newline whose column is relative to the carried one).
TEST(RowCheck, ByteLevelSliceItemOkIsItem) {
  CFGMASK_REQUIRE_ENV("CFGMASK_LARK_GRAMMARS");
  const std::string tok = TempPath("row_check_small_tokenizer.json");
  WriteTextFile(tok, SmallTokenizerJson());
  CompileOptions o;
  o.start = "file_input";
  CompiledStore store;
  Status st = CompileStore(PythonGrammarPath(), tok, o, &store);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<std::string> texts = StdlibTexts(TestQuick() ? 3 : 20, 300, 6000);
  ASSERT_FALSE(texts.empty());
  // Few rows per lexer state with 601 tokens.
  ExpectCompared("python.lark x byte-level slice, files",
                 ForceTexts(&store, texts, TestQuick() ? 400 : 3000), 2000, 200);
  ExpectCompared("python.lark x byte-level slice, walks",
                 Walks(&store, TestQuick() ? 40 : 200, 60, 8), 500, 20);
}

// ---------------------------------------------------------------- scope filter

// Programs that stop at the states where the layer's filter takes its
// indexed paths: a declared name a `:` would annotate, a whole `global` /
// `nonlocal`, a parameter or keyword name written again (and a longer name
// it begins), await / yield / async words, `__debug__`, `del` with a star,
// assignment expressions in comprehensions, \N{...} and hex escapes; f-strings
// read by the parser (fields, specs, nested quotes, a prefix word before the
// quote) and match statements (soft keywords, patterns, guards).
const char* const kScopePrograms[] = {
    "def show(items, width=8):\n    f = rf = 2\n    head = f\"{len(items)} items: {', '.join(map(str, items))}\"\n"
    "    row = F'{items[0]!r:>{width}} | {items[-1] + 1 = }'\n    raw = rf\"\\d{{2}} {width:0{width}d}\"\n"
    "    return f'''{head}\n{row}''' + fr'{raw}' + f\"{'a' if f else 'b'}\"\n",
    "def kind(cmd):\n    match = case = 1\n    match cmd:\n        case [\"go\", direction] if direction:\n"
    "            return direction\n        case {\"x\": x, **rest}:\n            return x, rest\n"
    "        case Point(x=0, y=yy) | Point(x=yy, y=0):\n            return yy\n"
    "        case str() as s:\n            return s\n        case _:\n            return match + case\n",
    "def where():\n    global _CTX\n    global _PATH\n    if _PATH is None:\n"
    "        _CTX = open('x')\n        _PATH = str(_CTX)\n    return _PATH\n",
    "def outer():\n    counter = 0\n    def inner(step=1):\n        nonlocal counter\n"
    "        counter += step\n        counter = counter + 1\n        return counter\n    return inner\n",
    "class E(Exception):\n    def __init__(\n        self,\n        *args: object,\n"
    "        code: int = None,\n        text: str = None,\n        codepoint: int = None,\n"
    "        codes=None,\n    ) -> None:\n        super().__init__(*args)\n"
    "        raise E(code=1, text=2, codepoint=3, codex=4)\n"
    "        f(code=1, text=2,\n          codepoint=3, text2 \\\n  = 4, codes # c\n  = 5, tex=text == code)\n",
    "async def fetch(s, url, *, timeout=10):\n    r = (await s.get(url), await s.head(url))\n"
    "    d = [x async for x in s.stream(url)]\n    t = sum((await f(x) for x in d))\n"
    "    return r, d, t\n",
    "def gen(items, key=None):\n    for item in items:\n        value = yield item\n"
    "        if value:\n            yield from gen(value, key=key)\n",
    "x = __debug__\nif __debug__:\n    del x\nlam = lambda a, b, c=3: a + b + c\n"
    "y = [z for z in range(3) if (w := z)]\nprint(lam, y, sep=', ', end='\\n')\n"
    "s = '\\N{EM DASH}'\n",
    "def f(a, b):\n    global G\n    G = a\n    G = {1: a}\n    G [1:2] = b\n    G \\\n        = b\n"
    "    nonlocal_ = b\n    global_ = a\n    dict(a=1, b=G, c=b == a)\n"
    "    return G, nonlocal_, global_\n",
    "def esc(n, w=8):\n    s = '\\x41\\u00e9\\U0001F600\\x7f' + b'\\xff\\x00\\u12'.hex() + '\\N{BULLET}\\777\\q'\n"
    "    t = f\"\\x41{n:\\x3e{w}}\\u00e9\\U0010ffff\" + rf'\\x{n}\\U' + f'\\{n}\\}}'\n"
    "    return s + t + '''\\x0a\\\n\\u0041'''\n",
    // names above ASCII (judged by character, compared after NFKC)
    "# 中文注释 · ，\n"
    "ä = 1\n"
    "Δt = ä + 1\n"
    "def f(ﬁle, 中文, *, ｘ=1):\n"
    "    global ｇ\n"
    "    ｇ = 中文\n"
    "    return f(ﬁle=file, y=ｘ), 'ä·，', f'{Δt!r:>{ä}}'\n",
    "def outer():\n"
    "    ｘ = 1\n"
    "    def inner():\n"
    "        nonlocal x\n"
    "        x = 2\n"
    "    return [é for é in range(3) if (ü := é)], é, a·b, x︳\n",
    "class Ä:\n"
    "    def méthode(self, ärger=None):\n"
    "        return self.métier, __class__, ｉｆ, ifä\n"
    "match ä:\n"
    "    case Ä(x=ü) if ü:\n"
    "        pass\n",
    // An async generator's `return`: every value is refused, names above
    // ASCII too (judged as a group where every allowed token is looked at).
    "async def agen(n):\n    yield n\n    return \n",
    // Quotes, `#` and line ends inside the fields of f-strings: of the other
    // quote, of the same quote triple-quoted, nested f-strings, format specs
    // (short programs: CI size forces 100 steps of each).
    "def report(rows, w=4, d=None):\n"
    "    return f\"{rows[0]['name']:>{w}} {rows[1:3]!r} {d.get('k', 0)=} {w:{w}}\"\n",
    "def report(rows, w=4, d=None):\n"
    "    return f\"{', '.join(f'{r}' for r in rows)}\" + f'{d[\"k\"]!s:{w}}' + f\"{d['#']}\"\n",
    "def report(rows, w=4, d=None):\n"
    "    c = f\"\"\"{d.get(\n        'k', w)} {rows[-1:]}\"\"\" + f'''{d[\"k\"]} {d.get(\"k\")!r}'''\n"
    "    return c + f\"\"\"{d[\"k\"]} {rows[-1:]}\"\"\" + f\"{f'{w}'}\"\n",
};

struct FilterCounts {
  int64_t steps = 0, tokens = 0, cleared = 0;
  // Tokens after which the last word is a proper prefix of `async` that
  // the layer refuses whole (ScopeLayer::RefusesAsyncAhead): refused by the
  // session (dead_words: each proved a dead end) or kept (live_words: none
  // proved dead).
  int64_t dead_words = 0, live_words = 0;
};

// At one step: the grammar's mask (the OR of the rows AcceptedRows gives,
// EOS aside), filtered by a layer fed the session's text, against every
// allowed token fed to a copy of that layer; and the session's own mask.
void CompareFilter(const CompiledStore& s, const ScopeTokenIndex& index, Session* session,
                   FilterCounts* c) {
  std::vector<int32_t> rows;
  bool eos = false;
  session->AcceptedRows(&rows, &eos);
  std::vector<uint32_t> grammar(s.mask_words(), 0u);
  OrRows(s, rows.data(), rows.size(), grammar.data());
  ScopeLayer layer;
  ASSERT_TRUE(layer.Feed(session->text())) << session->text();
  std::vector<uint32_t> fast = grammar;
  layer.Filter(s, index, fast.data());
  ++c->steps;
  std::vector<int32_t> async_words;
  for (int32_t t = 0; t < s.vocab_size; ++t) {
    if (!MaskAllows(grammar, t) || s.token_special[t]) continue;
    ScopeLayer next = layer;
    const bool slow = next.Feed(s.TokenBytes(t));
    ++c->tokens;
    c->cleared += !slow;
    if (MaskAllows(fast, t) != slow) {
      ADD_FAILURE() << "token " << t << " '" << s.TokenBytes(t) << "': filter "
                    << MaskAllows(fast, t) << ", layer " << slow << " after:\n"
                    << session->text();
      return;
    }
    if (slow && next.RefusesAsyncAhead()) async_words.push_back(t);
  }
  std::vector<uint32_t> mask = session->Mask();
  for (int32_t e : s.eos_ids) mask[e >> 5] &= ~(1u << (e & 31));
  // The session refuses besides only tokens whose last word can become
  // nothing but an `async` the layer refuses (Session::WordLeadsNowhere):
  // each such token is a dead end that the completion search proves on a
  // copy that does not ask (and AllowsSlow refuses it too); the others of
  // those words stay, and the search proves none of them dead.
  std::vector<uint32_t> want = fast;
  std::optional<Completer> completer;
  if (!async_words.empty()) completer.emplace(s);
  for (int32_t t : async_words) {
    Session copy = session->Fork();
    copy.set_dead_word_check(false);
    ASSERT_TRUE(copy.Advance(t).ok()) << s.TokenBytes(t);
    std::string got;
    const CompletionResult r = completer->Search(&copy, 20000, &got);
    if (MaskAllows(mask, t)) {
      ++c->live_words;
      EXPECT_NE(r, CompletionResult::kNone) << "kept, dead: " << JsonQuote(copy.text());
    } else {
      ++c->dead_words;
      EXPECT_EQ(r, CompletionResult::kNone) << "refused, completed by " << JsonQuote(got) << ": "
                                            << JsonQuote(copy.text());
      EXPECT_FALSE(session->AllowsSlow(t)) << JsonQuote(copy.text());
      want[t >> 5] &= ~(1u << (t & 31));
    }
  }
  EXPECT_EQ(mask, want) << "session mask after:\n" << session->text();
}

// Teacher forcing of `texts`: in the first `every_step` texts every step
// where a check is armed or pending at the word (ScopeLayer::Armed) and a
// seeded half of the others, a seeded fifth of the steps of the rest.
FilterCounts ForceFilter(const CompiledStore* store, const std::vector<std::string>& texts,
                         size_t every_step, int max_steps, uint64_t seed) {
  FilterCounts c;
  ScopeTokenIndex index(*store);
  Segmenter seg(*store);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    Session session(store, NoMemo());
    int steps = 0;
    for (const Segment& s : seg.Cut(text, SegmentMode::kGreedy, &rng)) {
      if (++steps > max_steps) break;
      bool armed = false;
      if (i < every_step) {
        ScopeLayer layer;
        bool at_word = false;
        armed = !layer.Feed(session.text()) || layer.Armed(&at_word) || at_word;
      }
      // Under the sanitizer (a copy of the layer per allowed token costs
      // about ten times as much) a tenth of the programs' other steps.
      const uint64_t others = i < every_step ? (TestSanitized() ? 10 : 2) : 5;
      if (armed || rng() % others == 0) CompareFilter(*store, index, &session, &c);
      if (testing::Test::HasFailure()) return c;
      const std::string_view bytes = std::string_view(text).substr(s.offset, s.length);
      if (!(s.token >= 0 ? session.Advance(s.token) : session.AdvanceBytes(bytes)).ok()) {
        ADD_FAILURE() << "not forced: " << text.substr(0, s.offset);
        return c;
      }
    }
  }
  return c;
}

void ExpectFiltered(const char* what, const FilterCounts& c) {
  std::printf("%s: %lld steps, %lld tokens fed to the layer, %lld refused\n", what,
              static_cast<long long>(c.steps), static_cast<long long>(c.tokens),
              static_cast<long long>(c.cleared));
  std::printf("%s: %lld tokens end in a prefix of a refused async: %lld refused (proved dead ends), "
              "%lld kept\n", what, static_cast<long long>(c.dead_words + c.live_words),
              static_cast<long long>(c.dead_words), static_cast<long long>(c.live_words));
  EXPECT_GT(c.steps, TestSanitized() ? 100 : 200);
  EXPECT_GT(c.cleared, 100);
  EXPECT_GT(c.dead_words, 0);
}

TEST(ScopeFilter, StrictPythonFilterIsLayer) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  std::vector<std::string> texts(std::begin(kScopePrograms), std::end(kScopePrograms));
  const size_t programs = texts.size();
  // CI size (CFGMASK_QUICK): the programs and a fifth of 100 steps of one
  // module, about 2.5 s; under the sanitizer the programs only.
  const size_t modules = TestSanitized() ? 0 : TestQuick() ? 1 : 12;
  for (std::string& t : StdlibTexts(modules, 300, 6000)) texts.push_back(std::move(t));
  ExpectFiltered("strict python.lark x LLaMA SPM",
                 ForceFilter(store, texts, programs, TestQuick() ? 100 : 3000, 11));
}

// The same with a byte-level BPE of 152k tokens (its tokens hold a leading
// space and whole runs of operators): CFGMASK_FULL=1 (a compile of ~40 s).
TEST(ScopeFilter, StrictPythonQwen2FilterIsLayer) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_QWEN2");
  if (TestEnv("CFGMASK_FULL") != "1") GTEST_SKIP() << "CFGMASK_FULL=1 runs it";
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_QWEN2"), &st);
  ASSERT_NE(store, nullptr) << st.message();
  std::vector<std::string> texts(std::begin(kScopePrograms), std::end(kScopePrograms));
  const size_t programs = texts.size();
  for (std::string& t : StdlibTexts(6, 300, 6000)) texts.push_back(std::move(t));
  ExpectFiltered("strict python.lark x Qwen2", ForceFilter(store, texts, programs, 2000, 12));
}

// NameRunsKind's NFKC condition (ScopeTokenIndex::na_other_kind): a token
// in which a word above ASCII that NFKC changes ends before a non-name byte
// (`ﬁx)`, U+FB01 LATIN SMALL LIGATURE FI: NFKC `fix`) must go through a
// copy of the layer, as its name is compared after NFKC; a word unchanged
// by NFKC is compared as its bytes.  No real vocabulary holds such a token
// (Qwen2, LLaMA SPM, SmolLM2), so a byte-level vocabulary is built here: the
// printable ASCII bytes, space, newline, every byte above ASCII, and tokens
// where the ligature's word (or `__ｄebug__`, U+FF44) ends before `)`, `,`,
// `:`, `=`, ` =`, a space or a newline, also joined to an open word (`ixﬁ)`
// after `f`; U+0301 COMBINING ACUTE ACCENT, `\u0301x)`, after `e`).  Each
// case is a prefix, a key token and a rest: the prefix is forced with the
// filter compared at every step against every allowed token fed to a copy
// (CompareFilter); the engine takes the token, the rest and the end exactly
// when CPython 3.11's compile() ($CFGMASK_PYTHON) takes prefix + token +
// rest; and where CPython refuses a name that the token decides (at_token),
// the token itself is refused.
TEST(ScopeFilter, NfkcNamesEndingInsideATokenAreCompared) {
  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  const std::string fi = "\xEF\xAC\x81", fw_d = "\xEF\xBD\x84";  // U+FB01, U+FF44
  const std::string acute = "\xCC\x81", e_acute = "\xC3\xA9";    // U+0301, U+00E9
  std::vector<std::string> raw;
  for (int c = 33; c < 127; ++c) raw.push_back(std::string(1, static_cast<char>(c)));
  for (int c = 0x80; c < 0x100; ++c) raw.push_back(std::string(1, static_cast<char>(c)));
  for (const std::string& t :
       {std::string(" "), std::string("\n"), std::string("    "), std::string("def"), std::string("pass"),
        std::string("global"), std::string("nonlocal"), std::string("lambda"), fi + "x", fi + "x)",
        fi + "x,", fi + "x:", fi + "x=", fi + "x =", fi + "x ", fi + "x\n", "ix" + fi + ")",
        "__" + fw_d + "ebug__ =", "__" + fw_d + "ebug__,", "f" + fi + "x)", acute + "x)"}) {
    raw.push_back(t);
  }
  std::vector<std::string> tokens;
  for (const std::string& t : raw) tokens.push_back(Gpt2ByteLevel(t));
  // The tokenizer file is named by its text in the store cache's folder, so
  // the store is compiled once per build (under the sanitizer by the
  // optimised build's cfgmask, tests/sanitize.sh).
  const std::string json = ByteLevelTokenizerJson(tokens);
  std::string dir = TestEnv("CFGMASK_TEST_CACHE");
  if (dir.empty()) dir = "/tmp/cfgmask-test-cache";
  mkdir(dir.c_str(), 0755);
  const std::string tok = dir + "/nfkc_tokenizer_" + std::to_string(std::hash<std::string>()(json)) + ".json";
  WriteTextFile(tok, json);
  Status st;
  const CompiledStore* cached = StrictPythonStore(tok, &st);
  ASSERT_NE(cached, nullptr) << st.message();
  const CompiledStore& store = *cached;
  ASSERT_TRUE(ScopeTokenIndex::Wanted(store));
  auto id = [&](const std::string& bytes) {
    for (int32_t t = 0; t < store.vocab_size; ++t) {
      if (!store.token_special[t] && store.TokenBytes(t) == bytes) return t;
    }
    return int32_t{-1};
  };
  // at_token: where CPython refuses, the key token itself must be refused
  // (the name is decided inside it); else a later step may refuse.
  struct Case {
    std::string prefix, token, rest;
    bool at_token;
  };
  const std::string g = "def g():\n    ", h = "def g():\n    fix = 1\n    def h():\n        ";
  const std::vector<Case> cases = {
      // Parameters: the NFKC name written again, and a name it does not equal.
      {"def f(fix, ", fi + "x)", ": pass\n", true},
      {"def f(fox, ", fi + "x)", ": pass\n", true},
      {"def f(fix, ", fi + "x,", " y): pass\n", true},
      {"def f(fix, ", fi + "x=", "1): pass\n", true},
      {"def f(fix, ", fi + "x:", " int): pass\n", true},
      {"def f(fox, ", fi + "x:", " int): pass\n", true},
      {"def f(*, fix, ", fi + "x =", " 1): pass\n", true},
      {"lambda fix, ", fi + "x:", " 0\n", true},
      {"lambda fox, ", fi + "x:", " 0\n", true},
      {"lambda fix, ", fi + "x,", " y: 0\n", true},
      // Joined to the open word `f`: `fixﬁ` is `fixfi` after NFKC.
      {"def f(fixfi, f", "ix" + fi + ")", ": pass\n", true},
      {"def f(fixfo, f", "ix" + fi + ")", ": pass\n", true},
      // Joined to the open word `e` with a combining mark: `e\u0301x` is
      // `\u00e9x` after NFKC, though the token's own run is unchanged by it.
      {"def f(" + e_acute + "x, e", acute + "x)", ": pass\n", true},
      {"def f(" + e_acute + "y, e", acute + "x)", ": pass\n", true},
      // Keyword arguments.
      {"f(fix=1, ", fi + "x=", "2)\n", false},
      {"f(fox=1, ", fi + "x=", "2)\n", false},
      {"f(fix=1, ", fi + "x =", " 2)\n", false},
      // global / nonlocal after a use, a parameter, or the other.
      {g + "fix = 1\n    global ", fi + "x\n", "", true},
      {g + "fox = 1\n    global ", fi + "x\n", "", true},
      {g + "fix = 1\n    global ", fi + "x,", " y\n", true},
      {"def g(fix):\n    global ", fi + "x\n", "", true},
      {"def g(fox):\n    global ", fi + "x\n", "", true},
      {h + "fix = 2\n        nonlocal ", fi + "x\n", "", true},
      {h + "nonlocal ", fi + "x\n", "", true},
      {h + "global fix\n        nonlocal ", fi + "x\n", "", true},
      {g + "global fix\n    ", fi + "x =", " 1\n", false},
      {g + "print(fix)\n    global ", fi + "x\n", "", true},
      // __debug__ (U+FF44 for its d).
      {"x = 1\n", "__" + fw_d + "ebug__ =", " 1\n", false},
      {"if ", "__" + fw_d + "ebug__ =", "= 1: pass\n", false},
      {"x = 1\n", "__" + fw_d + "ebug__,", " y = 1, 2\n", false},
      {"print(", "__" + fw_d + "ebug__,", " 1)\n", false},
      // An assignment expression rebinding a comprehension's variable.
      {"[fix := 0 for ", fi + "x ", "in y]\n", false},
      {"[fox := 0 for ", fi + "x ", "in y]\n", false},
      {"[f" + fi + "x for fix in y if (", fi + "x:", "= 1)]\n", false},
  };
  // CPython's verdicts, one process for every case.
  const std::string programs = TempPath("nfkc_programs.txt"), script = TempPath("nfkc_compile.py");
  {
    std::string lines;
    for (const Case& k : cases) {
      for (unsigned char c : k.prefix + k.token + k.rest) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", c);
        lines += hex;
      }
      lines += '\n';
    }
    WriteTextFile(programs, lines);
    WriteTextFile(script,
                  "import sys\n"
                  "for line in open(sys.argv[1]):\n"
                  "    try:\n"
                  "        compile(bytes.fromhex(line.strip()).decode(), '<case>', 'exec')\n"
                  "        print(1)\n"
                  "    except SyntaxError:\n"
                  "        print(0)\n");
  }
  std::string verdicts;
  {
    FILE* p = popen((TestEnv("CFGMASK_PYTHON") + " " + script + " " + programs).c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) {
      if (buf[0] == '0' || buf[0] == '1') verdicts += buf[0];
    }
    ASSERT_EQ(pclose(p), 0);
  }
  ASSERT_EQ(verdicts.size(), cases.size());
  const int accepted = static_cast<int>(std::count(verdicts.begin(), verdicts.end(), '1'));
  EXPECT_GT(accepted, 8);
  EXPECT_GT(static_cast<int>(cases.size()) - accepted, 8);
  ScopeTokenIndex index(store);
  Segmenter seg(store);
  std::mt19937_64 rng(13);
  FilterCounts c;
  // Forces `text`, the filter compared at every step and at the end; false
  // where the mask refuses one of its tokens.
  auto force = [&](Session* s, const std::string& text) {
    for (const Segment& x : seg.Cut(text, SegmentMode::kGreedy, &rng)) {
      CompareFilter(store, index, s, &c);
      if (x.token < 0 || !MaskAllows(s->Mask(), x.token)) return false;
      EXPECT_TRUE(s->Advance(x.token).ok());
    }
    CompareFilter(store, index, s, &c);
    return true;
  };
  for (size_t i = 0; i < cases.size() && !testing::Test::HasFailure(); ++i) {
    const Case& k = cases[i];
    const int32_t t = id(k.token);
    ASSERT_GE(t, 0) << k.token;
    Session session(&store, NoMemo());
    ASSERT_TRUE(force(&session, k.prefix)) << "prefix refused: " << k.prefix;
    const bool cpython = verdicts[i] == '1';
    const bool token = MaskAllows(session.Mask(), t);
    if (!cpython && k.at_token) {
      EXPECT_FALSE(token) << "after '" << k.prefix << "' the token '" << k.token << "'";
    }
    bool engine = token && session.Advance(t).ok() && force(&session, k.rest);
    if (engine) {
      bool eos = false;
      for (int32_t e : store.eos_ids) eos |= MaskAllows(session.Mask(), e);
      engine = eos;
    }
    EXPECT_EQ(engine, cpython) << "engine " << engine << ", CPython " << cpython << " on:\n"
                               << k.prefix << k.token << k.rest;
  }
  std::printf("strict python.lark x NFKC tokens: %zu programs (%d compile), %lld steps, %lld tokens fed "
              "to the layer, %lld refused\n",
              cases.size(), accepted, static_cast<long long>(c.steps), static_cast<long long>(c.tokens),
              static_cast<long long>(c.cleared));
  EXPECT_GT(c.steps, 300);
}

// ---------------------------------------------------------------- chain memo

// A table as data files hold one (idna's uts46data.py: 8,000 tuples), one
// element a line, `n` elements drawn from `rng` in one of six shapes: a
// parenthesised tuple, a list, a dict, a call's arguments, an import list,
// an unparenthesised tuple.  Every comma list of the strict grammar is
// right-recursive: a terminal checked after element k reduces through all k.
std::string Table(int n, int shape, std::mt19937_64* rng) {
  auto num = [&] { return std::to_string((*rng)() % 100000); };
  auto str = [&] {
    std::string s = "\"";
    for (int i = 1 + static_cast<int>((*rng)() % 3); i > 0; --i) s += static_cast<char>('a' + (*rng)() % 26);
    return s + "\"";
  };
  auto element = [&] {
    switch ((*rng)() % 5) {
      case 0: return "(0x" + num() + ", " + str() + ")";
      case 1: return "(" + num() + ", " + str() + ", " + str() + ")";
      case 2: return "[" + num() + ", -" + num() + "]";
      case 3: return str();
      default: return num();
    }
  };
  std::string t = "from typing import Tuple\n\n";
  const char* open[] = {"table: Tuple = (\n", "table = [\n", "table = {\n", "print(\n",
                        "from os import (\n", "table = \\\n"};
  const char* close[] = {")\n", "]\n", "}\n", ")\n", ")\n", "\n"};
  t += open[shape];
  for (int i = 0; i < n; ++i) {
    if (shape == 2) {
      t += "    " + num() + ": " + element() + ",\n";
    } else if (shape == 4) {
      t += "    name" + std::to_string(i) + (i % 3 == 0 ? " as n" + std::to_string(i) : "") + ",\n";
    } else if (shape == 5) {
      t += "    " + element() + (i + 1 < n ? ", \\\n" : "");
    } else {
      t += "    " + element() + ",\n";
    }
  }
  return t + close[shape] + "x = 1\n";
}

// What a feed through the chain memo records of its depth: the row memo's
// key reads down to the deepest stack node any check read (LrOverlay's
// `low`), and a chain the memo ends early must have read what the whole
// chain reads (Rebase reads the node it ends on).  Every parse terminal is
// asked of a live hypothesis' stack, "would it be shifted" (a scratch view)
// and fed (the overlay, on a fresh copy), with the memo on and off: the
// answers, the depth read and the stack after the feed must be equal.
// (Masks alone did not see a Rebase that skipped the read: other checks of
// the same step read down to the list's start.)
struct ChainDepthCheck {
  int64_t asked = 0, hits = 0, deeper = 0, fed_hits = 0;
  void Ask(const CompiledStore* store, const LiveState& l, const std::string& where) {
    ChainMemo& memo = ChainMemo::ForThread();
    const HypothesisParser p{store, store->lr(), LrOverlay(l.stack), l.indent, l.paren, l.slot_bits};
    for (int32_t t = 0; t < store->num_parse_terminals && !testing::Test::HasFailure(); ++t) {
      size_t low_on = l.stack.Depth(), low_off = l.stack.Depth();
      HypothesisParser on = p, off = p;
      on.stack.set_low(&low_on);
      off.stack.set_low(&low_off);
      const int64_t hits0 = memo.hits;
      const bool a_on = on.Accepts(t);
      memo.enabled = false;
      const bool a_off = off.Accepts(t);
      memo.enabled = true;
      ++asked;
      ASSERT_EQ(a_on, a_off) << "terminal " << t << " asked at " << where;
      ASSERT_EQ(low_on, low_off) << "terminal " << t << " asked at " << where
                                  << ": depth read with the chain memo, without it";
      size_t feed_on = l.stack.Depth(), feed_off = l.stack.Depth();
      on = p;
      off = p;
      on.stack.set_low(&feed_on);
      off.stack.set_low(&feed_off);
      const int64_t hits1 = memo.hits;
      const bool f_on = on.Feed(t);
      memo.enabled = false;
      const bool f_off = off.Feed(t);
      memo.enabled = true;
      if (memo.hits > hits1) ++fed_hits;
      ASSERT_EQ(f_on, f_off) << "terminal " << t << " fed at " << where;
      ASSERT_EQ(feed_on, feed_off) << "terminal " << t << " fed at " << where
                                    << ": depth read with the chain memo, without it";
      if (f_on) {
        ASSERT_TRUE(on.stack.Commit() == off.stack.Commit()) << "terminal " << t << " fed at " << where;
      }
      hits += memo.hits - hits0;
      if (memo.hits > hits0 && std::min(low_on, feed_on) + 40 < l.stack.Depth()) ++deeper;
    }
  }
};

// The session's mask with this thread's ChainMemo on (as shipped, with a row
// memo) against a session with it off and no row memo, at a seeded share of
// the steps of teacher-forced tables and of random walks that leave one;
// the tables end or leave at the step the memo's answers matter most.
TEST(ChainMemo, MasksEqualWithoutIt) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_TRUE(store) << st.message();
  ChainMemo& memo = ChainMemo::ForThread();
  Segmenter seg(*store);
  std::mt19937_64 rng(33);
  int64_t steps = 0, compared = 0;
  ChainDepthCheck depth;
  const int64_t hits0 = memo.hits;
  // The slow session runs with the memo off, its advances included.
  auto without = [&](auto fn) {
    memo.enabled = false;
    auto r = fn();
    memo.enabled = true;
    return r;
  };
  auto compare = [&](Session* fast, Session* slow, const std::string& where) {
    const std::vector<uint32_t> a = fast->Mask();
    const std::vector<uint32_t> b = without([&] { return slow->Mask(); });
    ++compared;
    for (int32_t t = 0; t < store->vocab_size; ++t) {
      if (MaskAllows(a, t) != MaskAllows(b, t)) {
        ADD_FAILURE() << "token " << t << ": with the chain memo " << MaskAllows(a, t)
                      << ", without " << MaskAllows(b, t) << " at " << where;
        return;
      }
    }
  };
  const int tables = TestSanitized() ? 3 : TestQuick() ? 8 : 60;
  for (int k = 0; k < tables && !testing::Test::HasFailure(); ++k) {
    const int n = 40 + static_cast<int>(rng() % (TestQuick() ? 40 : 400));
    std::string text = Table(n, k % 6, &rng);
    if (k % 6 == 0) {
      // The same elements again in a list, in a tuple inside a list and
      // inside a tuple: the stack above the list's start and the bracket
      // depth equal, the list's start or what is below it not (the row
      // memo's key must reach it: Rebase reads the node a chain ends on).
      const size_t from = text.find("(\n") + 2, to = text.rfind("\n)");
      const std::string e = text.substr(from, to - from);
      text += "w = [\n" + e + "\n]\ny = [(\n" + e + "\n)]\nz = ((\n" + e + "\n),)\n";
    }
    Session fast(store), slow(store, NoMemo());
    const std::vector<Segment> cut = seg.Cut(text, SegmentMode::kGreedy, nullptr);
    for (size_t i = 0; i < cut.size() && !testing::Test::HasFailure(); ++i) {
      ++steps;
      if (rng() % 6 == 0 || i + 4 >= cut.size()) {
        const std::string where = "table " + std::to_string(k) + " at byte " +
                                  std::to_string(cut[i].offset) + ":\n" + text.substr(0, cut[i].offset);
        compare(&fast, &slow, where);
        // In the first tables, after steps whose masks filled the memo.
        if (k < (TestSanitized() ? 1 : 3)) {
          for (const LiveState& l : fast.live()) depth.Ask(store, l, where);
        }
      }
      const Segment& s = cut[i];
      const std::string_view bytes = std::string_view(text).substr(s.offset, s.length);
      ASSERT_TRUE((s.token >= 0 ? fast.Advance(s.token) : fast.AdvanceBytes(bytes)).ok());
      ASSERT_TRUE(without([&] { return s.token >= 0 ? slow.Advance(s.token) : slow.AdvanceBytes(bytes); }).ok());
    }
    // A walk from a point inside the table: tokens drawn from the mask.
    Session wf(store), ws(store, NoMemo());
    const size_t stop = cut.size() / 2 + rng() % (cut.size() / 2);
    for (size_t i = 0; i < stop; ++i) {
      const std::string_view bytes = std::string_view(text).substr(cut[i].offset, cut[i].length);
      ASSERT_TRUE(wf.AdvanceBytes(bytes).ok());
      ASSERT_TRUE(without([&] { return ws.AdvanceBytes(bytes); }).ok());
    }
    for (int i = 0; i < 12 && !testing::Test::HasFailure(); ++i) {
      compare(&wf, &ws, "walk from table " + std::to_string(k) + ":\n" + wf.text());
      const int32_t t = DrawToken(*store, wf.Mask(), 0.0, &rng, /*ascii_only=*/true);
      if (t < 0 || store->token_special[t]) break;
      ASSERT_TRUE(wf.Advance(t).ok());
      ASSERT_TRUE(without([&] { return ws.Advance(t); }).ok());
    }
  }
  std::printf("chain memo: %lld steps, %lld masks compared, %lld chain memo hits\n",
              static_cast<long long>(steps), static_cast<long long>(compared),
              static_cast<long long>(memo.hits - hits0));
  EXPECT_GT(compared, TestSanitized() ? 50 : TestQuick() ? 300 : 3000);
  EXPECT_GT(memo.hits - hits0, TestSanitized() ? 100 : 1000);  // the memo answered
  std::printf("chain memo depth: %lld terminals asked and fed, %lld chain memo hits, %lld of them "
              "reading 40+ states below the top, %lld feeds ended by the memo\n",
              static_cast<long long>(depth.asked), static_cast<long long>(depth.hits),
              static_cast<long long>(depth.deeper), static_cast<long long>(depth.fed_hits));
  EXPECT_GT(depth.hits, TestSanitized() ? 10 : 50);     // the memo answered these too
  EXPECT_GT(depth.deeper, TestSanitized() ? 3 : 10);    // with chains that end deep
  EXPECT_GT(depth.fed_hits, TestSanitized() ? 3 : 10);  // feeds, not only "would it be shifted"
}

// The work of a step does not grow with the table: the parser reductions
// its checks make (StepCounters::reductions, what `cfgmask bench` reports),
// counted, not timed.  The largest step of a 10x longer table's last
// elements stays within the short one's plus a margin; without the memo the
// same steps reduce through every element (checked too: the count sees it).
TEST(ChainMemo, StepWorkIndependentOfTableLength) {
  CFGMASK_REQUIRE_ENV("CFGMASK_TOK_LLAMA_SPM");
  Status st;
  const CompiledStore* store = StrictPythonStore(TestEnv("CFGMASK_TOK_LLAMA_SPM"), &st);
  ASSERT_TRUE(store) << st.message();
  Segmenter seg(*store);
  // The most reductions of one step over the last `tail` steps of the table
  // (before its closing bracket), with the memo on or off there.
  auto max_step = [&](int n, int shape, bool memo_on, int tail) {
    std::mt19937_64 rng(7);
    const std::string text = Table(n, shape, &rng);
    const char* const closing[] = {"\n)", "\n]", "\n}", "", "", "\nx = 1"};
    const size_t end = text.rfind(closing[shape]);
    ChainMemo::ForThread().Clear();
    Session session(store);
    StepCounters counters;
    session.set_counters(&counters);
    std::vector<uint32_t> mask(store->mask_words());
    const std::vector<Segment> cut = seg.Cut(text, SegmentMode::kGreedy, nullptr);
    size_t last = 0;
    while (last < cut.size() && cut[last].offset < end) ++last;
    int64_t most = 0;
    for (size_t i = 0; i < last; ++i) {
      // Every step fills its mask (as decoding does); the last `tail` are counted.
      const bool counted = i + tail >= last;
      ChainMemo::ForThread().enabled = memo_on || !counted;
      const int64_t before = counters.reductions;
      session.FillMask(mask.data());
      ChainMemo::ForThread().enabled = true;
      if (counted) most = std::max(most, counters.reductions - before);
      const std::string_view bytes = std::string_view(text).substr(cut[i].offset, cut[i].length);
      EXPECT_TRUE(session.AdvanceBytes(bytes).ok());
    }
    return most;
  };
  // The right-recursive shapes: a tuple, a list, an unparenthesised tuple
  // (Table).  A dict's items are a left-recursive repetition: its steps hit
  // the row memo, none reduce through the list.
  for (int shape : {0, 1, 5}) {
    if (TestSanitized() && shape != 0) continue;
    if (TestQuick() && shape == 1) continue;  // a list: right-recursive as the tuple is
    const int64_t short_table = max_step(60, shape, true, 60);
    const int64_t long_table = max_step(600, shape, true, 60);
    const int64_t long_without = max_step(600, shape, false, 20);
    std::printf("shape %d: most reductions in a step: 60 elements %lld, 600 elements %lld, 600 "
                "without the chain memo %lld\n",
                shape, static_cast<long long>(short_table), static_cast<long long>(long_table),
                static_cast<long long>(long_without));
    EXPECT_LE(long_table, short_table + short_table / 10) << "shape " << shape;
    EXPECT_GT(long_without, 4 * long_table) << "shape " << shape << ": the count misses the growth";
  }
}

}  // namespace
}  // namespace cfgmask
