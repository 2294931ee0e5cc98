// Phase 2: LALR(1) lookaheads by the relations of DeRemer & Pennello,
// "Efficient Computation of LALR(1) Look-Ahead Sets", TOPLAS 4(4), 1982.
//
// Over the nonterminal transitions (p, A) of the LR(0) automaton:
//   DR(p, A)     = { t | p --A--> r --t--> }                         (p. 620)
//   (p, A) reads (r, C)     iff p --A--> r --C--> and C =>* eps      (p. 621)
//   Read(p, A)   = DR(p, A) u U{ Read(r, C) | (p, A) reads (r, C) }
//   (p, A) includes (p', B) iff B -> b A g, g =>* eps, p' --b--> p   (p. 624)
//   Follow(p, A) = Read(p, A) u U{ Follow(p', B) | (p, A) includes (p', B) }
//   (q, A -> w) lookback (p, A) iff p --w--> q                       (p. 624)
//   LA(q, A -> w) = U{ Follow(p, A) | (q, A -> w) lookback (p, A) }
// Read and Follow are each one run of the digraph algorithm (p. 625), which
// collapses strongly connected components so every set is computed once.
//
// As Lark (lark/parsers/lalr_analysis.py) does, $END is a direct read of the
// transition on S out of S's start state, and `includes` is built by walking,
// for each (p', B), every item of p' whose left side is B from its dot to its
// end (the kernel items `B -> a . w` included, as Lark does).
//
// One more thing is Lark's and not DeRemer-Pennello's.  Lark's digraph keeps
// one Python set object per strongly connected component of `reads` and
// hands those objects to the Follow pass as its initial sets, which the Follow
// pass then updates in place: the transitions of one reads cycle (a loop of
// the LR(0) automaton through nullable nonterminals) pool their Follow sets.
// We compute that deterministically, as the digraph over the quotient by the
// reads components (each component one node, its edges the union of its
// members' `includes` edges), every member getting its component's set.  This
// is Lark's table whenever Lark's is deterministic: in rare grammars Lark's
// set iteration order (id-hashed objects) makes a member copy a component's
// set before it is complete, and Lark's table then varies between runs (2 of
// 108 random grammars with reads cycles; lalr_test.cc compares the others).
// The pooled sets contain DeRemer-Pennello's, which Bison computes, so for
// the Bison oracle LalrStats counts the transitions on reads cycles and the
// (reduction, terminal) pairs the pooling adds; both are 0 on python.lark.
// Tested by lalr_test.cc and bison_export_test.cc.
#include <algorithm>

#include "grammar/base/check.h"
#include "parser/lalr_internal.h"

namespace cfgmask {
namespace lalr_internal {
namespace {

// A relation over nonterminal transitions in CSR form.
struct Relation {
  std::vector<int32_t> begin;
  std::vector<int32_t> target;

