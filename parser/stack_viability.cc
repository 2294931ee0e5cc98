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
#include <cstring>
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
  if (S > limits.max_lr_states) {
    st.over_limits = true;
    return nullptr;
  }
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
  st.saturation_seconds = seconds();
  st.controls = sat.first_pop + static_cast<int64_t>(sat.pop_t.size());
  st.transitions = sat.transitions;
  if (sat.over) {
    st.over_limits = true;
    st.seconds = seconds();
    return nullptr;
  }

  // Goals: terminals [0, NT), idle NT, then the pop controls with k = 0.
  auto v = std::make_shared<StackViability>();
  v->start_state_ = start_state;
  v->num_terminals_ = NT;
  v->idle_ = NT;
  v->words_ = (NT + 63) / 64;
  std::vector<int32_t> goal_of(sat.pop_t.size(), -1);
  int32_t goals = NT + 1;
  for (size_t i = 0; i < sat.pop_t.size(); ++i) {
    if (sat.pop_k[i] == 0) goal_of[i] = goals++;
  }
  v->num_goals_ = goals;
  auto goal = [&](int32_t control) {
    if (control < NT) return control;
    if (control == sat.kIdle) return NT;
    if (sat.IsPop(control)) return goal_of[control - sat.first_pop];
    return -1;
  };
  // Per LR state, (goal, target): from the transitions c -q-> s of goal
  // controls c: s = final (accepted), or s = (t', A', j): the goal (t', A', 0)
  // at the entry j + 1 below.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> per(S);
  for (const auto& [key, targets] : sat.out) {
    const int32_t c = static_cast<int32_t>(key >> 32), q = static_cast<int32_t>(key & 0xffffffffu);
    const int32_t g = goal(c);
    if (g < 0) continue;
    for (int32_t s : targets) {
      if (s == sat.kFinal) {
        per[q].push_back({g, -1});
      } else {
        const int32_t i = s - sat.first_pop;
        const int32_t depth = sat.pop_k[i] + 1;
        const int32_t zero = sat.pop_id.at(std::make_tuple(sat.pop_t[i], sat.pop_a[i], 0));
        const int32_t base = goal_of[zero - sat.first_pop];
        per[q].push_back({g, static_cast<int64_t>(depth) * goals + base});
        v->max_depth_ = std::max(v->max_depth_, depth);
      }
    }
  }
  v->offsets_.assign(1, 0);
  for (int32_t q = 0; q < S; ++q) {
    std::sort(per[q].begin(), per[q].end());
    per[q].erase(std::unique(per[q].begin(), per[q].end()), per[q].end());
    v->rules_.insert(v->rules_.end(), per[q].begin(), per[q].end());
    v->offsets_.push_back(static_cast<int64_t>(v->rules_.size()));
  }
  st.goal_rules = static_cast<int64_t>(v->rules_.size());
  st.max_depth = v->max_depth_;
  // reads_[q]: the deepest entry below that a rule of q reads.
  v->reads_.assign(S, 0);
  for (int32_t q = 0; q < S; ++q) {
    for (int64_t i = v->offsets_[q]; i < v->offsets_[q + 1]; ++i) {
      if (v->rules_[i].second >= 0) {
        v->reads_[q] = std::max(v->reads_[q], static_cast<int32_t>(v->rules_[i].second / goals));
      }
    }
  }

  // Nothing to check?  lb[q]: goals that hold on every stack (a path of
  // the automaton from the start state) ending in q, a least fixpoint: a
  // goal holds when some rule of q needs nothing below, or a goal at depth
  // j that lb gives at every state j transitions before q, on a stack that
  // is always that deep (the fewest transitions from the start to q is at
  // least j).  When lb holds idle for every reachable q, every stack
  // completes.
  const LrPredecessors preds(lr, start_state);
  std::vector<int32_t> dist(S, -1);
  {
    std::vector<int32_t> queue{start_state};
    dist[start_state] = 0;
    for (size_t h = 0; h < queue.size(); ++h) {
      const int32_t q = queue[h];
      for (int32_t x = 0; x < NT + lr.num_nonterminals; ++x) {
        const int32_t to = lr.Transition(q, x);
        if (to >= 0 && dist[to] < 0) {
          dist[to] = dist[q] + 1;
          queue.push_back(to);
        }
      }
    }
  }
  std::vector<std::vector<uint8_t>> lb(S);
  for (int32_t q = 0; q < S; ++q) lb[q].assign(goals, 0);
  std::vector<std::vector<std::vector<int32_t>>> frontier(S);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t q = 0; q < S; ++q) {
      if (dist[q] < 0) continue;
      for (int64_t i = v->offsets_[q]; i < v->offsets_[q + 1]; ++i) {
        const auto [g, target] = v->rules_[i];
        if (lb[q][g]) continue;
        bool holds = target < 0;
        if (!holds) {
          const int32_t depth = static_cast<int32_t>(target / goals);
          const int32_t need = static_cast<int32_t>(target % goals);
          if (dist[q] >= depth) {
            if (frontier[q].size() <= static_cast<size_t>(depth)) frontier[q].resize(depth + 1);
            std::vector<int32_t>& f = frontier[q][depth];
            if (f.empty()) f = preds.Frontier(q, depth);
            holds = true;
            for (int32_t p : f) holds = holds && lb[p][need];
          }
        }
        if (holds) lb[q][g] = 1, changed = true;
      }
    }
  }
  for (int32_t q = 0; q < S; ++q) st.unsure_states += dist[q] >= 0 && !lb[q][NT];
  // Entry state kAll: everything accepted.
  v->viable_.reserve(kMaxStates);
  v->takes_.reserve(static_cast<size_t>(kMaxStates) * v->words_);
  v->sets_.reserve(kMaxStates);
  v->viable_.push_back(1);
  v->takes_.assign(v->words_, ~uint64_t{0});
  v->sets_.push_back(nullptr);
  if (st.unsure_states == 0) {
    st.seconds = seconds();
    return nullptr;
  }
  // Otherwise every stack is walked, as its top LR state and the states of
  // the top entries that later pushes can still read: a stack that cannot
  // complete ends the walk (the check is needed); so does passing
  // limits.max_walk (then the check stays on: it refuses only what cannot
  // complete).  A walk that ends without either shows that every stack
  // completes.  An entry's state reads reads[q] entries below it (its
  // deepest rule); keep[q], the entries a stack with top LR state q keeps in
  // its summary (its top entry first), is the least fixpoint of
  // keep[q] = max over q's successors s of max(reads[s], keep[s] - 1): an
  // entry deeper than keep[q] is never read by a push to come (every push
  // reads at most reads[s] entries, and each push moves the entries one
  // deeper), so summaries that differ only there have the same future.
  // Were keep too small, the walk would still never answer "nothing to
  // check" wrongly: Push is monotone (a goal holds when a goal it needs is
  // in the set below), so an entry left out only shrinks the states above
  // it, and a stack that cannot complete still shows "idle" missing.
  {
    const double walk_from = seconds();
    std::vector<int32_t> reads = v->reads_, keep(S, 0);
    std::vector<std::vector<int32_t>> successors(S);
    for (int32_t q = 0; q < S; ++q) {
      for (int32_t x = 0; x < NT + lr.num_nonterminals; ++x) {
        const int32_t to = lr.Transition(q, x);
        if (to >= 0) successors[q].push_back(to);
      }
      std::sort(successors[q].begin(), successors[q].end());
      successors[q].erase(std::unique(successors[q].begin(), successors[q].end()), successors[q].end());
    }
    for (bool changed = true; changed && !limits.whole_window_walk;) {
      changed = false;
      for (int32_t q = 0; q < S; ++q) {
        int32_t k = keep[q];
        for (int32_t to : successors[q]) k = std::max({k, reads[to], keep[to] - 1});
        if (k != keep[q]) keep[q] = k, changed = true;
      }
    }
    if (limits.whole_window_walk) reads.assign(S, v->max_depth_), keep.assign(S, v->max_depth_);
    std::unordered_set<std::string> seen;
    std::vector<std::string> todo;
    // A walk state: the top LR state, then the entries' states nearest first.
    auto pack = [&](int32_t q, const std::vector<int32_t>& w) {
      std::string k(sizeof(int32_t) * (w.size() + 1), '\0');
      std::memcpy(k.data(), &q, sizeof(int32_t));
      std::memcpy(k.data() + sizeof(int32_t), w.data(), sizeof(int32_t) * w.size());
      return k;
    };
    std::vector<int32_t> w{v->Push(start_state, nullptr, 0)};
    bool dead = !v->viable_[w[0]];
    w.resize(std::min<size_t>(w.size(), keep[start_state]));
    todo.push_back(pack(start_state, w));
    seen.insert(todo.back());
    while (!todo.empty() && !dead) {
      const std::string k = std::move(todo.back());
      todo.pop_back();
      int32_t q;
      std::memcpy(&q, k.data(), sizeof(int32_t));
      w.resize(k.size() / sizeof(int32_t) - 1);
      std::memcpy(w.data(), k.data() + sizeof(int32_t), sizeof(int32_t) * w.size());
      for (int32_t to : successors[q]) {
        // The summary holds min(the stack's depth, keep[q]) >= reads[to]
        // entries when the stack has them: Push reads what it would read
        // on the whole stack.
        const int32_t d = v->Push(to, w.data(), std::min<int32_t>(static_cast<int32_t>(w.size()), reads[to]));
        if (d == kAll || !v->viable_[d]) {
          dead = true;
          break;
        }
        std::vector<int32_t> next{d};
        next.insert(next.end(), w.begin(), w.end());
        next.resize(std::min<size_t>(next.size(), keep[to]));
        std::string nk = pack(to, next);
        if (seen.insert(nk).second) todo.push_back(std::move(nk));
      }
      if (static_cast<int64_t>(seen.size()) > limits.max_walk) dead = true;
    }
    st.walked = static_cast<int64_t>(seen.size());
    st.seconds = seconds();
    st.walk_seconds = st.seconds - walk_from;
    if (!dead) return nullptr;
  }
  return v;
}

