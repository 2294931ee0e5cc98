// Unlimited credit exploration: see exploration.h.
#include "streamline/exploration.h"

#include <algorithm>
#include <climits>

#include "grammar/base/check.h"
#include "maskstore/hypothesis_parser.h"

namespace cfgmask {

int32_t Exploration::KeyMemo::Entry(const std::vector<int32_t>& key, int8_t init, bool* inserted) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ key.size();
  for (int32_t v : key) h = (h ^ static_cast<uint32_t>(v)) * 0x100000001b3ULL + (h >> 29);
  // The index probes by the low bits, which the loop mixes poorly for keys
  // of small ids (LR states, items): finalised (murmur3's fmix64), so that
  // probe runs stay short.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  const int32_t id = index_.FindOrAdd(
      h, values_.size(),
      [&](int32_t e) {
        return hash_[e] == h && length_[e] == key.size() &&
               std::equal(key.begin(), key.end(), arena_.at(offset_[e]));
      },
      [&] {
        CFGMASK_CHECK(key.size() <= (size_t{1} << Blocks<int32_t>::kShift));
        const size_t at = arena_.Reserve(key.size());
        std::copy(key.begin(), key.end(), arena_.at(at));
        hash_.push_back(h);
        offset_.push_back(at);
        length_.push_back(static_cast<uint32_t>(key.size()));
        values_.push_back(init);
      },
      [&](int32_t e) { return hash_[e]; }, inserted);
  if (!*inserted && values_[id] == kUnanswered) {
    values_[id] = init;
    *inserted = true;
  }
  return id;
}

// The known top of the parse stack as an LR-core stack: it refuses to pop
// below what it knows (the caller borrows); every action looked up counts
// against the query's budget.  Its bottom is dropped past max_stack after a
// shift (Feed), not after the gotos of a reduction chain.
struct Exploration::KnownTop {
  std::vector<int32_t>* K;
  Exploration* x;
  int32_t Top() const { return K->back(); }
  bool Pop(int32_t n) {
    if (n >= static_cast<int32_t>(K->size())) return false;
    K->resize(K->size() - n);
    return true;
  }
  bool Push(int32_t state) {
    K->push_back(state);
    return true;
  }
  bool Step() {
    if (++x->steps_ > x->options_.max_steps) {
      x->exceeded_ = true;
      return false;
    }
    return true;
  }
};

namespace {
ExplorationOptions Checked(ExplorationOptions o) {
  if (o.max_stack < 2) o.max_stack = 2;  // a borrowed pair must fit
  return o;
}
}  // namespace

Exploration::Exploration(const LrTables& lr, int32_t start_state, ExplorationOptions options)
    : lr_(lr), preds_(lr, start_state), options_(Checked(options)) {}

bool Exploration::Feed(const int32_t* r, int32_t n, int32_t next, std::vector<int32_t> K,
                       int32_t t, int32_t ctx) {
  KnownTop known{&K, this};
  const LrResult step = LrFeed(lr_, t, &known);
  switch (step.outcome) {
    case LrOutcome::kStopped:
      return possible_;  // out of steps: not proved / possible
    case LrOutcome::kReject:
    case LrOutcome::kAccept:  // only $END is accepted; never fed here
      return false;
    case LrOutcome::kShift:
      if (static_cast<int32_t>(K.size()) > options_.max_stack) K.erase(K.begin());
      return next < 0 || Proved(r, n, next, K, ctx);
    case LrOutcome::kBelow:
      break;
  }
  // Pops below what is known: the new top is any state with a path of the
  // right length to the deepest known one; every one must succeed (some
  // one, for the refutation).  States without a goto on lhs cannot be
  // under a real stack.
  const int32_t len = lr_.rule_length[step.rule];
  const bool decided = preds_.ForEachBorrow(
      lr_, K[0], len - static_cast<int32_t>(K.size()) + 1, step.rule,
      [&](int32_t p, int32_t g) { return FeedMemo(r, n, next, {p, g}, t, ctx) == possible_; });
  return decided ? possible_ : !possible_;
}

bool Exploration::FeedMemo(const int32_t* r, int32_t n, int32_t next,
                           const std::vector<int32_t>& K, int32_t t, int32_t ctx) {
  Key(r, n, next < 0 ? n : next, K, ctx);
  key_.push_back(-2);
  key_.push_back(t);
  return Memoised([&] { return Feed(r, n, next, K, t, ctx); });
}

// The key is in key_ (Key()); the memo copies it before compute() runs.  A
// query cut short (exceeded_) leaves its key unanswered.
template <class F>
bool Exploration::Memoised(const F& compute) {
  KeyMemo& memo = memo_[possible_];
  bool inserted;
  const int32_t id = memo.Entry(key_, kInProgress, &inserted);
  if (!inserted) {
    const int8_t v = memo.value(id);
    return v == kInProgress ? possible_ : v == 1;
  }
  const bool result = compute();
  memo.value(id) = exceeded_ ? KeyMemo::kUnanswered : (result ? 1 : 0);
  return result;
}

void Exploration::Key(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
                      int32_t ctx) {
  key_.clear();
  key_.push_back(ctx);
  key_.push_back(static_cast<int32_t>(K.size()));
  key_.insert(key_.end(), K.begin(), K.end());
  key_.insert(key_.end(), r + pos, r + n);
}

bool Exploration::Proved(const int32_t* r, int32_t n, int32_t pos, const std::vector<int32_t>& K,
                         int32_t ctx) {
  if (pos == n) return true;
  Key(r, n, pos, K, ctx);
  return Memoised([&] { return Check(r, n, pos, K, ctx); });
}

