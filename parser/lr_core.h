// The LR core: the one place that steps LALR(1) tables.
//
// Every user of the tables — the runtime session (runtime/session.cc), the
// streamlining exploration (streamline/exploration.cc), the completion
// search (runtime/completion.cc), the store builder's dead-state analysis
// and the tests' reference parser (IncrementalParser) — feeds terminals
// through LrFeed() below, over a stack of its own kind:
//
//  - LrStack: the persistent stack.  Immutable reference-counted nodes, each
//    with its depth and a hash of the whole stack below it, so a copy (fork)
//    is O(1), a pushed state shares everything under it, going back to an
//    older stack (rollback) is keeping the old handle, and equal stacks hash
//    and compare equal however they were built.
//  - LrOverlay: a mutable view for a run of feeds: an LrStack node cut
//    somewhere (the "base") plus the states pushed since, committed back to
//    an LrStack at the end (Commit) or thrown away.
//  - LrScratch: a read-only view that answers "would t be shifted?" by
//    simulating the reductions on a small local overlay, without touching
//    the stack it looks at or the heap in the common case.
//  - a stack whose lower part is unknown (the streamlining exploration): its
//    Pop refuses to go below what it knows, and LrFeed returns kBelow with
//    the rule, for the caller to "borrow" every state that could be there
//    (LrPredecessors::ForEachBorrow, also the dead-state analysis of
//    parser/dead_states.cc).
//
// The stack concept LrFeed needs:
//   int32_t Top() const;      // the top state
//   bool Pop(int32_t n);      // pops n states; false (unchanged) if not known
//   bool Push(int32_t state); // false: the stack gives up (budget, size)
//   bool Step();              // before each action look-up; false: give up
//
// Action encoding (parser/lalr.h): 0 error, s+1 shift to s, -(r+1) reduce
// by rule r, kAcceptAction accept on $END.  Only this header decodes it.
// Tested by lr_core_test.cc, incremental_parser_test.cc and, through its
// users, session_test.cc and streamline_store_test.cc.
#ifndef CFGMASK_PARSER_LR_CORE_H_
#define CFGMASK_PARSER_LR_CORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "parser/lalr.h"

namespace cfgmask {

// The LALR(1) tables as the core reads them: borrowed arrays, from
// ParseTables (LrTables::Of) or from a compiled store (CompiledStore::lr()).
struct LrTables {
  const int32_t* action = nullptr;      // [state * num_terminals + terminal]
  const int32_t* goto_table = nullptr;  // [state * num_nonterminals + nonterminal], -1 none
  const int32_t* rule_lhs = nullptr;
  const int32_t* rule_length = nullptr;
  int32_t num_states = 0;
  int32_t num_terminals = 0;  // grammar terminals + $END (the last id)
  int32_t num_nonterminals = 0;
  int32_t num_rules = 0;

