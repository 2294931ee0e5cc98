// Lexer modes (parser/lexer_modes.h, lexer/terminal_automaton.h).
//
// - On every grammar the project ships and on tests/data/engine/
//   fstring_modes.lark: every parser state's scanner lies within one mode
//   plus the shared terminals, and the modes after a terminal include the
//   mode of every state that shifting it leads to (what makes the split
//   exact).
// - fstring_modes.lark (strings with fields of code) splits into code, text
//   and spec modes; its store with modes and its store without them give the
//   same mask (EOS included) at every step of seeded random walks, the one
//   with modes from fewer lexer states; and the texts the walks end, and
//   mutants of them, are accepted exactly when Lark accepts them.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/lark_reader.h"
#include "parser/lalr.h"
#include "parser/lexer_modes.h"
#include "parser/lr_core.h"
#include "runtime/compile/compile.h"
#include "runtime/session.h"
#include "tests/exactness_harness.h"
#include "tests/small_tokenizer.h"

namespace cfgmask {
namespace {

std::string Source(const std::string& rel) { return std::string(CFGMASK_SOURCE_DIR) + "/" + rel; }

struct Tables {
  Grammar g;
  ParseTables t;
  std::vector<int32_t> shared;
  int32_t indent = -1, dedent = -1;
};

void Load(const std::string& path, Tables* out) {
  LarkReaderOptions ro;
  ro.start = {path.find("python.lark") != std::string::npos ? "file_input" : "start"};
  const Status st = ReadLarkFile(path, ro, &out->g);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(BuildParseTables(out->g, &out->t).ok()) << path;
  out->shared.assign(out->g.ignore.begin(), out->g.ignore.end());
  const int32_t nl = out->g.FindTerminal("_NEWLINE");
  out->indent = out->g.FindTerminal("_INDENT");
  out->dedent = out->g.FindTerminal("_DEDENT");
  if (nl >= 0 && out->indent >= 0 && out->dedent >= 0) {
    out->shared.push_back(nl);
  } else {
    out->indent = out->dedent = -1;
  }
}

// The conditions under which lexing by modes is Lark's lexing.
void ExpectModesSound(const Tables& x, const LexerModes& m) {
  const int32_t T = x.g.num_terminals();
  ASSERT_EQ(static_cast<int32_t>(m.mode_of.size()), T);
  ASSERT_EQ(static_cast<int32_t>(m.after.size()), T);
  if (m.num_modes == 0) return;
  std::set<int32_t> shared(x.shared.begin(), x.shared.end());
  auto mode_of_state = [&](int32_t s) {
    std::set<int32_t> modes;
    for (int32_t t : x.t.AcceptedTerminals(s)) {
      if (x.g.terminals[t].kind == PatternKind::kDeclared || shared.count(t)) continue;
      EXPECT_GE(m.mode_of[t], 0) << x.g.terminals[t].name << " is scanned but has no mode";
      modes.insert(m.mode_of[t]);
    }
    EXPECT_LE(modes.size(), 1u) << "state " << s << "'s scanner spans " << modes.size() << " modes";
    return modes.empty() ? -1 : *modes.begin();
  };
  for (int32_t s = 0; s < x.t.num_states; ++s) mode_of_state(s);
  const LrTables lr = LrTables::Of(x.t);
  for (int32_t t = 0; t < T; ++t) {
    if (shared.count(t)) {
      EXPECT_EQ(m.mode_of[t], LexerModes::kShared) << x.g.terminals[t].name;
    }
    for (int32_t s = 0; s < x.t.num_states; ++s) {
      const int32_t to = lr.ShiftTo(s, t);
      if (to < 0) continue;
      const int32_t to_mode = mode_of_state(to);
      if (to_mode < 0) continue;
      EXPECT_TRUE(std::binary_search(m.after[t].begin(), m.after[t].end(), to_mode))
          << "after " << x.g.terminals[t].name << " in state " << s << ": mode " << to_mode
          << " is missing";
    }
  }
  EXPECT_EQ(m.initial_mode, std::max(0, mode_of_state(x.t.start_state[0])));
}

TEST(LexerModes, ShippedGrammarsScanWithinOneModeEach) {
  for (const char* rel : {"grammar/lark/python.lark", "grammar/lark/sql.lark",
                          "grammar/lark/json.lark", "tests/data/engine/fstring_modes.lark"}) {
    SCOPED_TRACE(rel);
    Tables x;
    Load(Source(rel), &x);
    const LexerModes m = ComputeLexerModes(x.g, x.t, x.shared, x.indent, x.dedent);
    ExpectModesSound(x, m);
    std::printf("%s: %d lexer modes\n%s", rel, m.num_modes, m.DebugString(x.g).c_str());
  }
}

TEST(LexerModes, FStringGrammarSplitsIntoCodeTextAndSpec) {
  Tables x;
  Load(Source("tests/data/engine/fstring_modes.lark"), &x);
  const LexerModes m = ComputeLexerModes(x.g, x.t, x.shared, -1, -1);
  ASSERT_EQ(m.num_modes, 3) << m.DebugString(x.g);
  auto mode = [&](const char* name) { return m.mode_of[x.g.FindTerminal(name)]; };
  EXPECT_EQ(mode("TEXT"), mode("FOPEN"));
  EXPECT_EQ(mode("TEXT"), mode("FEND"));
  EXPECT_EQ(mode("SPEC"), mode("SOPEN"));
  EXPECT_EQ(mode("SPEC"), mode("SCLOSE"));
  EXPECT_EQ(mode("NAME"), mode("FSTART"));
  EXPECT_EQ(mode("NAME"), mode("CONV"));
  EXPECT_NE(mode("NAME"), mode("TEXT"));
  EXPECT_NE(mode("NAME"), mode("SPEC"));
  EXPECT_NE(mode("TEXT"), mode("SPEC"));
  EXPECT_EQ(mode("COMMENT"), LexerModes::kShared);
  EXPECT_EQ(m.initial_mode, mode("NAME"));
  // A field's "}" closes into text, a nested field's into the spec, a set's
  // into code.
  int32_t rbrace = -1;
  for (int32_t t = 0; t < x.g.num_terminals(); ++t) {
    if (x.g.terminals[t].kind == PatternKind::kString && x.g.terminals[t].value == "}") rbrace = t;
  }
  ASSERT_GE(rbrace, 0);
  EXPECT_EQ(m.after[rbrace].size(), 3u);
}

// Tokens that cross the modes' boundaries, beside every printable byte.
std::string ModesTokenizer() {
  std::vector<std::string> tokens;
  for (int c = 33; c < 127; ++c) tokens.push_back(std::string(1, static_cast<char>(c)));
  // GPT-2 byte map: space U+0120 (\xC4\xA0), newline U+010A (\xC4\x8A).
  for (const char* t : {"\xC4\xA0", "\xC4\x8A", "f\"", "\"}", "{a", "a}", "}\"", "{{", "}}",
                        "\xC4\xA0{", "}\xC4\xA0", ":>", "!r}", "#\xC4\xA0", "\xC4\xA0#", "ab",
                        "\xC4\xA0+", "\"\xC4\xA0", "x}\"", "{\"", "12", "\xC4\xA0=", ";\xC4\x8A"}) {
    tokens.push_back(t);
  }
  return ByteLevelTokenizerJson(tokens);
}

bool Bit(const std::vector<uint32_t>& m, int32_t t) { return (m[t >> 5] >> (t & 31)) & 1; }

TEST(LexerModes, MasksEqualWithoutModesAndAgreeWithLark) {
  const std::string grammar = Source("tests/data/engine/fstring_modes.lark");
  const std::string tok = TempPath("modes_tokenizer.json");
  WriteTextFile(tok, ModesTokenizer());
  CompileOptions on, off;
  off.lexer_modes = false;
  CompiledStore with, without;
  ASSERT_TRUE(CompileGrammar(grammar, tok, on, /*streamline=*/true, &with).ok());
  ASSERT_TRUE(CompileGrammar(grammar, tok, off, /*streamline=*/true, &without).ok());
  std::printf("lexer states: %d with modes, %d without\n", with.num_lex_states,
              without.num_lex_states);
  EXPECT_LT(with.num_lex_states, without.num_lex_states);

  // Walks that prefer the tokens that open and close fields and strings.
  const int walks = TestQuick() ? 150 : 1500;
  std::mt19937 rng(20261127);
  std::vector<std::string> ended;
  int64_t steps = 0;
  for (int w = 0; w < walks; ++w) {
    Session a(&with), b(&without);
    ASSERT_TRUE(a.AdvanceBytes("x = ").ok());
    ASSERT_TRUE(b.AdvanceBytes("x = ").ok());
    for (int step = 0; step < 40; ++step) {
      const std::vector<uint32_t> ma = a.Mask(), mb = b.Mask();
      ++steps;
      ASSERT_EQ(ma, mb) << "after " << JsonQuote(a.text());
      ASSERT_EQ(a.CanEnd(), b.CanEnd()) << "after " << JsonQuote(a.text());
      std::vector<int32_t> allowed, favoured;
      for (int32_t t = 0; t < with.vocab_size; ++t) {
        if (!Bit(ma, t) || with.token_special[t]) continue;
        allowed.push_back(t);
        const std::string_view s = with.TokenBytes(t);
        if (s.find_first_of("{}\"f:!#;+") != std::string_view::npos) favoured.push_back(t);
      }
      if (a.CanEnd() && rng() % 4 == 0) {
        ended.push_back(a.text());
        break;
      }
      ASSERT_FALSE(allowed.empty()) << "no token after " << JsonQuote(a.text());
      const std::vector<int32_t>& pool = !favoured.empty() && rng() % 3 != 0 ? favoured : allowed;
      const int32_t pick = pool[rng() % pool.size()];
      ASSERT_TRUE(a.Advance(pick).ok());
      ASSERT_TRUE(b.Advance(pick).ok());
    }
  }
  std::printf("%lld steps, %zu texts ended\n", static_cast<long long>(steps), ended.size());
  ASSERT_GE(ended.size(), static_cast<size_t>(walks / 10));

  CFGMASK_REQUIRE_ENV("CFGMASK_PYTHON");
  const int accepted = ExpectTextsExact(&with, ended, LarkVerdicts(grammar, "start", "none", ended));
  EXPECT_EQ(accepted, static_cast<int>(ended.size()));
  const int mutants_accepted = ExpectMutationsAgree(
      &with, ended, {"{", "}", "\"", "f\"", "{{", "}}", ":", "!r", "#", " ", "a", "+"}, "{}\":!#f ",
      TestQuick() ? 300 : 3000, 7, grammar, "start", "none");
  std::printf("mutants accepted by Lark: %d\n", mutants_accepted);
}

}  // namespace
}  // namespace cfgmask
