// VocabTrie: the byte strings of all non-special, non-empty vocabulary tokens
// as a flat trie, for the walk that computes nfa_transition[q][token] from
// every terminal-automaton state (seed: mask-store streamlining, fig. 1;
// XGrammar section 3 walks the sorted vocabulary the same way, so shared
// prefixes are matched once).
//
// Layout: nodes are numbered in DFS pre-order over the tokens sorted as byte
// strings (unsigned byte order), root = node 0 with no byte.  Children of a
// node appear in increasing byte order, the first one (if any) at n + 1, and
// the descendants of n are exactly the indices [n + 1, subtree_end(n)).  So a
// walk is a loop over node indices: advance the automaton on byte(n) from the
// state saved at parent(n) (or at depth(n) - 1 on a stack), and when that byte
// is rejected jump to subtree_end(n), skipping every token that extends the
// rejected prefix.  Visiting [n + 1, subtree_end(n)) in index order visits the
// descendants in DFS order, parents before children.
// tokens_at(n) lists the ids (ascending) whose bytes end exactly at n; several
// ids may share one node (e.g. SentencePiece "▁" and <0x20> are both " ").
// Tested by vocab_trie_test.cc.
#ifndef CFGMASK_LEXER_VOCAB_TRIE_H_
#define CFGMASK_LEXER_VOCAB_TRIE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lexer/tokenizer/tokenizer.h"

namespace cfgmask {

class VocabTrie {
 public:
  // An empty trie: the root alone.
  VocabTrie();

  // All tokens of `vocab` with special == 0 and non-empty bytes.
  static VocabTrie Build(const Vocabulary& vocab);
  // The given token ids (bytes from `vocab`; special/empty ones are skipped).
  static VocabTrie Build(const Vocabulary& vocab, std::span<const int32_t> ids);

  int32_t num_nodes() const { return static_cast<int32_t>(byte_.size()); }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids_.size()); }
  int32_t max_depth() const { return max_depth_; }

  uint8_t byte(int32_t n) const { return byte_[n]; }           // 0 for the root
  int32_t parent(int32_t n) const { return parent_[n]; }       // -1 for the root
  int32_t depth(int32_t n) const { return depth_[n]; }         // bytes from the root
  int32_t subtree_end(int32_t n) const { return subtree_end_[n]; }
  // n + 1 when n has children, else -1.
  int32_t first_child(int32_t n) const { return subtree_end_[n] > n + 1 ? n + 1 : -1; }
  // The next child of parent(n) after n, or -1.
  int32_t next_sibling(int32_t n) const {
    int32_t p = parent_[n];
    return p >= 0 && subtree_end_[n] < subtree_end_[p] ? subtree_end_[n] : -1;
  }
  std::span<const int32_t> tokens_at(int32_t n) const {
    return std::span<const int32_t>(token_ids_.data() + token_begin_[n],
                                     token_ids_.data() + token_begin_[n + 1]);
  }

  // The tokens of n's descendants (not n's own), in DFS order: those whose
  // bytes extend n's by at least one byte.
  std::span<const int32_t> tokens_below(int32_t n) const {
    return std::span<const int32_t>(token_ids_.data() + token_begin_[n + 1],
                                     token_ids_.data() + token_begin_[subtree_end_[n]]);
  }
  // The tokens of n and of its descendants, in DFS order.
  std::span<const int32_t> tokens_in_subtree(int32_t n) const {
    return std::span<const int32_t>(token_ids_.data() + token_begin_[n],
                                     token_ids_.data() + token_begin_[subtree_end_[n]]);
  }
  // Is every byte on the edges below n (the bytes of its descendants) in
  // `bytes`, a set of ASCII bytes 1..127 (bit b of bytes[b / 64])?  A
  // subtree holding byte 0 or a byte >= 0x80 is never within: its summary
  // keeps bit 0 for "some byte outside 1..127".
  // Are all bytes below n in 1..127 (a cheap first test for BelowWithin)?
  bool BelowAscii(int32_t n) const { return !below_outside_[n]; }
  bool BelowWithin(int32_t n, const uint64_t bytes[2]) const {
    if (below_outside_[n]) return false;  // one byte per node, read first
    const uint64_t* m = below_bytes_.data() + 2 * static_cast<size_t>(n);
    return (m[0] & ~(bytes[0] & ~uint64_t{1})) == 0 && (m[1] & ~bytes[1]) == 0;
  }

  // The child of n labelled `b`, or -1 (binary search over the children).
  int32_t Child(int32_t n, uint8_t b) const;
  // The node spelling `bytes` from the root, or -1.
  int32_t Find(std::string_view bytes) const;
  // The bytes from the root to n.
  std::string Prefix(int32_t n) const;

  // Sizes, then one line per node up to `max_nodes`: index, depth, byte,
  // subtree_end, token ids.
  std::string DebugString(int32_t max_nodes = 64) const;

 private:
  void FillBelowBytes();
  std::vector<uint8_t> byte_;
  std::vector<int32_t> parent_;
  std::vector<int32_t> depth_;
  std::vector<int32_t> subtree_end_;
  std::vector<int32_t> token_begin_;  // num_nodes + 1 offsets into token_ids_
  std::vector<int32_t> token_ids_;
  std::vector<uint64_t> below_bytes_;  // 2 per node: bytes below it (bit 0: outside 1..127)
  std::vector<uint8_t> below_outside_;  // per node: bit 0 of its below_bytes_
  int32_t max_depth_ = 0;
};

}  // namespace cfgmask

#endif  // CFGMASK_LEXER_VOCAB_TRIE_H_