  static LrTables Of(const ParseTables& t) {
    return {t.action.data(), t.goto_table.data(), t.rule_lhs.data(), t.rule_length.data(),
            t.num_states, t.num_terminals, t.num_nonterminals,
            static_cast<int32_t>(t.rule_lhs.size())};
  }
  int32_t end_terminal() const { return num_terminals - 1; }
  int32_t Action(int32_t state, int32_t terminal) const {
    return action[static_cast<size_t>(state) * num_terminals + terminal];
  }
  int32_t Goto(int32_t state, int32_t nonterminal) const {
    return goto_table[static_cast<size_t>(state) * num_nonterminals + nonterminal];
  }
  // The decoded action of (state, terminal): at most one of these holds.
  int32_t ShiftTo(int32_t state, int32_t terminal) const {  // -1: no shift
    const int32_t a = Action(state, terminal);
    return a > 0 ? a - 1 : -1;
  }
  int32_t ReduceBy(int32_t state, int32_t terminal) const {  // -1: no reduction
    const int32_t a = Action(state, terminal);
    return a < 0 && a != kAcceptAction ? -(a + 1) : -1;
  }
  bool AcceptsOn(int32_t state, int32_t terminal) const {
    return Action(state, terminal) == kAcceptAction;
  }
  bool HasAction(int32_t state, int32_t terminal) const { return Action(state, terminal) != 0; }
  // A reduction by `rule` pops RuleLength(rule) states, then enters
  // GotoAfterReduce(the state it uncovered, rule) (-1: the tables have none).
  int32_t RuleLength(int32_t rule) const { return rule_length[rule]; }
  int32_t GotoAfterReduce(int32_t uncovered, int32_t rule) const {
    return Goto(uncovered, rule_lhs[rule]);
  }
  // The state entered from `state` on grammar symbol `symbol`: a terminal
  // (< num_terminals, by a shift) or num_terminals + a nonterminal (goto);
  // -1 when there is none.
  int32_t Transition(int32_t state, int32_t symbol) const {
    return symbol < num_terminals ? ShiftTo(state, symbol)
                                  : Goto(state, symbol - num_terminals);
  }
};

// Is `a` an action the tables can hold: error, shift to a state below
// num_states, reduce by a rule below num_rules, or accept?  For checking
// tables read from a file (maskstore/store_file.cc) before any is decoded.
inline bool LrActionValid(int32_t a, int64_t num_states, int64_t num_rules) {
  if (a >= 0) return a <= num_states;
  return a == kAcceptAction || -(static_cast<int64_t>(a) + 1) < num_rules;
}

enum class LrOutcome : uint8_t {
  kReject,   // an error entry, or a goto the tables lack
  kShift,    // the terminal was shifted (pushed)
  kAccept,   // $END accepted (nothing pushed)
  kBelow,    // a reduction by LrResult::rule pops below the known stack
  kStopped,  // the stack gave up (Push or Step returned false)
};
struct LrResult {
  LrOutcome outcome;
  int32_t rule = -1;  // kBelow: the reduction that could not pop
};

// The LR driver (Lark's ParserState.feed_token, lark/parsers/
// lalr_parser_state.py): reduce while the table says so, then shift,
// accept or reject.
//
// LrFeedHooked: the same, calling after(&result) once each reduction's goto
// state is pushed; when it returns true the feed ends with *result (the
// runtime's memo of long reduction chains, maskstore/hypothesis_parser.h,
// has then put the stack where the rest of the chain leaves it).
template <class Stack, class After>
inline LrResult LrFeedHooked(const LrTables& t, int32_t terminal, Stack* stack, After after) {
  for (;;) {
    if (!stack->Step()) return {LrOutcome::kStopped};
    const int32_t a = t.Action(stack->Top(), terminal);
    if (a > 0) return {stack->Push(a - 1) ? LrOutcome::kShift : LrOutcome::kStopped};
    if (a == 0) return {LrOutcome::kReject};
    if (a == kAcceptAction) return {LrOutcome::kAccept};
    const int32_t rule = -(a + 1);
    if (!stack->Pop(t.RuleLength(rule))) return {LrOutcome::kBelow, rule};
    const int32_t g = t.GotoAfterReduce(stack->Top(), rule);
    if (g < 0) return {LrOutcome::kReject};
    if (!stack->Push(g)) return {LrOutcome::kStopped};
    LrResult r;
    if (after(&r)) return r;
  }
}
template <class Stack>
inline LrResult LrFeed(const LrTables& t, int32_t terminal, Stack* stack) {
  return LrFeedHooked(t, terminal, stack, [](LrResult*) { return false; });
}

// Shifted, or for $END accepted: what "t is taken" means to every caller.
inline bool LrTaken(LrResult r) {
  return r.outcome == LrOutcome::kShift || r.outcome == LrOutcome::kAccept;
}

// The persistent stack.
class LrStack {
 public:
  struct Node {
    int32_t state;
    uint32_t depth;  // states in the stack ending here
    uint64_t hash;   // of the states from the bottom to here
    const Node* parent;
    mutable std::atomic<uint32_t> refs;
    // The stack-viability DFA's state of the stack ending here, -1 until
    // asked (parser/stack_viability.h; a node belongs to one store's stacks).
    mutable std::atomic<int32_t> viability{-1};
  };

  LrStack() = default;  // empty: only assigned to
  explicit LrStack(int32_t start_state) : top_(NewNode(start_state, nullptr)) {}
  LrStack(const LrStack& o) : top_(o.top_) { Retain(top_); }
  LrStack(LrStack&& o) noexcept : top_(o.top_) { o.top_ = nullptr; }
  LrStack& operator=(const LrStack& o) {
    Retain(o.top_);
    Release(top_);
    top_ = o.top_;
    return *this;
  }
  LrStack& operator=(LrStack&& o) noexcept {
    std::swap(top_, o.top_);
    return *this;
  }
  ~LrStack() { Release(top_); }

  bool empty() const { return top_ == nullptr; }
  int32_t Top() const { return top_->state; }
  // Number of states, the start state included.
  size_t Depth() const { return top_ == nullptr ? 0 : top_->depth; }
  uint64_t Hash() const { return top_ == nullptr ? 0 : top_->hash; }
  const Node* top_node() const { return top_; }
  // The stack with `state` pushed (this one is unchanged).
  LrStack Pushed(int32_t state) const { return LrStack(NewNode(state, Retained(top_))); }
  // `base` (a node of some stack, or null) with states[0..n) pushed.
  static LrStack Build(const Node* base, const int32_t* states, size_t n);
  // The states from the bottom (the start state) to the top.
  std::vector<int32_t> States() const;
  // Lexicographic order of States(), bottom first (without building them).
  static int Compare(const LrStack& a, const LrStack& b);
  bool operator==(const LrStack& o) const;
  bool operator!=(const LrStack& o) const { return !(*this == o); }
  // "[0 5 12]", bottom first.
  std::string DebugString() const;

