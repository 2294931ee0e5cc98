// Interchangeable terminals by swap invariance of the rule multiset.  A swap
// only moves rules that mention x or y, so each pair costs the size of their
// occurrence lists: the rules touching x or y, swapped, must be the same
// multiset as before.  See interchangeable.h; the seed lists seven classes
// for python.lark.  Tested by interchangeable_test.cc.
#include "streamline/interchangeable.h"

#include <algorithm>
#include <map>

#include "grammar/base/check.h"

namespace cfgmask {
namespace {

using RuleText = std::vector<int32_t>;  // lhs, then rhs

RuleText Text(const Rule& rule) {
  RuleText text{rule.lhs};
  text.insert(text.end(), rule.rhs.begin(), rule.rhs.end());
  return text;
}

// Rules (indices) mentioning each terminal, each rule once.
std::vector<std::vector<int32_t>> Occurrences(const Grammar& grammar) {
  std::vector<std::vector<int32_t>> occ(grammar.num_terminals());
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    for (SymbolId s : grammar.rules[r].rhs) {
      if (!grammar.IsTerminal(s)) continue;
      if (occ[s].empty() || occ[s].back() != static_cast<int32_t>(r))
        occ[s].push_back(static_cast<int32_t>(r));
    }
  }
  return occ;
}

bool SwapInvariant(const Grammar& grammar, const std::vector<std::vector<int32_t>>& occ,
                   int32_t x, int32_t y) {
  if (occ[x].size() != occ[y].size()) return false;
  std::vector<int32_t> touched;
  std::set_union(occ[x].begin(), occ[x].end(), occ[y].begin(), occ[y].end(),
                 std::back_inserter(touched));
  std::map<RuleText, int32_t> balance;
  for (int32_t r : touched) {
    RuleText text = Text(grammar.rules[r]);
    ++balance[text];
    for (int32_t& s : text) s = s == x ? y : s == y ? x : s;
    --balance[text];
  }
  return std::all_of(balance.begin(), balance.end(), [](const auto& e) { return e.second == 0; });
}

}  // namespace

bool AreInterchangeable(const Grammar& grammar, int32_t x, int32_t y) {
  CFGMASK_CHECK(grammar.IsTerminal(x) && grammar.IsTerminal(y));
  return SwapInvariant(grammar, Occurrences(grammar), x, y);
}

std::vector<std::vector<int32_t>> InterchangeableClasses(const Grammar& grammar) {
  const auto occ = Occurrences(grammar);
  const int32_t num_t = grammar.num_terminals();
  std::vector<bool> placed(num_t, false);
  std::vector<std::vector<int32_t>> classes;
  for (int32_t x = 0; x < num_t; ++x) {
    if (placed[x] || occ[x].empty()) continue;
    std::vector<int32_t> cls{x};
    // An equivalence: comparing with the class's first member suffices.
    for (int32_t y = x + 1; y < num_t; ++y) {
      if (!placed[y] && !occ[y].empty() && SwapInvariant(grammar, occ, x, y)) {
        cls.push_back(y);
        placed[y] = true;
      }
    }
    if (cls.size() >= 2) classes.push_back(std::move(cls));
  }
  return classes;
}

}  // namespace cfgmask