int32_t StackViability::num_states() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int32_t>(sets_.size());
}

int32_t StackViability::Intern(std::vector<int32_t> goals) const {
  // mu_ held.
  auto it = ids_.find(goals);
  if (it != ids_.end()) return it->second;
  if (static_cast<int32_t>(sets_.size()) >= kMaxStates) return kAll;
  const int32_t id = static_cast<int32_t>(sets_.size());
  it = ids_.emplace(std::move(goals), id).first;
  const std::vector<int32_t>& set = it->first;
  viable_.push_back(std::binary_search(set.begin(), set.end(), idle_) ? 1 : 0);
  const size_t at = takes_.size();
  takes_.resize(at + words_, 0);  // within the reserved capacity: no reader sees a move
  for (int32_t g : set) {
    if (g < num_terminals_) takes_[at + g / 64] |= uint64_t{1} << (g & 63);
  }
  sets_.push_back(&set);
  return id;
}

int32_t StackViability::Push(int32_t q, const int32_t* below, int32_t n) const {
  if (q < 0 || static_cast<size_t>(q) + 1 >= offsets_.size()) return kAll;
  // The rules of q read no entry deeper than reads_[q]: the rest of
  // `below` cannot change the state, so the memo's key leaves it out.
  n = std::min(n, reads_[q]);
  for (int32_t i = 0; i < n; ++i) {
    if (below[i] == kAll) return kAll;
  }
  std::string key(sizeof(int32_t) * (n + 1), '\0');
  std::memcpy(key.data(), &q, sizeof(int32_t));
  if (n > 0) std::memcpy(key.data() + sizeof(int32_t), below, sizeof(int32_t) * n);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = push_.find(key);
  if (it != push_.end()) return it->second;
  std::vector<int32_t> goals;
  for (int64_t i = offsets_[q]; i < offsets_[q + 1]; ++i) {
    const auto [g, target] = rules_[i];
    if (!goals.empty() && goals.back() == g) continue;  // rules sorted by goal
    bool holds = target < 0;
    if (!holds) {
      const int32_t depth = static_cast<int32_t>(target / num_goals_);
      const int32_t need = static_cast<int32_t>(target % num_goals_);
      if (depth <= n) {
        const std::vector<int32_t>& set = *sets_[below[depth - 1]];
        holds = std::binary_search(set.begin(), set.end(), need);
      }
    }
    if (holds) goals.push_back(g);
  }
  const int32_t id = Intern(std::move(goals));
  if (push_.size() >= kMaxPushes) push_.clear();  // a cache: bounded, recomputed on demand
  push_.emplace(std::move(key), id);
  return id;
}

