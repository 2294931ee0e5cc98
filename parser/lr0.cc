// Phase 1 of the LALR(1) construction: the augmented grammar and its LR(0)
// automaton (Aho, Sethi & Ullman, "Compilers", sec. 4.7, the canonical
// collection of sets of LR(0) items, Fig. 4.34).
//
// The augmentation is Lark's (lark/parsers/grammar_analysis.py): each start
// symbol S gets a root rule `$root_S: S` whose item `$root_S: . S` is the
// kernel of S's start state; $END is not part of the root rule, it is the
// lookahead DeRemer-Pennello attaches to the transition on S out of that state
// (lalr.cc).  The state reached by S from the start state is the end state:
// reaching it by a reduction on $END accepts.  Bison instead augments with
// `$accept: S $end` and so has one more state, the one after shifting $end
// (see bison_export.cc for the exact correspondence).
//
// States are numbered in creation order: start states first, one per start
// symbol, then breadth-first with each state's successors created in
// increasing symbol order.  A state is identified by its kernel (sorted item
// ids); its closure lists the kernel first, then the items `B: . w` added for
// each nonterminal B after a dot, in breadth-first order.
//
// Before any of that, Augment() rejects what Lark rejects (no start, a start
// or a used nonterminal without rules, a rule defined twice) and, beyond
// Lark, rules that no start symbol reaches, which Lark would silently keep
// out of its tables but which always mean a mistake in the grammar.
// BuildLr0 stops with kResourceLimit when the automaton outgrows LalrLimits
// (states, closure items, time), naming the rule that fills most kernels.
// Tested by lalr_test.cc and resource_limits_test.cc.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <map>
#include <unordered_map>

#include "grammar/analysis.h"
#include "grammar/base/check.h"
#include "parser/lalr_internal.h"

