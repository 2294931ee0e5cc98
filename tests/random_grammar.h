// Test helper: small random grammars (fixed seeds in the callers) for the
// streamlining analyses' tests: `num_t` one-letter terminals A, B, ... and
// nonterminals n0 (the start) .. n{num_n-1}, each with 1-3 rules of 0-3
// symbols.
#ifndef CFGMASK_TESTS_RANDOM_GRAMMAR_H_
#define CFGMASK_TESTS_RANDOM_GRAMMAR_H_

#include <random>
#include <string>

#include "grammar/grammar.h"

namespace cfgmask {

inline Grammar RandomGrammar(std::mt19937& rng, int num_t, int num_n) {
  Grammar g;
  for (int t = 0; t < num_t; ++t) {
    TerminalDef def;
    def.name = std::string(1, static_cast<char>('A' + t));
    def.value = def.name;
    g.terminals.push_back(def);
  }
  for (int n = 0; n < num_n; ++n) g.nonterminals.push_back("n" + std::to_string(n));
  g.start = {"n0"};
  for (int n = 0; n < num_n; ++n) {
    const int rules = 1 + rng() % 3;
    for (int r = 0; r < rules; ++r) {
      Rule rule;
      rule.lhs = num_t + n;
      const int len = rng() % 4;
      for (int i = 0; i < len; ++i) rule.rhs.push_back(rng() % (num_t + num_n));
      rule.order = r;
      g.rules.push_back(rule);
    }
  }
  return g;
}

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_RANDOM_GRAMMAR_H_
