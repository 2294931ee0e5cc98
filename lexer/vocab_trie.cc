// VocabTrie construction: sort the token byte strings, then build the nodes
// in one pass keeping the path to the previous token on a stack.  Each token
// shares its longest common prefix with the previous one (sorted order puts
// every shared prefix on the stack), pops the deeper nodes — their subtrees
// are complete, so subtree_end is the current node count — and pushes one new
// node per remaining byte.  Nodes are thus created in DFS pre-order, children
// in byte order.  O(total bytes + sort).  Tested by vocab_trie_test.cc.
#include "lexer/vocab_trie.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "grammar/base/check.h"

namespace cfgmask {

VocabTrie::VocabTrie()
    : byte_{0}, parent_{-1}, depth_{0}, subtree_end_{1}, token_begin_{0, 0}, below_bytes_{0, 0}, below_outside_{0} {}

VocabTrie VocabTrie::Build(const Vocabulary& vocab) {
  std::vector<int32_t> ids(vocab.size());
  std::iota(ids.begin(), ids.end(), 0);
  return Build(vocab, ids);
}

VocabTrie VocabTrie::Build(const Vocabulary& vocab, std::span<const int32_t> ids) {
  std::vector<int32_t> order;
  order.reserve(ids.size());
  for (int32_t id : ids) {
    CFGMASK_CHECK(id >= 0 && id < vocab.size());
    if (!vocab.special[id] && !vocab.tokens[id].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    int c = vocab.tokens[a].compare(vocab.tokens[b]);
    return c != 0 ? c < 0 : a < b;
  });
  order.erase(std::unique(order.begin(), order.end()), order.end());

  VocabTrie trie;
  trie.token_begin_.clear();
  std::vector<int32_t> end_node(order.size());
  std::vector<int32_t> path = {0};  // path[d] = node at depth d
  const std::string* previous = nullptr;
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& bytes = vocab.tokens[order[k]];
    size_t common = 0;
    if (previous != nullptr) {
      size_t limit = std::min({bytes.size(), previous->size(), path.size() - 1});
      while (common < limit && bytes[common] == (*previous)[common]) ++common;
    }
    while (path.size() > common + 1) {
      trie.subtree_end_[path.back()] = trie.num_nodes();
      path.pop_back();
    }
    for (size_t d = common; d < bytes.size(); ++d) {
      int32_t node = trie.num_nodes();
      trie.byte_.push_back(static_cast<uint8_t>(bytes[d]));
      trie.parent_.push_back(path.back());
      trie.depth_.push_back(static_cast<int32_t>(d + 1));
      trie.subtree_end_.push_back(-1);
      path.push_back(node);
    }
    end_node[k] = path.back();
    trie.max_depth_ = std::max(trie.max_depth_, static_cast<int32_t>(bytes.size()));
    previous = &bytes;
  }
  while (!path.empty()) {
    trie.subtree_end_[path.back()] = trie.num_nodes();
    path.pop_back();
  }

  // Tokens per node, ids ascending within a node (counting sort keeps the
  // sorted order, which breaks byte ties by id).
  trie.token_begin_.assign(trie.num_nodes() + 1, 0);
  for (int32_t node : end_node) ++trie.token_begin_[node + 1];
  for (int32_t n = 0; n < trie.num_nodes(); ++n) trie.token_begin_[n + 1] += trie.token_begin_[n];
  trie.token_ids_.resize(order.size());
  std::vector<int32_t> fill(trie.token_begin_.begin(), trie.token_begin_.end() - 1);
  for (size_t k = 0; k < order.size(); ++k) trie.token_ids_[fill[end_node[k]]++] = order[k];
  trie.FillBelowBytes();
  return trie;
}

void VocabTrie::FillBelowBytes() {
  below_bytes_.assign(2 * static_cast<size_t>(num_nodes()), 0);
  // Children follow their parents: one backward pass folds each node's
  // byte and summary into its parent's.
  for (int32_t n = num_nodes() - 1; n > 0; --n) {
    uint64_t* p = below_bytes_.data() + 2 * static_cast<size_t>(parent_[n]);
    const uint64_t* m = below_bytes_.data() + 2 * static_cast<size_t>(n);
    const uint8_t b = byte_[n];
    p[0] |= m[0];
    p[1] |= m[1];
    if (b == 0 || b >= 0x80) {
      p[0] |= 1;
    } else {
      p[b / 64] |= uint64_t{1} << (b % 64);
    }
  }
  below_outside_.resize(num_nodes());
  for (int32_t n = 0; n < num_nodes(); ++n) below_outside_[n] = below_bytes_[2 * static_cast<size_t>(n)] & 1;
}

int32_t VocabTrie::Child(int32_t n, uint8_t b) const {
  // Children sit at n + 1, subtree_end(n + 1), ...; usually few, so a linear
  // scan with an early exit on the sorted labels.
  for (int32_t c = n + 1; c < subtree_end_[n]; c = subtree_end_[c]) {
    if (byte_[c] == b) return c;
    if (byte_[c] > b) return -1;
  }
  return -1;
}

int32_t VocabTrie::Find(std::string_view bytes) const {
  int32_t n = 0;
  for (char c : bytes) {
    n = Child(n, static_cast<uint8_t>(c));
    if (n < 0) return -1;
  }
  return n;
}

std::string VocabTrie::Prefix(int32_t n) const {
  std::string out(depth_[n], '\0');
  for (int32_t m = n; m > 0; m = parent_[m]) out[depth_[m] - 1] = static_cast<char>(byte_[m]);
  return out;
}

std::string VocabTrie::DebugString(int32_t max_nodes) const {
  std::string out = "VocabTrie: " + std::to_string(num_nodes()) + " nodes, " +
                    std::to_string(num_tokens()) + " tokens, max depth " +
                    std::to_string(max_depth_) + "\n";
  char line[96];
  for (int32_t n = 0; n < num_nodes() && n < max_nodes; ++n) {
    std::snprintf(line, sizeof(line), "%d d=%d byte=0x%02x end=%d tokens=", n, depth_[n],
                  byte_[n], subtree_end_[n]);
    out += line;
    bool first = true;
    for (int32_t id : tokens_at(n)) {
      out += (first ? "" : ",") + std::to_string(id);
      first = false;
    }
    out += '\n';
  }
  return out;
}

}  // namespace cfgmask
