// is_never_legal: the relation-fixpoint form of L ∩ Σ* X S Σ* = ∅ on the
// grammar, and the streamlining step on a store's item sequences.  See
// never_legal.h; the seed section "is_never_legal" states the reduction; the
// Bar-Hillel reference is tests/reference/bar_hillel.h.  Tested by
// never_legal_test.cc and streamline_store_test.cc.
#include "streamline/never_legal.h"

#include <algorithm>
#include <chrono>

#include "grammar/base/check.h"

namespace cfgmask {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Terminal sets as bit words.
using Bits = std::vector<uint64_t>;
bool OrInto(Bits& dst, const Bits& src) {
  bool changed = false;
  for (size_t i = 0; i < dst.size(); ++i) {
    uint64_t v = dst[i] | src[i];
    if (v != dst[i]) {
      dst[i] = v;
      changed = true;
    }
  }
  return changed;
}

}  // namespace

TerminalDfa SubstringDfa(int32_t num_terminals, std::span<const int32_t> w) {
  const int32_t m = static_cast<int32_t>(w.size());
  TerminalDfa dfa;
  dfa.num_states = m + 1;
  dfa.num_terminals = num_terminals;
  dfa.next.assign(static_cast<size_t>(m + 1) * num_terminals, 0);
  dfa.accepting.assign(m + 1, false);
  dfa.accepting[m] = true;
  // KMP failure function: fail[i] = longest proper border of w[0, i).
  std::vector<int32_t> fail(m + 1, 0);
  for (int32_t i = 1; i < m; ++i) {
    int32_t k = fail[i];
    while (k > 0 && w[k] != w[i]) k = fail[k];
    fail[i + 1] = w[k] == w[i] ? k + 1 : 0;
  }
  for (int32_t p = 0; p <= m; ++p) {
    for (int32_t t = 0; t < num_terminals; ++t) {
      int32_t q;
      if (p == m) {
        q = m;
      } else if (w[p] == t) {
        q = p + 1;
      } else {
        q = p == 0 ? 0 : dfa.next[static_cast<size_t>(fail[p]) * num_terminals + t];
      }
      dfa.next[static_cast<size_t>(p) * num_terminals + t] = q;
    }
  }
  return dfa;
}

TerminalDfa PrefixDfa(int32_t num_terminals, std::span<const int32_t> w) {
  const int32_t m = static_cast<int32_t>(w.size());
  TerminalDfa dfa;
  dfa.num_states = m + 2;
  dfa.num_terminals = num_terminals;
  const int32_t dead = m + 1;
  dfa.next.assign(static_cast<size_t>(m + 2) * num_terminals, dead);
  dfa.accepting.assign(m + 2, false);
  dfa.accepting[m] = true;
  for (int32_t p = 0; p < m; ++p) dfa.next[static_cast<size_t>(p) * num_terminals + w[p]] = p + 1;
  for (int32_t t = 0; t < num_terminals; ++t) dfa.next[static_cast<size_t>(m) * num_terminals + t] = m;
  return dfa;
}

