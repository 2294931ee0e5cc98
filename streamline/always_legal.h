// is_always_legal (seed, "Unlimited credit exploration"): a sufficient
// condition for "every viable prefix P X can be continued by S".  The
// function itself is not computable (seed, technical appendix); both classes
// here answer true only with a proof, false means "not proved".
//
//  * AlwaysLegalAnalysis is the seed's construction.  The pushdown automaton
//    has two states per symbol Z, "about to generate Z" and "Z finished", and
//    its stack symbols are return addresses (r, i): "in rule r, continue at
//    position i".  Exploration starts at (X finished, empty stack).  Popping
//    an empty stack borrows a return address, any (r, i) with rhs_r[i-1] = Z
//    (plus Z0, the bottom, when Z is the start symbol), and labels the edge
//    with it; the other moves (rule choice, popping what was pushed) are ε.
//    The stack is bounded, so the NFA of these paths is finite.  A node is
//    ε-coaccessible when it has read all of S, or has an ε edge to an
//    ε-coaccessible node, or has no ε edge and, for every return address it
//    could borrow, an edge with that label to an ε-coaccessible node.  The
//    proof is ε-coaccessibility of (X finished, ε).  For S = Y1..Yk the node
//    also records how many of the Yi were generated.
//  * LrAlwaysLegalAnalysis runs the same exploration on the LALR(1)
//    automaton the incremental parser uses: states are LR states, the local
//    stack is the known top of the parse stack, the moves are the table's
//    actions on the next symbol of S, and a reduction that pops below what
//    is known borrows every LR state that has a path to it.  Being
//    deterministic apart from borrowing, it proves things the symbol
//    automaton cannot when the grammar leaves the rule open after X (e.g.
//    S -> a S b | a b after a).
//
// Only useful rules (productive, reachable) are used, which is sound: the
// stacks of real derivations only hold return addresses of useful rules.
// Tested by always_legal_test.cc (the seed's a^n b^n example and a
// brute-force soundness check on random small grammars).
#ifndef CFGMASK_STREAMLINE_ALWAYS_LEGAL_H_
#define CFGMASK_STREAMLINE_ALWAYS_LEGAL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "parser/lalr.h"

namespace cfgmask {

struct AlwaysLegalOptions {
  int32_t max_stack = 6;       // bound on the local (pushed) stack
  int32_t max_nodes = 200000;  // exploration budget per query; beyond it: not proved
};

struct AlwaysLegalStats {
  int64_t queries = 0;
  int64_t proved = 0;
  int64_t nodes = 0;           // NFA nodes built, summed over queries
  int64_t budget_exceeded = 0; // queries that hit max_nodes
  double seconds = 0;
};

class AlwaysLegalAnalysis {
 public:
  AlwaysLegalAnalysis(const Grammar& grammar, int start_index, AlwaysLegalOptions options = {});

  // True only if every viable prefix ending in x can be continued by s.
  bool IsAlwaysLegal(int32_t x, std::span<const int32_t> s);
  const AlwaysLegalStats& stats() const { return stats_; }

 private:
  const Grammar& grammar_;
  AlwaysLegalOptions options_;
  SymbolId start_;
  std::vector<int32_t> addr_base_;     // return address (r, i) = addr_base_[r] + i - 1
  std::vector<int32_t> addr_rule_, addr_pos_;
  std::vector<std::vector<int32_t>> returns_to_;  // per symbol Z: addresses with rhs[i-1] = Z
  std::vector<std::vector<int32_t>> rules_of_;    // per nonterminal: useful rules
  std::vector<bool> nullable_;
  std::vector<std::vector<bool>> first_;          // per symbol, per terminal
  std::vector<std::vector<bool>> rule_first_;     // per rule: FIRST(rhs)
  std::vector<bool> rule_nullable_;
  AlwaysLegalStats stats_;
};

class LrAlwaysLegalAnalysis {
 public:
  // `tables` must be BuildParseTables(grammar) and outlive this object.
  LrAlwaysLegalAnalysis(const Grammar& grammar, const ParseTables& tables, int start_index,
                        AlwaysLegalOptions options = {});

  bool IsAlwaysLegal(int32_t x, std::span<const int32_t> s);
  const AlwaysLegalStats& stats() const { return stats_; }

 private:
  const ParseTables& tables_;
  AlwaysLegalOptions options_;
  int32_t num_grammar_terminals_;
  std::vector<std::vector<int32_t>> pred_;     // per LR state: states with an edge to it
  std::vector<std::vector<int32_t>> after_;    // per terminal: reachable states entered by it
  AlwaysLegalStats stats_;
};

}  // namespace cfgmask

#endif  // CFGMASK_STREAMLINE_ALWAYS_LEGAL_H_