 private:
  explicit LrStack(const Node* top) : top_(top) {}
  static const Node* NewNode(int32_t state, const Node* parent);
  static const Node* Retained(const Node* n) {
    Retain(n);
    return n;
  }
  static void Retain(const Node* n) {
    if (n) n->refs.fetch_add(1, std::memory_order_relaxed);
  }
  static void Release(const Node* n);

  const Node* top_ = nullptr;
};

// A run of feeds over an LrStack: the stack cut at `base` plus the states
// pushed since.  When `low` is set, it is lowered to the index (depth - 1)
// of the deepest base state read: what a result computed on this view
// depends on (the row memo's key, runtime/row_memo.h).
class LrOverlay {
 public:
  LrOverlay() = default;
  explicit LrOverlay(const LrStack& stack) : base_(stack.top_node()) {}

  int32_t Top() const {
    if (!overlay_.empty()) return overlay_.back();
    Read(base_);
    return base_->state;
  }
  bool Pop(int32_t n) {
    while (n > 0 && !overlay_.empty()) {
      overlay_.pop_back();
      --n;
    }
    for (; n > 0; --n) base_ = base_->parent;
    return true;
  }
  bool Push(int32_t state) {
    overlay_.push_back(state);
    return true;
  }
  static bool Step() { return true; }

  // The view as a persistent stack (the base's nodes are shared).
  LrStack Commit() const { return LrStack::Build(base_, overlay_.data(), overlay_.size()); }
  const LrStack::Node* base() const { return base_; }
  const std::vector<int32_t>& overlay() const { return overlay_; }
  void set_low(size_t* low) { low_ = low; }
  size_t* low() const { return low_; }
  void Read(const LrStack::Node* n) const {
    if (low_ && n->depth - 1 < *low_) *low_ = n->depth - 1;
  }
  // Exactly one state above the base (the view is the pair (base, it)).
  bool OneAboveBase() const { return overlay_.size() == 1; }
  int32_t StatesAbove() const { return static_cast<int32_t>(overlay_.size()); }
  int32_t Above(int32_t i) const { return overlay_[i]; }
  // The view becomes `base` (an ancestor of the current base) plus
  // states[0..n), as a run of feeds computed elsewhere left it; `base` is
  // read (the deepest node that run read).
  void Rebase(const LrStack::Node* base, const int32_t* states, int32_t n) {
    base_ = base;
    overlay_.assign(states, states + n);
    Read(base_);
  }

 private:
  const LrStack::Node* base_ = nullptr;
  std::vector<int32_t> overlay_;
  size_t* low_ = nullptr;
};

// A read-only simulation over (base nodes, a fixed overlay above them): the
// reductions push onto a local buffer (64 states inline, the heap past
// that).  An endless chain of reductions (a cyclic grammar) gives up
// (kStopped): see kFirstCycleCheck.
class LrScratch {
 public:
  LrScratch(const LrStack::Node* base, const int32_t* overlay, int32_t overlay_size,
            const LrOverlay* owner = nullptr)
      : base_(base), overlay_(overlay), ov_(overlay_size), owner_(owner) {}

  int32_t Top() const {
    if (n_ > 0) return At(n_ - 1);
    if (ov_ > 0) return overlay_[ov_ - 1];
    if (owner_) owner_->Read(base_);
    return base_->state;
  }
  bool Pop(int32_t n) {
    const int32_t local = n < n_ ? n : n_;
    n_ -= local;
    n -= local;
    const int32_t over = n < ov_ ? n : ov_;
    ov_ -= over;
    n -= over;
    for (; n > 0; --n) base_ = base_->parent;
    return true;
  }
  bool Push(int32_t state) {
    if (n_ < kInline) {
      inline_[n_++] = state;
      return true;
    }
    if (n_ >= kMaxStates) return false;
    spill_.resize(static_cast<size_t>(n_ - kInline + 1));
    spill_[n_ - kInline] = state;
    ++n_;
    return true;
  }
  // Brent's cycle detection: past kFirstCycleCheck actions, the
  // configuration is saved at every power of two and compared with each
  // later one; a repeat is an endless chain of reductions.
  bool Step() {
    if (++steps_ < kFirstCycleCheck) return true;
    if (steps_ == next_save_) {
      saved_base_ = base_;
      saved_ov_ = ov_;
      saved_.resize(static_cast<size_t>(n_));
      for (int32_t i = 0; i < n_; ++i) saved_[i] = At(i);
      next_save_ *= 2;
      return true;
    }
    if (base_ != saved_base_ || ov_ != saved_ov_ || n_ != static_cast<int32_t>(saved_.size())) {
      return true;
    }
    for (int32_t i = n_ - 1; i >= 0; --i) {
      if (At(i) != saved_[i]) return true;
    }
    return false;
  }

