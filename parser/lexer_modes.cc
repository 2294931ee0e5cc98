// Lexer modes: see lexer_modes.h.
#include "parser/lexer_modes.h"

#include <algorithm>
#include <numeric>

#include "grammar/analysis.h"
#include "parser/lr_core.h"

namespace cfgmask {

namespace {

int32_t Find(std::vector<int32_t>* parent, int32_t x) {
  while ((*parent)[x] != x) {
    (*parent)[x] = (*parent)[(*parent)[x]];
    x = (*parent)[x];
  }
  return x;
}

}  // namespace

LexerModes ComputeLexerModes(const Grammar& grammar, const ParseTables& tables,
                             const std::vector<int32_t>& shared, int32_t indent, int32_t dedent) {
  const int32_t T = grammar.num_terminals();
  LexerModes m;
  m.mode_of.assign(T, LexerModes::kNeverScanned);
  m.after.assign(T, {});
  std::vector<uint8_t> is_shared(T, 0), lexed(T, 0);
  for (int32_t t : shared) {
    if (t >= 0 && t < T) is_shared[t] = 1;
  }
  for (int32_t t = 0; t < T; ++t) lexed[t] = grammar.terminals[t].kind != PatternKind::kDeclared;

  // Lark scans only in the state a shift enters (the reductions a terminal
  // causes come when the next one has been scanned) and in the start state:
  // a state entered only by a goto never scans.
  const LrTables lr = LrTables::Of(tables);
  const int32_t start = tables.start_state.empty() ? 0 : tables.start_state[0];
  std::vector<uint8_t> lexing(tables.num_states, 0);
  for (int32_t st : tables.start_state) lexing[st] = 1;
  lexing[start] = 1;
  for (int32_t s = 0; s < tables.num_states; ++s) {
    for (int32_t t = 0; t < T; ++t) {
      const int32_t to = lr.ShiftTo(s, t);
      if (to >= 0) lexing[to] = 1;
    }
  }
  // Per state, its scanner's own terminals (not shared, lexed).
  std::vector<int32_t> parent(T);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<uint8_t> scanned(T, 0);
  std::vector<int32_t> some_terminal(tables.num_states, -1);  // a terminal of the state's scanner
  for (int32_t s = 0; s < tables.num_states; ++s) {
    if (!lexing[s]) continue;
    int32_t first = -1;
    for (int32_t t : tables.AcceptedTerminals(s)) {
      if (!lexed[t] || is_shared[t]) continue;
      scanned[t] = 1;
      if (first < 0) {
        first = t;
      } else {
        parent[Find(&parent, t)] = Find(&parent, first);
      }
    }
    some_terminal[s] = first;
  }
  // A part of string literals only (the colon after a JSON key) costs the
  // lexer almost nothing beside the others: modes pay where regexps that
  // overlap (a string's text, code) would otherwise live side by side.  So
  // such parts join the largest part (a coarser split is as exact).
  std::vector<int32_t> size(T, 0);
  std::vector<uint8_t> has_regex(T, 0);
  for (int32_t t = 0; t < T; ++t) {
    if (!scanned[t]) continue;
    const int32_t r = Find(&parent, t);
    ++size[r];
    has_regex[r] = has_regex[r] || grammar.terminals[t].kind == PatternKind::kRegex;
  }
  int32_t largest = -1;
  for (int32_t r = 0; r < T; ++r) {
    if (size[r] > 0 && (largest < 0 || size[r] > size[largest])) largest = r;
  }
  for (int32_t t = 0; t < T; ++t) {
    if (!scanned[t]) continue;
    const int32_t r = Find(&parent, t);
    if (!has_regex[r] && r != largest) parent[r] = largest;
  }
  // Modes numbered by their smallest terminal.
  std::vector<int32_t> mode_of_root(T, -1);
  int32_t modes = 0;
  for (int32_t t = 0; t < T; ++t) {
    if (!scanned[t]) continue;
    const int32_t r = Find(&parent, t);
    if (mode_of_root[r] < 0) mode_of_root[r] = modes++;
    m.mode_of[t] = mode_of_root[r];
  }
  for (int32_t t = 0; t < T; ++t) {
    if (lexed[t] && is_shared[t]) m.mode_of[t] = LexerModes::kShared;
  }
  if (modes <= 1) {
    // One part: nothing to split; the lexer keeps every terminal live.
    return LexerModes{0, std::vector<int32_t>(T, 0), std::vector<std::vector<int32_t>>(T, {0}), 0};
  }
  m.num_modes = modes;
  auto state_mode = [&](int32_t s) {
    return some_terminal[s] < 0 ? -1 : m.mode_of[some_terminal[s]];
  };
  m.initial_mode = std::max(0, state_mode(start));

  // The modes after the indenter's terminals: those of the terminals that
  // can follow them in the grammar.
  std::vector<uint8_t> after_indenter(modes, 0);
  if (indent >= 0 || dedent >= 0) {
    const auto nullable = NullableSymbols(grammar);
    const auto first = FirstSets(grammar, nullable);
    const auto follow = FollowSets(grammar, nullable, first);
    for (int32_t x : {indent, dedent}) {
      if (x < 0) continue;
      for (int32_t t = 0; t < T; ++t) {
        if (follow[x][t] && m.mode_of[t] >= 0) after_indenter[m.mode_of[t]] = 1;
      }
    }
  }
  for (int32_t t = 0; t < T; ++t) {
    if (!lexed[t] || m.mode_of[t] == LexerModes::kNeverScanned) continue;
    std::vector<uint8_t> next(modes, 0);
    for (int32_t s = 0; s < tables.num_states; ++s) {
      // Lark scans the next terminal in the state the shift enters (a
      // reduction on t comes back to a shift of t).
      const int32_t to = lr.ShiftTo(s, t);
      if (to < 0) continue;
      const int32_t mode = state_mode(to);
      if (mode >= 0) {
        next[mode] = 1;
      } else if (m.mode_of[t] >= 0) {
        next[m.mode_of[t]] = 1;  // only shared terminals or the end next: any mode holds them
      }
      bool indenter_next = false;
      for (int32_t x : {indent, dedent}) indenter_next = indenter_next || (x >= 0 && lr.HasAction(to, x));
      if (indenter_next) {
        for (int32_t k = 0; k < modes; ++k) next[k] = next[k] || after_indenter[k];
      }
    }
    for (int32_t k = 0; k < modes; ++k) {
      if (next[k]) m.after[t].push_back(k);
    }
  }
  // The scanners lexed in each mode: the states of that mode, and a state
  // whose scanner holds only shared terminals in the mode of the terminal
  // that led to it (or the start state's).
  std::vector<std::vector<uint8_t>> in_all(modes, std::vector<uint8_t>(T, 1));
  auto meet = [&](int32_t k, int32_t s) {
    std::vector<uint8_t> in(T, 0);
    for (int32_t t : tables.AcceptedTerminals(s)) in[t] = 1;
    for (int32_t t = 0; t < T; ++t) in_all[k][t] = in_all[k][t] && (in[t] || is_shared[t]);
  };
  for (int32_t s = 0; s < tables.num_states; ++s) {
    if (lexing[s] && state_mode(s) >= 0) meet(state_mode(s), s);
  }
  if (state_mode(start) < 0) meet(m.initial_mode, start);
  // Such a state is lexed in the mode of the terminal shifted into it; after
  // the newline, in the mode it was lexed in (its state's); after the
  // indenter's terminals, in a mode that can follow them.  A state that takes
  // only the indenter's terminals is never lexed in (the indenter puts them
  // in first).
  auto only_indenter = [&](int32_t s) {
    const std::vector<int32_t> acc = tables.AcceptedTerminals(s);
    if (acc.empty()) return false;
    for (int32_t t : acc) {
      if (t != indent && t != dedent) return false;
    }
    return true;
  };
  for (int32_t t = 0; t < T; ++t) {
    const bool indenter_terminal = t == indent || t == dedent;
    const bool shared_terminal = lexed[t] && is_shared[t];
    if (!indenter_terminal && !shared_terminal && (!lexed[t] || m.mode_of[t] < 0)) continue;
    for (int32_t s = 0; s < tables.num_states; ++s) {
      const int32_t to = lr.ShiftTo(s, t);
      if (to < 0 || state_mode(to) >= 0 || only_indenter(to)) continue;
      for (int32_t k = 0; k < modes; ++k) {
        bool lexed_in_k;
        if (indenter_terminal) {
          lexed_in_k = after_indenter[k];
        } else if (shared_terminal) {
          lexed_in_k = state_mode(s) < 0 || state_mode(s) == k;
        } else {
          lexed_in_k = m.mode_of[t] == k;
        }
        if (lexed_in_k) meet(k, to);
      }
    }
  }
  m.certain.assign(modes, {});
  for (int32_t k = 0; k < modes; ++k) {
    for (int32_t t = 0; t < T; ++t) {
      if (lexed[t] && in_all[k][t] && (m.mode_of[t] == k || is_shared[t])) m.certain[k].push_back(t);
    }
  }
  m.foreign.assign(modes, {});
  for (int32_t t = 0; t < T; ++t) {
    if (m.mode_of[t] < 0) continue;
    for (int32_t k = 0; k < modes; ++k) {
      if (k != m.mode_of[t]) m.foreign[k].push_back(t);
    }
  }
  return m;
}

}  // namespace cfgmask
