// Unlimited credit exploration (seed, "is_always_legal"), on the LALR(1)
// tables through the LR core (parser/lr_core.h): the one exploration behind
// both streamlining analyses.
//
// A query asks about a sequence r[0..n) of elements that follows a symbol X
// just shifted, with nothing known of the parse stack below the state X
// entered.  The exploration keeps the known top of the stack K (at most
// max_stack states, the oldest dropped), feeds each element's terminal
// through LrFeed, and when a reduction pops below K it "borrows" every
// reachable LR state with a path of the right length to K's bottom
// (LrPredecessors::Frontier): the real stack's state there is one of them.
// Two questions share the code:
//
//  - every (always legal, the proof): every configuration takes the whole
//    sequence; every borrowed state must succeed, and what the exploration
//    does not know makes the proof fail;
//  - some (never legal, the refutation): no configuration can take it; one
//    borrowed state that succeeds is enough, and what is not known counts as
//    possible.
//
// Results are memoised by (context, K, rest of the sequence); a node met
// again while it is being explored (a cycle of borrowing reductions) counts
// as "not proved" / "possible", so a cached answer never rests on it.  A
// query that exceeds max_steps is not proved / possible.
//
// The elements are a policy (Check): ItemExploration reads the store's item
// sequences (lexer/terminal_automaton.h) exactly as the runtime checks them
// (streamline/never_legal.h and always_legal.h use it); TerminalExploration
// reads plain terminal sequences over ParseTables (the seed's definition,
// used by the tests and by research queries).
// Tested by always_legal_test.cc, never_legal_test.cc and
// streamline_store_test.cc (masks identical with and without streamlining).
#ifndef CFGMASK_STREAMLINE_EXPLORATION_H_
#define CFGMASK_STREAMLINE_EXPLORATION_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "maskstore/compiled_store.h"
#include "maskstore/defaults.h"
#include "maskstore/id_index.h"
#include "parser/lr_core.h"

namespace cfgmask {

struct ExplorationOptions {
  int32_t max_stack = defaults::kExplorationMaxStack;  // known part of the stack kept (>= 2)
  int64_t max_steps = defaults::kExplorationMaxSteps;  // LR actions per query; beyond: not proved
};

class Exploration {
 public:
  Exploration(const LrTables& lr, int32_t start_state, ExplorationOptions options);
  virtual ~Exploration() = default;
  // Did the last query run out of steps?
  bool exceeded() const { return exceeded_; }
  // Bytes the memo holds.
  int64_t MemoBytes() const { return memo_[0].bytes() + memo_[1].bytes(); }
  // Empties the memo when it holds more than max_bytes (call between
  // queries only).  Answers stay exact; only a query near the step budget
  // may come out differently (not proved / possible) without what the memo
  // held, so the caller clears at points fixed by its own order of queries.
  void TrimMemo(int64_t max_bytes) {
    if (MemoBytes() > max_bytes) {
      memo_[0] = KeyMemo();
      memo_[1] = KeyMemo();
      borrows_.clear();
    }
  }
  int64_t steps() const { return steps_; }

 protected:
  // Starts a query: which question, fresh step budget.
  void Begin(bool possible) {
    possible_ = possible;
    steps_ = 0;
    exceeded_ = false;
  }
  bool possible() const { return possible_; }
  // Can the elements r[pos..n) be taken from every (some) configuration
  // whose known top is K?  Memoised; calls Check for r[pos].
  bool Proved(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
              int32_t ctx);
  // The policy: decide r[pos] on top of K, continuing with Proved(pos + 1)
  // or Feed(.., pos + 1, ..).  `ctx` is the query's own context (the item
  // exploration's first slot opened inside the sequence).
  virtual bool Check(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
                     int32_t ctx) = 0;
  // Feeds terminal t to every (some) configuration whose known top is K,
  // then continues with r[next..n) (next < 0: nothing more).
  bool Feed(const int32_t* r, int32_t n, int32_t next, std::span<const int32_t> K, int32_t t,
            int32_t ctx);
  // Is t taken from every (some) configuration whose known top is K?
  bool AcceptsAll(const std::vector<int32_t>& K, int32_t t) {
    return FeedMemo(nullptr, 0, -1, K, t, 0);
  }

  const LrTables lr_;
  const LrPredecessors preds_;
  const ExplorationOptions options_;

