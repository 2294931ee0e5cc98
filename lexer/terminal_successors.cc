// Successors of terminals: see terminal_successors.h.
//
// For a terminal t: a breadth-first search from the automaton's
// initial state over the bytes that keep t alive reaches every lexer state
// where t's match can end (t among its boundary candidates).  Ending t there
// (Boundary) and reading one more character gives the start of the next
// terminal; the continuation is impossible when that character already
// matches a blocking shadow of an ignored terminal (every scanner has the
// ignored terminals, so such a Hit is always fatal: t itself would have
// matched longer, e.g. a comment swallowing the rest of the line).  Every
// terminal still alive after the character can be the next one.
//
// A character above ASCII is read whole: its lead byte, then every
// continuation byte, the blockers' Hits looked at after each.  A code-point
// class is built as UTF-8 sequences, so a shadow that takes the character
// hits only at its last byte: at the lead byte alone the comment `#[^\n]*`
// has not matched longer yet, and a NAME that starts with the same lead byte
// looked like a successor (`x = a / #c` was allowed, a dead end).  Whether
// t takes the character is not decided from t's threads (Lark's
// leftmost-first alternation: in `#(c|cé)` after `#c` the longer branch does
// not win, `é` starts the next terminal) but by the Hits of the shadows the
// automaton keeps for exactly that, on each completion of the character; the
// successors are those alive after some completion no Hit killed.  No
// terminal ends inside a character (every text of a terminal is UTF-8).
//
// Successors that are ignored are followed through (their own successors),
// to a fixed point.
#include "lexer/terminal_successors.h"

#include <algorithm>
#include <memory>
#include <unordered_set>

#include "grammar/analysis.h"
#include "lexer/terminal_automaton.h"

