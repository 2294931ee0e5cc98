// Reference Bar-Hillel construction: see bar_hillel.h.
#include "tests/reference/bar_hillel.h"

#include <algorithm>
#include <map>
#include <vector>

#include "grammar/base/check.h"

namespace cfgmask {

// Bar-Hillel, Perles and Shamir (1961), on a grammar binarised first so that
// the intersection has O(|rules| n^3) rules.  Triple (p, A, q) derives the
// strings of L(A) that take the DFA from p to q.
bool BarHillelNonEmpty(const Grammar& grammar, SymbolId start, const TerminalDfa& dfa,
                       BarHillelStats* stats) {
  const int32_t n = dfa.num_states;
  const int32_t num_t = grammar.num_terminals();
  CFGMASK_CHECK(dfa.num_terminals == num_t);
  struct BinRule {
    int32_t lhs, a, b;  // a, b = -1 when absent
  };
  std::vector<BinRule> bin;
  int32_t num_symbols = grammar.num_symbols();
  for (const Rule& r : grammar.rules) {
    const int32_t k = static_cast<int32_t>(r.rhs.size());
    if (k <= 2) {
      bin.push_back({r.lhs, k > 0 ? r.rhs[0] : -1, k > 1 ? r.rhs[1] : -1});
      continue;
    }
    int32_t lhs = r.lhs;
    for (int32_t i = 0; i + 2 < k; ++i) {
      int32_t helper = num_symbols++;
      bin.push_back({lhs, r.rhs[i], helper});
      lhs = helper;
    }
    bin.push_back({lhs, r.rhs[k - 2], r.rhs[k - 1]});
  }
  auto triple = [&](int32_t p, int32_t sym, int32_t q) {
    return (static_cast<int64_t>(sym) * n + p) * n + q;
  };
  const int64_t num_triples = static_cast<int64_t>(num_symbols) * n * n;
  // The intersected grammar: rule i has lhs triple_lhs[i] and rhs triples
  // rhs[2i], rhs[2i+1] (-1 when absent).
  std::vector<int64_t> rule_lhs, rule_rhs;
  for (const BinRule& b : bin) {
    for (int32_t p = 0; p < n; ++p) {
      if (b.a < 0) {
        rule_lhs.push_back(triple(p, b.lhs, p));
        rule_rhs.push_back(-1);
        rule_rhs.push_back(-1);
        continue;
      }
      for (int32_t q = 0; q < n; ++q) {
        if (b.b < 0) {
          rule_lhs.push_back(triple(p, b.lhs, q));
          rule_rhs.push_back(triple(p, b.a, q));
          rule_rhs.push_back(-1);
          continue;
        }
        for (int32_t r = 0; r < n; ++r) {
          rule_lhs.push_back(triple(p, b.lhs, q));
          rule_rhs.push_back(triple(p, b.a, r));
          rule_rhs.push_back(triple(r, b.b, q));
        }
      }
    }
  }
  const int64_t num_rules = static_cast<int64_t>(rule_lhs.size());
  if (stats) {
    stats->triples = num_triples;
    stats->rules = num_rules;
  }
  // Emptiness: a rule fires when all its rhs triples are productive.
  std::vector<int32_t> missing(num_rules, 0);
  std::vector<std::vector<int64_t>> uses(num_triples);
  std::vector<bool> productive(num_triples, false);
  std::vector<int64_t> work;
  auto mark = [&](int64_t t) {
    if (!productive[t]) {
      productive[t] = true;
      work.push_back(t);
    }
  };
  for (int32_t p = 0; p < n; ++p)
    for (int32_t t = 0; t < num_t; ++t) mark(triple(p, t, dfa.next[static_cast<size_t>(p) * num_t + t]));
  for (int64_t i = 0; i < num_rules; ++i) {
    for (int j = 0; j < 2; ++j) {
      int64_t t = rule_rhs[2 * i + j];
      if (t < 0) continue;
      if (j == 1 && t == rule_rhs[2 * i]) continue;  // same triple twice counts once
      ++missing[i];
      uses[t].push_back(i);
    }
    if (missing[i] == 0) mark(rule_lhs[i]);
  }
  while (!work.empty()) {
    int64_t t = work.back();
    work.pop_back();
    for (int64_t i : uses[t])
      if (--missing[i] == 0) mark(rule_lhs[i]);
  }
  for (int32_t q = 0; q < n; ++q)
    if (dfa.accepting[q] && productive[triple(dfa.start, start, q)]) return true;
  return false;
}

bool BarHillelNeverLegal(const Grammar& grammar, SymbolId start, int32_t x,
                         std::span<const int32_t> s) {
  std::vector<int32_t> w;
  w.push_back(x);
  w.insert(w.end(), s.begin(), s.end());
  return !BarHillelNonEmpty(grammar, start, SubstringDfa(grammar.num_terminals(), w));
}

}  // namespace cfgmask
