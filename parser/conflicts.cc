// Phase 3: the action and goto tables, with conflicts resolved as Lark's
// LALR_Analyzer.compute_lalr1_states does (lark/parsers/lalr_analysis.py):
//   - reduce/reduce first: among the rules that reduce on a terminal, the one
//     with the strictly highest priority wins; a tie at the top is an error
//     (even when a shift on the same terminal would have won);
//   - shift/reduce: the shift wins, silently.
// The accept action of an end state counts as the shift of $END, as in Bison,
// where it is the shift of `$end` in `$accept: S . $end`: a reduction on $END
// there is a shift/reduce conflict, and it loses, exactly as Lark's parser
// stops as soon as a reduction on $END lands in the end state.
//
// The conflict counts follow Bison's conflicts.c (count_state_sr_conflicts,
// count_state_rr_conflicts): one shift/reduce per (state, terminal) where a
// shift meets at least one reduction, and (n - 1) reduce/reduce per
// (state, terminal) where n >= 2 reductions meet, before any resolution.
// Tested by lalr_test.cc and bison_export_test.cc.
#include <algorithm>

#include "grammar/base/check.h"
#include "parser/lalr_internal.h"

namespace cfgmask {
namespace {

std::string GrammarRuleString(const Grammar& grammar, int32_t rule) {
  const Rule& r = grammar.rules[rule];
  std::string text = grammar.SymbolName(r.lhs) + ":";
  if (r.rhs.empty()) return text + " <empty>";
  for (SymbolId s : r.rhs) text += " " + grammar.SymbolName(s);
  return text;
}

std::string TerminalName(const Grammar& grammar, int32_t terminal) {
  return terminal < grammar.num_terminals() ? grammar.terminals[terminal].name : "$END";
}

}  // namespace

namespace lalr_internal {

Status ResolveConflicts(const AugmentedGrammar& g, const Lr0Automaton& lr0,
                        const Lookaheads& la, ParseTables* out, ConflictCounts* counts,
                        StopCheck* stop) {
  const Grammar& grammar = *g.grammar;
  ParseTables& t = *out;
  t = ParseTables();
  *counts = ConflictCounts();
  t.num_states = lr0.num_states;
  t.num_terminals = g.num_terminals;
  t.num_nonterminals = static_cast<int32_t>(grammar.nonterminals.size());
  t.end_terminal = g.num_terminals - 1;
  t.action.assign(static_cast<size_t>(t.num_states) * t.num_terminals, 0);
  t.goto_table.assign(static_cast<size_t>(t.num_states) * t.num_nonterminals, -1);
  for (int32_t r = 0; r < g.num_grammar_rules; ++r) {
    t.rule_lhs.push_back(g.rule_lhs[r]);
    t.rule_length.push_back(g.RuleLength(r));
  }
  t.start_state = lr0.start_state;
  const int32_t grammar_terminals = grammar.num_terminals();
  for (int32_t s : lr0.accessing_symbol) {
    t.accessing_symbol.push_back(s < 0 || s < grammar_terminals ? s : s - 1);
  }

  for (int32_t p = 0; p < t.num_states; ++p) {
    if (stop != nullptr) CFGMASK_RETURN_IF_ERROR(stop->Poll("lalr"));
    for (int32_t i = lr0.trans_begin[p]; i < lr0.trans_begin[p + 1]; ++i) {
      const int32_t sym = lr0.trans_symbol[i];
      const int32_t target = lr0.trans_target[i];
      if (g.IsTerminal(sym)) {
        t.action[static_cast<size_t>(p) * t.num_terminals + sym] = target + 1;
      } else {
        const int32_t k = sym - g.num_terminals;
        CFGMASK_CHECK(k < t.num_nonterminals);
        t.goto_table[static_cast<size_t>(p) * t.num_nonterminals + k] = target;
      }
    }
  }
  for (int32_t e : lr0.end_state) {
    t.action[static_cast<size_t>(e) * t.num_terminals + t.end_terminal] = kAcceptAction;
  }

  std::vector<ParseTables::Conflict> unresolved;
  std::vector<int32_t> rules;
  for (int32_t q = 0; q < t.num_states; ++q) {
    if (stop != nullptr) CFGMASK_RETURN_IF_ERROR(stop->Poll("lalr"));
    if (la.reduce_begin[q] == la.reduce_begin[q + 1]) continue;
    for (int32_t term = 0; term < t.num_terminals; ++term) {
      rules.clear();
      for (int32_t k = la.reduce_begin[q]; k < la.reduce_begin[q + 1]; ++k) {
        if (la.Has(k, term)) rules.push_back(la.reduce_rule[k]);
      }
      if (rules.empty()) continue;
      int32_t& cell = t.action[static_cast<size_t>(q) * t.num_terminals + term];
      const bool has_shift = cell != 0;
      if (has_shift) ++counts->shift_reduce;
      if (rules.size() >= 2) {
        counts->reduce_reduce += static_cast<int32_t>(rules.size()) - 1;
        std::stable_sort(rules.begin(), rules.end(), [&](int32_t a, int32_t b) {
          return grammar.rules[a].priority > grammar.rules[b].priority;
        });
        if (grammar.rules[rules[0]].priority == grammar.rules[rules[1]].priority) {
          unresolved.push_back({q, term, false, rules});
          continue;
        }
        ++counts->reduce_reduce_resolved;
        t.resolved_conflicts.push_back({q, term, false, rules});
      }
      if (has_shift) {
        t.resolved_conflicts.push_back({q, term, true, {rules[0]}});
      } else {
        cell = -(rules[0] + 1);
      }
    }
  }
  if (unresolved.empty()) return Status::Ok();
  const ParseTables::Conflict& c = unresolved.front();
  std::string message = grammar.WherePrefix(grammar.rules[c.rules[0]].lhs) +
                        "reduce/reduce conflict on terminal '" + TerminalName(grammar, c.terminal) +
                        "' between rule '" + GrammarRuleString(grammar, c.rules[0]) +
                        "' and rule '" + GrammarRuleString(grammar, c.rules[1]) +
                        "' (equal priority " + std::to_string(grammar.rules[c.rules[0]].priority) +
                        ") in LALR state " + std::to_string(c.state) + ", reached by: " +
                        SampleReaching(g, lr0, c.state);
  if (unresolved.size() > 1) {
    message += " (and " + std::to_string(unresolved.size() - 1) + " more reduce/reduce conflicts)";
  }
  return Status(ErrorCode::kGrammarSemantics, message);
}

}  // namespace lalr_internal

std::string ConflictReport(const Grammar& grammar, const ParseTables& tables) {
  std::vector<const ParseTables::Conflict*> sorted;
  for (const ParseTables::Conflict& c : tables.resolved_conflicts) sorted.push_back(&c);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ParseTables::Conflict* a, const ParseTables::Conflict* b) {
                     return a->state != b->state ? a->state < b->state : a->terminal < b->terminal;
                   });
  auto rule_text = [&](int32_t r) {
    return "rule " + std::to_string(r) + " (" + GrammarRuleString(grammar, r) + ")";
  };
  std::string report;
  for (size_t i = 0; i < sorted.size();) {
    const int32_t state = sorted[i]->state;
    size_t j = i;
    int32_t sr = 0, rr = 0;
    std::string details;
    for (; j < sorted.size() && sorted[j]->state == state; ++j) {
      const ParseTables::Conflict& c = *sorted[j];
      details += "    on " + TerminalName(grammar, c.terminal) + ": ";
      if (c.shift_reduce) {
        ++sr;
        details += std::string(c.terminal == tables.end_terminal ? "accept" : "shift") +
                   " wins over reduce by " + rule_text(c.rules[0]) + "\n";
      } else {
        rr += static_cast<int32_t>(c.rules.size()) - 1;
        details += "reduce by " + rule_text(c.rules[0]) + " [priority " +
                   std::to_string(grammar.rules[c.rules[0]].priority) + "] wins over";
        for (size_t k = 1; k < c.rules.size(); ++k) {
          details += std::string(k > 1 ? "," : "") + " " + rule_text(c.rules[k]) + " [priority " +
                     std::to_string(grammar.rules[c.rules[k]].priority) + "]";
        }
        details += "\n";
      }
    }
    report += "State " + std::to_string(state) + " conflicts:";
    if (sr > 0) report += " " + std::to_string(sr) + " shift/reduce";
    if (rr > 0) report += std::string(sr > 0 ? "," : "") + " " + std::to_string(rr) + " reduce/reduce";
    report += "\n" + details;
    i = j;
  }
  return report;
}

}  // namespace cfgmask
