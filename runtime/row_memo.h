// The row memo: the store rows a decoding hypothesis accepts, keyed by
// exactly what checking them reads, so that a context met again costs one
// look-up instead of a walk of its lexer state's rows against the parser.
//
// The checks of a hypothesis' rows (runtime/session.cc) are a deterministic
// function of its lexer state, carried column, bracket depth, indenter stack,
// slot scanners and the entries of its LR stack at or above the deepest one
// any check popped to.  An entry keeps all of these, the stack as that
// suffix, so a hypothesis equal on them (its stack ending with the same
// suffix) accepts the same rows: exact by construction, and compared with
// the memo off in tests/row_memo_test.cc.
//
// One memo belongs to one store.  Sessions of that store may share it (a
// server that opens a session per request keeps its hits); it is sharded and
// locked, so sessions on different threads may use it at once.  Its size is
// bounded: a shard that would exceed its share of the budget is emptied.
// A key whose stack suffix is longer than kMaxSuffix states (a check that
// reduced through a long list reads the stack down to the list's start) is
// kept as the stack itself, held, matched by node identity and filed under
// the hash mixed with that node (WholeHash): such a key
// is met again only with that same stack (the next steps before a terminal
// is fed), and a copy of its states would cost every look-up of its hash a
// walk of that length, which grew with the list.
#ifndef CFGMASK_RUNTIME_ROW_MEMO_H_
#define CFGMASK_RUNTIME_ROW_MEMO_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "maskstore/compiled_store.h"
#include "parser/lr_core.h"

namespace cfgmask {

struct LiveState;
class RowPrefixes;
class SuffixLexings;

class RowMemo {
 public:
  // A memo of at most about `cap_bytes` for sessions of `store`.
  RowMemo(const CompiledStore* store, int64_t cap_bytes);
  RowMemo(const RowMemo&) = delete;
  RowMemo& operator=(const RowMemo&) = delete;

  const CompiledStore* store() const { return store_; }
  // The store's text-token mask (TextTokenMask), made once for its sessions.
  const std::vector<uint32_t>& text_mask() const { return text_mask_; }
  // The store's row prefix table (RowPrefixes, runtime/session.h, at its
  // default cap), made once here for every session that shares this memo:
  // it depends on the store alone, and a table per session cost each one up
  // to a byte per row (2.7 MB with sql.lark x Qwen2) in a server that opens
  // a session per request.
  const std::shared_ptr<RowPrefixes>& row_prefixes() const { return row_prefixes_; }
  // The store's lexing classes for exact suffix masks (SuffixLexings,
  // runtime/suffix_quotient.h), shared by the quotients of every session that
  // shares this memo: a function of the store alone, made per lexer state on
  // first use and kept while the memo lives, at most 64 lexer states' worth
  // (4 bytes per vocabulary token each, and their lexings; not counted in
  // bytes()).
  const std::shared_ptr<SuffixLexings>& suffix_lexings() const { return suffix_lexings_; }
  static uint64_t Hash(const LiveState& l);
  // Appends the rows memoised for `l` and returns true, or returns false.
  bool Find(const LiveState& l, uint64_t hash, std::vector<int32_t>* rows);
  // Records rows[0..n) for `l`, whose checks read l.stack from index `low` up.
  void Put(const LiveState& l, uint64_t hash, size_t low, const int32_t* rows, size_t n);

  int64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  int64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  int64_t bytes() const;

 private:
  struct Entry {
    int32_t q, col, paren;
    std::vector<int32_t> indent;
    std::vector<uint64_t> slots;
    std::vector<int32_t> suffix;  // the top of the parser stack the checks read
    LrStack whole;  // instead, past kMaxSuffix states: this very stack (node identity)
    std::vector<int32_t> rows;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_multimap<uint64_t, Entry> map;
    int64_t bytes = 0;
  };
  static constexpr size_t kShards = 16;
  // Past this many states read, an entry holds its stack instead (Put).
  static constexpr size_t kMaxSuffix = 256;
  Shard& ShardOf(uint64_t hash) { return shards_[(hash >> 59) % kShards]; }
  static uint64_t WholeHash(uint64_t hash, const LrStack::Node* top);

  const CompiledStore* store_;
  std::vector<uint32_t> text_mask_;
  std::shared_ptr<RowPrefixes> row_prefixes_;
  std::shared_ptr<SuffixLexings> suffix_lexings_;
  int64_t shard_cap_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<int64_t> hits_{0}, misses_{0};
};

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_ROW_MEMO_H_
