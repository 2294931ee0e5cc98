// LALR(1) parse tables: LR(0) item sets (lr0.cc), DeRemer-Pennello lookaheads
// (lalr.cc), conflict resolution as Lark does it (conflicts.cc: shift wins a
// shift/reduce conflict; reduce/reduce is resolved by rule priority, else an
// error), and the Bison export used as a test oracle (bison_export.cc).
// Tested by lalr_test.cc, bison_export_test.cc and the Lark differential test.
#ifndef CFGMASK_PARSER_LALR_H_
#define CFGMASK_PARSER_LALR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/base/status.h"
#include "grammar/base/stop_check.h"

namespace cfgmask {

// Action encoding in ParseTables::action: 0 = error; s+1 (> 0) = shift to
// state s; -(r+1) (< 0) = reduce by rule r; kAcceptAction = accept on $END.
constexpr int32_t kAcceptAction = INT32_MIN;

struct ParseTables {
  int32_t num_states = 0;
  int32_t num_terminals = 0;     // grammar terminals + 1: id num_terminals-1 is $END
  int32_t num_nonterminals = 0;
  int32_t end_terminal = 0;      // = num_terminals - 1
  std::vector<int32_t> action;   // [state * num_terminals + terminal]
  std::vector<int32_t> goto_table;  // [state * num_nonterminals + nonterminal index], -1 none
  std::vector<int32_t> rule_lhs;     // nonterminal index (symbol id - grammar terminals)
  std::vector<int32_t> rule_length;  // rhs length
  std::vector<int32_t> start_state;  // per Grammar::start entry
  std::vector<int32_t> accessing_symbol;  // per state; -1 for start states

  struct Conflict {
    int32_t state, terminal;
    bool shift_reduce;           // else reduce/reduce
    std::vector<int32_t> rules;  // rules involved
  };
  std::vector<Conflict> resolved_conflicts;  // s/r resolved as shift, r/r by priority

  int32_t Action(int32_t state, int32_t terminal) const {
    return action[static_cast<size_t>(state) * num_terminals + terminal];
  }
  int32_t Goto(int32_t state, int32_t nonterminal) const {
    return goto_table[static_cast<size_t>(state) * num_nonterminals + nonterminal];
  }
  // Terminals (grammar ids, $END excluded) that have an action in `state`:
  // Lark's contextual lexer scans with exactly these (plus %ignore ones).
  std::vector<int32_t> AcceptedTerminals(int32_t state) const;
  // One line per state: its actions and gotos, by symbol name.
  std::string DebugString(const Grammar& grammar) const;
};

struct LalrStats {
  int32_t lr0_states = 0;
  int32_t shift_reduce = 0;
  int32_t reduce_reduce_resolved = 0;
  double seconds = 0;
  // Bison's count of reduce/reduce conflicts before resolution: the sum over
  // (state, terminal) of (reductions - 1) where two or more meet.
  int32_t reduce_reduce = 0;
  int32_t lr0_items = 0;               // sum of closure sizes over the states
  int32_t nonterminal_transitions = 0;
  // Nonterminal transitions on cycles of the `reads` relation (loops through
  // nullable nonterminals), and the (reduction, terminal) lookaheads that
  // Lark's pooling of Follow sets along those cycles adds to DeRemer and
  // Pennello's LALR(1) sets (see parser/lalr.cc).  When the second is not
  // zero our conflict counts, like Lark's, may exceed Bison's.
  int32_t reads_cycle_transitions = 0;
  int32_t lark_extra_lookaheads = 0;
  double lr0_seconds = 0;              // phase times; `seconds` is their total
  double lookahead_seconds = 0;
  double table_seconds = 0;
};

// Resource bounds of the construction: a grammar that would exceed one is
// refused with kResourceLimit, naming the limit and the rule that grows the
// automaton most, instead of exhausting memory or time.
struct LalrLimits {
  int32_t max_states = 1000000;          // LR(0) states
  int64_t max_items = 100000000;         // LR(0) closure items, all states together
  int64_t max_table_bytes = int64_t{4} << 30;  // lookahead sets + action/goto tables
  double max_seconds = 600;              // wall time of the whole construction
  // The compile's budget and interrupt (grammar/base/stop_check.h), polled
  // inside the construction's loops; null: none.
  StopCheck* stop = nullptr;
};

// Builds LALR(1) tables.  An unresolved reduce/reduce conflict is an error
// naming the terminal, the rules and a sample input that reaches the state.
// `stats`, when given, is filled as far as the construction went (conflict
// counts included when the error is a reduce/reduce conflict); `out` is only
// written on success.
Status BuildParseTables(const Grammar& grammar, ParseTables* out, LalrStats* stats = nullptr,
                        const LalrLimits& limits = LalrLimits());

// Bison-style listing of the conflicts resolved in `tables`: for each state
// with conflicts, "State N conflicts: X shift/reduce, Y reduce/reduce" and one
// line per terminal saying which action won.  Empty when there were none.
std::string ConflictReport(const Grammar& grammar, const ParseTables& tables);

// The BNF as a Bison .y file (same rules, same order, %start per start
// symbol) for the Bison oracle.
std::string ExportBison(const Grammar& grammar, int start_index = 0);

}  // namespace cfgmask

#endif  // CFGMASK_PARSER_LALR_H_
