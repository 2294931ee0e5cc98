// Reference for is_never_legal: Bar-Hillel, Perles and Shamir's
// intersection of the grammar with a DFA over terminals, tested for
// emptiness.  Slow (O(|rules| n^3) rules for an n-state DFA); the tests
// compare NeverLegalAnalysis (streamline/never_legal.h) with it.
// Tested by never_legal_test.cc.
#ifndef CFGMASK_TESTS_REFERENCE_BAR_HILLEL_H_
#define CFGMASK_TESTS_REFERENCE_BAR_HILLEL_H_

#include <cstdint>
#include <span>

#include "grammar/grammar.h"
#include "streamline/never_legal.h"

namespace cfgmask {

struct BarHillelStats {
  int64_t triples = 0;  // nonterminals (p, A, q) of the intersection
  int64_t rules = 0;    // rules of the intersection
};

// Reference Bar-Hillel construction + emptiness: is L(start) ∩ L(dfa) ≠ ∅?
bool BarHillelNonEmpty(const Grammar& grammar, SymbolId start, const TerminalDfa& dfa,
                       BarHillelStats* stats = nullptr);

// is_never_legal by the reference: no sentence of L(start) contains x
// immediately followed by s (no cache, no filters).
bool BarHillelNeverLegal(const Grammar& grammar, SymbolId start, int32_t x,
                         std::span<const int32_t> s);

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_REFERENCE_BAR_HILLEL_H_