 private:
  // The memo: int32 keys (copied into one arena) to small values, indexed
  // by IdIndex; allocation-free look-ups.
  class KeyMemo {
   public:
    static constexpr int8_t kUnanswered = 3;  // an entry whose query was cut short
    // The key's hash, also in steps (a key's prefix hashed once): Start with
    // the whole key's length, Add each value, End.
    static uint64_t HashStart(size_t size) { return 0x9e3779b97f4a7c15ULL ^ size; }
    static uint64_t HashAdd(uint64_t h, int32_t v) {
      return (h ^ static_cast<uint32_t>(v)) * 0x100000001b3ULL + (h >> 29);
    }
    // The index probes by the low bits, which the loop mixes poorly for keys
    // of small ids (LR states, items): finalised (murmur3's fmix64), so that
    // probe runs stay short.
    static uint64_t HashEnd(uint64_t h) { return IdIndex::Fmix64(h); }
    static uint64_t Hash(const int32_t* key, size_t size);
    // The entry of `key` hashed h (Hash), added with value `init` if new.
    int32_t Entry(const std::vector<int32_t>& key, uint64_t h, int8_t init, bool* inserted);
    void Prefetch(uint64_t h) const { index_.Prefetch(h); }
    int8_t& value(int32_t id) { return values_[id]; }
    int64_t bytes() const {
      return static_cast<int64_t>(index_.bytes() + 25 * values_.size() + 4 * arena_.size());
    }

   private:
    // Grows a block at a time: no copy of what is held (a growing vector
    // would briefly hold its old and new buffers, half again the memo).
    template <class T>
    class Blocks {
     public:
      static constexpr int kShift = 16;
      T& operator[](size_t i) { return blocks_[i >> kShift][i & ((size_t{1} << kShift) - 1)]; }
      const T& operator[](size_t i) const {
        return blocks_[i >> kShift][i & ((size_t{1} << kShift) - 1)];
      }
      size_t size() const { return size_; }
      void push_back(T v) {
        if ((size_ >> kShift) == blocks_.size()) {
          blocks_.push_back(std::make_unique<T[]>(size_t{1} << kShift));
        }
        (*this)[size_++] = v;
      }
      // Room for n contiguous elements (n <= block size): skips to the next
      // block when the current one cannot hold them.  Returns their start.
      size_t Reserve(size_t n) {
        const size_t room = (size_t{1} << kShift) - (size_ & ((size_t{1} << kShift) - 1));
        if (n > room && (size_ & ((size_t{1} << kShift) - 1)) != 0) size_ += room;
        if ((size_ >> kShift) == blocks_.size()) {
          blocks_.push_back(std::make_unique<T[]>(size_t{1} << kShift));
        }
        const size_t at = size_;
        size_ += n;
        return at;
      }
      T* at(size_t i) { return &(*this)[i]; }

     private:
      std::vector<std::unique_ptr<T[]>> blocks_;
      size_t size_ = 0;
    };
    IdIndex index_;
    Blocks<uint64_t> hash_;
    Blocks<size_t> offset_;
    Blocks<uint32_t> length_;
    Blocks<int32_t> arena_;  // keys, each within one block
    Blocks<int8_t> values_;
  };
  struct KnownTop;

  bool FeedMemo(const int32_t* r, int32_t n, int32_t next, const std::vector<int32_t>& K,
                int32_t t, int32_t ctx);
  template <class F>
  bool Memoised(uint64_t h, const F& compute);
  // The memo key of r[pos..n) (t < 0) or of feeding t before it, on top of K.
  void Key(const int32_t* r, int32_t n, int32_t pos, std::span<const int32_t> K, int32_t t,
           int32_t ctx);
  // The borrow step's pairs (p, goto(p, lhs)) below `state` at `distance`
  // (LrPredecessors::ForEachBorrow's, in its order), flat; kept until the
  // memo is emptied.
  const std::vector<int32_t>& Borrows(int32_t state, int32_t distance, int32_t lhs);

  static constexpr int8_t kInProgress = 2;
  KeyMemo memo_[2];  // [possible_]
  std::unordered_map<uint64_t, std::vector<int32_t>> borrows_;
  std::deque<std::vector<int32_t>> stacks_;  // Feed's known tops, per nesting depth
  size_t depth_ = 0;
  std::vector<int32_t> key_;
  int64_t steps_ = 0;
  bool exceeded_ = false;
  bool possible_ = false;  // which question: every configuration (false) or some (true)
};

// Counts of a streamlining step's queries.
struct StepQueries {
  int64_t queries = 0;          // explorations run (after the cache)
  int64_t cache_hits = 0;
  int64_t budget_exceeded = 0;
};

// FNV-1a over int32 sequences (item sequences, suffixes).
struct SequenceHash {
  size_t operator()(std::span<const int32_t> v) const {
    size_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return h;
  }
};

// One question's answers about item-sequence suffixes, cached by suffix:
// the streamlining steps ask each suffix once.  A suffix is interned as its
// first item and the id of the suffix after it (ids from the back of the
// sequence), so that each distinct suffix costs a few bytes whatever its
// length, and a look-up allocates nothing.  The index is hashed by the
// suffix's content (which the pair stands for), not by the pair: the hashes
// of all the suffixes of a sequence are known before the first look-up, so
// their slots are fetched together instead of one cache miss after another
// along the chain of ids.
class SuffixAnswers {
 public:
  // The ids of the suffixes items[j, n), for every j < n, in (*ids)[j].
  void SuffixIds(const int32_t* items, int32_t n, std::vector<int32_t>* ids) {
    ids->resize(n);
    hashes_.resize(n);
    uint32_t h = kSeed;
    for (int32_t j = n - 1; j >= 0; --j) {
      h = ContentStep(h, items[j]);
      hashes_[j] = h;
      index_.Prefetch(Hash(h));
    }
    int32_t tail = kEmpty;
    for (int32_t j = n - 1; j >= 0; --j) {
      const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(items[j])) << 32 |
                           static_cast<uint32_t>(tail);
      const uint32_t content = hashes_[j];
      tail = index_.FindOrAdd(
          Hash(content), keys_.size(), [&](int32_t i) { return keys_[i] == key; },
          [&] {
            keys_.push_back(key);
            content_.push_back(content);
            answer_.push_back(kUnknown);
          },
          [&](int32_t i) { return Hash(content_[i]); });
      (*ids)[j] = tail;
    }
  }
  // The answer for the suffix `id` (of SuffixIds): cached, else ask()
  // (counted, with whether the exploration `x` ran out of steps on it).
  template <class Ask>
  bool Get(int32_t id, const Exploration& x, const Ask& ask) {
    if (answer_[id] != kUnknown) {
      ++counts_.cache_hits;
      return answer_[id] != 0;
    }
    ++counts_.queries;
    const bool answer = ask();
    counts_.budget_exceeded += x.exceeded();
    answer_[id] = answer;
    return answer;
  }
  const StepQueries& counts() const { return counts_; }
  // Frees the cached answers (the counts stay).
  void Release() {
    index_.Clear();
    std::vector<uint64_t>().swap(keys_);
    std::vector<uint32_t>().swap(content_);
    std::vector<int8_t>().swap(answer_);
    std::vector<uint32_t>().swap(hashes_);
  }

