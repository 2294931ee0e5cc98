// Row memo: see row_memo.h.
#include "runtime/row_memo.h"

#include <algorithm>

#include "runtime/or_reduce.h"
#include "runtime/session.h"
#include "runtime/suffix_quotient.h"

namespace cfgmask {

RowMemo::RowMemo(const CompiledStore* store, int64_t cap_bytes)
    : store_(store),
      text_mask_(store->vocab_size > 0 ? TextTokenMask(*store) : std::vector<uint32_t>()),
      row_prefixes_(std::make_shared<RowPrefixes>(store->num_roots)),
      suffix_lexings_(std::make_shared<SuffixLexings>(store)),
      shard_cap_(std::max<int64_t>(cap_bytes / static_cast<int64_t>(kShards), 1)),
      shards_(new Shard[kShards]) {}

uint64_t RowMemo::Hash(const LiveState& l) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
  };
  mix(static_cast<uint32_t>(l.q));
  mix(static_cast<uint32_t>(l.col));
  mix(static_cast<uint32_t>(l.paren));
  mix(static_cast<uint32_t>(l.stack.Top()));
  for (int32_t v : l.indent) mix(static_cast<uint32_t>(v));
  for (uint64_t v : l.slot_bits) mix(v);
  return h ^ (h >> 31);
}

// Entries that hold their whole stack live under the hash mixed with the
// stack's top node: the many steps of a long list (one key each) do not
// lengthen the bucket that every other look-up of `hash` walks.
uint64_t RowMemo::WholeHash(uint64_t hash, const LrStack::Node* top) {
  uint64_t h = (hash ^ reinterpret_cast<uintptr_t>(top)) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

bool RowMemo::Find(const LiveState& l, uint64_t hash, std::vector<int32_t>* rows) {
  // Does the stack end with `suffix` (bottom first)?  Walked from the top.
  auto ends_with = [&l](const std::vector<int32_t>& suffix) {
    if (suffix.size() > l.stack.Depth()) return false;
    const LrStack::Node* n = l.stack.top_node();
    for (size_t i = suffix.size(); i-- > 0; n = n->parent) {
      if (n->state != suffix[i]) return false;
    }
    return true;
  };
  for (const uint64_t h : {hash, WholeHash(hash, l.stack.top_node())}) {
    Shard& sh = ShardOf(h);
    std::lock_guard<std::mutex> lock(sh.mu);
    auto [b, e] = sh.map.equal_range(h);
    for (auto it = b; it != e; ++it) {
      const Entry& x = it->second;
      if (x.q != l.q || x.col != l.col || x.paren != l.paren || x.indent != l.indent ||
          x.slots != l.slot_bits ||
          (x.whole.empty() ? !ends_with(x.suffix) : x.whole.top_node() != l.stack.top_node())) {
        continue;
      }
      rows->insert(rows->end(), x.rows.begin(), x.rows.end());
      hits_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void RowMemo::Put(const LiveState& l, uint64_t hash, size_t low, const int32_t* rows, size_t n) {
  const size_t depth = l.stack.Depth();
  low = std::min(low, depth - 1);  // the top is always part of the key
  // A check read the stack that far down (a reduction through a long list):
  // the key is the stack itself, held (its top node names it), not a copy
  // of its states that every Find of this hash would walk.
  const bool whole = depth - low > kMaxSuffix;
  std::vector<int32_t> suffix(whole ? 0 : depth - low);
  const LrStack::Node* node = l.stack.top_node();
  for (size_t i = suffix.size(); i-- > 0; node = node->parent) suffix[i] = node->state;
  Entry x{l.q, l.col, l.paren, l.indent, l.slot_bits, std::move(suffix),
          whole ? l.stack : LrStack(), std::vector<int32_t>(rows, rows + n)};
  const int64_t bytes =
      static_cast<int64_t>(sizeof(Entry) + 64 + (whole ? sizeof(LrStack::Node) : 0) +
                           4 * (x.indent.size() + x.suffix.size() + x.rows.size()) +
                           8 * x.slots.size());
  if (bytes > shard_cap_) return;
  if (whole) hash = WholeHash(hash, l.stack.top_node());
  Shard& sh = ShardOf(hash);
  std::lock_guard<std::mutex> lock(sh.mu);
  if (sh.bytes + bytes > shard_cap_) {
    sh.map.clear();
    sh.bytes = 0;
  }
  sh.bytes += bytes;
  sh.map.emplace(hash, std::move(x));
}

int64_t RowMemo::bytes() const {
  int64_t total = 0;
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mu);
    total += shards_[i].bytes;
  }
  return total;
}

}  // namespace cfgmask