  static Relation FromEdges(int32_t num_nodes, const std::vector<std::pair<int32_t, int32_t>>& edges) {
    Relation rel;
    rel.begin.assign(num_nodes + 1, 0);
    for (const auto& [from, to] : edges) ++rel.begin[from + 1];
    for (int32_t x = 0; x < num_nodes; ++x) rel.begin[x + 1] += rel.begin[x];
    std::vector<int32_t> fill(rel.begin.begin(), rel.begin.end() - 1);
    rel.target.resize(edges.size());
    for (const auto& [from, to] : edges) rel.target[fill[from]++] = to;
    return rel;
  }
};

// DeRemer & Pennello's DIGRAPH / TRAVERSE, iterative: on return,
// F(x) = F0(x) u U{ F(y) | x R y }, with F given as F0 on entry.  Returns the
// number of nodes in strongly connected components of two or more nodes.
// With `stop`, polled per root; its error stops the traversal (in *stopped).
int32_t Digraph(const Relation& rel, int32_t words, std::vector<uint64_t>* sets,
                std::vector<int32_t>* component = nullptr, StopCheck* stop = nullptr,
                Status* stopped = nullptr) {
  const int32_t num_nodes = static_cast<int32_t>(rel.begin.size()) - 1;
  constexpr int32_t kDone = INT32_MAX;
  std::vector<int32_t> depth(num_nodes, 0);
  std::vector<int32_t> stack;
  struct Frame {
    int32_t node, edge, own_depth;
  };
  std::vector<Frame> frames;
  int32_t in_cycles = 0;
  auto set_of = [&](int32_t x) { return sets->data() + static_cast<size_t>(x) * words; };
  auto unite = [&](int32_t into, int32_t from) {
    uint64_t* a = set_of(into);
    const uint64_t* b = set_of(from);
    for (int32_t w = 0; w < words; ++w) a[w] |= b[w];
  };
  for (int32_t root = 0; root < num_nodes; ++root) {
    if (stop != nullptr && !(*stopped = stop->Poll("lalr")).ok()) return in_cycles;
    if (depth[root] != 0) continue;
    stack.push_back(root);
    depth[root] = static_cast<int32_t>(stack.size());
    frames.push_back({root, rel.begin[root], depth[root]});
    while (!frames.empty()) {
      Frame& f = frames.back();
      const int32_t x = f.node;
      if (f.edge < rel.begin[x + 1]) {
        const int32_t y = rel.target[f.edge];
        if (depth[y] == 0) {
          stack.push_back(y);
          depth[y] = static_cast<int32_t>(stack.size());
          frames.push_back({y, rel.begin[y], depth[y]});
          continue;  // y's frame finishes, then this edge is revisited below
        }
        depth[x] = std::min(depth[x], depth[y]);
        unite(x, y);
        ++f.edge;
        continue;
      }
      // All edges of x done.
      const int32_t own_depth = f.own_depth;
      frames.pop_back();
      if (depth[x] == own_depth) {
        if (stack.back() != x) in_cycles += static_cast<int32_t>(stack.size()) - own_depth + 1;
        while (true) {
          const int32_t z = stack.back();
          stack.pop_back();
          depth[z] = kDone;
          if (component != nullptr) (*component)[z] = x;
          if (z == x) break;
          std::copy(set_of(x), set_of(x) + words, set_of(z));
        }
      }
      if (!frames.empty()) {
        // Finish the parent's edge to x.
        Frame& parent = frames.back();
        depth[parent.node] = std::min(depth[parent.node], depth[x]);
        unite(parent.node, x);
        ++parent.edge;
      }
    }
  }
  return in_cycles;
}

}  // namespace

Lookaheads ComputeLookaheads(const AugmentedGrammar& g, const Lr0Automaton& lr0) {
  Lookaheads la;
  CFGMASK_CHECK(ComputeLookaheads(g, lr0, nullptr, &la).ok());
  return la;
}

Status ComputeLookaheads(const AugmentedGrammar& g, const Lr0Automaton& lr0, StopCheck* stop,
                         Lookaheads* out) {
  Status stopped;
  auto poll = [&] { return stop == nullptr || (stopped = stop->Poll("lalr")).ok(); };
  Lookaheads& la = *out;
  la = Lookaheads();
  la.words = (g.num_terminals + 63) / 64;
  const int32_t words = la.words;
  const int32_t end = g.num_terminals - 1;

  // Number the nonterminal transitions.
  std::vector<int32_t> ntx_of_trans(lr0.trans_symbol.size(), -1);
  std::vector<int32_t> ntx_state, ntx_symbol, ntx_target;
  for (int32_t p = 0; p < lr0.num_states; ++p) {
    for (int32_t i = lr0.trans_begin[p]; i < lr0.trans_begin[p + 1]; ++i) {
      if (g.IsTerminal(lr0.trans_symbol[i])) continue;
      ntx_of_trans[i] = static_cast<int32_t>(ntx_state.size());
      ntx_state.push_back(p);
      ntx_symbol.push_back(lr0.trans_symbol[i]);
      ntx_target.push_back(lr0.trans_target[i]);
    }
  }
  const int32_t num_ntx = static_cast<int32_t>(ntx_state.size());
  la.nonterminal_transitions = num_ntx;

  // Reductions: the complete items of each state, root rules excluded.
  la.reduce_begin.push_back(0);
  for (int32_t q = 0; q < lr0.num_states; ++q) {
    for (int32_t i = lr0.closure_begin[q]; i < lr0.closure_begin[q + 1]; ++i) {
      const int32_t item = lr0.closure[i];
      if (lr0.item_next[item] >= 0 || lr0.item_rule[item] >= g.num_grammar_rules) continue;
      la.reduce_rule.push_back(lr0.item_rule[item]);
    }
    la.reduce_begin.push_back(static_cast<int32_t>(la.reduce_rule.size()));
  }

  // DR and reads.
  std::vector<uint64_t> follow(static_cast<size_t>(num_ntx) * words, 0);
  auto set_bit = [&](int32_t x, int32_t t) {
    follow[static_cast<size_t>(x) * words + (t >> 6)] |= uint64_t{1} << (t & 63);
  };
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (int32_t x = 0; x < num_ntx; ++x) {
    const int32_t r = ntx_target[x];
    for (int32_t i = lr0.trans_begin[r]; i < lr0.trans_begin[r + 1]; ++i) {
      const int32_t c = lr0.trans_symbol[i];
      if (g.IsTerminal(c)) {
        set_bit(x, c);
      } else if (g.nullable[c - g.num_terminals]) {
        edges.emplace_back(x, ntx_of_trans[i]);
      }
    }
  }
  for (size_t s = 0; s < lr0.start_state.size(); ++s) {
    set_bit(ntx_of_trans[lr0.TransitionIndex(lr0.start_state[s], g.start_symbol[s])], end);
  }
  std::vector<int32_t> reads_component(num_ntx);
  la.reads_cycle_transitions =
      Digraph(Relation::FromEdges(num_ntx, edges), words, &follow, &reads_component, stop, &stopped);
  CFGMASK_RETURN_IF_ERROR(stopped);

  // includes and lookback, walking each B-item of p' along its right side.
  edges.clear();
  std::vector<std::pair<int32_t, int32_t>> lookback;  // (reduction, transition)
  for (int32_t x = 0; x < num_ntx; ++x) {
    if (!poll()) return stopped;
    const int32_t p = ntx_state[x];
    const int32_t b = ntx_symbol[x] - g.num_terminals;
    for (int32_t c = lr0.closure_begin[p]; c < lr0.closure_begin[p + 1]; ++c) {
      const int32_t item = lr0.closure[c];
      const int32_t rule = lr0.item_rule[item];
      if (g.rule_lhs[rule] != b) continue;
      const int32_t len = g.RuleLength(rule);
      int32_t state = p;
      for (int32_t i = lr0.item_dot[item]; i < len; ++i) {
        const int32_t sym = g.rhs[g.rhs_begin[rule] + i];
        const int32_t ti = lr0.TransitionIndex(state, sym);
        CFGMASK_DCHECK(ti >= 0);
        state = lr0.trans_target[ti];
        if (g.IsTerminal(sym)) continue;
        bool rest_nullable = true;
        for (int32_t j = i + 1; j < len && rest_nullable; ++j) {
          const int32_t s2 = g.rhs[g.rhs_begin[rule] + j];
          rest_nullable = !g.IsTerminal(s2) && g.nullable[s2 - g.num_terminals];
        }
        if (rest_nullable) edges.emplace_back(ntx_of_trans[ti], x);
      }
      if (lr0.item_dot[item] != 0) continue;
      for (int32_t k = la.reduce_begin[state]; k < la.reduce_begin[state + 1]; ++k) {
        if (la.reduce_rule[k] == rule) lookback.emplace_back(k, x);
      }
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());

  // Follow as Lark computes it: over the quotient by reads components.
  std::vector<uint64_t> read;
  if (la.reads_cycle_transitions > 0) read = follow;
  std::vector<std::pair<int32_t, int32_t>> merged_edges;
  merged_edges.reserve(edges.size());
  for (const auto& [from, to] : edges) {
    merged_edges.emplace_back(reads_component[from], reads_component[to]);
  }
  Digraph(Relation::FromEdges(num_ntx, merged_edges), words, &follow, nullptr, stop, &stopped);
  CFGMASK_RETURN_IF_ERROR(stopped);
  for (int32_t x = 0; x < num_ntx; ++x) {
    const size_t rep = static_cast<size_t>(reads_component[x]) * words;
    std::copy(follow.begin() + rep, follow.begin() + rep + words,
              follow.begin() + static_cast<size_t>(x) * words);
  }
  auto lookaheads_from = [&](const std::vector<uint64_t>& follow_sets) {
    std::vector<uint64_t> sets(la.reduce_rule.size() * words, 0);
    for (const auto& [k, x] : lookback) {
      if (!poll()) return sets;
      uint64_t* into = sets.data() + static_cast<size_t>(k) * words;
      const uint64_t* from = follow_sets.data() + static_cast<size_t>(x) * words;
      for (int32_t w = 0; w < words; ++w) into[w] |= from[w];
    }
    return sets;
  };
  la.sets = lookaheads_from(follow);
  CFGMASK_RETURN_IF_ERROR(stopped);

  // DeRemer-Pennello's own Follow, to count what the merge added.
  if (la.reads_cycle_transitions > 0) {
    Digraph(Relation::FromEdges(num_ntx, edges), words, &read, nullptr, stop, &stopped);
    CFGMASK_RETURN_IF_ERROR(stopped);
    const std::vector<uint64_t> exact = lookaheads_from(read);
    CFGMASK_RETURN_IF_ERROR(stopped);
    for (size_t w = 0; w < exact.size(); ++w) {
      la.lark_extra_lookaheads += __builtin_popcountll(la.sets[w] & ~exact[w]);
    }
  }
  return Status::Ok();
}

}  // namespace lalr_internal
}  // namespace cfgmask
