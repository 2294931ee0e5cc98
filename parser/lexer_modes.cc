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

  // Per state, its scanner's own terminals (not shared, lexed).
  std::vector<int32_t> parent(T);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<uint8_t> scanned(T, 0);
  std::vector<int32_t> some_terminal(tables.num_states, -1);  // a terminal of the state's scanner
  for (int32_t s = 0; s < tables.num_states; ++s) {
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
  const int32_t start = tables.start_state.empty() ? 0 : tables.start_state[0];
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
  const LrTables lr = LrTables::Of(tables);
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
  return m;
}

std::string LexerModes::DebugString(const Grammar& grammar) const {
  std::string out;
  for (int32_t k = 0; k < std::max(num_modes, 1); ++k) {
    out += "mode " + std::to_string(k) + ":";
    for (int32_t t = 0; t < static_cast<int32_t>(mode_of.size()); ++t) {
      if (mode_of[t] == k) out += " " + grammar.terminals[t].name;
    }
    out += "\n";
  }
  return out;
}

}  // namespace cfgmask