namespace cfgmask {

namespace {

// The direct successors of terminal t; false when the bound was hit.
bool DirectSuccessors(TerminalAutomaton* a, const std::vector<uint8_t>& ignored, int32_t t,
                      int32_t max_states, std::vector<uint8_t>* next) {
  std::vector<int32_t> queue = {a->initial_state()};
  std::unordered_set<int32_t> seen(queue.begin(), queue.end());
  std::vector<LexItem> items;
  auto alive = [&](int32_t q, int32_t u) {
    const std::vector<int32_t>& set = a->Set(a->Tail(q).blockers);
    return std::binary_search(set.begin(), set.end(), u);
  };
  // One step that no Hit of an ignored terminal kills: the state, -1 when
  // the step dies or is killed, -3 when the automaton's bound was hit.
  auto step = [&](int32_t q, int b) {
    items.clear();
    const int32_t to = a->Step(q, static_cast<uint8_t>(b), &items);
    if (to < 0) return to;
    for (const LexItem& h : items) {
      if (h.kind == LexItem::kHit && ignored[h.terminal]) return -1;
    }
    return to;
  };
  // The terminals alive after each first character of the next terminal
  // from q0 (a boundary's state) go into *next; states after the whole
  // character are deduplicated per depth (what follows depends on the state
  // only).  Each q0 once.
  std::unordered_set<int32_t> starts;
  std::vector<int32_t> level, deeper;
  auto first_chars = [&](int32_t q0) {
    if (!starts.insert(q0).second) return true;
    for (int b = 0; b < 256; ++b) {
      const int32_t q1 = step(q0, b);
      if (q1 == -3) return false;
      if (q1 < 0) continue;
      // Continuation bytes still to come: 1-3 after a lead byte (invalid
      // leads and sequences die in Step: classes are valid UTF-8 only).
      const int more = b < 0xC0 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
      level.assign(1, q1);
      for (int k = 0; k < more && !level.empty(); ++k) {
        deeper.clear();
        for (int32_t s : level) {
          for (int c = 0x80; c < 0xC0; ++c) {
            const int32_t to = step(s, c);
            if (to == -3) return false;
            if (to >= 0 && std::find(deeper.begin(), deeper.end(), to) == deeper.end()) deeper.push_back(to);
          }
        }
        level.swap(deeper);
      }
      for (int32_t s : level) {
        for (int32_t u : a->Set(a->Tail(s).blockers)) (*next)[u] = 1;
      }
    }
    return true;
  };
  for (size_t head = 0; head < queue.size(); ++head) {
    const int32_t q = queue[head];
    if (!a->AtTerminalStart(q)) {
      const std::vector<int32_t>& cands = a->BoundaryCandidates(q);
      if (std::find(cands.begin(), cands.end(), t) != cands.end()) {
        for (int32_t mode : a->ModesAfter(q, t)) {
          LexItem emit;
          const int32_t q0 = a->Boundary(q, t, mode, &emit);
          if (q0 == -3) return false;
          if (q0 >= 0 && !first_chars(q0)) return false;
        }
      }
    }
    for (int b = 0; b < 256; ++b) {
      items.clear();
      const int32_t to = a->Step(q, static_cast<uint8_t>(b), &items);
      if (to == -3) return false;
      if (to < 0 || !alive(to, t) || !seen.insert(to).second) continue;
      if (static_cast<int32_t>(seen.size()) > max_states) return false;
      queue.push_back(to);
    }
  }
  return true;
}

// Shortest texts per terminal: breadth-first over bytes from the initial
// state, a terminal's depth the first at which it can end (a boundary
// candidate whose Boundary is legal), within `max_states` states.
std::vector<int32_t> ShortestSpellings(TerminalAutomaton* a, int32_t T, int32_t max_states) {
  std::vector<int32_t> best(T, -1);
  std::vector<int32_t> level = {a->initial_state()};
  std::unordered_set<int32_t> seen(level.begin(), level.end());
  std::vector<LexItem> items;
  int32_t missing = 0;
  for (int32_t t = 0; t < T; ++t) missing += a->IsLexed(t) ? 1 : 0;
  for (int32_t depth = 1; missing > 0 && !level.empty(); ++depth) {
    std::vector<int32_t> next;
    for (int32_t q : level) {
      for (int b = 0; b < 256; ++b) {
        items.clear();
        const int32_t to = a->Step(q, static_cast<uint8_t>(b), &items);
        if (to < 0 || !seen.insert(to).second) continue;
        for (int32_t t : a->BoundaryCandidates(to)) {
          if (best[t] >= 0) continue;
          for (int32_t mode : a->ModesAfter(to, t)) {
            LexItem emit;
            if (best[t] < 0 && a->Boundary(to, t, mode, &emit) >= 0) {
              best[t] = depth;
              --missing;
            }
          }
        }
        next.push_back(to);
        if (static_cast<int32_t>(seen.size()) >= max_states) {
          next.clear();
          break;
        }
      }
      if (next.empty() && static_cast<int32_t>(seen.size()) >= max_states) break;
    }
    level = std::move(next);
  }
  for (int32_t t = 0; t < T; ++t) {
    if (best[t] < 0) best[t] = a->IsLexed(t) ? 1 : 0;
  }
  return best;
}

}  // namespace

Status ComputeTerminalSuccessors(const Grammar& grammar, int32_t indenter_nl, int32_t max_states,
                                 TerminalSuccessors* out) {
  const int32_t T = grammar.num_terminals();
  out->any.assign(T, 1);
  out->next.assign(T, {});
  std::vector<uint8_t> ignored(T, 0);
  for (int32_t t : grammar.ignore) ignored[t] = 1;
  std::unique_ptr<TerminalAutomaton> a;
  TerminalAutomatonOptions options;
  CFGMASK_RETURN_IF_ERROR(TerminalAutomaton::Build(grammar, indenter_nl, options, &a));
  out->min_bytes = ShortestSpellings(a.get(), T, std::max(1, max_states / 8));
  const std::vector<uint8_t> nullable = NullableSymbols(grammar);
  const std::vector<std::vector<uint8_t>> follow =
      FollowSets(grammar, nullable, FirstSets(grammar, nullable));
  // Direct successors (all terminals, ignored ones included) per terminal;
  // the indenter's newline is left to the indenter (any).
  std::vector<std::vector<uint8_t>> direct(T);
  std::vector<uint8_t> bounded(T, 0);
  auto explore = [&](int32_t t) {
    if (!direct[t].empty() || !a->IsLexed(t) || t == indenter_nl) return;
    direct[t].assign(T, 0);
    const int32_t bound = ignored[t] ? max_states : std::max(1, max_states / 8);
    bounded[t] = DirectSuccessors(a.get(), ignored, t, bound, &direct[t]) ? 1 : 0;
  };
  for (int32_t t = 0; t < T; ++t) {
    if (ignored[t]) explore(t);
  }
  for (int32_t t = 0; t < T; ++t) {
    if (!a->IsLexed(t) || t == indenter_nl) continue;
    explore(t);  // done already for the ignored ones
    if (!bounded[t]) continue;
    // Through chains of ignored terminals, to a fixed point.
    std::vector<uint8_t> reach = direct[t];
    bool ok = true;
    std::vector<uint8_t> done(T, 0);
    done[t] = 1;
    std::vector<int32_t> work;
    for (int32_t u = 0; u < T; ++u) {
      if (reach[u] && ignored[u]) work.push_back(u);
    }
    while (!work.empty() && ok) {
      const int32_t u = work.back();
      work.pop_back();
      if (done[u]) continue;
      done[u] = 1;
      if (!bounded[u]) {
        ok = false;
        break;
      }
      for (int32_t v = 0; v < T; ++v) {
        if (!direct[u][v] || reach[v]) continue;
        reach[v] = 1;
        if (ignored[v]) work.push_back(v);
      }
    }
    if (!ok) continue;  // any: nothing is checked
    // An ignored terminal can sit anywhere: every terminal counts.  Another
    // terminal is followed only by what the grammar lets follow it
    // (declared terminals, made by a post-lexer, are not lexed).
    bool all = true;
    std::vector<int32_t> list;
    for (int32_t u = 0; u < T; ++u) {
      if (ignored[u] || !a->IsLexed(u)) continue;
      if (reach[u]) {
        list.push_back(u);
      } else if (ignored[t] || follow[t][u]) {
        all = false;
      }
    }
    if (all) continue;
    out->any[t] = 0;
    out->next[t] = std::move(list);
  }
  return Status::Ok();
}

}  // namespace cfgmask
