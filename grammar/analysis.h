// Grammar analyses over the BNF (grammar/grammar.h), the one place they are
// computed: productive symbols, useful rules, nullable symbols, FIRST and
// FOLLOW sets over terminals, shortest derivations.  Each is a least
// fixpoint, so its result does not depend on the order rules are visited.
// Used by the store builder (which terminals may touch), the streamlining
// analyses and the tests' references.  Tested by grammar_analysis_test.cc.
#ifndef CFGMASK_GRAMMAR_ANALYSIS_H_
#define CFGMASK_GRAMMAR_ANALYSIS_H_

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace cfgmask {

// The symbol id of grammar.start[start_index]; CHECKs that it exists.
SymbolId StartSymbol(const Grammar& grammar, int start_index);
// Productive symbols (derive some terminal string); terminals are.
std::vector<bool> ProductiveSymbols(const Grammar& grammar);
// Rules usable in a derivation of a sentence from `start`: every rhs symbol
// productive and the lhs reachable from `start` through such rules.
std::vector<bool> UsefulRules(const Grammar& grammar, SymbolId start);
// Per symbol: derives the empty string (terminals never do).
std::vector<uint8_t> NullableSymbols(const Grammar& grammar);
// Per symbol, per terminal: FIRST (the terminals a derivation of the symbol
// can start with; a terminal's FIRST is itself).
std::vector<std::vector<uint8_t>> FirstSets(const Grammar& grammar,
                                            const std::vector<uint8_t>& nullable);
// Per symbol, per terminal: FOLLOW (the terminals that can come right after
// the symbol in a sentential form derived from any rule's lhs; no end
// marker).
std::vector<std::vector<uint8_t>> FollowSets(const Grammar& grammar,
                                             const std::vector<uint8_t>& nullable,
                                             const std::vector<std::vector<uint8_t>>& first);
// Per symbol: the fewest terminals of a string it derives (Knuth's
// shortest-derivation problem); kNoDerivation when it derives none.
constexpr int32_t kNoDerivation = INT32_MAX;
std::vector<int32_t> ShortestDerivations(const Grammar& grammar);

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_ANALYSIS_H_