  // As LrOverlay's: one local state above the base and none of the fixed
  // overlay left; the states above the base; Rebase (the local states
  // become states[0..n), none of the fixed overlay left).
  bool OneAboveBase() const { return ov_ == 0 && n_ == 1; }
  int32_t StatesAbove() const { return ov_ + n_; }
  int32_t Above(int32_t i) const { return i < ov_ ? overlay_[i] : At(i - ov_); }
  void Rebase(const LrStack::Node* base, const int32_t* states, int32_t n) {
    base_ = base;
    ov_ = 0;
    n_ = 0;
    for (int32_t i = 0; i < n; ++i) Push(states[i]);  // n came from a run of Push
    if (owner_) owner_->Read(base_);
  }

  // Where the simulation ended: the base node, how much of the fixed
  // overlay is left, and the local states above it.
  const LrStack::Node* base() const { return base_; }
  int32_t overlay_left() const { return ov_; }
  int32_t local_size() const { return n_; }
  int32_t At(int32_t i) const { return i < kInline ? inline_[i] : spill_[i - kInline]; }

  // A cyclic grammar (A =>+ A) can make the reductions on one terminal go
  // on forever, where Lark's parser hangs; the terminal is rejected instead.
  // Such a chain either repeats a configuration exactly (Step) or grows the
  // local overlay without bound (cut at kMaxStates).  Chains of fewer than
  // kFirstCycleCheck actions, all of them in real grammars, never reach
  // either check.
  static constexpr int64_t kFirstCycleCheck = 64;
  static constexpr int32_t kMaxStates = int32_t{1} << 16;

 private:
  static constexpr int32_t kInline = 64;
  const LrStack::Node* base_;
  const int32_t* overlay_;
  int32_t ov_;
  const LrOverlay* owner_;
  int32_t inline_[kInline];
  int32_t n_ = 0;
  std::vector<int32_t> spill_;
  int64_t steps_ = 0;
  int64_t next_save_ = kFirstCycleCheck;
  const LrStack::Node* saved_base_ = nullptr;
  int32_t saved_ov_ = -1;
  std::vector<int32_t> saved_;
};

// Would `terminal` be taken on top of `view`?  Nothing is written.
inline bool LrWouldTake(const LrTables& t, const LrOverlay& view, int32_t terminal) {
  LrScratch s(view.base(), view.overlay().data(), static_cast<int32_t>(view.overlay().size()),
              &view);
  return LrTaken(LrFeed(t, terminal, &s));
}

// The LR automaton as a graph, for analyses of stacks whose lower part is
// unknown: the states reachable from a start state, their predecessors, and
// the states each terminal's shift enters.
class LrPredecessors {
 public:
  // start_state < 0: every state counts as reachable.
  LrPredecessors(const LrTables& t, int32_t start_state);
  // Every reachable state with a path of `distance` transitions to `state`
  // (distance 0: state itself), sorted.
  std::vector<int32_t> Frontier(int32_t state, int32_t distance) const;
  // The borrow step below a known stack: a reduction by `rule` that pops
  // `distance` states below `state` (the deepest state known) can leave any
  // state p of Frontier(state, distance) under the new top, which is then
  // goto(p, lhs); p without that goto cannot be under a real stack.  Calls
  // fn(p, goto) for each, in p's order, until fn returns true (then true).
  template <class Fn>
  bool ForEachBorrow(const LrTables& lr, int32_t state, int32_t distance, int32_t rule,
                     Fn fn) const {
    const int32_t lhs = lr.rule_lhs[rule];
    for (int32_t p : Frontier(state, distance)) {
      const int32_t g = lr.Goto(p, lhs);
      if (g >= 0 && fn(p, g)) return true;
    }
    return false;
  }
  // Reachable states entered by shifting terminal t from a reachable state, sorted.
  const std::vector<int32_t>& EnteredBy(int32_t t) const { return entered_by_[t]; }
  const std::vector<uint8_t>& reachable() const { return reachable_; }

 private:
  std::vector<std::vector<int32_t>> pred_, entered_by_;
  std::vector<uint8_t> reachable_;
};

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_LR_CORE_H_
