// The LR core: see lr_core.h.
#include "parser/lr_core.h"

#include <algorithm>

namespace cfgmask {
namespace {

uint64_t MixState(uint64_t parent_hash, int32_t state) {
  uint64_t z = parent_hash + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(state) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

const LrStack::Node* LrStack::NewNode(int32_t state, const Node* parent) {
  Node* node = new Node;
  node->state = state;
  node->depth = parent == nullptr ? 1 : parent->depth + 1;
  node->hash = MixState(parent == nullptr ? 0 : parent->hash, state);
  node->parent = parent;
  node->refs.store(1, std::memory_order_relaxed);
  return node;
}

void LrStack::Release(const Node* node) {
  // Iterative, so that dropping a deep stack does not recurse.
  while (node != nullptr && node->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    const Node* parent = node->parent;
    delete node;
    node = parent;
  }
}

LrStack LrStack::Build(const Node* base, const int32_t* states, size_t n) {
  const Node* node = Retained(base);
  for (size_t i = 0; i < n; ++i) node = NewNode(states[i], node);
  return LrStack(node);
}

std::vector<int32_t> LrStack::States() const {
  std::vector<int32_t> states(Depth());
  size_t i = states.size();
  for (const Node* n = top_; n != nullptr; n = n->parent) states[--i] = n->state;
  return states;
}

int LrStack::Compare(const LrStack& a, const LrStack& b) {
  if (a.top_ == b.top_) return 0;
  // Walk the deeper one down to equal depth, then both down to their first
  // shared node; the last differing pair (the lowest) decides, unless one
  // stack is a prefix of the other.
  const Node* x = a.top_;
  const Node* y = b.top_;
  const size_t dx = a.Depth(), dy = b.Depth();
  while (x && x->depth > dy) x = x->parent;
  while (y && y->depth > dx) y = y->parent;
  int order = 0;  // of the lowest differing states at equal depth
  for (; x != y; x = x->parent, y = y->parent) {
    if (x->state != y->state) order = x->state < y->state ? -1 : 1;
  }
  if (order != 0) return order;
  return dx < dy ? -1 : (dx > dy ? 1 : 0);
}

bool LrStack::operator==(const LrStack& o) const {
  const Node* a = top_;
  const Node* b = o.top_;
  if (a == b) return true;
  if (a == nullptr || b == nullptr || a->depth != b->depth || a->hash != b->hash) return false;
  for (; a != b; a = a->parent, b = b->parent) {
    if (a->state != b->state) return false;
  }
  return true;
}

std::string LrStack::DebugString() const {
  std::string text = "[";
  for (int32_t s : States()) {
    if (text.size() > 1) text += ' ';
    text += std::to_string(s);
  }
  return text + "]";
}

LrPredecessors::LrPredecessors(const LrTables& t, int32_t start_state) {
  const int32_t n = t.num_states;
  std::vector<std::vector<int32_t>> edges(n);
  for (int32_t q = 0; q < n; ++q) {
    for (int32_t a = 0; a < t.num_terminals; ++a) {
      const int32_t to = t.ShiftTo(q, a);
      if (to >= 0) edges[q].push_back(to);
    }
    for (int32_t x = 0; x < t.num_nonterminals; ++x) {
      const int32_t g = t.Goto(q, x);
      if (g >= 0) edges[q].push_back(g);
    }
  }
  reachable_.assign(n, start_state < 0 ? 1 : 0);
  std::vector<int32_t> work;
  if (start_state >= 0) work.push_back(start_state), reachable_[start_state] = 1;
  while (!work.empty()) {
    const int32_t q = work.back();
    work.pop_back();
    for (int32_t w : edges[q]) {
      if (!reachable_[w]) reachable_[w] = 1, work.push_back(w);
    }
  }
  pred_.resize(n);
  entered_by_.resize(t.num_terminals);
  for (int32_t q = 0; q < n; ++q) {
    if (!reachable_[q]) continue;
    for (int32_t w : edges[q]) {
      if (pred_[w].empty() || pred_[w].back() != q) pred_[w].push_back(q);
    }
    for (int32_t a = 0; a < t.num_terminals; ++a) {
      const int32_t to = t.ShiftTo(q, a);
      if (to >= 0) entered_by_[a].push_back(to);
    }
  }
  for (auto& v : entered_by_) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
}

std::vector<int32_t> LrPredecessors::Frontier(int32_t state, int32_t distance) const {
  std::vector<int32_t> frontier{state}, up;
  for (int32_t d = 0; d < distance; ++d) {
    up.clear();
    for (int32_t q : frontier) up.insert(up.end(), pred_[q].begin(), pred_[q].end());
    std::sort(up.begin(), up.end());
    up.erase(std::unique(up.begin(), up.end()), up.end());
    frontier.swap(up);
  }
  return frontier;
}

}  // namespace cfgmask