// ---------------------------------------------------------------------------
// Item sequences of a compiled store.

ItemExploration::ItemExploration(const CompiledStore& store, ExplorationOptions options)
    : Exploration(store.lr(), store.start_state, options), s_(store) {}

// A query's start: the terminals the Emit can be fed as (itself or a keyword
// it is retyped to) and the first slot opened inside r (Hits of earlier
// slots are not known).  False when the Emit is %ignore'd: the parser state
// it leaves is not known.
bool ItemExploration::Start(int32_t emit, const int32_t* r, int32_t n, std::vector<int32_t>* types,
                            int32_t* base_slot) const {
  const int32_t t = s_.item_terminal[emit];
  if (s_.terminal_ignored[t]) return false;
  types->assign(1, t);
  const int32_t f = s_.item_full[emit];
  for (int32_t i = s_.set_offsets[f]; i < s_.set_offsets[f + 1]; ++i)
    types->push_back(s_.set_data[i]);
  *base_slot = INT32_MAX;
  for (int32_t i = 0; i < n; ++i) {
    if (s_.KindOf(r[i]) == ItemKind::kEmit) {
      *base_slot = s_.item_slot[r[i]];
      break;
    }
  }
  return true;
}

bool ItemExploration::ProveAfterEmit(int32_t emit, const int32_t* r, int32_t n) {
  Begin(false);
  std::vector<int32_t> types;
  int32_t base_slot;
  if (!Start(emit, r, n, &types, &base_slot)) return false;  // the parser state is not known
  for (int32_t type : types) {
    if (type == s_.indenter_nl && s_.indenter_nl >= 0) return false;
    for (int32_t k : preds_.EnteredBy(type)) {
      if (!Proved(r, n, 0, {k}, base_slot)) return false;
    }
  }
  return true;
}

bool ItemExploration::PossibleAfterEmit(int32_t emit, const int32_t* r, int32_t n) {
  Begin(true);
  std::vector<int32_t> types;
  int32_t base_slot;
  if (!Start(emit, r, n, &types, &base_slot)) return true;  // the parser state is not known
  for (int32_t type : types) {
    if (type == s_.indenter_nl && s_.indenter_nl >= 0) return true;
    for (int32_t k : preds_.EnteredBy(type)) {
      if (Proved(r, n, 0, {k}, base_slot)) return true;
    }
  }
  return false;
}

// The runtime's HypothesisParser::TailOk (maskstore/hypothesis_parser.h),
// for every (some) configuration: some terminal of the tail that the known
// top state scans, unblocked, is taken.  Inside brackets the indenter drops
// a newline: unknown here.
bool ItemExploration::TailProved(const std::vector<int32_t>& K, int32_t item) {
  if (!possible() && s_.viability) return false;  // see Check
  return ItemScanner(s_).TailOk(
      K.back(), item, [&](int32_t t) { return AcceptsAll(K, t); },
      [&](int32_t t) { return possible() || AcceptsAll(K, t); },
      [&] { return possible(); },  // the end of the input: the stack below is unknown
      [&](int32_t, int32_t) { return possible(); });  // two terminals ahead: not explored
}

bool ItemExploration::Check(const int32_t* r, int32_t n, int32_t pos,
                            const std::vector<int32_t>& K, int32_t base_slot) {
  const int32_t item = r[pos];
  const int32_t t = s_.item_terminal[item];
  switch (s_.KindOf(item)) {
    case ItemKind::kHit:
      // Checked where its slot was opened, if that was inside r.  Its
      // scanner is unknown if its slot was opened before r.
      return (possible() || s_.item_slot[item] >= base_slot) &&
             Proved(r, n, pos + 1, K, base_slot);
    case ItemKind::kTail:
      return TailProved(K, item) && Proved(r, n, pos + 1, K, base_slot);
    case ItemKind::kEmit:
      break;
  }
  const ItemScanner scanner(s_);
  const int32_t state = K.back();
  if (!scanner.EmitScanned(state, item)) return false;
  for (int32_t i = pos + 1; i < n; ++i) {
    const int32_t h = r[i];
    if (s_.KindOf(h) == ItemKind::kHit && s_.item_slot[h] == s_.item_slot[item] &&
        scanner.InAlt(state, s_.item_terminal[h]))
      return false;
  }
  if (s_.terminal_ignored[t]) return Proved(r, n, pos + 1, K, base_slot);
  const int32_t type = scanner.EmitType(state, item);
  if (type == s_.indenter_nl && s_.indenter_nl >= 0) return possible();  // indenter stack unknown
  // With the stack-viability check (CompiledStore::viability) the runtime
  // takes a terminal only into a stack that can still complete, which
  // depends on the whole stack: below the known top it is not known, so
  // nothing that feeds the parser is proved (a fold relying on it could
  // keep a token the check refuses).  Refutations stand: the check only
  // refuses more.
  if (!possible() && s_.viability) return false;
  return Feed(r, n, pos + 1, K, type, base_slot);
}

// ---------------------------------------------------------------------------
// Plain terminal sequences.

bool TerminalExploration::Run(bool possible, int32_t x, const int32_t* s, int32_t n) {
  Begin(possible);
  if (n == 0) return true;
  for (int32_t k : preds_.EnteredBy(x)) {
    if (Proved(s, n, 0, {k}, 0) == possible) return possible;
  }
  return !possible;
}

bool TerminalExploration::ProveAfter(int32_t x, const int32_t* s, int32_t n) {
  return Run(false, x, s, n);
}

bool TerminalExploration::PossibleAfter(int32_t x, const int32_t* s, int32_t n) {
  return Run(true, x, s, n);
}

}  // namespace cfgmask
