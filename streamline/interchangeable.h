// Interchangeable terminals (seed, "are_jointly_legal"): X and Y are
// interchangeable when swapping them in every rule leaves the multiset of
// BNF rules unchanged (rules as Lark expands the EBNF: aliases, priorities
// and rule order play no part in the language).  Then a terminal sequence is
// in the language iff its image under the swap is, so mask-store entries that
// differ by such swaps can be merged.  Swap invariance composes (a product of
// transpositions), so it is an equivalence; classes are its blocks of size
// >= 2, over the terminals that occur in some rule.
// Tested by interchangeable_test.cc.
#ifndef CFGMASK_STREAMLINE_INTERCHANGEABLE_H_
#define CFGMASK_STREAMLINE_INTERCHANGEABLE_H_

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace cfgmask {

// True iff swapping terminals x and y maps the multiset of rules to itself.
bool AreInterchangeable(const Grammar& grammar, int32_t x, int32_t y);

// Classes of mutually interchangeable terminals (each sorted, at least two
// members), ordered by their smallest terminal id.
std::vector<std::vector<int32_t>> InterchangeableClasses(const Grammar& grammar);

}  // namespace cfgmask

#endif  // CFGMASK_STREAMLINE_INTERCHANGEABLE_H_
