// The stack-viability DFA: see stack_viability.h.
//
// P-automaton states: the controls (a pending terminal t < NT, kAccept,
// kIdle, the reduction pops (t, A, k)) and kFinal, which reads any stack.
// A transition s -q-> s' says: from control s with LR state q on top, some
// run pops q and continues in s' (s' a pop control), or reaches acceptance
// (s' = kFinal).  Pop controls with k >= 1 pop any state (implicit
// transitions to (t, A, k-1)); kFinal and kAccept read any state into
// kFinal.  The saturation adds, for each PDS rule <c, g> -> <c', w>, the
// transitions c -g-> s for every s that w leads to from c': a pop rule
// directly, a push rule <c, g> -> <c', g1 g> once c' -g1-> s1 is known (then
// every s1 -g-> s2, now and later: the derived rule <c, g> -> <s1, g>).
#include "parser/stack_viability.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <tuple>
#include <unordered_set>

namespace cfgmask {
namespace {

struct Saturation {
  Saturation(int32_t num_terminals, int64_t max_transitions)
      : NT(num_terminals),
        kAccept(num_terminals),
        kIdle(num_terminals + 1),
        kFinal(num_terminals + 2),
        first_pop(num_terminals + 3),
        limit(max_transitions) {}
  const int32_t NT;
  const int32_t kAccept, kIdle, kFinal;
  // Pop controls: (t, A, k) -> id; their fields by id - first_pop.
  const int32_t first_pop;
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> pop_id;
  std::vector<int32_t> pop_t, pop_a, pop_k, pop_down, pop_up;  // down: (t,A,k-1); up: (t,A,k+1) or -1
  // Push rules <c, g> -> <p, g1 g>, by (p, g1): the (c, g).
  std::unordered_map<uint64_t, std::vector<std::pair<int32_t, int32_t>>> push_rules;
  // Derived rules <c, g> -> <s1, g>, by (s1, g): the c.
  std::unordered_map<uint64_t, std::vector<int32_t>> derived;
  // Transitions from non-implicit sources, by (s, g): the targets.
  std::unordered_map<uint64_t, std::vector<int32_t>> out;
  std::unordered_map<uint64_t, std::unordered_set<int32_t>> seen;
  std::vector<std::array<int32_t, 3>> work;
  int64_t transitions = 0;
  const int64_t limit;
  bool over = false;