int32_t StackViability::StateOf(const LrStack::Node* node) const {
  const int32_t known = node->viability.load(std::memory_order_relaxed);
  if (known >= 0) return known;
  // The entries from the deepest one without a state up to `node`.
  thread_local std::vector<const LrStack::Node*> chain;
  chain.clear();
  for (const LrStack::Node* n = node; n != nullptr && n->viability.load(std::memory_order_relaxed) < 0;
       n = n->parent) {
    chain.push_back(n);
  }
  std::vector<int32_t> below(max_depth_);
  for (size_t i = chain.size(); i-- > 0;) {
    const LrStack::Node* c = chain[i];
    int32_t n = 0;
    for (const LrStack::Node* b = c->parent; b != nullptr && n < max_depth_; b = b->parent) {
      below[n++] = b->viability.load(std::memory_order_relaxed);
    }
    const int32_t d = c->parent == nullptr && c->state != start_state_ ? kAll : Push(c->state, below.data(), n);
    c->viability.store(d, std::memory_order_relaxed);
  }
  return node->viability.load(std::memory_order_relaxed);
}

int32_t StackViability::ViewState(const LrStack::Node* base, const int32_t* overlay,
                                  int32_t n) const {
  const int32_t top = StateOf(base);
  if (n == 0) return top;
  // The states of the entries under the next push, nearest first.
  thread_local std::vector<int32_t> window;
  window.assign(1, top);
  for (const LrStack::Node* b = base->parent; b != nullptr && static_cast<int32_t>(window.size()) <
                                                                     max_depth_;
       b = b->parent) {
    window.push_back(b->viability.load(std::memory_order_relaxed));
  }
  int32_t d = top;
  for (int32_t i = 0; i < n; ++i) {
    d = Push(overlay[i], window.data(), std::min<int32_t>(static_cast<int32_t>(window.size()), max_depth_));
    window.insert(window.begin(), d);
  }
  return d;
}

}  // namespace cfgmask
