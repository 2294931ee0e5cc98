// Internal structures passed between the phases of the LALR(1) construction:
// the augmented grammar (one root rule `$root_<start>: <start>` per start
// symbol, as lark.parsers.grammar_analysis builds it for its LR(0) machine),
// the LR(0) automaton (lr0.cc), the DeRemer-Pennello lookaheads (lalr.cc) and
// the conflict resolution that fills ParseTables (conflicts.cc).  Each phase
// takes the previous one's immutable output; everything is dense int32 ids in
// CSR arrays.  Not part of the public API.
// Tested by lalr_test.cc and bison_export_test.cc.
#ifndef CFGMASK_PARSER_LALR_INTERNAL_H_
#define CFGMASK_PARSER_LALR_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/base/status.h"
#include "parser/lalr.h"

namespace cfgmask {
namespace lalr_internal {

// Symbols inside the construction: [0, num_terminals) are terminals with
// $END last (= ParseTables::end_terminal), then the nonterminals: the
// grammar's in order, then one root nonterminal per start symbol.
struct AugmentedGrammar {
  const Grammar* grammar = nullptr;
  int32_t num_terminals = 0;          // grammar terminals + 1 ($END)
  int32_t num_nonterminals = 0;       // grammar nonterminals + starts
  int32_t num_grammar_rules = 0;      // rules [0, this) are the grammar's
  int32_t num_rules = 0;              // + one root rule per start
  std::vector<int32_t> rule_lhs;      // nonterminal index
  std::vector<int32_t> rhs_begin;     // CSR into rhs, size num_rules + 1
  std::vector<int32_t> rhs;           // construction symbol ids
  std::vector<int32_t> rules_of_begin;  // CSR: rules per nonterminal
  std::vector<int32_t> rules_of;
  std::vector<int32_t> start_symbol;  // per start: construction symbol id
  std::vector<uint8_t> nullable;      // per nonterminal

  int32_t num_symbols() const { return num_terminals + num_nonterminals; }
  bool IsTerminal(int32_t symbol) const { return symbol < num_terminals; }
  int32_t RuleLength(int32_t rule) const { return rhs_begin[rule + 1] - rhs_begin[rule]; }
  // LR(0) item ids: item_base(rule) + dot, dot in [0, RuleLength(rule)].
  int32_t ItemBase(int32_t rule) const { return rhs_begin[rule] + rule; }
  std::string SymbolName(int32_t symbol) const;
  std::string RuleString(int32_t rule) const;  // "lhs: a b c" / "lhs: <empty>"
};

// Checks the grammar (start symbols, undefined and unreachable rules,
// duplicates) and builds the augmented view with nullable sets.
Status Augment(const Grammar& grammar, AugmentedGrammar* out);

struct Lr0Automaton {
  int32_t num_states = 0;
  std::vector<int32_t> item_rule;   // per item id
  std::vector<int32_t> item_dot;
  std::vector<int32_t> item_next;   // symbol after the dot, -1 when complete
  std::vector<int32_t> closure_begin, closure;          // CSR per state, kernel first
  std::vector<int32_t> kernel_size;                     // per state
  std::vector<int32_t> trans_begin, trans_symbol, trans_target;  // CSR, by symbol
  std::vector<int32_t> accessing_symbol;                // -1 for start states
  std::vector<int32_t> start_state;                     // per start symbol
  std::vector<int32_t> end_state;   // per start: Goto(start_state, start symbol)

  // -1 when `state` has no transition on `symbol`.
  int32_t Goto(int32_t state, int32_t symbol) const;
  // Position of the transition in trans_* arrays, -1 when none.
  int32_t TransitionIndex(int32_t state, int32_t symbol) const;
};

Lr0Automaton BuildLr0(const AugmentedGrammar& g);
// The same under `limits` (states, closure items, seconds since `start`):
// kResourceLimit naming the rule whose items fill the most kernels.
Status BuildLr0(const AugmentedGrammar& g, const LalrLimits& limits, double seconds_used,
                Lr0Automaton* out);
// Bytes ComputeLookaheads and ResolveConflicts will allocate for `lr0`.
int64_t LookaheadTableBytes(const AugmentedGrammar& g, const Lr0Automaton& lr0);

// Terminal sets as 64-bit word bitsets.
struct Lookaheads {
  int32_t words = 0;                        // per set
  std::vector<int32_t> reduce_begin;        // CSR per state
  std::vector<int32_t> reduce_rule;         // grammar rule of each reduction
  std::vector<uint64_t> sets;               // [reduction * words ...]
  int32_t nonterminal_transitions = 0;
  int32_t reads_cycle_transitions = 0;      // see lalr.cc
  int32_t lark_extra_lookaheads = 0;        // see lalr.cc

  bool Has(int32_t reduction, int32_t terminal) const {
    return (sets[static_cast<size_t>(reduction) * words + (terminal >> 6)] >> (terminal & 63)) & 1;
  }
};

Lookaheads ComputeLookaheads(const AugmentedGrammar& g, const Lr0Automaton& lr0);
// The same, polling `stop` (may be null) in its loops: its error, if any.
Status ComputeLookaheads(const AugmentedGrammar& g, const Lr0Automaton& lr0, StopCheck* stop,
                         Lookaheads* out);

struct ConflictCounts {
  int32_t shift_reduce = 0;    // Bison's count: (state, terminal) pairs
  int32_t reduce_reduce = 0;   // Bison's count: sum of (reductions - 1)
  int32_t reduce_reduce_resolved = 0;
};

// Fills the action and goto tables, resolving conflicts as Lark does.  An
// unresolved reduce/reduce conflict is a kGrammarSemantics error; `counts` is
// filled either way.
Status ResolveConflicts(const AugmentedGrammar& g, const Lr0Automaton& lr0,
                        const Lookaheads& la, ParseTables* out, ConflictCounts* counts,
                        StopCheck* stop = nullptr);

// Shortest sequence of symbol names that leads from a start state to `state`.
std::string SampleReaching(const AugmentedGrammar& g, const Lr0Automaton& lr0, int32_t state);

}  // namespace lalr_internal
}  // namespace cfgmask

#endif  // CFGMASK_PARSER_LALR_INTERNAL_H_
