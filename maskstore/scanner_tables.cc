// The store's grammar side (see scanner_tables.h): terminal tables, the
// parse tables and, per parser state, Lark's contextual scanner as two
// terminal bitsets.  Lark's ContextualLexer gives each parser state a
// scanner over the terminals the state accepts plus %ignore (and the
// indenter's newline); its alternation leaves out string terminals that a
// regexp of the same scanner "embeds" (matches in full): those come only by
// retyping.  Then the lookaheads no scanner can produce are removed and the
// parser states that strands are closed (parser/dead_states.h).
#include "maskstore/scanner_tables.h"

#include <vector>

#include "parser/dead_states.h"

namespace cfgmask {
namespace {

// Lookaheads the contextual lexer can never produce, and states they strand.
//
// Lark's scanner of a parser state tries its terminals in a fixed order and
// the first that matches at all wins; a string terminal k that a regexp r of
// the scanner matches in full is produced only by r's "unless" callback
// retyping r's token, and an ignored r's token is dropped even when retyped.
// So a plain string terminal k (no flags) is never produced in a state when
// no non-ignored regexp of its scanner retypes to k and either
//  - k is not in the state's alternation (an ignored regexp embeds it), or
//  - a terminal u earlier in the alternation matches a non-empty prefix of
//    k's text without looking around: u then matches at that position
//    whatever follows, and wins.
// A terminal that is only %declare'd and not produced by the indenter never
// comes at all.
// Every action on k in that state needs k lexed in that state (the contextual
// lexer scans with the state's scanner before any reduction), so it is
// removed; the scanner itself stays Lark's.  CloseDeadStates then removes
// the states this strands
// (parser/dead_states.h).  Both steps remove only moves that no text Lark accepts makes:
// masks shrink exactly by tokens that lead to dead ends (e.g.
// `comment: /#[^\n]*\n/ "\n"` with `%ignore /[ \t\n]+/`).
void PruneUnlexableLookaheads(const Grammar& g, const TerminalAutomaton& a, CompiledStore* s) {
  const int32_t T = static_cast<int32_t>(g.terminals.size());
  const int32_t NT = s->num_parse_terminals;
  const size_t W = static_cast<size_t>(s->scanner_words);
  auto bit = [&](const StoreArray<uint64_t>& v, int32_t st, int32_t t) {
    return (v[static_cast<size_t>(st) * W + t / 64] >> (t & 63)) & 1;
  };
  std::vector<uint8_t> plain(T, 0);
  std::vector<std::vector<int32_t>> blockers(T), retypers(T);
  bool any = false;
  for (int32_t k = 0; k < T; ++k) {
    const TerminalDef& def = g.terminals[k];
    if (!a.IsLexed(k) || !a.IsStringTerminal(k) || !def.flags.empty() || def.value.empty()) continue;
    plain[k] = 1;
    any = true;
    for (int32_t u = 0; u < T; ++u) {
      if (u == k || !a.IsLexed(u)) continue;
      if (!a.IsStringTerminal(u) && !s->terminal_ignored[u] && a.UnlessOk(u, k)) {
        retypers[k].push_back(u);
      }
      if (a.rank(u) < a.rank(k) && !a.LooksAround(u) && a.MatchTerminal(u, def.value) > 0) {
        blockers[k].push_back(u);
      }
    }
  }
  // A %declare'd terminal is produced only by the Python indenter
  // (_INDENT, _DEDENT); any other can never come.
  for (int32_t k = 0; k < T; ++k) {
    if (a.IsLexed(k) || k == s->indenter_indent || k == s->indenter_dedent) continue;
    for (int32_t st = 0; st < s->num_states; ++st) s->action[static_cast<size_t>(st) * NT + k] = 0;
  }
  for (int32_t st = 0; any && st < s->num_states; ++st) {
    for (int32_t k = 0; k < T; ++k) {
      if (!plain[k] || !bit(s->scanner_terms, st, k)) continue;
      bool retyped = false;
      for (int32_t r : retypers[k]) retyped = retyped || bit(s->scanner_terms, st, r);
      if (retyped) continue;
      bool never = !bit(s->scanner_alt, st, k);
      for (int32_t u : blockers[k]) never = never || bit(s->scanner_alt, st, u);
      if (never) s->action[static_cast<size_t>(st) * NT + k] = 0;
    }
  }
}

}  // namespace

void FillGrammarTables(const Grammar& g, const ParseTables& pt, const TerminalAutomaton& a,
                       const IndenterTerminals& indenter, CompiledStore* out) {
  CompiledStore& s = *out;
  // Terminals.
  const int32_t T = g.num_terminals();
  s.num_terminals = T;
  s.terminal_rank.resize(T);
  s.terminal_ignored.assign(T, 0);
  s.terminal_open_paren.assign(T, 0);
  s.terminal_close_paren.assign(T, 0);
  for (int32_t t = 0; t < T; ++t) {
    s.terminal_names.push_back(g.terminals[t].name);
    s.terminal_rank[t] = a.rank(t);
  }
  for (int32_t t : g.ignore) s.terminal_ignored[t] = 1;
  s.terminal_is_string.assign(T, 0);
  s.unless_offsets.assign(1, 0);
  for (int32_t t = 0; t < T; ++t) {
    s.terminal_is_string[t] = a.IsLexed(t) && a.IsStringTerminal(t);
    if (a.IsLexed(t) && !a.IsStringTerminal(t)) {
      for (int32_t k = 0; k < T; ++k) {
        if (a.IsLexed(k) && a.UnlessOk(t, k)) s.unless_data.push_back(k);
      }
    }
    s.unless_offsets.push_back(static_cast<int32_t>(s.unless_data.size()));
  }
  if (indenter.used()) {
    s.indenter_nl = indenter.nl;
    s.indenter_indent = indenter.indent;
    s.indenter_dedent = indenter.dedent;
    for (const char* n : {"LPAR", "LSQB", "LBRACE"}) {
      if (g.FindTerminal(n) >= 0) s.terminal_open_paren[g.FindTerminal(n)] = 1;
    }
    for (const char* n : {"RPAR", "RSQB", "RBRACE"}) {
      if (g.FindTerminal(n) >= 0) s.terminal_close_paren[g.FindTerminal(n)] = 1;
    }
  }

  // Parser and scanners.
  s.num_states = pt.num_states;
  s.num_parse_terminals = pt.num_terminals;
  s.num_nonterminals = pt.num_nonterminals;
  s.start_state = pt.start_state.empty() ? 0 : pt.start_state[0];
  s.action = pt.action;
  s.goto_table = pt.goto_table;
  s.rule_lhs = pt.rule_lhs;
  s.rule_length = pt.rule_length;
  s.scanner_words = (T + 63) / 64;
  s.scanner_terms.assign(static_cast<size_t>(pt.num_states) * s.scanner_words, 0);
  s.scanner_alt.assign(s.scanner_terms.size(), 0);
  for (int32_t st = 0; st < pt.num_states; ++st) {
    std::vector<uint8_t> in(T, 0);
    for (int32_t t : pt.AcceptedTerminals(st)) in[t] = 1;
    for (int32_t t : g.ignore) in[t] = 1;
    if (indenter.used()) in[indenter.nl] = 1;
    std::vector<uint8_t> alt = in;
    for (int32_t r = 0; r < T; ++r) {
      if (!in[r] || !a.IsLexed(r) || a.IsStringTerminal(r)) continue;
      for (int32_t k = 0; k < T; ++k) {
        if (in[k] && a.IsLexed(k) && a.Embeds(r, k)) alt[k] = 0;
      }
    }
    for (int32_t t = 0; t < T; ++t) {
      if (!a.IsLexed(t)) continue;  // declared terminals are never scanned
      uint64_t bit = uint64_t{1} << (t & 63);
      if (in[t]) s.scanner_terms[static_cast<size_t>(st) * s.scanner_words + t / 64] |= bit;
      if (alt[t]) s.scanner_alt[static_cast<size_t>(st) * s.scanner_words + t / 64] |= bit;
    }
  }

  PruneUnlexableLookaheads(g, a, &s);
  CloseDeadStates(s.lr(), s.action.data());
  s.ComputeViability();
}

void FillSuccessorTables(const TerminalSuccessors& successors, CompiledStore* out) {
  CompiledStore& s = *out;
  const int32_t T = s.num_terminals;
  s.terminal_min_bytes.assign(T, 0);
  for (int32_t t = 0; t < T && static_cast<size_t>(t) < successors.min_bytes.size(); ++t) {
    s.terminal_min_bytes[t] = successors.min_bytes[t];
  }
  s.terminal_next_any.assign(T, 1);
  s.terminal_next_offsets.assign(1, 0);
  s.terminal_next_data.clear();
  for (int32_t t = 0; t < T; ++t) {
    if (static_cast<size_t>(t) < successors.any.size() && !successors.any[t]) {
      s.terminal_next_any[t] = 0;
      for (int32_t u : successors.next[t]) s.terminal_next_data.push_back(u);
    }
    s.terminal_next_offsets.push_back(static_cast<int32_t>(s.terminal_next_data.size()));
  }
}

}  // namespace cfgmask
