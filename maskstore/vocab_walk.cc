// The vocabulary walk and the store phase of the compile: see vocab_walk.h.
//
// The walk visits the vocabulary trie once per lexer state q found at a token
// boundary, in depth-first order; a prefix that kills every hypothesis skips
// its whole subtree.  Lexer states reached at the end of a token are new
// roots, until no new one appears.
//
// The walks of different roots are independent and run in parallel (oneTBB),
// against the lazily built automaton read-only: a walk that needs a
// transition not computed yet records the request and suspends that subtree.
// Between parallel passes the requests are computed serially, in root order,
// so automaton state ids, and hence the store bytes, do not depend on the
// thread count.  Most steps inside a terminal are plain (one hypothesis,
// no terminal can end, the byte's transition known and itemless): a tight
// loop takes them, and a subtree all of whose bytes the state loops on (the
// inside of a string or comment) is taken whole, its tokens being one
// contiguous range of the trie (VocabTrie::BelowWithin).  Each root interns its item sequences locally; finished roots
// are merged into the store in root order.  Tested by vocab_walk_test.cc
// (against a brute-force byte-by-byte simulation of every token, thread-count
// determinism and resource limits).
#include "maskstore/vocab_walk.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "grammar/analysis.h"
#include "grammar/base/check.h"
#include "lexer/terminal_automaton.h"
#include "lexer/vocab_trie.h"
#include "maskstore/id_index.h"
#include "maskstore/row_codec.h"

