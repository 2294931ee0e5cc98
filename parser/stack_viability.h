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
// transitions from the start state); when each of them is viable the
// analysis answers "nothing to check" (trivial()), and the runtime pays
// nothing.  Tested by tests/viable_prefix_test.cc (the minimal cases,
// random grammars with %declare'd terminals, against the byte-level pre*
// of runtime/suffix_quotient.h and a breadth-first completion search).
#ifndef CFGMASK_PARSER_STACK_VIABILITY_H_
#define CFGMASK_PARSER_STACK_VIABILITY_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "parser/lr_core.h"

namespace cfgmask {

struct StackViabilityLimits {
  int64_t max_transitions = int64_t{1} << 24;  // of the saturated P-automaton
  int64_t max_dfa_states = int64_t{1} << 16;
};

struct StackViabilityStats {
  int64_t controls = 0, transitions = 0, dfa_states = 0, explored = 0;
  int64_t dead_stacks = 0;  // explored (DFA state, top) pairs that cannot complete
  bool over_limits = false;
  double seconds = 0;
};

class StackViability {
 public:
  // Null when every stack the tables can build completes (nothing to check)
  // or when the analysis passes `limits` (then nothing is checked either:
  // the masks are as without it).  `stats` may be null.
  static std::shared_ptr<const StackViability> Build(const LrTables& lr, int32_t start_state,
                                                     const StackViabilityLimits& limits,
                                                     StackViabilityStats* stats);

  // The DFA state of the stack ending at `node` (cached in the node: each
  // entry is computed once, from the one below).
  int32_t StateOf(const LrStack::Node* node) const;
  // The state after pushing LR state q on a stack in state d.
  int32_t Step(int32_t d, int32_t q) const {
    if (d == kAll) return kAll;
    auto it = step_.find(Key(d, q));
    return it == step_.end() ? kAll : it->second;
  }
  // Can the stack in state d complete (some terminals lead to acceptance)?
  bool Viable(int32_t d) const { return viable_[d] != 0; }
  // Is terminal t (a parse terminal, $END included) taken on the stack in
  // state d, leaving a stack that can complete (for $END: accepted)?
  bool Takes(int32_t d, int32_t t) const {
    return (takes_[static_cast<size_t>(d) * words_ + t / 64] >> (t & 63)) & 1;
  }
  int32_t num_states() const { return static_cast<int32_t>(viable_.size()); }

  // A state that accepts everything: for a stack the exploration never met
  // (none that the tables build; kept so that a surprise refuses nothing).
  static constexpr int32_t kAll = 0;

 private:
  static uint64_t Key(int32_t d, int32_t q) {
    return static_cast<uint64_t>(static_cast<uint32_t>(d)) << 32 | static_cast<uint32_t>(q);
  }
  int32_t start_state_ = 0;
  int32_t words_ = 0;
  int32_t bottom_ = kAll;  // the state of the stack [start_state]
  std::vector<uint8_t> viable_;
  std::vector<uint64_t> takes_;
  std::unordered_map<uint64_t, int32_t> step_;
};

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_STACK_VIABILITY_H_
