// Which LR stacks can still reach an accepted end: a regular set, kept as a
// DFA state per stack entry.
//
// The tables the store builder leaves (after removing the lookaheads no
// scanner produces, maskstore/scanner_tables.cc) can hold a state that
// accepts with some stacks below it but not with the one at hand: LALR
// merges a dead context with a live one.  With
//   start: "a" x "b" | "c" x D      x: "e"      %declare D
// the state after `e` reduces on `b` (merged from the `a` context), so after
// `c e` the parser takes nothing that leads anywhere, yet every per-state
// check passes.  Whether a configuration completes depends on the whole
// stack; the set of stacks that do is regular.
//
// The LR automaton is read as a pushdown system over terminals: control
// states are "a terminal t is pending" (its reductions run, then it is
// shifted or, for $END, accepted), "idle" (any terminal may come next),
// "accepted", and the pops of a reduction by a rule with left side A and k
// states still to pop under lookahead t; the stack alphabet is the LR
// states.  A shift of t from q is <t, q> -> <idle, q' q>; a reduction pops
// one state per rule (<t, q> -> <(t,A,n-1), eps>, <(t,A,k), p> ->
// <(t,A,k-1), eps>, <(t,A,0), p> -> <t, goto(p,A) p>); $END's accept goes
// to "accepted", which reads any stack.  pre* of the accepting
// configurations (Bouajjani, Esparza and Maler 1997; Schwoon's worklist
// saturation, 2002) gives a P-automaton, reversed and determinized here so
// that it reads a stack bottom-up: each entry's state is a function of the
// entry below and the LR state pushed (Step), and the set of controls from
// which the stack is accepted is read off the top entry's state.  Only the
// terminals the tables still act on take part, so the scanners' pruning
// (what Lark's contextual lexer can produce in each state) is in; the
// indenter's terminals count as always producible (the set is then a
// superset of the completable stacks: a refusal is always right).
//
// Build explores every stack the LR automaton can build (every path of
// transitions from the start state), each summarised by its top LR state
// and the entries a later push can still read; when each of them is viable
// the analysis answers "nothing to check" (null), and the runtime pays
// nothing.  Tested by tests/viable_prefix_test.cc (the minimal cases,
// random grammars with %declare'd terminals, against the byte-level pre*
// of runtime/suffix_quotient.h and a breadth-first completion search).
#ifndef CFGMASK_PARSER_STACK_VIABILITY_H_
#define CFGMASK_PARSER_STACK_VIABILITY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "parser/lr_core.h"

namespace cfgmask {

struct StackViabilityLimits {
  // The analysis runs at every load (it is not in the store file), so it
  // is bounded: past these the store is not checked (its masks are as
  // without the analysis).  sql.lark (1,573 LR states) and the strict
  // Python grammar (2,845) are past the first; their saturations take
  // 1.3 M and 11.6 M transitions, 2.5-6 s and 14-22 s with the walk.
  // Unbounded, both have nothing to check (tests/stack_viability_test.cc),
  // so skipping them loses nothing.
  int32_t max_lr_states = 512;
  int64_t max_transitions = int64_t{1} << 20;  // of the saturated P-automaton
  int64_t max_walk = int64_t{1} << 16;         // stack summaries walked to find nothing to check
  // The reference walk: every summary keeps the states of the top
  // max_depth entries, whether a later push can read them or not (the
  // default keeps only those it can: the same verdict with far fewer
  // summaries; tests/stack_viability_test.cc compares the two).
  bool whole_window_walk = false;
};

struct StackViabilityStats {
  int64_t controls = 0, transitions = 0;
  int64_t goal_rules = 0;     // (goal, target) pairs the runtime reads
  int32_t max_depth = 0;      // entries below one that its state reads
  int64_t unsure_states = 0;  // LR states whose lower bound of goals lacks idle
  int64_t walked = 0;         // stack summaries walked (0: not needed)
  bool over_limits = false;
  double seconds = 0;
  double saturation_seconds = 0;  // of `seconds`: the saturation
  double walk_seconds = 0;        // of `seconds`: the walk over stack summaries
};

class StackViability {
 public:
  // Null when every stack the tables can build completes (nothing to check:
  // a lower bound of each entry's goals, common to all stacks ending in its
  // LR state, already holds "idle") or when the saturation passes `limits`
  // (then nothing is checked either: the masks are as without it).
  // `stats` may be null.
  static std::shared_ptr<const StackViability> Build(const LrTables& lr, int32_t start_state,
                                                     const StackViabilityLimits& limits,
                                                     StackViabilityStats* stats);

  // The state of the view: the stack ending at `base` with overlay[0..n)
  // pushed.  Each base entry's state is cached in its node (computed once,
  // from the entries below it); the overlay's are computed here.
  int32_t ViewState(const LrStack::Node* base, const int32_t* overlay, int32_t n) const;
  // Can the stack in state d complete (some terminals lead to acceptance)?
  bool Viable(int32_t d) const { return viable_[d] != 0; }
  // Is terminal t (a parse terminal, $END included) taken on the stack in
  // state d, leaving a stack that can complete (for $END: accepted)?
  bool Takes(int32_t d, int32_t t) const {
    return (takes_[static_cast<size_t>(d) * words_ + t / 64] >> (t & 63)) & 1;
  }
  // Distinct entry states met so far.
  int32_t num_states() const;
  // Past this many entry states, a new one is kAll (accepts everything: a
  // surprise refuses nothing).
  static constexpr int32_t kMaxStates = int32_t{1} << 18;
  static constexpr int32_t kAll = 0;
  // The memo of Push keeps at most this many entries (then starts again).
  static constexpr size_t kMaxPushes = size_t{1} << 20;

  StackViability() = default;
  StackViability(const StackViability&) = delete;
  StackViability& operator=(const StackViability&) = delete;

 private:
  // An entry's state: the set of goals (a pending terminal, idle, a goto
  // context (t, A) waiting for a reduction to uncover this entry) from
  // which the stack up to it is accepted, interned.
  int32_t StateOf(const LrStack::Node* node) const;
  // The state of an entry in LR state q over entries whose states are
  // below[0] (the one under it), below[1], ... (n known; fewer than
  // max_depth_ when the stack is that short).
  int32_t Push(int32_t q, const int32_t* below, int32_t n) const;
  int32_t Intern(std::vector<int32_t> goals) const;

  int32_t start_state_ = 0;
  int32_t num_terminals_ = 0, idle_ = 0;
  int32_t words_ = 0;
  int32_t max_depth_ = 1;
  // Per LR state q, rules_[offsets_[q]..offsets_[q+1]): (goal, target):
  // target -1 = accepted whatever is below, else depth * goals + goal: the
  // goal must hold at the entry `depth` below this one (1 = the one under it).
  std::vector<int64_t> offsets_;
  std::vector<std::pair<int32_t, int64_t>> rules_;
  int64_t num_goals_ = 0;
  std::vector<int32_t> reads_;  // per LR state: the deepest `depth` of its rules
  // Interned entry states (guarded by mu_: sessions on several threads).
  mutable std::mutex mu_;
  mutable std::map<std::vector<int32_t>, int32_t> ids_;
  mutable std::vector<const std::vector<int32_t>*> sets_;
  mutable std::unordered_map<std::string, int32_t> push_;  // (q, states below) -> state
  mutable std::vector<uint8_t> viable_;
  mutable std::vector<uint64_t> takes_;
};

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_STACK_VIABILITY_H_
