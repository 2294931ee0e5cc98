// Reference for is_always_legal (seed, "Unlimited credit exploration"): the
// seed's own construction on the grammar's symbols, kept beside the tests
// to compare the product's exploration on the LR tables
// (streamline/exploration.h) with.  Like it, true only with a proof.
//
// The pushdown automaton has two states per symbol Z, "about to generate Z"
// and "Z finished", and its stack symbols are return addresses (r, i): "in
// rule r, continue at position i".  Exploration starts at (X finished,
// empty stack).  Popping an empty stack borrows a return address, any
// (r, i) with rhs_r[i-1] = Z (plus Z0, the bottom, when Z is the start
// symbol), and labels the edge with it; the other moves (rule choice,
// popping what was pushed) are epsilon.  The stack is bounded, so the NFA of
// these paths is finite.  A node is epsilon-coaccessible when it has read
// all of S, or has an epsilon edge to an epsilon-coaccessible node, or has
// no epsilon edge and, for every return address it could borrow, an edge
// with that label to an epsilon-coaccessible node.  The proof is
// epsilon-coaccessibility of (X finished, epsilon).  For S = Y1..Yk the node
// also records how many of the Yi were generated.  Only useful rules
// (productive, reachable) are used, which is sound: the stacks of real
// derivations only hold return addresses of useful rules.
// Tested by always_legal_test.cc.
#ifndef CFGMASK_TESTS_REFERENCE_SYMBOL_ALWAYS_LEGAL_H_
#define CFGMASK_TESTS_REFERENCE_SYMBOL_ALWAYS_LEGAL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "streamline/always_legal.h"

namespace cfgmask {

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

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_REFERENCE_SYMBOL_ALWAYS_LEGAL_H_
