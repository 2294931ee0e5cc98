// is_never_legal (seed, "is_never_legal").
//
// NeverLegalStep is the streamlining step on a compiled store: a row whose
// item sequence no hypothesis can accept is deleted: after some Emit of the
// sequence, no configuration takes the rest (the "some" question of the one
// exploration, streamline/exploration.h).
//
// On the grammar, for terminal sequences: X followed by S never occurs in a
// sentence, i.e. L ∩ Σ* X S Σ* = ∅.  Two constructions of the same
// emptiness test (research queries and the tests; the store's step above
// works on items, which carry the lexer's context too):
//
//  * BarHillelNonEmpty, the reference (tests/reference/bar_hillel.h): the
//    grammar is binarised, intersected
//    with a DFA over terminals by Bar-Hillel's triple construction
//    (nonterminals (p, A, q), one rule per choice of intermediate states),
//    and the intersection is tested for emptiness by the classic productive-
//    nonterminal worklist (one counter per rule).
//  * NeverLegalAnalysis, the fast path: the same least fixpoint, computed
//    per grammar symbol as a relation on DFA states (bit rows, at most 64
//    states), M_A = ∪_{A -> X1..Xk} M_X1 ∘ ... ∘ M_Xk, so that no triple is
//    materialised; (start, final) ∈ M_S decides.  Before that, two exact
//    filters shared by all queries: X must occur in some sentence, and every
//    adjacent pair of X S must be adjacent in some sentence (the pair
//    relation, computed once from FIRST/LAST over the useful rules).  Results
//    are cached per (X, S); a cached "never" for a prefix of S decides S.
//
// Tested by streamline_store_test.cc (the step: masks identical with and
// without it) and never_legal_test.cc (the two agree on random small grammars and
// on pairs/triples of python.lark terminals; both agree with enumeration).
#ifndef CFGMASK_STREAMLINE_NEVER_LEGAL_H_
#define CFGMASK_STREAMLINE_NEVER_LEGAL_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "grammar/analysis.h"
#include "grammar/grammar.h"
#include "maskstore/compiled_store.h"
#include "streamline/exploration.h"

namespace cfgmask {

// A complete DFA over the terminals of a grammar.
struct TerminalDfa {
  int32_t num_states = 0;
  int32_t num_terminals = 0;
  int32_t start = 0;
  std::vector<int32_t> next;     // [state * num_terminals + terminal]
  std::vector<bool> accepting;   // per state
};

// The DFA of Σ* w Σ* (Knuth-Morris-Pratt automaton of w; |w| + 1 states, the
// last one absorbing and accepting).
TerminalDfa SubstringDfa(int32_t num_terminals, std::span<const int32_t> w);
// The DFA of w Σ* (|w| + 2 states: the prefix chain, accept, dead).
TerminalDfa PrefixDfa(int32_t num_terminals, std::span<const int32_t> w);

class NeverLegalAnalysis {
 public:
  NeverLegalAnalysis(const Grammar& grammar, int start_index);

  // True iff no sentence of the language contains x immediately followed by s.
  bool IsNeverLegal(int32_t x, std::span<const int32_t> s);

  // x y occur adjacently in some sentence (exact, precomputed).
  bool CanBeAdjacent(int32_t x, int32_t y) const {
    return adjacent_[static_cast<size_t>(x) * num_terminals_ + y];
  }
  // x occurs in some sentence.
  bool Occurs(int32_t x) const { return occurs_[x]; }

  struct Stats {
    double setup_seconds = 0;     // productive/useful rules, FIRST/LAST, pairs
    int64_t queries = 0;
    int64_t cache_hits = 0;       // answered from the (X, S) cache or a prefix
    int64_t filtered = 0;         // answered by the occurrence / pair filters
    int64_t fixpoints = 0;        // relation fixpoints run
    double fixpoint_seconds = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  bool Fixpoint(int32_t x, std::span<const int32_t> s);

  const Grammar& grammar_;
  SymbolId start_;
  int32_t num_terminals_;
  std::vector<bool> useful_rule_;
  std::vector<int32_t> rule_order_;  // useful rules, callees' rules before callers'
  std::vector<std::vector<int32_t>> rules_using_;  // per symbol: useful rules with it in rhs
  std::vector<bool> occurs_;
  std::vector<bool> adjacent_;  // [x * T + y]
  std::vector<std::map<std::vector<int32_t>, bool>> cache_;  // per x
  Stats stats_;
};

// The deletion step: Dead(seq) is true when no hypothesis can accept item
// sequence `seq`.  Queries are cached by suffix.
class NeverLegalStep {
 public:
  NeverLegalStep(const CompiledStore& store, ItemExploration* exploration)
      : s_(store), x_(exploration) {}
  bool Dead(int32_t seq);
  const StepQueries& counts() const { return answers_.counts(); }
  // Frees the cached answers (counts() stays).
  void Release() { answers_.Release(); }

 private:
  const CompiledStore& s_;
  ItemExploration* x_;
  SuffixAnswers answers_;
  std::vector<int32_t> suffix_;  // SuffixIds of the sequence asked about
};

}  // namespace cfgmask

#endif  // CFGMASK_STREAMLINE_NEVER_LEGAL_H_
