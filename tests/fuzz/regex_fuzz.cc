// Fuzz target: the regex parser (Boost.Spirit X3), the NFA compiler and the
// terminal automaton built over the compiled pattern.
//
// Input: byte 0 selects the global flags (bits: i s x m u), then the pattern
// up to the first NUL byte, then a text.  The pattern is compiled and run on
// the text by the reference Pike VM; when it compiles, a grammar with the
// pattern as terminal A beside a keyword and a NAME terminal (so that
// priorities, "unless" retyping and shadows all come into play) is turned
// into a TerminalAutomaton, which is stepped over the text byte by byte,
// ending terminals at every candidate boundary.  Errors must be Status values
// naming the terminal.  Seeds: make_seeds.py (every terminal of the real
// grammars); dictionary: regex.dict.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "lexer/regex/regex.h"
#include "lexer/terminal_automaton.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

cfgmask::Grammar GrammarWith(const std::string& pattern, const std::string& flags) {
  using namespace cfgmask;
  Grammar g;
  TerminalDef a;
  a.name = "A";
  a.kind = PatternKind::kRegex;
  a.value = pattern;
  a.flags = flags;
  TerminalDef kw;
  kw.name = "IF";
  kw.kind = PatternKind::kString;
  kw.value = "if";
  TerminalDef name;
  name.name = "NAME";
  name.kind = PatternKind::kRegex;
  name.value = "[a-z_][a-z0-9_]*";
  TerminalDef ws;
  ws.name = "WS";
  ws.kind = PatternKind::kRegex;
  ws.value = "[ \\t\\n]+";
  g.terminals = {a, kw, name, ws};
  g.ignore = {3};
  g.nonterminals = {"start"};
  g.start = {"start"};
  const SymbolId start = g.num_terminals();
  for (SymbolId t = 0; t < 3; ++t) {
    g.rules.push_back(Rule{start, {t}, 0, t});
    g.rules.push_back(Rule{start, {start, t}, 0, 3 + t});
  }
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  if (size < 1 || size > 4096) return 0;
  static const char kFlagLetters[] = "ismxu";
  std::string flags;
  for (int b = 0; b < 5; ++b) {
    if ((data[0] >> b) & 1) flags += kFlagLetters[b];
  }
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  const std::string pattern = rest.substr(0, nul);
  const std::string text = nul == std::string::npos ? "" : rest.substr(nul + 1, 256);

  Nfa nfa;
  RegexWidth width;
  // A smaller instruction limit than the library's (kRegexMaxInsts): a
  // repeat count in the tens of thousands compiles within limits but takes
  // seconds in the sanitized build, and the limit's own error path is
  // reached more often.
  Status st = CompileRegex(pattern, flags, "A", &nfa, &width, 4000);
  if (!st.ok()) {
    CFGMASK_FUZZ_CHECK(st.message().find("A") != std::string::npos);
    CFGMASK_FUZZ_CHECK(st.code() == ErrorCode::kRegexSyntax ||
                       st.code() == ErrorCode::kRegexUnsupported ||
                       st.code() == ErrorCode::kResourceLimit);
    return 0;
  }
  CFGMASK_FUZZ_CHECK(width.lo <= width.hi);
  const int64_t n = MatchPrefix(nfa, text);
  CFGMASK_FUZZ_CHECK(n >= -1 && n <= static_cast<int64_t>(text.size()));

  // The automaton takes Lark's flag set on the terminal ("u" is implied).
  std::string terminal_flags;
  for (char f : std::string("imsx")) {
    if (flags.find(f) != std::string::npos) terminal_flags += f;
  }
  const Grammar g = GrammarWith(pattern, terminal_flags);
  TerminalAutomatonOptions options;
  options.max_lexer_states = 5000;
  std::unique_ptr<TerminalAutomaton> a;
  st = TerminalAutomaton::Build(g, -1, options, &a);
  if (!st.ok()) return 0;
  std::vector<int32_t> live = {a->initial_state()};
  std::vector<LexItem> items;
  for (unsigned char b : text) {
    std::vector<int32_t> next;
    for (int32_t q : live) {
      items.clear();
      const int32_t q2 = a->Step(q, b, &items);
      if (q2 >= 0) next.push_back(q2);
      for (int32_t t : a->BoundaryCandidates(q)) {
        for (int32_t mode : a->ModesAfter(q, t)) {
          LexItem emit;
          const int32_t q1 = a->Boundary(q, t, mode, &emit);
          if (q1 < 0) continue;
          CFGMASK_FUZZ_CHECK(emit.terminal == t);
          items.clear();
          const int32_t q3 = a->Step(q1, b, &items);
          if (q3 >= 0) next.push_back(q3);
        }
      }
    }
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    if (next.size() > 64) next.resize(64);
    live.swap(next);
    if (live.empty()) break;
  }
  for (int32_t q : live) {
    if (!a->AtTerminalStart(q)) a->Tail(q);
    a->EndOfInput(q);
    std::vector<int32_t> slot_map;
    a->CompactSlots(q, &slot_map);
  }
  return 0;
}
