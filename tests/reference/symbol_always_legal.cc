// Reference: the seed's symbol pushdown automaton for is_always_legal.  See
// symbol_always_legal.h.  Tested by always_legal_test.cc.
#include "tests/reference/symbol_always_legal.h"

#include <chrono>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "grammar/base/check.h"
#include "streamline/never_legal.h"

namespace cfgmask {
namespace {

enum class NodeKind : uint8_t {
  kAccept,  // all of S generated
  kDead,    // no move, or cut by a bound
  kAny,     // ε edges: ε-coaccessible if one successor is
  kAll,     // borrowing edges: ε-coaccessible if every successor is
};

// The NFA of the exploration, built breadth first from the root, then solved
// for ε-coaccessibility as a least fixpoint (counter per node, reverse edges).
class ExplorationGraph {
 public:
  using Key = std::vector<int32_t>;

  int32_t Intern(const Key& key) {
    std::string bytes(reinterpret_cast<const char*>(key.data()), key.size() * sizeof(int32_t));
    auto [it, inserted] = ids_.emplace(std::move(bytes), static_cast<int32_t>(kind_.size()));
    if (inserted) {
      kind_.push_back(NodeKind::kDead);
      succ_.emplace_back();
      keys_.push_back(key);
    }
    return it->second;
  }
  int32_t size() const { return static_cast<int32_t>(kind_.size()); }
  const Key& key(int32_t id) const { return keys_[id]; }
  void Set(int32_t id, NodeKind kind, std::vector<int32_t> succ) {
    kind_[id] = kind;
    succ_[id] = std::move(succ);
  }

  // Expands nodes in creation order until done or `max_nodes` are built
  // (unexpanded nodes stay dead).  Returns false when the budget was hit.
  template <typename Expand>
  bool Explore(int32_t max_nodes, Expand&& expand) {
    for (int32_t id = 0; id < size(); ++id) {
      if (size() > max_nodes) return false;
      expand(id);
    }
    return true;
  }

  bool Coaccessible(int32_t root) const {
    const int32_t n = size();
    std::vector<std::vector<int32_t>> rev(n);
    std::vector<int32_t> need(n, 0);
    std::vector<bool> good(n, false);
    std::vector<int32_t> work;
    for (int32_t v = 0; v < n; ++v) {
      for (int32_t w : succ_[v]) rev[w].push_back(v);
      switch (kind_[v]) {
        case NodeKind::kAccept: need[v] = 0; break;
        case NodeKind::kDead: need[v] = -1; break;
        case NodeKind::kAny: need[v] = succ_[v].empty() ? -1 : 1; break;
        case NodeKind::kAll: need[v] = static_cast<int32_t>(succ_[v].size()); break;
      }
      if (need[v] == 0) {
        good[v] = true;
        work.push_back(v);
      }
    }
    while (!work.empty()) {
      int32_t w = work.back();
      work.pop_back();
      for (int32_t v : rev[w]) {
        if (good[v] || need[v] <= 0) continue;
        if (--need[v] == 0) {
          good[v] = true;
          work.push_back(v);
        }
      }
    }
    return good[root];
  }

 private:
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<NodeKind> kind_;
  std::vector<std::vector<int32_t>> succ_;
  std::vector<Key> keys_;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr int32_t kAbout = 0;     // "about to generate Z"
constexpr int32_t kFinished = 1;  // "Z finished"

}  // namespace

AlwaysLegalAnalysis::AlwaysLegalAnalysis(const Grammar& grammar, int start_index,
                                         AlwaysLegalOptions options)
    : grammar_(grammar), options_(options), start_(StartSymbol(grammar, start_index)) {
  const std::vector<bool> useful = UsefulRules(grammar, start_);
  const int32_t num_symbols = grammar.num_symbols();
  const int32_t num_t = grammar.num_terminals();
  const int32_t num_rules = static_cast<int32_t>(grammar.rules.size());
  returns_to_.resize(num_symbols);
  rules_of_.resize(num_symbols);
  addr_base_.resize(num_rules);
  for (int32_t r = 0; r < num_rules; ++r) {
    const Rule& rule = grammar.rules[r];
    addr_base_[r] = static_cast<int32_t>(addr_rule_.size());
    for (size_t i = 1; i <= rule.rhs.size(); ++i) {
      if (useful[r]) returns_to_[rule.rhs[i - 1]].push_back(static_cast<int32_t>(addr_rule_.size()));
      addr_rule_.push_back(r);
      addr_pos_.push_back(static_cast<int32_t>(i));
    }
    if (useful[r]) rules_of_[rule.lhs].push_back(r);
  }
  nullable_.assign(num_symbols, false);
  first_.assign(num_symbols, std::vector<bool>(num_t, false));
  for (int32_t t = 0; t < num_t; ++t) first_[t][t] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < num_rules; ++r) {
      if (!useful[r]) continue;
      const Rule& rule = grammar.rules[r];
      bool all_nullable = true;
      for (SymbolId s : rule.rhs) {
        for (int32_t t = 0; t < num_t; ++t) {
          if (first_[s][t] && !first_[rule.lhs][t]) {
            first_[rule.lhs][t] = true;
            changed = true;
          }
        }
        if (!nullable_[s]) {
          all_nullable = false;
          break;
        }
      }
      if (all_nullable && !nullable_[rule.lhs]) {
        nullable_[rule.lhs] = true;
        changed = true;
      }
    }
  }
  rule_first_.assign(num_rules, std::vector<bool>(num_t, false));
  rule_nullable_.assign(num_rules, false);
  for (int32_t r = 0; r < num_rules; ++r) {
    bool all_nullable = true;
    for (SymbolId s : grammar.rules[r].rhs) {
      for (int32_t t = 0; t < num_t; ++t)
        if (first_[s][t]) rule_first_[r][t] = true;
      if (!nullable_[s]) {
        all_nullable = false;
        break;
      }
    }
    rule_nullable_[r] = all_nullable;
  }
}