NeverLegalAnalysis::NeverLegalAnalysis(const Grammar& grammar, int start_index)
    : grammar_(grammar),
      start_(StartSymbol(grammar, start_index)),
      num_terminals_(grammar.num_terminals()) {
  auto t0 = std::chrono::steady_clock::now();
  useful_rule_ = UsefulRules(grammar, start_);
  const int32_t num_symbols = grammar.num_symbols();
  std::vector<int32_t> useful_rules;
  std::vector<std::vector<int32_t>> rules_of(num_symbols);
  rules_using_.resize(num_symbols);
  for (size_t i = 0; i < grammar.rules.size(); ++i) {
    if (!useful_rule_[i]) continue;
    const int32_t r = static_cast<int32_t>(i);
    useful_rules.push_back(r);
    rules_of[grammar.rules[i].lhs].push_back(r);
    for (SymbolId s : grammar.rules[i].rhs)
      if (rules_using_[s].empty() || rules_using_[s].back() != r) rules_using_[s].push_back(r);
  }
  // Post-order of the nonterminals from the start symbol, so that the first
  // pass of the fixpoint meets a symbol's rules before the rules using it.
  std::vector<std::vector<SymbolId>> children(num_symbols);
  for (int32_t r : useful_rules)
    for (SymbolId s : grammar.rules[r].rhs)
      if (!grammar.IsTerminal(s)) children[grammar.rules[r].lhs].push_back(s);
  std::vector<bool> visited(num_symbols, false);
  std::vector<std::pair<SymbolId, size_t>> dfs{{start_, 0}};
  visited[start_] = true;
  while (!dfs.empty()) {
    const SymbolId sym = dfs.back().first;
    const size_t k = dfs.back().second++;
    if (k == children[sym].size()) {
      rule_order_.insert(rule_order_.end(), rules_of[sym].begin(), rules_of[sym].end());
      dfs.pop_back();
    } else if (!visited[children[sym][k]]) {
      visited[children[sym][k]] = true;
      dfs.push_back({children[sym][k], 0});
    }
  }
  const size_t words = (num_terminals_ + 63) / 64;
  // FIRST and LAST sets and nullability over the useful rules: exact for the
  // symbols that occur in a sentence's derivation.
  std::vector<bool> nullable(num_symbols, false);
  std::vector<Bits> first(num_symbols, Bits(words, 0)), last(num_symbols, Bits(words, 0));
  for (int32_t t = 0; t < num_terminals_; ++t) {
    first[t][t / 64] |= uint64_t{1} << (t % 64);
    last[t][t / 64] |= uint64_t{1} << (t % 64);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t i : useful_rules) {
      const Rule& r = grammar.rules[i];
      bool all_nullable = true;
      for (SymbolId s : r.rhs) {
        changed |= OrInto(first[r.lhs], first[s]);
        if (!nullable[s]) {
          all_nullable = false;
          break;
        }
      }
      for (auto it = r.rhs.rbegin(); it != r.rhs.rend(); ++it) {
        changed |= OrInto(last[r.lhs], last[*it]);
        if (!nullable[*it]) break;
      }
      if (all_nullable && !nullable[r.lhs]) {
        nullable[r.lhs] = true;
        changed = true;
      }
    }
  }
  occurs_.assign(num_terminals_, false);
  adjacent_.assign(static_cast<size_t>(num_terminals_) * num_terminals_, false);
  std::vector<Bits> follow(num_terminals_, Bits(words, 0));  // follow[x] = {y : x y adjacent}
  for (int32_t i : useful_rules) {
    const Rule& r = grammar.rules[i];
    for (size_t a = 0; a < r.rhs.size(); ++a) {
      if (grammar.IsTerminal(r.rhs[a])) occurs_[r.rhs[a]] = true;
      for (size_t b = a + 1; b < r.rhs.size(); ++b) {
        const Bits& lx = last[r.rhs[a]];
        const Bits& fy = first[r.rhs[b]];
        for (size_t w = 0; w < words; ++w) {
          for (uint64_t bits = lx[w]; bits; bits &= bits - 1) {
            int32_t x = static_cast<int32_t>(w * 64 + __builtin_ctzll(bits));
            OrInto(follow[x], fy);
          }
        }
        if (!nullable[r.rhs[b]]) break;
      }
    }
  }
  for (int32_t x = 0; x < num_terminals_; ++x)
    for (int32_t y = 0; y < num_terminals_; ++y)
      adjacent_[static_cast<size_t>(x) * num_terminals_ + y] = (follow[x][y / 64] >> (y % 64)) & 1;
  cache_.resize(num_terminals_);
  stats_.setup_seconds = SecondsSince(t0);
}

bool NeverLegalAnalysis::IsNeverLegal(int32_t x, std::span<const int32_t> s) {
  CFGMASK_CHECK(x >= 0 && x < num_terminals_);
  ++stats_.queries;
  std::vector<int32_t> key(s.begin(), s.end());
  auto& cache = cache_[x];
  if (auto it = cache.find(key); it != cache.end()) {
    ++stats_.cache_hits;
    return it->second;
  }
  // Never legal is inherited by every extension of S.
  for (size_t len = 0; len < key.size(); ++len) {
    auto it = cache.find(std::vector<int32_t>(key.begin(), key.begin() + len));
    if (it != cache.end() && it->second) {
      ++stats_.cache_hits;
      cache.emplace(key, true);
      return true;
    }
  }
  bool never = !occurs_[x];
  int32_t prev = x;
  for (size_t i = 0; !never && i < key.size(); ++i) {
    CFGMASK_CHECK(key[i] >= 0 && key[i] < num_terminals_);
    never = !CanBeAdjacent(prev, key[i]);
    prev = key[i];
  }
  if (never || key.size() <= 1) {
    // The filters are exact for |S| <= 1.
    ++stats_.filtered;
  } else {
    never = !Fixpoint(x, key);
  }
  cache.emplace(std::move(key), never);
  return never;
}

