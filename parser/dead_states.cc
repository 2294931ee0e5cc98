// Dead parser states: see dead_states.h.
//
// live(q) when q accepts, shifts to a live state, or reduces by A -> x1..xn
// where some state p with a path of n transitions to q has a live goto(p, A)
// (the LR core's borrow step, LrPredecessors::ForEachBorrow).  Every state on a completing run of the parser
// is live, so the rest are dead: a least fixpoint, computed by a worklist
// over the reverse dependencies.  The store build runs it after removing the
// lookaheads the contextual lexer can never produce
// (maskstore/scanner_tables.cc), whose removals can leave states stranded.
#include "parser/dead_states.h"

#include <algorithm>
#include <vector>

namespace cfgmask {

void CloseDeadStates(const LrTables& lr, int32_t* action) {
  const int32_t NT = lr.num_terminals, S = lr.num_states;
  const LrPredecessors preds(lr, -1);
  std::vector<std::vector<int32_t>> dependents(S);  // live(x) makes each of dependents[x] live
  std::vector<int32_t> work;
  std::vector<uint8_t> live(S, 0);
  std::vector<int32_t> targets;
  for (int32_t q = 0; q < S; ++q) {
    targets.clear();
    for (int32_t t = 0; t < NT; ++t) {
      if (lr.AcceptsOn(q, t)) {
        if (!live[q]) live[q] = 1, work.push_back(q);
      } else if (const int32_t to = lr.ShiftTo(q, t); to >= 0) {
        targets.push_back(to);
      } else if (const int32_t r = lr.ReduceBy(q, t); r >= 0) {
        preds.ForEachBorrow(lr, q, lr.rule_length[r], r, [&](int32_t, int32_t to) {
          targets.push_back(to);
          return false;
        });
      }
    }
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    for (int32_t x : targets) dependents[x].push_back(q);
  }
  while (!work.empty()) {
    const int32_t x = work.back();
    work.pop_back();
    for (int32_t q : dependents[x]) {
      if (!live[q]) live[q] = 1, work.push_back(q);
    }
  }
  // Removing actions edits the tables (as their builder does).
  for (int32_t st = 0; st < S; ++st) {
    for (int32_t t = 0; t < NT; ++t) {
      const int32_t to = lr.ShiftTo(st, t);
      if (!live[st] || (to >= 0 && !live[to])) action[static_cast<size_t>(st) * NT + t] = 0;
    }
  }
}

}  // namespace cfgmask