  static uint64_t K(int32_t a, int32_t b) {
    return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }
  bool IsPop(int32_t s) const { return s >= first_pop; }
  // The implicit target of s reading any state: -1 when s has none.
  int32_t Implicit(int32_t s) const {
    if (s == kFinal || s == kAccept) return kFinal;
    if (IsPop(s) && pop_k[s - first_pop] >= 1) return pop_down[s - first_pop];
    return -1;
  }
  int32_t Pop(int32_t t, int32_t a, int32_t k) {
    auto [it, fresh] = pop_id.emplace(std::make_tuple(t, a, k), 0);
    if (!fresh) return it->second;
    const int32_t id = first_pop + static_cast<int32_t>(pop_t.size());
    it->second = id;
    pop_t.push_back(t);
    pop_a.push_back(a);
    pop_k.push_back(k);
    pop_down.push_back(-1);
    pop_up.push_back(-1);
    if (k >= 1) {
      const int32_t down = Pop(t, a, k - 1);
      pop_down[id - first_pop] = down;
      pop_up[down - first_pop] = id;
    }
    return id;
  }
  void Add(int32_t s, int32_t g, int32_t to) {
    if (over) return;
    if (!seen[K(s, g)].insert(to).second) return;
    if (++transitions > limit) {
      over = true;
      return;
    }
    work.push_back({s, g, to});
  }
  void Run() {
    while (!work.empty() && !over) {
      const auto [p, g1, s1] = work.back();
      work.pop_back();
      out[K(p, g1)].push_back(s1);
      if (p < NT) Add(kIdle, g1, s1);  // <idle, q> -> <t, q>
      auto r = push_rules.find(K(p, g1));
      if (r != push_rules.end()) {
        for (const auto& [c, g] : r->second) {
          const int32_t imp = Implicit(s1);
          if (imp >= 0) {
            Add(c, g, imp);
            continue;
          }
          auto o = out.find(K(s1, g));
          if (o != out.end()) {
            for (size_t i = 0; i < o->second.size(); ++i) Add(c, g, o->second[i]);
          }
          derived[K(s1, g)].push_back(c);
        }
      }
      auto d = derived.find(K(p, g1));
      if (d != derived.end()) {
        for (size_t i = 0; i < d->second.size(); ++i) Add(d->second[i], g1, s1);
      }
    }
  }
};

}  // namespace

std::shared_ptr<const StackViability> StackViability::Build(const LrTables& lr, int32_t start_state,
                                                            const StackViabilityLimits& limits,
                                                            StackViabilityStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  StackViabilityStats local;
  StackViabilityStats& st = stats ? *stats : local;
  st = StackViabilityStats{};
  const int32_t NT = lr.num_terminals, S = lr.num_states, END = lr.end_terminal();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  Saturation sat(NT, limits.max_transitions);

  // The states each nonterminal has a goto from.
  std::vector<std::vector<int32_t>> goto_from(lr.num_nonterminals);
  for (int32_t p = 0; p < S; ++p) {
    for (int32_t a = 0; a < lr.num_nonterminals; ++a) {
      if (lr.Goto(p, a) >= 0) goto_from[a].push_back(p);
    }
  }
  // The rules, and the pop rules as transitions.
  for (int32_t q = 0; q < S; ++q) {
    for (int32_t t = 0; t < NT; ++t) {
      if (lr.AcceptsOn(q, t)) {
        sat.Add(t, q, sat.kFinal);  // <t, q> -> <accept, q>, and accept -q-> final
      } else if (const int32_t to = lr.ShiftTo(q, t); to >= 0) {
        if (t != END) sat.push_rules[Saturation::K(sat.kIdle, to)].push_back({t, q});
      } else if (const int32_t r = lr.ReduceBy(q, t); r >= 0) {
        const int32_t a = lr.rule_lhs[r], n = lr.RuleLength(r);
        if (n >= 1) {
          sat.Add(t, q, sat.Pop(t, a, n - 1));
        } else if (const int32_t g = lr.Goto(q, a); g >= 0) {
          sat.push_rules[Saturation::K(t, g)].push_back({t, q});
        }
      }
    }
  }
  // <(t,A,0), p> -> <t, goto(p,A) p>.
  for (size_t i = 0; i < sat.pop_t.size(); ++i) {
    if (sat.pop_k[i] != 0) continue;
    const int32_t id = sat.first_pop + static_cast<int32_t>(i), t = sat.pop_t[i], a = sat.pop_a[i];
    for (int32_t p : goto_from[a]) sat.push_rules[Saturation::K(t, lr.Goto(p, a))].push_back({id, p});
  }
  sat.Run();
  st.controls = sat.first_pop + static_cast<int64_t>(sat.pop_t.size());
  st.transitions = sat.transitions;
  if (sat.over) {
    st.over_limits = true;
    st.seconds = seconds();
    return nullptr;
  }

  // The reverse: for (q, s), the sources c with c -q-> s.
  std::unordered_map<uint64_t, std::vector<int32_t>> rev;
  for (const auto& [key, targets] : sat.out) {
    const int32_t c = static_cast<int32_t>(key >> 32), q = static_cast<int32_t>(key & 0xffffffffu);
    for (int32_t s : targets) rev[Saturation::K(q, s)].push_back(c);
  }
  // Determinize bottom-up: a DFA state is the sorted set of P-automaton
  // states from which the stack read so far is accepted.
  auto step_set = [&](const std::vector<int32_t>& d, int32_t q) {
    std::vector<int32_t> next;
    for (int32_t s : d) {
      if (s == sat.kFinal) {
        next.push_back(sat.kFinal);
        next.push_back(sat.kAccept);
      } else if (sat.IsPop(s) && sat.pop_up[s - sat.first_pop] >= 0) {
        next.push_back(sat.pop_up[s - sat.first_pop]);
      }
      auto it = rev.find(Saturation::K(q, s));
      if (it != rev.end()) next.insert(next.end(), it->second.begin(), it->second.end());
    }
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    return next;
  };
  auto v = std::make_shared<StackViability>();
  v->start_state_ = start_state;
  v->words_ = (NT + 63) / 64;
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<const std::vector<int32_t>*> sets;
  // State kAll first: everything accepted.
  v->viable_.push_back(1);
  v->takes_.assign(v->words_, ~uint64_t{0});
  sets.push_back(nullptr);
  auto intern = [&](std::vector<int32_t> d) {
    auto [it, fresh] = ids.emplace(std::move(d), static_cast<int32_t>(sets.size()));
    if (fresh) {
      sets.push_back(&it->first);
      const std::vector<int32_t>& set = it->first;
      v->viable_.push_back(std::binary_search(set.begin(), set.end(), sat.kIdle) ? 1 : 0);
      v->takes_.resize(v->takes_.size() + v->words_, 0);
      uint64_t* w = v->takes_.data() + (sets.size() - 1) * v->words_;
      for (int32_t s : set) {
        if (s < NT) w[s / 64] |= uint64_t{1} << (s & 63);
      }
    }
    return it->second;
  };
  // Successors of each LR state in the automaton (shifts and gotos).
  std::vector<std::vector<int32_t>> succ(S);
  for (int32_t q = 0; q < S; ++q) {
    for (int32_t x = 0; x < NT + lr.num_nonterminals; ++x) {
      const int32_t to = lr.Transition(q, x);
      if (to >= 0) succ[q].push_back(to);
    }
    std::sort(succ[q].begin(), succ[q].end());
    succ[q].erase(std::unique(succ[q].begin(), succ[q].end()), succ[q].end());
  }
  v->bottom_ = intern(step_set({sat.kFinal}, start_state));
  std::unordered_set<uint64_t> explored;
  std::vector<std::pair<int32_t, int32_t>> todo{{v->bottom_, start_state}};
  explored.insert(Key(v->bottom_, start_state));
  bool all_viable = true;
  while (!todo.empty()) {
    const auto [d, top] = todo.back();
    todo.pop_back();
    if (!v->viable_[d]) {
      all_viable = false;
      ++st.dead_stacks;
    }
    for (int32_t q : succ[top]) {
      int32_t next;
      auto it = v->step_.find(Key(d, q));
      if (it != v->step_.end()) {
        next = it->second;
      } else {
        next = intern(step_set(*sets[d], q));
        v->step_.emplace(Key(d, q), next);
        if (static_cast<int64_t>(sets.size()) > limits.max_dfa_states) {
          st.over_limits = true;
          st.dfa_states = static_cast<int64_t>(sets.size()) - 1;
          st.seconds = seconds();
          return nullptr;
        }
      }
      if (explored.insert(Key(next, q)).second) todo.push_back({next, q});
    }
  }
  st.dfa_states = static_cast<int64_t>(sets.size()) - 1;
  st.explored = static_cast<int64_t>(explored.size());
  st.seconds = seconds();
  if (all_viable) return nullptr;
  return v;
}

int32_t StackViability::StateOf(const LrStack::Node* node) const {
  const int32_t known = node->viability.load(std::memory_order_relaxed);
  if (known >= 0) return known;
  // The entries below without a state, deepest last.
  thread_local std::vector<const LrStack::Node*> chain;
  chain.clear();
  const LrStack::Node* n = node;
  while (n != nullptr && n->viability.load(std::memory_order_relaxed) < 0) {
    chain.push_back(n);
    n = n->parent;
  }
  int32_t d = n == nullptr ? -1 : n->viability.load(std::memory_order_relaxed);
  for (size_t i = chain.size(); i-- > 0;) {
    const LrStack::Node* c = chain[i];
    if (d < 0) {
      d = c->state == start_state_ ? bottom_ : kAll;  // the bottom entry
    } else {
      d = Step(d, c->state);
    }
    c->viability.store(d, std::memory_order_relaxed);
  }
  return d;
}

}  // namespace cfgmask