namespace cfgmask {
namespace {

std::string FormatSeconds(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// What a limit on lexer states met: the terminals whose own thread states
// are most numerous (a pattern whose threads multiply makes the lexer states
// multiply), with their definitions, for the error message.  Serial only.
std::string StateGrowthCulprits(const TerminalAutomaton& a, const Grammar& g) {
  std::string out;
  int shown = 0;
  for (const TerminalAutomaton::TerminalCensus& c : a.Census()) {
    if (shown == 3 || c.thread_states <= 1) break;
    out += shown++ == 0 ? "; the largest terminals: " : ", ";
    const std::string& where = g.terminals[c.terminal].where;
    out += g.SymbolName(c.terminal) + " (" + (where.empty() ? "" : where + ", ") +
           std::to_string(c.thread_states) + " thread states, in " + std::to_string(c.lexer_states) +
           " of " + std::to_string(a.num_states()) + " lexer states)";
  }
  return out;
}

// One lexing hypothesis of the walk: the lexer state, the items produced
// since the root (an interned sequence), the last non-ignored Emit among
// them (-1: none) and the column bookkeeping of the current terminal.
struct WalkState {
  int32_t q;
  int32_t seq;
  int32_t last_emit;
  ColumnDelta col;
  bool operator<(const WalkState& o) const {
    return std::tie(q, seq, col.absolute, col.value) <
           std::tie(o.q, o.seq, o.col.absolute, o.col.value);
  }
  bool operator==(const WalkState& o) const {
    return q == o.q && seq == o.seq && col.absolute == o.col.absolute && col.value == o.col.value;
  }
};

// A map from 64-bit keys to non-negative ids (open addressing, linear
// probing; keys are never erased).
class FlatIdMap {
 public:
  // The id stored under key, or -1.
  int32_t Find(uint64_t key) const {
    if (keys_.empty()) return -1;
    const size_t mask = keys_.size() - 1;
    for (size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      if (ids_[i] < 0) return -1;
      if (keys_[i] == key) return ids_[i];
    }
  }
  void Insert(uint64_t key, int32_t id) {
    if ((size_ + 1) * 2 > keys_.size()) Grow();
    const size_t mask = keys_.size() - 1;
    size_t i = Hash(key) & mask;
    while (ids_[i] >= 0 && keys_[i] != key) i = (i + 1) & mask;
    if (ids_[i] < 0) ++size_;
    keys_[i] = key;
    ids_[i] = id;
  }

 private:
  static uint64_t Hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void Grow() {
    std::vector<uint64_t> keys(std::max<size_t>(16, keys_.size() * 2));
    std::vector<int32_t> ids(keys.size(), -1);
    keys.swap(keys_);
    ids.swap(ids_);
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (ids[i] >= 0) Insert(keys[i], ids[i]);
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<int32_t> ids_;
  size_t size_ = 0;
};

// Item sequences by id, in one flat array (no allocation per sequence).
class SeqList {
 public:
  std::span<const int32_t> operator[](int32_t id) const {
    return {data_.data() + ends_[id] - Length(id), static_cast<size_t>(Length(id))};
  }
  size_t size() const { return ends_.size(); }
  void push_back(std::span<const int32_t> ids) {
    data_.insert(data_.end(), ids.begin(), ids.end());
    ends_.push_back(static_cast<int64_t>(data_.size()));
  }
  void shrink_to_fit() {
    data_.shrink_to_fit();
    ends_.shrink_to_fit();
  }
  // The sequences i with keep[i] >= 0, in order, concatenated in place (no copy
  // of the list); their end offsets are appended to *ends.  The list is left
  // empty.
  std::vector<int32_t> TakeKept(const std::vector<int32_t>& keep, std::vector<int32_t>* ends) {
    size_t w = 0;
    int64_t begin = 0;
    for (size_t i = 0; i < ends_.size(); ++i) {
      const int64_t end = ends_[i];
      if (keep[i] >= 0) {
        if (static_cast<int64_t>(w) != begin) {
          std::copy(data_.begin() + begin, data_.begin() + end, data_.begin() + w);
        }
        w += static_cast<size_t>(end - begin);
        ends->push_back(static_cast<int32_t>(w));
      }
      begin = end;
    }
    std::vector<int64_t>().swap(ends_);
    data_.resize(w);
    return std::move(data_);
  }
  int64_t bytes() const { return static_cast<int64_t>(4 * data_.size() + 8 * ends_.size()); }

 private:
  int64_t Length(int32_t id) const { return ends_[id] - (id == 0 ? 0 : ends_[id - 1]); }
  std::vector<int32_t> data_;
  std::vector<int64_t> ends_;
};

// Interns lexer items and item sequences as dense ids.  The indexes hold
// ids only (IdIndex) and compare against item_list / seq_list, so a look-up
// allocates nothing.
class Interner {
 public:
  int32_t Item(const LexItem& it) {
    return item_index_.FindOrAdd(
        HashItem(it), item_list.size(), [&](int32_t id) { return item_list[id] == it; },
        [&] { item_list.push_back(it); }, [&](int32_t id) { return HashItem(item_list[id]); });
  }
  int32_t Seq(const std::vector<LexItem>& items) {
    std::vector<int32_t> ids;
    ids.reserve(items.size());
    for (const LexItem& it : items) ids.push_back(Item(it));
    return SeqIds(ids);
  }
  // The sequence `seq` followed by item `item`, memoised.  The hash of a
  // sequence extends the one of its prefix (kept per sequence), so an
  // append hashes one item, not its whole prefix again.
  int32_t Append(int32_t seq, int32_t item) {
    const uint64_t key = (static_cast<uint64_t>(seq) << 32) | static_cast<uint32_t>(item);
    const int32_t found = appended_.Find(key);
    if (found >= 0) return found;
    CFGMASK_CHECK(seq_hash_.size() == seq_list.size());  // no look-up after the indexes go
    const std::span<const int32_t> prefix = seq_list[seq];
    const uint32_t h = Step(seq_hash_[seq], item);
    const size_t size = prefix.size() + 1;
    const int32_t id = seq_index_.FindOrAdd(
        Spread(h), seq_list.size(),
        [&](int32_t id) {
          const std::span<const int32_t> v = seq_list[id];
          return v.size() == size && v.back() == item &&
                 std::equal(prefix.begin(), prefix.end(), v.begin());
        },
        [&] {
          append_scratch_.assign(prefix.begin(), prefix.end());
          append_scratch_.push_back(item);
          seq_list.push_back(append_scratch_);
          seq_hash_.push_back(h);
        },
        [&](int32_t id) { return Spread(seq_hash_[id]); });
    appended_.Insert(key, id);
    return id;
  }
  int32_t SeqIds(const std::vector<int32_t>& ids) {
    CFGMASK_CHECK(seq_hash_.size() == seq_list.size());
    uint32_t h = kSeqSeed;
    for (int32_t v : ids) h = Step(h, v);
    return seq_index_.FindOrAdd(
        Spread(h), seq_list.size(),
        [&](int32_t id) {
          const std::span<const int32_t> v = seq_list[id];
          return v.size() == ids.size() && std::equal(v.begin(), v.end(), ids.begin());
        },
        [&] {
          seq_list.push_back(ids);
          seq_hash_.push_back(h);
        },
        [&](int32_t id) { return Spread(seq_hash_[id]); });
  }
  // Frees the indexes (and the hashes), keeping item_list and seq_list (a
  // finished sub-walk: no more look-ups).
  void ReleaseIndexes() {
    item_index_.Clear();
    seq_index_.Clear();
    appended_ = FlatIdMap();
    std::vector<int32_t>().swap(append_scratch_);
    seq_list.shrink_to_fit();
    std::vector<uint32_t>().swap(seq_hash_);
  }
  // Frees the indexes only (no more look-ups; the lists are still read).
  void DropIndexes() {
    std::vector<uint32_t>().swap(seq_hash_);
    item_index_.Clear();
    seq_index_.Clear();
    appended_ = FlatIdMap();
    std::vector<int32_t>().swap(append_scratch_);
  }
  // Frees everything but item_list (a finished root's interner, before
  // the serial merge that reads only its items).
  void ReleaseSequences() {
    seq_list = SeqList();
    std::vector<uint32_t>().swap(seq_hash_);
    item_index_.Clear();
    seq_index_.Clear();
    appended_ = FlatIdMap();
  }
  std::vector<LexItem> item_list;
  SeqList seq_list;

 private:
  static uint64_t Mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
  }
  static uint64_t HashItem(const LexItem& it) {
    uint64_t h = it.kind;
    for (int64_t v : {int64_t{it.terminal}, int64_t{it.blockers}, int64_t{it.full_match},
                      int64_t{it.col_absolute}, int64_t{it.col}, int64_t{it.slot}}) {
      h = Mix(h, static_cast<uint64_t>(v));
    }
    return h ^ (h >> 29);
  }
  // A sequence's hash, 32 bits kept per sequence: Step from the hash of
  // the sequence without its last id (kSeqSeed for the empty one), spread
  // to 64 bits for the index (equal hashes only cost a comparison).
  static constexpr uint32_t kSeqSeed = 0x811c9dc5u;
  static uint64_t Fmix(uint64_t k) { return IdIndex::Fmix64(k); }
  static uint32_t Step(uint32_t h, int32_t v) {
    const uint64_t k = Fmix(static_cast<uint64_t>(h) << 32 | static_cast<uint32_t>(v));
    return static_cast<uint32_t>(k >> 32) ^ static_cast<uint32_t>(k);
  }
  static uint64_t Spread(uint32_t h) { return Fmix(0x9e3779b97f4a7c15ULL ^ h); }
  IdIndex item_index_, seq_index_;
  FlatIdMap appended_;
  std::vector<int32_t> append_scratch_;
  std::vector<uint32_t> seq_hash_;  // per sequence of seq_list: its hash (Step)
};

// Which terminal can immediately follow which in some sentential form (the
// FOLLOW sets of terminals, computed over all symbols).  Two terminals that
// never touch cannot be consecutive Emits of one token, whatever the parser
// state: pruning such splits keeps tokens like "================" from
// producing exponentially many candidate lexings.
class FollowRelation {
 public:
  explicit FollowRelation(const Grammar& g) : T_(g.num_terminals()) {
    const std::vector<uint8_t> nullable = NullableSymbols(g);
    const std::vector<std::vector<uint8_t>> follow = FollowSets(g, nullable, FirstSets(g, nullable));
    can_follow_.assign(static_cast<size_t>(T_) * T_, 0);
    for (int32_t a = 0; a < T_; ++a) {
      for (int32_t b = 0; b < T_; ++b) can_follow_[static_cast<size_t>(a) * T_ + b] = follow[a][b];
    }
  }
  bool CanFollow(int32_t a, int32_t b) const {
    return can_follow_[static_cast<size_t>(a) * T_ + b];
  }

 private:
  int32_t T_;
  std::vector<uint8_t> can_follow_;
};

struct WalkContext {
  const TerminalAutomaton* a;
  int32_t nl;                      // indenter newline terminal, -1 without indenter
  const StoreArray<uint8_t>* ignored;
  const FollowRelation* follow;    // nullptr: every pair of Emits is kept
};

// Could Emit e2 come right after Emit e1 (either may be retyped by Lark's
// "unless" into one of its full-match strings)?  A newline next to anything
// is kept: the indenter may drop it or add _INDENT/_DEDENT around it.
bool PairPossible(const WalkContext& c, const LexItem& e1, const LexItem& e2) {
  if (c.follow == nullptr) return true;
  if (e1.terminal == c.nl || e2.terminal == c.nl) return true;
  // Does f hold for one of e's types: its terminal, or a full-match string?
  auto any_type = [&](const LexItem& e, auto&& f) {
    if (f(e.terminal)) return true;
    for (int32_t k : c.a->Set(e.full_match)) {
      if (f(k)) return true;
    }
    return false;
  };
  return any_type(e1, [&](int32_t x) {
    return any_type(e2, [&](int32_t y) { return c.follow->CanFollow(x, y); });
  });
}

// Automaton access of the parallel passes: reads only, and a transition not
// computed yet is a miss.
struct ReadOnlyAccess {
  const TerminalAutomaton* a;
  bool miss = false;
  int32_t Step(int32_t q, uint8_t b, std::vector<LexItem>* hits) {
    const int32_t r = a->StepIfComputed(q, b, hits);
    if (r == -2) miss = true;
    return r < 0 ? -1 : r;
  }
  const std::vector<int32_t>* Candidates(int32_t q) {
    const std::vector<int32_t>* c = a->BoundaryCandidatesIfComputed(q);
    if (c == nullptr) miss = true;
    return c;
  }
  int32_t Boundary(int32_t q, int32_t t, int32_t mode, LexItem* emit) {
    const int32_t r = a->BoundaryIfComputed(q, t, mode, emit);
    if (r == -2) miss = true;
    return r < 0 ? -1 : r;
  }
};

// Automaton access of the serial phase between passes: computes what is
// missing.
struct ComputingAccess {
  TerminalAutomaton* a;
  bool miss = false;  // never set
  int32_t Step(int32_t q, uint8_t b, std::vector<LexItem>* hits) { return a->Step(q, b, hits); }
  const std::vector<int32_t>* Candidates(int32_t q) { return &a->BoundaryCandidates(q); }
  int32_t Boundary(int32_t q, int32_t t, int32_t mode, LexItem* emit) {
    return a->Boundary(q, t, mode, emit);
  }
};

// Advances one walk state by one byte, taking every legal terminal boundary
// before the byte.  Returns false on a miss of `acc` (`out` then holds a
// partial result).
template <class Access>
bool AdvanceOne(const WalkContext& c, Access& acc, Interner* in, const WalkState& ws, uint8_t b,
                std::vector<LexItem>* hits, std::vector<WalkState>* out) {
  auto add_hits = [&](int32_t seq) {
    for (const LexItem& h : *hits) seq = in->Append(seq, in->Item(h));
    return seq;
  };
  hits->clear();
  const int32_t q2 = acc.Step(ws.q, b, hits);
  if (acc.miss) return false;
  if (q2 >= 0) {
    WalkState n{q2, add_hits(ws.seq), ws.last_emit, ws.col};
    n.col.Feed(b);
    out->push_back(n);
  }
  const std::vector<int32_t>* cands = acc.Candidates(ws.q);
  if (acc.miss) return false;
  // A copy: Item() below may grow item_list.
  const bool has_last = ws.last_emit >= 0;
  const LexItem last = has_last ? in->item_list[ws.last_emit] : LexItem();
  for (int32_t t : *cands) {
    for (int32_t mode : c.a->ModesAfter(ws.q, t)) {
      LexItem emit;
      const int32_t q1 = acc.Boundary(ws.q, t, mode, &emit);
      if (acc.miss) return false;
      if (q1 < 0) continue;
      if (has_last && !(*c.ignored)[t] && !PairPossible(c, last, emit)) continue;
      if (t == c.nl) {
        emit.col_absolute = ws.col.absolute;
        emit.col = ws.col.value;
      }
      hits->clear();
      const int32_t q3 = acc.Step(q1, b, hits);
      if (acc.miss) return false;
      if (q3 < 0) continue;
      const int32_t emit_id = in->Item(emit);
      WalkState n{q3, add_hits(in->Append(ws.seq, emit_id)),
                  (*c.ignored)[t] ? ws.last_emit : emit_id, ColumnDelta::TerminalStart()};
      n.col.Feed(b);
      out->push_back(n);
    }
  }
  return true;
}

// What a suspended walk needs computed: the byte step of one walk state
// (byte >= 0; `last` is its last non-ignored Emit, if any), or the slot
// compaction and Tail of a lexer state where a token ends (byte == -1).
struct Request {
  int32_t q;
  int32_t byte;
  bool has_last;
  LexItem last;
};

// Is lexer state q a dead end: the text cannot end at q, and no string of
// at most `depth` bytes leads from it to a state that can end the text or
// still has `depth` bytes to go?  A token must not end in such a state: e.g.
// "Insert" + 0xC4 after a statement, where 0xC4 can only start "İ" or "ı"
// (case-insensitive "i" under Python's Unicode rules) and any character
// completing it vetoes INSERT's look-ahead (?![a-z0-9_$]|[^\x00-\x7f]).
// With depth 4 every partial UTF-8 character is resolved.  Sound: "alive"
// when unsure (depth exhausted or `budget` spent).  Serial phase only.
class DeadEnds {
 public:
  explicit DeadEnds(TerminalAutomaton* a) : a_(a) {}
  bool Dead(int32_t q) {
    budget_ = 200000;
    return DeadWithin(q, 4);
  }

 private:
  bool DeadWithin(int32_t q, int32_t depth) {
    if (depth == 0) return false;
    const int64_t key = static_cast<int64_t>(q) * 8 + depth;
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    bool dead = a_->EndOfInput(q).empty();
    // A common byte first: a live state usually answers at once.
    static constexpr uint8_t kFirst[] = {' ', 'a', 'e', '0', '\n', '(', '_', 'x', ';', '"', '\''};
    for (int k = 0; dead && k < static_cast<int>(sizeof(kFirst)) + 256; ++k) {
      const uint8_t b = k < static_cast<int>(sizeof(kFirst)) ? kFirst[k]
                                                           : static_cast<uint8_t>(k - sizeof(kFirst));
      if (--budget_ < 0) return false;
      const int32_t to = a_->Step(q, b, &hits_);
      if (to >= 0 && !DeadWithin(to, depth - 1)) dead = false;
      if (!dead) break;
      const std::vector<int32_t> cands = a_->BoundaryCandidates(q);
      for (int32_t t : cands) {
        const std::vector<int32_t> modes = a_->ModesAfter(q, t);
        for (int32_t mode : modes) {
          LexItem emit;
          const int32_t q1 = a_->Boundary(q, t, mode, &emit);
          if (q1 < 0) continue;
          const int32_t q3 = a_->Step(q1, b, &hits_);
          if (q3 >= 0 && !DeadWithin(q3, depth - 1)) {
            dead = false;
            break;
          }
        }
        if (!dead) break;
      }
    }
    if (budget_ >= 0) memo_[key] = dead;
    return dead;
  }
  TerminalAutomaton* a_;
  std::unordered_map<int64_t, bool> memo_;
  std::vector<LexItem> hits_;
  int64_t budget_ = 0;
};

// Advances a set of walk states by one byte with read-only automaton access.
// Returns false when some state missed; its request is appended.
bool AdvanceWalk(const WalkContext& c, Interner* in, const std::vector<WalkState>& states,
                 uint8_t b, std::vector<WalkState>* out, std::vector<Request>* requests) {
  out->clear();
  std::vector<LexItem> hits;
  bool complete = true;
  for (const WalkState& ws : states) {
    ReadOnlyAccess acc{c.a};
    if (!AdvanceOne(c, acc, in, ws, b, &hits, out)) {
      const bool has_last = ws.last_emit >= 0;
      requests->push_back(
          {ws.q, b, has_last, has_last ? in->item_list[ws.last_emit] : LexItem()});
      complete = false;
    }
  }
  if (!complete) return false;
  if (out->size() > 1) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
  return true;
}

// A part of one root's walk still to do: the trie nodes [first, end), all of
// depth >= depth(first), from the walk states `base` at depth(first) - 1.
struct WalkTask {
  int32_t first;
  int32_t end;
  bool single;                  // one walk state, kept inline (most tasks)
  WalkState one;
  std::vector<WalkState> many;  // else
  static WalkTask Of(int32_t first, int32_t end, const std::vector<WalkState>& states) {
    WalkTask t{first, end, states.size() == 1, states.empty() ? WalkState{} : states[0], {}};
    if (!t.single) t.many = states;
    return t;
  }
  std::span<const WalkState> base() const {
    return single ? std::span<const WalkState>(&one, 1) : std::span<const WalkState>(many);
  }
};

// One mask-store row of a root, its token set already stored adaptively;
// `items` are ids of the root's local interner until the merge.
struct EncodedRow {
  std::vector<int32_t> items;
  RowKind kind;
  int32_t length;
  std::vector<int32_t> ids;     // kList / kComplement
  std::vector<uint32_t> bits;   // kBitset
};

// A root's walk below one first byte, from one walk state: the part of the
// trie under node `node` is the sub-walk `sub`'s, its items following the
// root's sequence `prefix`.
struct WalkPart {
  int32_t prefix;
  int32_t sub;
};

// The walk of one root, across passes; or a sub-walk (a shared walk of the
// subtree below one first byte, from one walk state: see SubWalkKey).
struct RootWalk {
  int32_t index = 0;  // root index (-1: a sub-walk)
  int32_t q = 0;      // its lexer state
  Interner in;        // local: item and sequence ids of this root only
  std::vector<std::vector<int32_t>> rows;  // local seq -> tokens (empty: no row)
  std::vector<int32_t> tail_item;          // lexer state -> local id of its Tail (-1: not yet)
  std::vector<WalkTask> tasks;
  std::vector<Request> requests;
  std::vector<int32_t> discovered;  // lexer states after compaction, first-seen order
  std::vector<uint8_t> discovered_flag;  // by lexer state: in `discovered`
  int64_t entries = 0;
  bool over_entries = false;
  bool over_time = false;
  std::vector<EncodedRow> encoded;
  std::vector<NfaTransitionEntry> record;
  std::vector<WalkTask> deferred;   // subtrees with too many hypotheses
  std::vector<int32_t> sim_tokens;  // their tokens, sorted at the merge
  std::vector<WalkPart> parts;      // a root's sub-walks, in trie order
  // A root's walk states after each first byte whose node has children
  // (ExpandRoot), before they are matched with sub-walks.
  std::vector<std::pair<int32_t, WalkState>> firsts;
  bool expanded = false;
  // A finished sub-walk: its rows flat (sequence, end of its tokens in
  // row_tokens), everything else but the items and sequences freed.
  int64_t last_used = 0;            // its last batch
  int64_t held = 0;                 // bytes held once finished
  std::vector<std::pair<int32_t, int64_t>> row_ends;
  std::vector<int32_t> row_tokens;

  // Notes lexer state `to` (after compaction) as reached at a token end.
  void Discover(int32_t to) {
    if (to >= static_cast<int32_t>(discovered_flag.size())) discovered_flag.resize(to + 1, 0);
    if (!discovered_flag[to]) {
      discovered_flag[to] = 1;
      discovered.push_back(to);
    }
  }
};

// Token-end data computed in the serial phase, read by the passes: per
// lexer state, its compaction (target, slot-map set) and its Tail item.
struct TokenEndData {
  std::vector<int32_t> compact_to;   // -1: not computed
  std::vector<int32_t> compact_map;
  std::vector<uint8_t> tail_done;
  std::vector<LexItem> tail;
  std::vector<uint8_t> dead;         // no token may end here (LexicallyDead)
  bool Ready(int32_t q) const {
    return q < static_cast<int32_t>(tail_done.size()) && tail_done[q] && compact_to[q] >= 0;
  }
  void Grow(int32_t n) {
    if (static_cast<int32_t>(tail_done.size()) >= n) return;
    compact_to.resize(n, -1);
    compact_map.resize(n, 0);
    tail_done.resize(n, 0);
    tail.resize(n);
    dead.resize(n, 0);
  }
};

struct WalkShared {
  const WalkContext* ctx;
  const VocabTrie* trie;
  const TokenEndData* ends;
  int64_t max_entries;
  std::chrono::steady_clock::time_point deadline;
  bool has_deadline;
  bool recording;
  int32_t max_hypotheses;
};

// The computed self-loop bytes of recently asked lexer states
// (TerminalAutomaton::ComputedSelfLoops), direct-mapped.
class SelfLoopCache {
 public:
  const uint64_t* Get(const TerminalAutomaton& a, int32_t q) {
    Entry& e = entries_[static_cast<uint32_t>(q) % kSize];
    if (e.q != q) {
      a.ComputedSelfLoops(q, e.bytes);
      e.q = q;
    }
    return e.bytes;
  }

 private:
  static constexpr uint32_t kSize = 64;
  struct Entry {
    int32_t q = -1;
    uint64_t bytes[2] = {0, 0};
  };
  Entry entries_[kSize];
};

// Adds tokens read from the walk's start to a walk state to their row: the
// walk state's items, then the Tail of its lexer state (which is Ready).
class RowAdder {
 public:
  RowAdder(const WalkShared& sh, RootWalk* r) : sh_(sh), r_(r) {}
  void Add(int32_t ws_seq, int32_t q, std::span<const int32_t> toks) {
    const TokenEndData& ends = *sh_.ends;
    RootWalk* r = r_;
    if (ends.dead[q]) return;  // no text goes on from here
    const int32_t to = ends.compact_to[q];
    r->Discover(to);
    // The last row looked up is kept: consecutive tokens usually end in the
    // same walk state.
    int32_t seq = last_row_seq_;
    if (ws_seq != last_seq_ || q != last_q_) {
      if (q >= static_cast<int32_t>(r->tail_item.size())) r->tail_item.resize(q + 1, -1);
      int32_t& tail = r->tail_item[q];
      if (tail < 0) tail = r->in.Item(ends.tail[q]);
      seq = r->in.Append(ws_seq, tail);
      last_seq_ = ws_seq;
      last_q_ = q;
      last_row_seq_ = seq;
    }
    if (seq >= static_cast<int32_t>(r->rows.size())) r->rows.resize(seq + 1);
    auto& row = r->rows[seq];
    row.insert(row.end(), toks.begin(), toks.end());
    r->entries += static_cast<int64_t>(toks.size());
    if (sh_.recording) {
      std::vector<LexItem> items;
      for (int32_t id : r->in.seq_list[seq]) items.push_back(r->in.item_list[id]);
      for (int32_t tok : toks) r->record.push_back({r->index, tok, to, items});
    }
  }

 private:
  const WalkShared& sh_;
  RootWalk* r_;
  int32_t last_seq_ = -1, last_q_ = -1, last_row_seq_ = -1;
};

// Runs the pending tasks of one root as far as the automaton allows; misses
// become requests and new tasks.
void RunRoot(const WalkShared& sh, RootWalk* r) {
  const VocabTrie& trie = *sh.trie;
  const TerminalAutomaton& a = *sh.ctx->a;
  const TokenEndData& ends = *sh.ends;
  // Per-thread scratch, kept across calls (a root is run once per pass).
  thread_local std::vector<std::vector<WalkState>> level;
  if (level.size() < static_cast<size_t>(trie.max_depth()) + 2) level.resize(trie.max_depth() + 2);
  std::vector<WalkTask> tasks;
  tasks.swap(r->tasks);
  int64_t visited = 0;
  auto out_of_time = [&]() {
    if (sh.has_deadline && (++visited & 4095) == 0 &&
        std::chrono::steady_clock::now() > sh.deadline) {
      r->over_time = true;
    }
    return r->over_time;
  };

  RowAdder adder(sh, r);

  // A plain step: no terminal may end at q, and q's step on b is known and
  // produces no item (*to = -1: rejected).  Most steps inside a terminal.
  auto plain_step = [&](int32_t q, uint8_t b, int32_t* to) {
    const std::vector<int32_t>* cands = a.BoundaryCandidatesIfComputed(q);
    return cands != nullptr && cands->empty() && a.StepIfComputedWithoutItems(q, b, to);
  };
  // Does the one walk state q at node n loop over n's whole subtree (no
  // terminal can end at q, every byte below n steps q to itself with no
  // item)?  Then all its tokens end in q, taken at once: inside a string or
  // a comment this skips most of the trie.
  SelfLoopCache loops;
  auto loops_over_subtree = [&](int32_t n, int32_t q) {
    if (trie.subtree_end(n) <= n + 1 || !trie.BelowAscii(n)) return false;
    const std::vector<int32_t>* cands = a.BoundaryCandidatesIfComputed(q);
    return cands != nullptr && cands->empty() && ends.Ready(q) &&
           trie.BelowWithin(n, loops.Get(a, q));
  };

  // Walks nodes [n, limit) from the single walk state at level[depth(n) - 1]
  // (every node there descends from it) while every step is plain: the
  // walk state only changes its lexer state and column, so it is kept per
  // depth on a plain path.  Returns the first node left to the general walk
  // below (limit when none), with level[] set along its path.
  thread_local std::vector<int32_t> path_q;
  thread_local std::vector<ColumnDelta> path_col;
  path_q.resize(std::max(path_q.size(), level.size()));
  path_col.resize(std::max(path_col.size(), level.size()));
  auto run_single = [&](int32_t n, int32_t limit) {
    const int32_t d0 = trie.depth(n);
    const WalkState base = level[d0 - 1][0];
    path_q[d0 - 1] = base.q;
    path_col[d0 - 1] = base.col;
    while (n < limit) {
      if (out_of_time()) return limit;
      const int32_t d = trie.depth(n);
      const uint8_t b = trie.byte(n);
      int32_t to;
      if (!plain_step(path_q[d - 1], b, &to)) break;
      if (to < 0) {
        n = trie.subtree_end(n);
        continue;
      }
      const bool whole = loops_over_subtree(n, to);
      const auto toks = whole ? trie.tokens_in_subtree(n) : trie.tokens_at(n);
      if (!toks.empty()) {
        if (!ends.Ready(to)) break;  // the general walk requests it
        adder.Add(base.seq, to, toks);
        if (r->entries > sh.max_entries) {
          r->over_entries = true;
          return limit;
        }
      }
      if (whole) {
        n = trie.subtree_end(n);
        continue;
      }
      path_q[d] = to;
      path_col[d] = path_col[d - 1];
      path_col[d].Feed(b);
      ++n;
    }
    if (n < limit) {
      for (int32_t j = d0; j < trie.depth(n); ++j) {
        WalkState ws = base;
        ws.q = path_q[j];
        ws.col = path_col[j];
        level[j].assign(1, ws);
      }
    }
    return n;
  };

  for (WalkTask& task : tasks) {
    if (r->over_entries || r->over_time) break;
    const auto base = task.base();
    level[trie.depth(task.first) - 1].assign(base.begin(), base.end());
    for (int32_t n = task.first; n < task.end;) {
      const int32_t d = trie.depth(n);
      if (level[d - 1].size() == 1) {
        const int32_t limit = std::min(task.end, trie.subtree_end(trie.parent(n)));
        const int32_t m = run_single(n, limit);
        if (r->over_entries || r->over_time) return;
        if (m != n) {
          n = m;
          continue;
        }
        // Node n's step is not plain: the general walk below takes it.
      }
      if (out_of_time()) return;
      if (!AdvanceWalk(*sh.ctx, &r->in, level[d - 1], trie.byte(n), &level[d], &r->requests)) {
        r->tasks.push_back(WalkTask::Of(n, trie.subtree_end(n), level[d - 1]));
        n = trie.subtree_end(n);
        continue;
      }
      if (level[d].empty()) {
        n = trie.subtree_end(n);
        continue;
      }
      if (static_cast<int32_t>(level[d].size()) > sh.max_hypotheses) {
        // Too many lexings: every token below n is simulated at run time
        // (the serial phase walks the subtree collapsed, for the automaton).
        r->deferred.push_back(WalkTask::Of(n, trie.subtree_end(n), level[d - 1]));
        n = trie.subtree_end(n);
        continue;
      }
      const bool whole = level[d].size() == 1 && loops_over_subtree(n, level[d][0].q);
      const auto toks = whole ? trie.tokens_in_subtree(n) : trie.tokens_at(n);
      if (!toks.empty()) {
        bool ready = true;
        for (const WalkState& ws : level[d]) {
          if (!ends.Ready(ws.q)) {
            r->requests.push_back({ws.q, -1, false, LexItem()});
            ready = false;
          }
        }
        if (!ready) {
          r->tasks.push_back(WalkTask::Of(n, trie.subtree_end(n), level[d - 1]));
          n = trie.subtree_end(n);
          continue;
        }
        for (const WalkState& ws : level[d]) adder.Add(ws.seq, ws.q, toks);
        if (r->entries > sh.max_entries) {
          r->over_entries = true;
          return;
        }
      }
      n = whole ? trie.subtree_end(n) : n + 1;
    }
  }
}

// The first byte of every token from root r, with read-only automaton
// access: tokens of one byte go to the root's rows, and the walk states
// below each first byte with children are listed in r->firsts (the batch
// then gives each its sub-walk).  Returns false, with r's requests added and
// nothing else changed, when a transition or token end is not computed yet.
bool ExpandRoot(const WalkShared& sh, RootWalk* r) {
  const VocabTrie& trie = *sh.trie;
  const WalkState start{r->q, 0, -1, ColumnDelta{false, 0}};
  std::vector<LexItem> hits;
  std::vector<WalkState> out;
  std::vector<std::pair<int32_t, std::vector<WalkState>>> below;  // by first byte
  bool complete = true;
  for (int32_t n = 1; n < trie.num_nodes(); n = trie.subtree_end(n)) {
    ReadOnlyAccess acc{sh.ctx->a};
    out.clear();
    if (!AdvanceOne(*sh.ctx, acc, &r->in, start, trie.byte(n), &hits, &out)) {
      r->requests.push_back({r->q, trie.byte(n), false, LexItem()});
      complete = false;
      continue;
    }
    if (out.empty()) continue;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    if (static_cast<int32_t>(out.size()) <= sh.max_hypotheses && !trie.tokens_at(n).empty()) {
      for (const WalkState& ws : out) {
        if (!sh.ends->Ready(ws.q)) {
          r->requests.push_back({ws.q, -1, false, LexItem()});
          complete = false;
        }
      }
    }
    below.emplace_back(n, out);
  }
  if (!complete) return false;
  RowAdder adder(sh, r);
  for (const auto& [n, states] : below) {
    if (static_cast<int32_t>(states.size()) > sh.max_hypotheses) {
      // Too many lexings: every token below n is simulated at run time.
      r->deferred.push_back(WalkTask::Of(n, trie.subtree_end(n), {start}));
      continue;
    }
    const auto toks = trie.tokens_at(n);
    if (!toks.empty()) {
      for (const WalkState& ws : states) adder.Add(ws.seq, ws.q, toks);
    }
    if (trie.subtree_end(n) == n + 1) continue;
    for (const WalkState& ws : states) r->firsts.push_back({n, ws});
  }
  return true;
}

// Stores the finished root's rows adaptively (sorted ids, complement or
// bitset, by size); their order is fixed at the merge.
void EncodeRows(const CompiledStore& s, int32_t text_tokens, RootWalk* r) {
  const int32_t V = s.vocab_size;
  const int32_t words = s.mask_words();
  std::vector<uint32_t> bits;
  for (size_t seq = 0; seq < r->rows.size(); ++seq) {
    std::vector<int32_t>& toks = r->rows[seq];
    if (toks.empty()) continue;
    EncodedRow row;
    const std::span<const int32_t> items = r->in.seq_list[seq];
    row.items.assign(items.begin(), items.end());
    int64_t n;
    const bool via_bits = static_cast<int64_t>(toks.size()) > words / 4;
    if (via_bits) {
      // A long list (in trie order, perhaps with repeats): its bitset
      // dedups and sorts it in one pass.
      bits.assign(words, 0);
      for (int32_t t : toks) bits[t / 32] |= 1u << (t % 32);
      n = 0;
      for (uint32_t w : bits) n += __builtin_popcount(w);
    } else {
      std::sort(toks.begin(), toks.end());
      toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
      n = static_cast<int64_t>(toks.size());
    }
    const int64_t comp = text_tokens - n;
    auto has = [&](int32_t t) { return (bits[t / 32] >> (t % 32)) & 1u; };
    // Long lists are ORed faster as bitsets (word-wise, SIMD) than scattered.
    if (n <= comp && n <= words / 4) {
      row.kind = RowKind::kList;
      row.length = static_cast<int32_t>(n);
      if (via_bits) {
        row.ids.clear();
        for (int32_t w = 0; w < words; ++w) {
          for (uint32_t x = bits[w]; x != 0; x &= x - 1) row.ids.push_back(w * 32 + __builtin_ctz(x));
        }
      } else {
        row.ids = std::move(toks);
      }
    } else if (comp <= words / 4) {
      row.kind = RowKind::kComplement;
      if (!via_bits) {
        bits.assign(words, 0);
        for (int32_t t : toks) bits[t / 32] |= 1u << (t % 32);
      }
      for (int32_t t = 0; t < V; ++t) {
        if (!s.token_special[t] && !has(t)) row.ids.push_back(t);
      }
      row.length = static_cast<int32_t>(row.ids.size());
    } else {
      row.kind = RowKind::kBitset;
      row.length = words;
      if (via_bits) {
        row.bits = bits;
      } else {
        row.bits.assign(words, 0);
        for (int32_t t : toks) row.bits[t / 32] |= 1u << (t % 32);
      }
    }
    std::vector<int32_t>().swap(toks);
    r->encoded.push_back(std::move(row));
  }
  std::vector<std::vector<int32_t>>().swap(r->rows);
  std::vector<int32_t>().swap(r->tail_item);
  r->in.ReleaseSequences();
}

// A sub-walk's identity: the subtree below first byte `node`, walked from
// lexer state q, with the last non-ignored Emit before it (pair pruning) and
// the column bookkeeping (read only by the indenter's newline).  Its rows,
// with the items after the walk state's, are the same from any root.
struct SubWalkKey {
  int32_t node;
  int32_t q;
  bool has_last;
  LexItem last;
  ColumnDelta col;
  bool operator==(const SubWalkKey& o) const {
    return node == o.node && q == o.q && has_last == o.has_last && (!has_last || last == o.last) &&
           col.absolute == o.col.absolute && col.value == o.col.value;
  }
};

struct SubWalkKeyHash {
  size_t operator()(const SubWalkKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.node) * 0x9e3779b97f4a7c15ULL ^ static_cast<uint32_t>(k.q);
    for (int64_t v : {int64_t{k.has_last}, int64_t{k.last.kind}, int64_t{k.last.terminal},
                      int64_t{k.last.blockers}, int64_t{k.last.full_match}, int64_t{k.last.col},
                      int64_t{k.last.slot}, int64_t{k.col.absolute}, int64_t{k.col.value}}) {
      h = (h ^ static_cast<uint64_t>(v)) * 0xff51afd7ed558ccdULL;
      h ^= h >> 32;
    }
    return h;
  }
};

// Keeps of a finished sub-walk what the roots read: its rows, flat; its
// items, sequences, discovered lexer states and simulated tokens.  Returns
// the bytes it still holds.
int64_t FinishSubWalk(RootWalk* r) {
  size_t n = 0;
  for (const std::vector<int32_t>& toks : r->rows) n += toks.size();
  r->row_tokens.reserve(n);
  for (size_t seq = 0; seq < r->rows.size(); ++seq) {
    std::vector<int32_t>& toks = r->rows[seq];
    if (toks.empty()) continue;
    r->row_tokens.insert(r->row_tokens.end(), toks.begin(), toks.end());
    r->row_ends.push_back({static_cast<int32_t>(seq), static_cast<int64_t>(r->row_tokens.size())});
    std::vector<int32_t>().swap(toks);
  }
  std::vector<std::vector<int32_t>>().swap(r->rows);
  std::vector<int32_t>().swap(r->tail_item);
  std::vector<uint8_t>().swap(r->discovered_flag);
  std::vector<WalkTask>().swap(r->tasks);
  std::vector<Request>().swap(r->requests);
  r->in.ReleaseIndexes();
  r->discovered.shrink_to_fit();
  r->sim_tokens.shrink_to_fit();
  int64_t bytes = static_cast<int64_t>(sizeof(RootWalk) + 4 * r->row_tokens.size() +
                                       12 * r->row_ends.size() +
                                       sizeof(LexItem) * r->in.item_list.size() +
                                       4 * (r->discovered.size() + r->sim_tokens.size()));
  bytes += r->in.seq_list.bytes();
  return bytes;
}

// Adds the rows of a root's sub-walks to its own: each sub-walk row's items
// after the part's prefix, its tokens appended (EncodeRows sorts and dedups).
void CombineParts(const WalkShared& sh, const std::vector<std::unique_ptr<RootWalk>>& subs,
                  RootWalk* r) {
  std::vector<int32_t> item_map;
  std::vector<LexItem> items;
  for (const WalkPart& part : r->parts) {
    const RootWalk& sub = *subs[part.sub];
    item_map.assign(sub.in.item_list.size(), -1);
    auto local = [&](int32_t it) {
      int32_t& m = item_map[it];
      if (m < 0) m = r->in.Item(sub.in.item_list[it]);
      return m;
    };
    int64_t begin = 0;
    for (const auto& [seq, end] : sub.row_ends) {
      int32_t rs = part.prefix;
      for (int32_t it : sub.in.seq_list[seq]) rs = r->in.Append(rs, local(it));
      if (rs >= static_cast<int32_t>(r->rows.size())) r->rows.resize(rs + 1);
      std::vector<int32_t>& row = r->rows[rs];
      row.insert(row.end(), sub.row_tokens.begin() + begin, sub.row_tokens.begin() + end);
      r->entries += end - begin;
      begin = end;
    }
    for (int32_t to : sub.discovered) r->Discover(to);
    r->sim_tokens.insert(r->sim_tokens.end(), sub.sim_tokens.begin(), sub.sim_tokens.end());
    if (sh.recording) {
      for (const NfaTransitionEntry& e : sub.record) {
        items.clear();
        for (int32_t it : r->in.seq_list[part.prefix]) items.push_back(r->in.item_list[it]);
        items.insert(items.end(), e.items.begin(), e.items.end());
        r->record.push_back({r->index, e.token, e.to, items});
      }
    }
  }
  std::vector<WalkPart>().swap(r->parts);
}

// What the vocabulary walk leaves for the store phase: the store's
// interner, the roots (lexer states at token boundaries) in discovery order,
// and the token-end data of every lexer state the walk ended a token in.
struct WalkPhase {  // VocabularyWalk::State
  Interner in;
  std::vector<int32_t> roots;
  std::unordered_map<int32_t, int32_t> root_of;  // lexer state -> root index
  TokenEndData ends;
  int64_t row_count = 0;
  // The store's row payloads, interned as the batches are merged.
  std::unique_ptr<RowPayloads> payloads;
  RowPayloads& Payloads(CompiledStore* s) {
    if (payloads == nullptr) payloads = std::make_unique<RowPayloads>(s);
    return *payloads;
  }
};

// The vocabulary walk from every root, and the mask-store rows it yields,
// merged into `s` batch by batch.
//
// The walk runs in batches of roots: each batch is walked in parallel
// passes; after each pass the automaton transitions the passes missed are
// computed serially, in root order, then the batch's rows are merged in
// root order.  The batch size is fixed (not the thread count), so every
// choice below is the same for any number of threads.  `progress` receives
// the share of the roots found so far that are walked.
Status VocabularyWalkPhase(const VocabularyWalkInput& input, CompiledStore* out, WalkPhase* w) {
  const std::string& grammar_path = input.grammar_path;
  const WalkOptions& options = input.options;
  TerminalAutomaton* a = input.automaton;
  const VocabTrie& trie = *input.trie;
  const auto deadline = input.deadline;
  const auto& progress = input.progress;
  CompiledStore& s = *out;
  Interner& in = w->in;  // the store's item and sequence ids
  in.SeqIds({});  // seq 0: empty
  const int32_t max_lexer_states = options.max_lexer_states;

  const int32_t V = s.vocab_size;
  int32_t text_tokens = 0;
  for (int32_t t = 0; t < V; ++t) text_tokens += !s.token_special[t];
  int64_t& row_count = w->row_count;
  s.root_row_offsets.assign(1, 0);
  RowPayloads& payloads = w->Payloads(&s);

  constexpr size_t kRootsPerBatch = 64;
  FollowRelation follow(*input.grammar);
  const bool keep_pairs = !options.prune_pairs ||
                          (options.record != nullptr && options.record->keep_impossible_pairs);
  const WalkContext walk{a, input.indenter_nl, &s.terminal_ignored,
                         keep_pairs ? nullptr : &follow};
  TokenEndData& ends = w->ends;
  const WalkShared shared{&walk,
                          &trie,
                          &ends,
                          options.max_store_entries,
                          deadline,
                          options.max_seconds > 0,
                          options.record != nullptr,
                          std::max(1, options.max_walk_hypotheses)};
  std::unordered_map<int32_t, int32_t>& root_of = w->root_of;
  std::vector<int32_t>& roots = w->roots;
  auto add_root = [&](int32_t q) {
    if (root_of.count(q)) return;
    root_of[q] = static_cast<int32_t>(roots.size());
    roots.push_back(q);
  };
  add_root(a->initial_state());
  const int32_t threads =
      options.num_threads > 0 ? options.num_threads : tbb::this_task_arena::max_concurrency();
  tbb::task_arena arena(std::max(threads, 1));
  // Runs fn on every root of the list, in parallel unless serial.
  auto for_each_root = [&](const std::vector<RootWalk*>& list, auto&& fn) {
    if (threads <= 1 || list.size() == 1) {
      for (RootWalk* r : list) fn(r);
      return;
    }
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<size_t>(0, list.size(), 1),
                        [&](const tbb::blocked_range<size_t>& range) {
                          for (size_t i = range.begin(); i != range.end(); ++i) fn(list[i]);
                        });
    });
  };
  auto time_out = [&]() {
    return Status(ErrorCode::kResourceLimit,
                  grammar_path + ": compile exceeded " + FormatSeconds(options.max_seconds) +
                      " s (max_seconds) in the vocabulary walk, after " +
                      std::to_string(roots.size()) + " lexer states at token boundaries" +
                      StateGrowthCulprits(*a, *input.grammar));
  };
  auto too_many_lexer_states = [&]() {
    return Status(ErrorCode::kResourceLimit,
                  grammar_path + ": more than " + std::to_string(max_lexer_states) +
                      " lexer states (max_lexer_states, --max-lexer-states)" +
                      StateGrowthCulprits(*a, *input.grammar));
  };
  auto too_many_entries = [&]() {
    return Status(ErrorCode::kResourceLimit,
                  grammar_path + ": more than " + std::to_string(options.max_store_entries) +
                      " nfa_transition entries (max_store_entries)");
  };
  Interner scratch;  // the serial phase's walk states, discarded
  scratch.SeqIds({});
  std::vector<LexItem> hits;
  std::vector<WalkState> scratch_out;
  std::vector<int32_t> slot_map;
  int64_t entries = 0;
  std::vector<std::vector<WalkState>> dlevel(trie.max_depth() + 2);
  DeadEnds dead_ends(a);
  // The compaction and Tail of lexer state q, where a token ends.
  auto compute_end = [&](int32_t q) -> Status {
    ends.Grow(a->num_states());
    if (ends.compact_to[q] < 0) {
      const int32_t to = a->CompactSlots(q, &slot_map);
      if (to < 0) {
        return too_many_lexer_states();
      }
      ends.compact_to[q] = to;
      ends.compact_map[q] = a->InternSet(slot_map);
      ends.Grow(a->num_states());
      ends.dead[q] = dead_ends.Dead(to);
      ends.Grow(a->num_states());
    }
    if (!ends.tail_done[q]) {
      ends.tail[q] = a->Tail(q);
      ends.tail_done[q] = 1;
    }
    return Status::Ok();
  };
  // Computes what a pass of r missed (serial phase).
  auto serve_requests = [&](RootWalk* r) -> Status {
    for (const Request& req : r->requests) {
      if (req.byte >= 0) {
        WalkState ws{req.q, 0, req.has_last ? scratch.Item(req.last) : -1, ColumnDelta{}};
        ComputingAccess acc{a};
        scratch_out.clear();
        AdvanceOne(walk, acc, &scratch, ws, static_cast<uint8_t>(req.byte), &hits, &scratch_out);
        continue;
      }
      CFGMASK_RETURN_IF_ERROR(compute_end(req.q));
    }
    r->requests.clear();
    return Status::Ok();
  };
  s.root_sim_offsets.assign(1, 0);
  const bool indenter = input.indenter_nl >= 0;
  std::vector<std::unique_ptr<RootWalk>> subs;  // by id; null: dropped
  std::unordered_map<SubWalkKey, int32_t, SubWalkKeyHash> memo;
  int64_t batch_no = 0;
  for (size_t next = 0; next < roots.size();) {
    if (static_cast<int64_t>(roots.size()) > options.max_roots) {
      return Status(ErrorCode::kResourceLimit,
                    grammar_path + ": more than " + std::to_string(options.max_roots) +
                        " lexer states at token boundaries (max_roots, --max-roots)" +
                        StateGrowthCulprits(*a, *input.grammar));
    }
    const size_t batch_end = std::min(roots.size(), next + kRootsPerBatch);
    std::vector<std::unique_ptr<RootWalk>> batch;
    for (size_t i = next; i < batch_end; ++i) {
      auto r = std::make_unique<RootWalk>();
      r->index = static_cast<int32_t>(i);
      r->q = roots[i];
      r->in.SeqIds({});
      batch.push_back(std::move(r));
    }
    // The first byte of every token from each root of the batch, in
    // parallel passes (what a pass misses is computed serially, in root
    // order, as below).  Then, serially and in root order (new sub-walks get
    // their ids in that order), every walk state below a first byte is
    // matched with the sub-walk of its key, shared with every root that
    // reaches it there.
    std::vector<RootWalk*> walkers;  // new sub-walks, then the batch's roots
    {
      std::vector<RootWalk*> pending;
      for (auto& r : batch) pending.push_back(r.get());
      while (!pending.empty()) {
        for_each_root(pending, [&](RootWalk* r) { r->expanded = ExpandRoot(shared, r); });
        std::vector<RootWalk*> again;
        for (RootWalk* r : pending) {
          CFGMASK_RETURN_IF_ERROR(serve_requests(r));
          if (!r->expanded) again.push_back(r);
        }
        if (a->num_states() >= max_lexer_states) return too_many_lexer_states();
        pending.swap(again);
      }
    }
    for (auto& rp : batch) {
      RootWalk* r = rp.get();
      for (const auto& [n, ws] : r->firsts) {
        SubWalkKey key{n, ws.q, ws.last_emit >= 0, LexItem(),
                       indenter ? ws.col : ColumnDelta{false, 0}};
        if (key.has_last) key.last = r->in.item_list[ws.last_emit];
        auto [it, inserted] = memo.emplace(key, static_cast<int32_t>(subs.size()));
        if (inserted) {
          auto sub = std::make_unique<RootWalk>();
          sub->index = -1;
          sub->q = ws.q;
          sub->in.SeqIds({});
          const int32_t last = key.has_last ? sub->in.Item(key.last) : -1;
          sub->tasks.push_back(
              WalkTask::Of(n + 1, trie.subtree_end(n), {WalkState{ws.q, 0, last, key.col}}));
          walkers.push_back(sub.get());
          subs.push_back(std::move(sub));
        }
        subs[it->second]->last_used = batch_no;
        r->parts.push_back({ws.seq, it->second});
      }
      std::vector<std::pair<int32_t, WalkState>>().swap(r->firsts);
      walkers.push_back(r);
    }
    for (;;) {
      std::vector<RootWalk*> active;
      for (RootWalk* r : walkers) {
        if (!r->tasks.empty() || !r->deferred.empty()) active.push_back(r);
      }
      if (active.empty()) break;
      for_each_root(active, [&](RootWalk* r) { RunRoot(shared, r); });
      // The serial phase: compute what the pass missed, in root order.
      for (RootWalk* r : active) {
        if (r->over_time) return time_out();
        if (r->over_entries) return too_many_entries();
        CFGMASK_RETURN_IF_ERROR(serve_requests(r));
        // Subtrees left to simulation: walk them with the hypotheses
        // collapsed to (lexer state, last Emit, column), which computes every
        // automaton transition and token end the runtime will need, and
        // finds the lexer states where their tokens end (new roots).
        for (const WalkTask& task : r->deferred) {
          const int32_t d0 = trie.depth(task.first);
          auto& lv0 = dlevel[d0 - 1];
          lv0.clear();
          for (const WalkState& ws : task.base()) {
            lv0.push_back({ws.q, 0, ws.last_emit >= 0 ? scratch.Item(r->in.item_list[ws.last_emit]) : -1,
                           ws.col});
          }
          for (int32_t n = task.first; n < task.end;) {
            const int32_t d = trie.depth(n);
            auto& cur = dlevel[d];
            cur.clear();
            for (const WalkState& ws : dlevel[d - 1]) {
              ComputingAccess acc{a};
              scratch_out.clear();
              AdvanceOne(walk, acc, &scratch, ws, trie.byte(n), &hits, &scratch_out);
              for (WalkState w : scratch_out) {
                w.seq = 0;
                cur.push_back(w);
              }
            }
            auto key = [](const WalkState& w) {
              return std::tie(w.q, w.last_emit, w.col.absolute, w.col.value);
            };
            std::sort(cur.begin(), cur.end(),
                      [&](const WalkState& x, const WalkState& y) { return key(x) < key(y); });
            cur.erase(std::unique(cur.begin(), cur.end(),
                                  [&](const WalkState& x, const WalkState& y) { return key(x) == key(y); }),
                      cur.end());
            if (a->num_states() >= max_lexer_states) break;  // reported below
            if (cur.empty()) {
              n = trie.subtree_end(n);
              continue;
            }
            auto toks = trie.tokens_at(n);
            if (!toks.empty()) {
              bool any = false;
              for (const WalkState& ws : cur) {
                CFGMASK_RETURN_IF_ERROR(compute_end(ws.q));
                if (ends.dead[ws.q]) continue;
                r->Discover(ends.compact_to[ws.q]);
                any = true;
              }
              if (any) r->sim_tokens.insert(r->sim_tokens.end(), toks.begin(), toks.end());
            }
            ++n;
          }
        }
        r->deferred.clear();
      }
      ends.Grow(a->num_states());
      if (a->num_states() >= max_lexer_states) {
        return too_many_lexer_states();
      }
      if (options.max_seconds > 0 && std::chrono::steady_clock::now() > deadline) {
        return time_out();
      }
      if (scratch.seq_list.size() > (1u << 20)) {
        scratch = Interner();
        scratch.SeqIds({});
      }
    }
    // Each root's rows: its own, then its sub-walks' after its prefixes.
    {
      std::vector<RootWalk*> new_subs;
      for (RootWalk* r : walkers) {
        if (r->index < 0) new_subs.push_back(r);
      }
      for_each_root(new_subs, [](RootWalk* r) { r->held = FinishSubWalk(r); });
      std::vector<RootWalk*> list;
      for (auto& r : batch) list.push_back(r.get());
      for_each_root(list, [&](RootWalk* r) {
        CombineParts(shared, subs, r);
        if (r->entries <= shared.max_entries) EncodeRows(s, text_tokens, r);
      });
      for (RootWalk* r : list) {
        if (r->entries > shared.max_entries) return too_many_entries();
      }
    }
    // The memo's working set: sub-walks not used by this batch are dropped,
    // least recently used first, while it holds more than walk_memo_bytes
    // (the choice depends on the batches only, not on threads).
    {
      int64_t held = 0;
      std::vector<int32_t> idle;
      for (size_t i = 0; i < subs.size(); ++i) {
        if (subs[i] == nullptr) continue;
        held += subs[i]->held;
        if (subs[i]->last_used < batch_no) idle.push_back(static_cast<int32_t>(i));
      }
      if (held > options.walk_memo_bytes) {
        std::stable_sort(idle.begin(), idle.end(), [&](int32_t x, int32_t y) {
          return subs[x]->last_used < subs[y]->last_used;
        });
        for (int32_t i : idle) {
          if (held <= options.walk_memo_bytes / 2) break;
          held -= subs[i]->held;
          subs[i].reset();
        }
        for (auto it = memo.begin(); it != memo.end();) {
          it = subs[it->second] == nullptr ? memo.erase(it) : std::next(it);
        }
      }
    }
    ++batch_no;
    // Merge in root order: global item ids, rows sorted by their item
    // sequences so that the runtime walks them as a trie (a shared prefix
    // is checked once, a rejected prefix skips every row below it).
    std::vector<RootWalk*> all;
    std::vector<std::vector<int32_t>> global(batch.size());
    for (size_t b = 0; b < batch.size(); ++b) {
      all.push_back(batch[b].get());
      for (const LexItem& it : batch[b]->in.item_list) global[b].push_back(in.Item(it));
    }
    for_each_root(all, [&](RootWalk* r) {
      const std::vector<int32_t>& ids = global[r->index - next];
      for (EncodedRow& row : r->encoded) {
        for (int32_t& v : row.items) v = ids[v];
      }
      std::sort(r->encoded.begin(), r->encoded.end(),
                [](const EncodedRow& x, const EncodedRow& y) { return x.items < y.items; });
    });
    // Rows by reference: a payload equal to an earlier row's (of any root)
    // is stored once (interned here, serially, in root order).
    for (auto& r : batch) {
      for (EncodedRow& row : r->encoded) {
        const int32_t seq = in.SeqIds(row.items);
        if (row.kind == RowKind::kBitset) {
          payloads.AppendBits(seq, row.bits);
        } else {
          payloads.AppendList(seq, row.kind, row.ids);
        }
        std::vector<int32_t>().swap(row.ids);
        std::vector<uint32_t>().swap(row.bits);
      }
      row_count += static_cast<int64_t>(r->encoded.size());
      s.root_row_offsets.push_back(static_cast<int32_t>(s.row_seq.size()));
      // By bytes: the runtime walks them as a trie (Session::CheckSimulated).
      std::sort(r->sim_tokens.begin(), r->sim_tokens.end());
      r->sim_tokens.erase(std::unique(r->sim_tokens.begin(), r->sim_tokens.end()), r->sim_tokens.end());
      std::stable_sort(r->sim_tokens.begin(), r->sim_tokens.end(), [&](int32_t x, int32_t y) {
        return s.TokenBytes(x) < s.TokenBytes(y);
      });
      s.sim_token.insert(s.sim_token.end(), r->sim_tokens.begin(), r->sim_tokens.end());
      s.root_sim_offsets.push_back(static_cast<int32_t>(s.sim_token.size()));
      entries += r->entries;
      for (int32_t q : r->discovered) add_root(q);
      if (options.record != nullptr) {
        for (auto& e : r->record) options.record->entries.push_back(std::move(e));
      }
      if (row_count > options.max_store_rows) {
        return Status(ErrorCode::kResourceLimit,
                      grammar_path + ": more than " + std::to_string(options.max_store_rows) +
                          " mask-store rows (max_store_rows)");
      }
      if (entries > options.max_store_entries) return too_many_entries();
    }
    for_each_root(all, [](RootWalk* r) { *r = RootWalk(); });
    next = batch_end;
    progress(static_cast<double>(next) / roots.size());
  }
  s.stats.nfa_transition_entries = entries;
  return Status::Ok();
}

