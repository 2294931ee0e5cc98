// The LALR(1) pipeline and queries on its result.  BuildParseTables runs the
// phases in order, each on the immutable output of the one before, and times
// each one: Augment + BuildLr0 (lr0.cc), ComputeLookaheads (lalr.cc, the
// DeRemer-Pennello relations), ResolveConflicts (conflicts.cc).
//
// AcceptedTerminals(state) is the set Lark's contextual lexer builds for a
// parser state (lark/lexer.py, ContextualLexer: the keys of
// parse_table.states[state] that are terminals), $END left out: every
// terminal with a shift or a reduce, after conflict resolution.
// Tested by lalr_test.cc (including the python.lark comparison with Lark).
#include <chrono>

#include "parser/lalr.h"
#include "parser/lr_core.h"
#include "parser/lalr_internal.h"

namespace cfgmask {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status BuildParseTables(const Grammar& grammar, ParseTables* out, LalrStats* stats,
                        const LalrLimits& limits) {
  using lalr_internal::AugmentedGrammar;
  LalrStats local;
  LalrStats& st = stats != nullptr ? *stats : local;
  st = LalrStats();

  auto phase = std::chrono::steady_clock::now();
  AugmentedGrammar g;
  CFGMASK_RETURN_IF_ERROR(lalr_internal::Augment(grammar, &g));
  lalr_internal::Lr0Automaton lr0;
  CFGMASK_RETURN_IF_ERROR(lalr_internal::BuildLr0(g, limits, SecondsSince(phase), &lr0));
  st.lr0_states = lr0.num_states;
  st.lr0_items = static_cast<int32_t>(lr0.closure.size());
  st.lr0_seconds = SecondsSince(phase);
  const int64_t table_bytes = lalr_internal::LookaheadTableBytes(g, lr0);
  if (table_bytes > limits.max_table_bytes) {
    return Status(ErrorCode::kResourceLimit,
                  "LALR(1) tables would need " + std::to_string(table_bytes) +
                      " bytes for " + std::to_string(lr0.num_states) + " states and " +
                      std::to_string(g.num_symbols()) + " symbols, more than the limit of " +
                      std::to_string(limits.max_table_bytes));
  }

  phase = std::chrono::steady_clock::now();
  lalr_internal::Lookaheads la;
  CFGMASK_RETURN_IF_ERROR(lalr_internal::ComputeLookaheads(g, lr0, limits.stop, &la));
  st.nonterminal_transitions = la.nonterminal_transitions;
  st.reads_cycle_transitions = la.reads_cycle_transitions;
  st.lark_extra_lookaheads = la.lark_extra_lookaheads;
  st.lookahead_seconds = SecondsSince(phase);
  if (st.lr0_seconds + st.lookahead_seconds > limits.max_seconds) {
    return Status(ErrorCode::kResourceLimit,
                  "LALR(1) lookaheads took " + std::to_string(st.lr0_seconds + st.lookahead_seconds) +
                      " s, more than the limit of " + std::to_string(limits.max_seconds) + " s");
  }

  phase = std::chrono::steady_clock::now();
  ParseTables tables;
  lalr_internal::ConflictCounts counts;
  const Status status = lalr_internal::ResolveConflicts(g, lr0, la, &tables, &counts, limits.stop);
  st.shift_reduce = counts.shift_reduce;
  st.reduce_reduce = counts.reduce_reduce;
  st.reduce_reduce_resolved = counts.reduce_reduce_resolved;
  st.table_seconds = SecondsSince(phase);
  st.seconds = st.lr0_seconds + st.lookahead_seconds + st.table_seconds;
  if (!status.ok()) return status;
  *out = std::move(tables);
  return Status::Ok();
}

std::vector<int32_t> ParseTables::AcceptedTerminals(int32_t state) const {
  std::vector<int32_t> terminals;
  const int32_t* row = action.data() + static_cast<size_t>(state) * num_terminals;
  for (int32_t t = 0; t < end_terminal; ++t) {
    if (row[t] != 0) terminals.push_back(t);
  }
  return terminals;
}

std::string ParseTables::DebugString(const Grammar& grammar) const {
  const int32_t grammar_terminals = grammar.num_terminals();
  auto terminal_name = [&](int32_t t) {
    return t < grammar_terminals ? grammar.terminals[t].name : std::string("$END");
  };
  std::string text;
  for (int32_t s = 0; s < num_states; ++s) {
    text += "state " + std::to_string(s);
    if (accessing_symbol[s] >= 0) text += " [" + grammar.SymbolName(accessing_symbol[s]) + "]";
    text += ":";
    const LrTables lr = LrTables::Of(*this);
    for (int32_t t = 0; t < num_terminals; ++t) {
      if (!lr.HasAction(s, t)) continue;
      text += " " + terminal_name(t) + "=";
      if (lr.AcceptsOn(s, t)) {
        text += "acc";
      } else if (lr.ShiftTo(s, t) >= 0) {
        text += "s" + std::to_string(lr.ShiftTo(s, t));
      } else {
        text += "r" + std::to_string(lr.ReduceBy(s, t));
      }
    }
    for (int32_t k = 0; k < num_nonterminals; ++k) {
      const int32_t target = Goto(s, k);
      if (target >= 0) text += " " + grammar.nonterminals[k] + "->" + std::to_string(target);
    }
    text += "\n";
  }
  return text;
}

}  // namespace cfgmask
