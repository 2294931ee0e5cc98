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

namespace cfgmask {

class IdIndex {
 public:
  // The id of the entry hashed `h` for which `equal(id)` holds, among the
  // `count` entries of the list; when there is none, `add()` appends the
  // entry to the list and its id, `count`, is returned (*added set).
  // `hash_of(id)` gives the hash of an entry already listed (for growing).
  template <class Equal, class Add, class HashOf>
  int32_t FindOrAdd(uint64_t h, size_t count, const Equal& equal, const Add& add,
                    const HashOf& hash_of, bool* added = nullptr) {
    if ((count + 1) * 2 > table_.size()) Grow(count, hash_of);
    const size_t mask = table_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const int32_t id = table_[i];
      if (id < 0) {
        table_[i] = static_cast<int32_t>(count);
        add();
        if (added) *added = true;
        return table_[i];
      }
      if (equal(id)) {
        if (added) *added = false;
        return id;
      }
    }
  }
  void Clear() { std::vector<int32_t>().swap(table_); }
  size_t bytes() const { return table_.capacity() * sizeof(int32_t); }

 private:
  template <class HashOf>
  void Grow(size_t count, const HashOf& hash_of) {
    table_.assign(std::max<size_t>(16, table_.size() * 2), -1);
    const size_t mask = table_.size() - 1;
    for (size_t id = 0; id < count; ++id) {
      size_t i = hash_of(static_cast<int32_t>(id)) & mask;
      while (table_[i] >= 0) i = (i + 1) & mask;
      table_[i] = static_cast<int32_t>(id);
    }
  }
  std::vector<int32_t> table_;  // ids; -1: empty; size a power of two
};

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_ID_INDEX_H_