// One single-token row per simulated token, past every root's rows.
void AddSimulatedRows(CompiledStore* out, WalkPhase* w) {
  CompiledStore& s = *out;
  RowPayloads& payloads = w->Payloads(out);
  std::unordered_map<int32_t, int32_t> row_of_token;
  s.sim_row.resize(s.sim_token.size());
  for (size_t i = 0; i < s.sim_token.size(); ++i) {
    const int32_t t = s.sim_token[i];
    auto [it, inserted] = row_of_token.emplace(t, static_cast<int32_t>(s.row_seq.size()));
    if (inserted) payloads.AppendList(0, RowKind::kList, {&t, 1});
    s.sim_row[i] = it->second;
  }
  s.stats.simulated_pairs = static_cast<int64_t>(s.sim_token.size());
  w->payloads.reset();  // the walk's rows are complete
}

// The end-of-input item sequences of every root, interned in root order.
std::vector<std::vector<int32_t>> EndOfInputPhase(TerminalAutomaton* a, WalkPhase* w) {
  std::vector<std::vector<int32_t>> eof(w->roots.size());
  for (size_t r = 0; r < w->roots.size(); ++r) {
    for (auto& alt : a->EndOfInput(w->roots[r])) eof[r].push_back(w->in.Seq(alt.items));
  }
  return eof;
}

