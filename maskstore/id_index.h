// An open-addressing index (linear probing) over dense ids 0, 1, 2, ... whose
// entries live in the caller's own list: the table holds ids only, so a
// look-up compares against the list and allocates nothing.  Used by the
// vocabulary walk's interner (maskstore/vocab_walk.cc) and the
// streamlining prover's memo (streamline/exploration.cc).
#ifndef CFGMASK_MASKSTORE_ID_INDEX_H_
#define CFGMASK_MASKSTORE_ID_INDEX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "grammar/base/check.h"

namespace cfgmask {

class IdIndex {
 public:
  // murmur3's 64-bit finaliser: spreads a key whose low bits vary little
  // (small ids, a hash built by a weak loop) before it picks a slot.
  static uint64_t Fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
  }
  // The id of the entry hashed `h` for which `equal(id)` holds, among the
  // `count` entries of the list; when there is none, `add()` appends the
  // entry to the list and its id, `count`, is returned (*added set).
  // `hash_of(id)` gives the hash of an entry already listed (for growing).
  // A slot holds id + 1 in the bits below the table's size and the hash's
  // high bits above them, so a probe that meets another entry is mostly
  // told apart by the slot alone: `equal` (which reads the caller's list,
  // usually a cache miss) runs only where those bits agree.
  template <class Equal, class Add, class HashOf>
  int32_t FindOrAdd(uint64_t h, size_t count, const Equal& equal, const Add& add,
                    const HashOf& hash_of, bool* added = nullptr) {
    if ((count + 1) * 2 > table_.size()) Grow(count, hash_of);
    const size_t mask = table_.size() - 1;
    const uint32_t tag = Tag(h, mask);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const uint32_t slot = table_[i];
      if (slot == 0) {
        table_[i] = tag | static_cast<uint32_t>(count + 1);
        add();
        if (added) *added = true;
        return static_cast<int32_t>(count);
      }
      if ((slot & ~static_cast<uint32_t>(mask)) != tag) continue;
      const int32_t id = static_cast<int32_t>((slot & mask) - 1);
      if (equal(id)) {
        if (added) *added = false;
        return id;
      }
    }
  }
  // Brings the first slot a look-up of hash h reads into the cache (a
  // hint: nothing changes).
  void Prefetch(uint64_t h) const {
    if (!table_.empty()) __builtin_prefetch(&table_[h & (table_.size() - 1)]);
  }
  void Clear() { std::vector<uint32_t>().swap(table_); }
  size_t bytes() const { return table_.capacity() * sizeof(uint32_t); }

 private:
  // The hash's high 32 bits above the table's index bits (id + 1 <= count
  // < size / 2 fits below them).
  static uint32_t Tag(uint64_t h, size_t mask) {
    return static_cast<uint32_t>(h >> 32) & ~static_cast<uint32_t>(mask);
  }
  template <class HashOf>
  void Grow(size_t count, const HashOf& hash_of) {
    CFGMASK_CHECK(count < (size_t{1} << 31));
    table_.assign(std::max<size_t>(16, table_.size() * 2), 0);
    const size_t mask = table_.size() - 1;
    for (size_t id = 0; id < count; ++id) {
      const uint64_t h = hash_of(static_cast<int32_t>(id));
      size_t i = h & mask;
      while (table_[i] != 0) i = (i + 1) & mask;
      table_[i] = Tag(h, mask) | static_cast<uint32_t>(id + 1);
    }
  }
  std::vector<uint32_t> table_;  // 0: empty; size a power of two, at most half full
};

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_ID_INDEX_H_