 private:
  static constexpr int32_t kEmpty = -1;  // the tail of a sequence's last item
  static constexpr int8_t kUnknown = -1;
  static constexpr uint32_t kSeed = 0x811c9dc5u;
  // A suffix's content hash from the one of the suffix after it (32 bits
  // kept per suffix; equal hashes only cost a comparison of the pairs).
  static uint32_t ContentStep(uint32_t h, int32_t item) {
    const uint64_t k = Hash(static_cast<uint64_t>(h) << 32 | static_cast<uint32_t>(item));
    return static_cast<uint32_t>(k >> 32) ^ static_cast<uint32_t>(k);
  }
  static uint64_t Hash(uint64_t k) { return IdIndex::Fmix64(k); }
  IdIndex index_;
  std::vector<uint64_t> keys_;     // per suffix: first item << 32 | the next suffix's id
  std::vector<uint32_t> content_;  // per suffix: its content hash (ContentStep)
  std::vector<int8_t> answer_;     // per suffix: 0, 1 or kUnknown
  std::vector<uint32_t> hashes_;   // SuffixIds' scratch
  StepQueries counts_;
};

// The store's item sequences, checked as the runtime session checks them: an
// Emit's terminal in the contextual scanner of the known top state and none
// of its blockers, the keyword retyping it gets there, the reductions and
// shift it triggers; a Hit against the scanner of an Emit made inside the
// sequence; a Tail by some terminal still able to end that the parser takes.
// Items whose outcome depends on what the exploration does not know (the
// indenter's stack for a newline, the scanner of a boundary before the
// sequence) make a proof fail and a refutation fail too.
class ItemExploration : public Exploration {
 public:
  ItemExploration(const CompiledStore& store, ExplorationOptions options);
  // Does every configuration in which the Emit `emit` was just accepted
  // accept the items r[0..n)?  (is_always_legal on items.)
  bool ProveAfterEmit(int32_t emit, const int32_t* r, int32_t n);
  // Can any configuration in which the Emit `emit` was just accepted accept
  // r[0..n)?  False only when none can.  (The negation of is_never_legal.)
  bool PossibleAfterEmit(int32_t emit, const int32_t* r, int32_t n);

 private:
  bool Start(int32_t emit, const int32_t* r, int32_t n, std::vector<int32_t>* types,
             int32_t* base_slot) const;
  bool Check(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
             int32_t base_slot) override;
  bool TailProved(const std::vector<int32_t>& K, int32_t item);

  const CompiledStore& s_;
};

// Plain terminal sequences over ParseTables: is every (some) viable prefix
// ending in terminal x continued by the terminals s[0..n)?
class TerminalExploration : public Exploration {
 public:
  TerminalExploration(const ParseTables& tables, int32_t start_state, ExplorationOptions options)
      : Exploration(LrTables::Of(tables), start_state, options) {}
  // True only with a proof that every viable prefix ending in x is
  // continued by s (x never shifted: vacuously true).
  bool ProveAfter(int32_t x, const int32_t* s, int32_t n);
  // False only when no viable prefix ending in x is continued by s.
  bool PossibleAfter(int32_t x, const int32_t* s, int32_t n);

 private:
  bool Run(bool possible, int32_t x, const int32_t* s, int32_t n);
  bool Check(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
             int32_t ctx) override {
    return Feed(r, n, pos + 1, K, r[pos], ctx);
  }
};

}  // namespace cfgmask

#endif  // CFGMASK_STREAMLINE_EXPLORATION_H_