// Node key: {generated, kind, symbol, local stack of return addresses...}.
bool AlwaysLegalAnalysis::IsAlwaysLegal(int32_t x, std::span<const int32_t> s) {
  auto t0 = std::chrono::steady_clock::now();
  ++stats_.queries;
  CFGMASK_CHECK(x >= 0 && x < grammar_.num_terminals());
  if (s.empty()) {
    ++stats_.proved;
    return true;
  }
  const int32_t k = static_cast<int32_t>(s.size());
  ExplorationGraph graph;
  const int32_t root = graph.Intern({0, kFinished, x});
  // Successor after the symbol before return address `a` is finished.
  auto resume = [&](int32_t j, int32_t a, const std::vector<int32_t>& stack) {
    const Rule& rule = grammar_.rules[addr_rule_[a]];
    const int32_t i = addr_pos_[a];
    ExplorationGraph::Key key{j, kFinished, rule.lhs};
    if (i < static_cast<int32_t>(rule.rhs.size())) key = {j, kAbout, rule.rhs[i]};
    key.insert(key.end(), stack.begin(), stack.end());
    if (i < static_cast<int32_t>(rule.rhs.size())) key.push_back(a + 1);
    return graph.Intern(key);
  };
  const bool complete = graph.Explore(options_.max_nodes, [&](int32_t id) {
    const ExplorationGraph::Key key = graph.key(id);
    const int32_t j = key[0], kind = key[1], sym = key[2];
    std::vector<int32_t> stack(key.begin() + 3, key.end());
    if (j == k) return graph.Set(id, NodeKind::kAccept, {});
    const int32_t y = s[j];
    std::vector<int32_t> succ;
    if (kind == kAbout) {
      if (grammar_.IsTerminal(sym)) {
        if (sym != y) return graph.Set(id, NodeKind::kDead, {});
        ExplorationGraph::Key next{j + 1, kFinished, sym};
        next.insert(next.end(), stack.begin(), stack.end());
        succ.push_back(graph.Intern(next));
        return graph.Set(id, NodeKind::kAny, std::move(succ));
      }
      for (int32_t r : rules_of_[sym]) {
        if (!rule_first_[r][y] && !rule_nullable_[r]) continue;
        const Rule& rule = grammar_.rules[r];
        ExplorationGraph::Key next;
        if (rule.rhs.empty()) {
          next = {j, kFinished, sym};
          next.insert(next.end(), stack.begin(), stack.end());
        } else {
          if (static_cast<int32_t>(stack.size()) >= options_.max_stack) continue;
          next = {j, kAbout, rule.rhs[0]};
          next.insert(next.end(), stack.begin(), stack.end());
          next.push_back(addr_base_[r]);  // (r, 1)
        }
        succ.push_back(graph.Intern(next));
      }
      return graph.Set(id, NodeKind::kAny, std::move(succ));
    }
    if (!stack.empty()) {
      const int32_t a = stack.back();
      stack.pop_back();
      succ.push_back(resume(j, a, stack));
      return graph.Set(id, NodeKind::kAny, std::move(succ));
    }
    // Borrow: the real stack's top is one of these; Z0 (end of input) when
    // the start symbol is finished can never be followed by y.
    if (sym == start_) return graph.Set(id, NodeKind::kDead, {});
    for (int32_t a : returns_to_[sym]) succ.push_back(resume(j, a, stack));
    graph.Set(id, NodeKind::kAll, std::move(succ));
  });
  if (!complete) ++stats_.budget_exceeded;
  stats_.nodes += graph.size();
  const bool proved = graph.Coaccessible(root);
  stats_.proved += proved;
  stats_.seconds += SecondsSince(t0);
  return proved;
}

}  // namespace cfgmask
