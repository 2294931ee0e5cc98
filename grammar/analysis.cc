// Grammar analyses: see analysis.h.
#include "grammar/analysis.h"

#include <algorithm>

#include "grammar/base/check.h"

namespace cfgmask {

SymbolId StartSymbol(const Grammar& grammar, int start_index) {
  CFGMASK_CHECK(start_index >= 0 && start_index < static_cast<int>(grammar.start.size()));
  SymbolId start = grammar.FindNonterminal(grammar.start[start_index]);
  CFGMASK_CHECK(start >= 0);
  return start;
}

std::vector<bool> ProductiveSymbols(const Grammar& grammar) {
  std::vector<bool> productive(grammar.num_symbols(), false);
  for (int32_t t = 0; t < grammar.num_terminals(); ++t) productive[t] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (const Rule& r : grammar.rules) {
      if (productive[r.lhs]) continue;
      if (std::all_of(r.rhs.begin(), r.rhs.end(), [&](SymbolId s) { return productive[s]; })) {
        productive[r.lhs] = true;
        changed = true;
      }
    }
  }
  return productive;
}

std::vector<bool> UsefulRules(const Grammar& grammar, SymbolId start) {
  const std::vector<bool> productive = ProductiveSymbols(grammar);
  std::vector<bool> reachable(grammar.num_symbols(), false);
  std::vector<bool> useful(grammar.rules.size(), false);
  if (!productive[start]) return useful;
  reachable[start] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < grammar.rules.size(); ++i) {
      const Rule& r = grammar.rules[i];
      if (useful[i] || !reachable[r.lhs]) continue;
      if (!std::all_of(r.rhs.begin(), r.rhs.end(), [&](SymbolId s) { return productive[s]; }))
        continue;
      useful[i] = true;
      changed = true;
      for (SymbolId s : r.rhs) reachable[s] = true;
    }
  }
  return useful;
}

std::vector<uint8_t> NullableSymbols(const Grammar& grammar) {
  std::vector<uint8_t> nullable(grammar.num_symbols(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (const Rule& r : grammar.rules) {
      if (nullable[r.lhs]) continue;
      if (std::all_of(r.rhs.begin(), r.rhs.end(), [&](SymbolId s) { return nullable[s] != 0; })) {
        nullable[r.lhs] = 1;
        changed = true;
      }
    }
  }
  return nullable;
}

namespace {
bool Unite(std::vector<uint8_t>& dst, const std::vector<uint8_t>& src) {
  bool changed = false;
  for (size_t i = 0; i < dst.size(); ++i) {
    if (src[i] && !dst[i]) dst[i] = 1, changed = true;
  }
  return changed;
}
}  // namespace

std::vector<std::vector<uint8_t>> FirstSets(const Grammar& grammar,
                                            const std::vector<uint8_t>& nullable) {
  const int32_t T = grammar.num_terminals();
  std::vector<std::vector<uint8_t>> first(grammar.num_symbols(), std::vector<uint8_t>(T, 0));
  for (int32_t t = 0; t < T; ++t) first[t][t] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (const Rule& r : grammar.rules) {
      for (SymbolId x : r.rhs) {
        changed |= Unite(first[r.lhs], first[x]);
        if (!nullable[x]) break;
      }
    }
  }
  return first;
}

std::vector<std::vector<uint8_t>> FollowSets(const Grammar& grammar,
                                             const std::vector<uint8_t>& nullable,
                                             const std::vector<std::vector<uint8_t>>& first) {
  const int32_t T = grammar.num_terminals();
  std::vector<std::vector<uint8_t>> follow(grammar.num_symbols(), std::vector<uint8_t>(T, 0));
  for (bool changed = true; changed;) {
    changed = false;
    for (const Rule& r : grammar.rules) {
      for (size_t i = 0; i < r.rhs.size(); ++i) {
        bool rest_nullable = true;
        for (size_t j = i + 1; j < r.rhs.size(); ++j) {
          changed |= Unite(follow[r.rhs[i]], first[r.rhs[j]]);
          if (!nullable[r.rhs[j]]) {
            rest_nullable = false;
            break;
          }
        }
        if (rest_nullable) changed |= Unite(follow[r.rhs[i]], follow[r.lhs]);
      }
    }
  }
  return follow;
}

std::vector<int32_t> ShortestDerivations(const Grammar& grammar) {
  std::vector<int32_t> len(grammar.num_symbols(), kNoDerivation);
  for (int32_t t = 0; t < grammar.num_terminals(); ++t) len[t] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (const Rule& r : grammar.rules) {
      int64_t total = 0;
      for (SymbolId s : r.rhs) {
        if (len[s] == kNoDerivation) {
          total = kNoDerivation;
          break;
        }
        total += len[s];
      }
      if (total < len[r.lhs]) {
        len[r.lhs] = static_cast<int32_t>(total);
        changed = true;
      }
    }
  }
  return len;
}

}  // namespace cfgmask