// The store's lexer side.  The automaton is frozen (every
// transition, boundary and compaction the walk computed), then the items,
// sets and the sequences the runtime reads, renumbered densely.
void FreezeStorePhase(TerminalAutomaton* automaton, const std::vector<std::vector<int32_t>>& eof,
                      WalkPhase* w, CompiledStore* out) {
  TerminalAutomaton& a = *automaton;  // Tail() memoises
  CompiledStore& s = *out;
  Interner& in = w->in;
  const TokenEndData& ends = w->ends;
  const int32_t Q = a.num_states();
  s.num_lex_states = Q;
  s.initial_lex_state = a.initial_state();
  s.step_offsets.assign(1, 0);
  s.cand_offsets.assign(1, 0);
  s.eof_offsets.assign(1, 0);
  s.compact_to.assign(Q, -1);
  s.compact_map.assign(Q, 0);
  s.num_slots.resize(Q);
  s.at_start.resize(Q);
  s.root_index.assign(Q, -1);
  s.tail_item.assign(Q, -1);
  for (int32_t q = 0; q < Q; ++q) {
    if (!a.AtTerminalStart(q)) s.tail_item[q] = in.Item(a.Tail(q));
    for (auto& cs : a.ComputedSteps(q)) {
      s.step_byte.push_back(cs.byte);
      s.step_to.push_back(cs.to);
      s.step_hits.push_back(cs.hits.empty() ? 0 : in.Seq(cs.hits));
    }
    s.step_offsets.push_back(static_cast<int32_t>(s.step_byte.size()));
    // One candidate per (terminal, mode): the same terminal is listed once
    // per mode the next terminal can be lexed in.
    for (int32_t t : a.BoundaryCandidates(q)) {
      for (int32_t mode : a.ModesAfter(q, t)) {
        LexItem emit;
        int32_t to = a.BoundaryIfComputed(q, t, mode, &emit);
        if (to < 0) continue;
        s.cand_terminal.push_back(t);
        s.cand_to.push_back(to);
        s.cand_item.push_back(in.Item(emit));
      }
    }
    s.cand_offsets.push_back(static_cast<int32_t>(s.cand_terminal.size()));
    s.num_slots[q] = a.NumOpenSlots(q);
    s.at_start[q] = a.AtTerminalStart(q);
    // A dead end keeps -1: the runtime ends no token there either.
    if (q < static_cast<int32_t>(ends.compact_to.size()) && ends.compact_to[q] >= 0 &&
        !ends.dead[q]) {
      s.compact_to[q] = ends.compact_to[q];
      s.compact_map[q] = ends.compact_map[q];
    }
    auto r = w->root_of.find(q);
    if (r != w->root_of.end()) {
      s.root_index[q] = r->second;
      for (int32_t seq : eof[r->second]) s.eof_seq.push_back(seq);
    }
    s.eof_offsets.push_back(static_cast<int32_t>(s.eof_seq.size()));
  }
  CFGMASK_CHECK(a.num_states() == Q);

  // Items, sets, sequences.  Nothing is interned from here on: the indexes
  // go before the sequences are taken.
  in.DropIndexes();
  static_assert(static_cast<int32_t>(LexItem::kEmit) == static_cast<int32_t>(ItemKind::kEmit) &&
                static_cast<int32_t>(LexItem::kHit) == static_cast<int32_t>(ItemKind::kHit) &&
                static_cast<int32_t>(LexItem::kTail) == static_cast<int32_t>(ItemKind::kTail));
  for (const LexItem& it : in.item_list) {
    s.item_kind.push_back(it.kind);
    s.item_terminal.push_back(it.terminal);
    s.item_blockers.push_back(it.blockers);
    s.item_full.push_back(it.full_match);
    s.item_col_abs.push_back(it.col_absolute);
    s.item_col.push_back(it.col);
    s.item_slot.push_back(it.slot);
  }
  s.set_offsets.assign(1, 0);
  for (int32_t i = 0; i < a.num_sets(); ++i) {
    for (int32_t v : a.Set(i)) s.set_data.push_back(v);
    s.set_offsets.push_back(static_cast<int32_t>(s.set_data.size()));
  }
  // Only the sequences the runtime reads are written (the walk also
  // interned every prefix), renumbered densely; seq 0 stays the empty one.
  std::vector<int32_t> new_id(in.seq_list.size(), -1);
  new_id[0] = 0;
  for (int32_t v : s.row_seq) new_id[v] = 0;
  for (int32_t v : s.eof_seq) new_id[v] = 0;
  for (int32_t v : s.step_hits) new_id[v] = 0;
  int32_t next_id = 0;
  for (int32_t& id : new_id) {
    if (id >= 0) id = next_id++;
  }
  // The kept sequences become the store's in place: no second copy at the
  // store's largest point.
  std::vector<int32_t> offsets(1, 0);
  offsets.reserve(static_cast<size_t>(next_id) + 1);
  std::vector<int32_t> data = in.seq_list.TakeKept(new_id, &offsets);
  s.seq_data = std::move(data);
  s.seq_offsets = std::move(offsets);
  for (int32_t& v : s.row_seq) v = new_id[v];
  for (int32_t& v : s.eof_seq) v = new_id[v];
  for (int32_t& v : s.step_hits) v = new_id[v];

  s.num_roots = static_cast<int32_t>(w->roots.size());
  s.stats.rows_before_streamlining = w->row_count;
}

}  // namespace

struct VocabularyWalk::State : WalkPhase {};

VocabularyWalk::VocabularyWalk() : state_(std::make_unique<State>()) {}
VocabularyWalk::~VocabularyWalk() = default;

Status VocabularyWalk::Run(const VocabularyWalkInput& input, CompiledStore* store) {
  CFGMASK_RETURN_IF_ERROR(VocabularyWalkPhase(input, store, state_.get()));
  AddSimulatedRows(store, state_.get());
  return Status::Ok();
}

void VocabularyWalk::Freeze(TerminalAutomaton* automaton, CompiledStore* store) {
  const std::vector<std::vector<int32_t>> eof = EndOfInputPhase(automaton, state_.get());
  FreezeStorePhase(automaton, eof, state_.get(), store);
}

const std::vector<int32_t>& VocabularyWalk::roots() const { return state_->roots; }

}  // namespace cfgmask