namespace cfgmask {
namespace lalr_internal {
namespace {

int32_t FindNonterminalIndex(const Grammar& grammar, const std::string& name) {
  for (size_t k = 0; k < grammar.nonterminals.size(); ++k) {
    if (grammar.nonterminals[k] == name) return static_cast<int32_t>(k);
  }
  return -1;
}

struct KernelHash {
  size_t operator()(const std::vector<int32_t>& kernel) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ kernel.size();
    for (int32_t item : kernel) {
      h ^= static_cast<uint64_t>(item) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return static_cast<size_t>(h);
  }
};

}  // namespace

std::string AugmentedGrammar::SymbolName(int32_t symbol) const {
  const int32_t t = grammar->num_terminals();
  if (symbol < t) return grammar->terminals[symbol].name;
  if (symbol == t) return "$END";
  const int32_t k = symbol - num_terminals;
  if (k < static_cast<int32_t>(grammar->nonterminals.size())) return grammar->nonterminals[k];
  return "$root_" + grammar->start[k - grammar->nonterminals.size()];
}

std::string AugmentedGrammar::RuleString(int32_t rule) const {
  std::string text = SymbolName(num_terminals + rule_lhs[rule]) + ":";
  if (RuleLength(rule) == 0) return text + " <empty>";
  for (int32_t i = rhs_begin[rule]; i < rhs_begin[rule + 1]; ++i) text += " " + SymbolName(rhs[i]);
  return text;
}

Status Augment(const Grammar& grammar, AugmentedGrammar* out) {
  AugmentedGrammar& g = *out;
  g = AugmentedGrammar();
  g.grammar = &grammar;
  const int32_t t = grammar.num_terminals();
  const int32_t n = static_cast<int32_t>(grammar.nonterminals.size());
  const int32_t num_starts = static_cast<int32_t>(grammar.start.size());
  if (num_starts == 0) {
    return Status(ErrorCode::kGrammarSemantics, "grammar has no start symbol");
  }
  if (grammar.rules.empty()) {
    return Status(ErrorCode::kGrammarSemantics, "grammar has no rules");
  }
  g.num_terminals = t + 1;
  g.num_nonterminals = n + num_starts;
  g.num_grammar_rules = static_cast<int32_t>(grammar.rules.size());
  g.num_rules = g.num_grammar_rules + num_starts;

  // Grammar symbol ids shift by one past the terminals to make room for $END.
  auto to_internal = [&](SymbolId s) { return s < t ? s : s + 1; };
  g.rhs_begin.push_back(0);
  for (int32_t r = 0; r < g.num_grammar_rules; ++r) {
    const Rule& rule = grammar.rules[r];
    if (rule.lhs < t || rule.lhs >= grammar.num_symbols()) {
      return Status(ErrorCode::kGrammarSemantics,
                    "rule " + std::to_string(r) + " has a left-hand side that is not a nonterminal");
    }
    g.rule_lhs.push_back(rule.lhs - t);
    for (SymbolId s : rule.rhs) {
      if (s < 0 || s >= grammar.num_symbols()) {
        return Status(ErrorCode::kGrammarSemantics,
                      "rule '" + grammar.nonterminals[rule.lhs - t] + "' uses symbol id " +
                          std::to_string(s) + ", which is out of range");
      }
      g.rhs.push_back(to_internal(s));
    }
    g.rhs_begin.push_back(static_cast<int32_t>(g.rhs.size()));
  }
  for (int32_t s = 0; s < num_starts; ++s) {
    const int32_t k = FindNonterminalIndex(grammar, grammar.start[s]);
    if (k < 0) {
      return Status(ErrorCode::kGrammarSemantics,
                    "start symbol '" + grammar.start[s] + "' is not a rule of the grammar");
    }
    g.start_symbol.push_back(g.num_terminals + k);
    g.rule_lhs.push_back(n + s);
    g.rhs.push_back(g.num_terminals + k);
    g.rhs_begin.push_back(static_cast<int32_t>(g.rhs.size()));
  }

  std::vector<int32_t> count(g.num_nonterminals + 1, 0);
  for (int32_t r = 0; r < g.num_rules; ++r) ++count[g.rule_lhs[r] + 1];
  for (int32_t k = 0; k < g.num_nonterminals; ++k) count[k + 1] += count[k];
  g.rules_of_begin = count;
  g.rules_of.resize(g.num_rules);
  for (int32_t r = 0; r < g.num_rules; ++r) g.rules_of[count[g.rule_lhs[r]]++] = r;
  auto has_rules = [&](int32_t k) { return g.rules_of_begin[k + 1] > g.rules_of_begin[k]; };

  for (int32_t s = 0; s < num_starts; ++s) {
    if (!has_rules(g.start_symbol[s] - g.num_terminals)) {
      return Status(ErrorCode::kGrammarSemantics,
                    "start symbol '" + grammar.start[s] + "' has no rules");
    }
  }
  for (int32_t r = 0; r < g.num_grammar_rules; ++r) {
    for (int32_t i = g.rhs_begin[r]; i < g.rhs_begin[r + 1]; ++i) {
      if (!g.IsTerminal(g.rhs[i]) && !has_rules(g.rhs[i] - g.num_terminals)) {
        return Status(ErrorCode::kGrammarSemantics,
                      "rule '" + g.RuleString(r) + "' uses '" + g.SymbolName(g.rhs[i]) +
                          "', which has no rules");
      }
    }
  }
  std::map<std::vector<int32_t>, int32_t> seen;
  for (int32_t r = 0; r < g.num_grammar_rules; ++r) {
    std::vector<int32_t> key(g.rhs.begin() + g.rhs_begin[r], g.rhs.begin() + g.rhs_begin[r + 1]);
    key.push_back(-1 - g.rule_lhs[r]);
    if (!seen.emplace(std::move(key), r).second) {
      return Status(ErrorCode::kGrammarSemantics,
                    "rule '" + g.RuleString(r) + "' is defined twice");
    }
  }

  // Reachability from the root rules.
  std::vector<uint8_t> reached(g.num_nonterminals, 0);
  std::vector<int32_t> queue;
  for (int32_t s = 0; s < num_starts; ++s) {
    reached[n + s] = 1;
    queue.push_back(n + s);
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    const int32_t k = queue[head];
    for (int32_t j = g.rules_of_begin[k]; j < g.rules_of_begin[k + 1]; ++j) {
      const int32_t r = g.rules_of[j];
      for (int32_t i = g.rhs_begin[r]; i < g.rhs_begin[r + 1]; ++i) {
        const int32_t sym = g.rhs[i];
        if (g.IsTerminal(sym) || reached[sym - g.num_terminals]) continue;
        reached[sym - g.num_terminals] = 1;
        queue.push_back(sym - g.num_terminals);
      }
    }
  }
  for (int32_t r = 0; r < g.num_grammar_rules; ++r) {
    if (!reached[g.rule_lhs[r]]) {
      return Status(ErrorCode::kGrammarSemantics,
                    "rule '" + g.RuleString(r) + "' is unreachable from the start symbol" +
                        (num_starts > 1 ? "s" : " '" + grammar.start[0] + "'"));
    }
  }

  // Nullable nonterminals (grammar/analysis.h); a root is nullable when its
  // start symbol is.
  const std::vector<uint8_t> nullable = NullableSymbols(grammar);
  const int32_t gt = grammar.num_terminals();
  g.nullable.assign(g.num_nonterminals, 0);
  for (int32_t k = 0; k < n; ++k) g.nullable[k] = nullable[gt + k];
  for (int32_t s = 0; s < num_starts; ++s) {
    g.nullable[n + s] = g.nullable[g.start_symbol[s] - g.num_terminals];
  }
  return Status::Ok();
}

int32_t Lr0Automaton::TransitionIndex(int32_t state, int32_t symbol) const {
  const auto first = trans_symbol.begin() + trans_begin[state];
  const auto last = trans_symbol.begin() + trans_begin[state + 1];
  const auto it = std::lower_bound(first, last, symbol);
  if (it == last || *it != symbol) return -1;
  return static_cast<int32_t>(it - trans_symbol.begin());
}

int32_t Lr0Automaton::Goto(int32_t state, int32_t symbol) const {
  const int32_t i = TransitionIndex(state, symbol);
  return i < 0 ? -1 : trans_target[i];
}

Lr0Automaton BuildLr0(const AugmentedGrammar& g) {
  LalrLimits unlimited;
  unlimited.max_states = INT32_MAX;
  unlimited.max_items = INT64_MAX;
  unlimited.max_seconds = 1e300;
  Lr0Automaton a;
  CFGMASK_CHECK(BuildLr0(g, unlimited, 0, &a).ok());
  return a;
}

namespace {

// The culprit of an automaton that outgrew a limit: the left side of the
// rules whose items fill the most kernels built so far.
// The nonterminal with items in the most kernels: its " (rule 'x' has items
// in N kernels)" note, and the position of its definition in *where.
std::string LargestContributor(const AugmentedGrammar& g, const Lr0Automaton& a,
                               const std::vector<std::vector<int32_t>>& kernels,
                               std::string* where) {
  std::vector<int64_t> per_nonterminal(g.num_nonterminals, 0);
  for (const auto& kernel : kernels) {
    for (int32_t item : kernel) ++per_nonterminal[g.rule_lhs[a.item_rule[item]]];
  }
  const auto most = std::max_element(per_nonterminal.begin(), per_nonterminal.end());
  if (most == per_nonterminal.end()) return "";
  const int32_t k = static_cast<int32_t>(most - per_nonterminal.begin());
  if (k < static_cast<int32_t>(g.grammar->nonterminals.size())) {
    *where = g.grammar->WherePrefix(g.grammar->num_terminals() + k);
  }
  return "; rule '" + g.SymbolName(g.num_terminals + k) + "' has items in " +
         std::to_string(*most) + " kernels";
}

}  // namespace

Status BuildLr0(const AugmentedGrammar& g, const LalrLimits& limits, double seconds_used,
                Lr0Automaton* out) {
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return seconds_used +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  Lr0Automaton a;
  const int32_t num_items = g.ItemBase(g.num_rules);
  a.item_rule.resize(num_items);
  a.item_dot.resize(num_items);
  a.item_next.resize(num_items);
  for (int32_t r = 0; r < g.num_rules; ++r) {
    const int32_t len = g.RuleLength(r);
    for (int32_t dot = 0; dot <= len; ++dot) {
      const int32_t item = g.ItemBase(r) + dot;
      a.item_rule[item] = r;
      a.item_dot[item] = dot;
      a.item_next[item] = dot < len ? g.rhs[g.rhs_begin[r] + dot] : -1;
    }
  }

  std::unordered_map<std::vector<int32_t>, int32_t, KernelHash> state_of_kernel;
  std::vector<std::vector<int32_t>> kernels;
  auto intern = [&](std::vector<int32_t> kernel, int32_t symbol) {
    auto [it, inserted] = state_of_kernel.emplace(kernel, static_cast<int32_t>(kernels.size()));
    if (inserted) {
      kernels.push_back(std::move(kernel));
      a.accessing_symbol.push_back(symbol);
    }
    return it->second;
  };
  const int32_t num_starts = static_cast<int32_t>(g.start_symbol.size());
  for (int32_t s = 0; s < num_starts; ++s) {
    a.start_state.push_back(intern({g.ItemBase(g.num_grammar_rules + s)}, -1));
  }

  std::vector<int32_t> nonterminal_epoch(g.num_nonterminals, -1);
  std::vector<std::vector<int32_t>> bucket(g.num_symbols());
  std::vector<int32_t> touched;
  a.closure_begin.push_back(0);
  a.trans_begin.push_back(0);
  for (int32_t state = 0; state < static_cast<int32_t>(kernels.size()); ++state) {
    const char* exceeded = nullptr;
    std::string limit;
    if (static_cast<int64_t>(kernels.size()) > limits.max_states) {
      exceeded = "states";
      limit = std::to_string(limits.max_states);
    } else if (static_cast<int64_t>(a.closure.size()) > limits.max_items) {
      exceeded = "items";
      limit = std::to_string(limits.max_items);
    } else if (limits.stop != nullptr) {
      CFGMASK_RETURN_IF_ERROR(limits.stop->Poll("lalr"));
    }
    if (exceeded == nullptr && (state & 255) == 0 && seconds() > limits.max_seconds) {
      exceeded = "seconds";
      limit = std::to_string(limits.max_seconds);
    }
    if (exceeded != nullptr) {
      std::string where;
      const std::string largest = LargestContributor(g, a, kernels, &where);
      return Status(ErrorCode::kResourceLimit,
                    where + "LR(0) automaton exceeds the limit of " + limit + " " + exceeded +
                        " (" + std::to_string(kernels.size()) + " states, " +
                        std::to_string(a.closure.size()) + " items so far" + largest + ")");
    }
    const size_t closure_start = a.closure.size();
    a.closure.insert(a.closure.end(), kernels[state].begin(), kernels[state].end());
    a.kernel_size.push_back(static_cast<int32_t>(kernels[state].size()));
    for (size_t i = closure_start; i < a.closure.size(); ++i) {
      const int32_t next = a.item_next[a.closure[i]];
      if (next < 0 || g.IsTerminal(next)) continue;
      const int32_t k = next - g.num_terminals;
      if (nonterminal_epoch[k] == state) continue;
      nonterminal_epoch[k] = state;
      for (int32_t j = g.rules_of_begin[k]; j < g.rules_of_begin[k + 1]; ++j) {
        a.closure.push_back(g.ItemBase(g.rules_of[j]));
      }
    }
    a.closure_begin.push_back(static_cast<int32_t>(a.closure.size()));

    touched.clear();
    for (size_t i = closure_start; i < a.closure.size(); ++i) {
      const int32_t item = a.closure[i];
      const int32_t next = a.item_next[item];
      if (next < 0) continue;
      if (bucket[next].empty()) touched.push_back(next);
      bucket[next].push_back(item + 1);
    }
    std::sort(touched.begin(), touched.end());
    for (int32_t symbol : touched) {
      std::vector<int32_t>& kernel = bucket[symbol];
      std::sort(kernel.begin(), kernel.end());
      const int32_t target = intern(kernel, symbol);
      kernel.clear();
      a.trans_symbol.push_back(symbol);
      a.trans_target.push_back(target);
    }
    a.trans_begin.push_back(static_cast<int32_t>(a.trans_symbol.size()));
  }
  a.num_states = static_cast<int32_t>(kernels.size());
  for (int32_t s = 0; s < num_starts; ++s) {
    a.end_state.push_back(a.Goto(a.start_state[s], g.start_symbol[s]));
    CFGMASK_CHECK(a.end_state.back() >= 0);
  }
  *out = std::move(a);
  return Status::Ok();
}

int64_t LookaheadTableBytes(const AugmentedGrammar& g, const Lr0Automaton& lr0) {
  int64_t nonterminal_transitions = 0, reductions = 0;
  for (int32_t symbol : lr0.trans_symbol) nonterminal_transitions += !g.IsTerminal(symbol);
  for (int32_t item : lr0.closure) reductions += lr0.item_next[item] < 0;
  const int64_t set_bytes = (g.num_terminals + 63) / 64 * 8;
  // Follow sets (twice: Read, then Follow), lookahead sets, action + goto.
  return (2 * nonterminal_transitions + reductions) * set_bytes +
         static_cast<int64_t>(lr0.num_states) * g.num_symbols() * 4;
}

std::string SampleReaching(const AugmentedGrammar& g, const Lr0Automaton& lr0, int32_t state) {
  std::vector<int32_t> parent(lr0.num_states, -2);
  std::vector<int32_t> queue;
  for (int32_t s : lr0.start_state) {
    if (parent[s] == -2) {
      parent[s] = -1;
      queue.push_back(s);
    }
  }
  for (size_t head = 0; head < queue.size() && parent[state] == -2; ++head) {
    const int32_t p = queue[head];
    for (int32_t i = lr0.trans_begin[p]; i < lr0.trans_begin[p + 1]; ++i) {
      const int32_t q = lr0.trans_target[i];
      if (parent[q] != -2) continue;
      parent[q] = p;
      queue.push_back(q);
    }
  }
  std::vector<int32_t> path;
  for (int32_t s = state; s >= 0 && parent[s] >= 0; s = parent[s]) {
    path.push_back(lr0.accessing_symbol[s]);
  }
  if (path.empty()) return "<start>";
  std::string text;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    if (!text.empty()) text += ' ';
    text += g.SymbolName(*it);
  }
  return text;
}

}  // namespace lalr_internal
}  // namespace cfgmask