// Least fixpoint of M_A = ∪ M_X1 ∘ ... ∘ M_Xk over the useful rules, M_A a
// relation on the states of the KMP automaton of X S.  Returns true when X S
// occurs in some sentence.
bool NeverLegalAnalysis::Fixpoint(int32_t x, std::span<const int32_t> s) {
  auto t0 = std::chrono::steady_clock::now();
  ++stats_.fixpoints;
  std::vector<int32_t> w;
  w.push_back(x);
  w.insert(w.end(), s.begin(), s.end());
  CFGMASK_CHECK(w.size() < 64);
  const TerminalDfa dfa = SubstringDfa(num_terminals_, w);
  const int32_t n = dfa.num_states;
  const int32_t num_symbols = grammar_.num_symbols();
  std::vector<uint64_t> rel(static_cast<size_t>(num_symbols) * n, 0);
  for (int32_t t = 0; t < num_terminals_; ++t)
    for (int32_t p = 0; p < n; ++p)
      rel[static_cast<size_t>(t) * n + p] = uint64_t{1} << dfa.next[static_cast<size_t>(p) * num_terminals_ + t];
  std::vector<uint64_t> cur(n), nxt(n);
  // Worklist: a rule is re-evaluated when the relation of an rhs symbol grew.
  std::vector<int32_t> queue(rule_order_.rbegin(), rule_order_.rend());
  std::vector<bool> queued(grammar_.rules.size(), false);
  for (int32_t i : queue) queued[i] = true;
  while (!queue.empty()) {
    {
      const int32_t i = queue.back();
      queue.pop_back();
      queued[i] = false;
      const Rule& r = grammar_.rules[i];
      for (int32_t p = 0; p < n; ++p) cur[p] = uint64_t{1} << p;
      bool empty = false;
      for (SymbolId sym : r.rhs) {
        const uint64_t* m = &rel[static_cast<size_t>(sym) * n];
        uint64_t any = 0;
        for (int32_t p = 0; p < n; ++p) {
          uint64_t row = 0;
          for (uint64_t bits = cur[p]; bits; bits &= bits - 1) row |= m[__builtin_ctzll(bits)];
          nxt[p] = row;
          any |= row;
        }
        cur.swap(nxt);
        if (!any) {
          empty = true;
          break;
        }
      }
      if (empty) continue;
      uint64_t* dst = &rel[static_cast<size_t>(r.lhs) * n];
      bool changed = false;
      for (int32_t p = 0; p < n; ++p) {
        if ((dst[p] | cur[p]) != dst[p]) {
          dst[p] |= cur[p];
          changed = true;
        }
      }
      if (!changed) continue;
      for (int32_t user : rules_using_[r.lhs])
        if (!queued[user]) queued[user] = true, queue.push_back(user);
    }
  }
  const bool found = (rel[static_cast<size_t>(start_) * n + dfa.start] >> (n - 1)) & 1;
  stats_.fixpoint_seconds += SecondsSince(t0);
  return found;
}

bool NeverLegalStep::Dead(int32_t seq) {
  const int32_t* items = s_.seq_data.data() + s_.seq_offsets[seq];
  const int32_t n = s_.seq_offsets[seq + 1] - s_.seq_offsets[seq];
  if (n < 2) return false;
  answers_.SuffixIds(items, n, &suffix_);
  for (int32_t j = 0; j + 1 < n; ++j) {
    if (s_.KindOf(items[j]) != ItemKind::kEmit) continue;
    const bool possible = answers_.Get(suffix_[j], *x_, [&] {
      return x_->PossibleAfterEmit(items[j], items + j + 1, n - j - 1);
    });
    if (!possible) return true;
  }
  return false;
}

}  // namespace cfgmask
