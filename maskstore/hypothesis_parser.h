// What a store item means to the parser, in one place: the scanner tests an
// item is checked with (ItemScanner: an Emit's retyping by a full-match
// keyword and its blockers, a Tail's candidate terminals) and the runtime's
// incremental parser of one lexing hypothesis (HypothesisParser), which
// checks a sequence of items against a concrete LR stack.
//
// The decoding session (runtime/session.cc) runs a HypothesisParser per live
// hypothesis; the streamlining steps reason about the same items for every
// stack with a known top (streamline/exploration.cc) and about which item
// fields any scanner can read (streamline/streamline.cc), both through
// ItemScanner, so that an item is read the same way offline and online.
// Items are those of lexer/terminal_automaton.h (LexItem) as stored in
// CompiledStore (ItemKind).
//
// Tested by session_test.cc (against Lark on every step of seeded walks),
// row_check_test.cc (ItemOk and the session's row walk against Item on copies),
// always_legal_test.cc and never_legal_test.cc (exploration against the
// runtime's answers) and streamline_store_test.cc (masks of streamlined and
// unstreamlined stores equal).
#ifndef CFGMASK_MASKSTORE_HYPOTHESIS_PARSER_H_
#define CFGMASK_MASKSTORE_HYPOTHESIS_PARSER_H_

#include <climits>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "lexer/terminal_automaton.h"
#include "maskstore/compiled_store.h"
#include "parser/lr_core.h"

namespace cfgmask {

// The scanner-side reading of items in parser state `state` (Lark's
// contextual lexer: the scanner of a state scans scanner_terms, of which
// scanner_alt is the alternation once embedded keyword strings are removed).
class ItemScanner {
 public:
  explicit ItemScanner(const CompiledStore& s) : s_(s) {}

  bool InAlt(int32_t state, int32_t t) const {
    return (s_.scanner_alt[static_cast<size_t>(state) * s_.scanner_words + t / 64] >> (t & 63)) & 1;
  }
  bool InTerms(int32_t state, int32_t t) const {
    return (s_.scanner_terms[static_cast<size_t>(state) * s_.scanner_words + t / 64] >> (t & 63)) &
           1;
  }
  // An Emit ends its terminal only if its scanner takes it and scans none of
  // its blockers (terminals that would have matched longer or first).
  bool EmitScanned(int32_t state, int32_t item) const {
    if (!InAlt(state, s_.item_terminal[item])) return false;
    const int32_t b = s_.item_blockers[item];
    for (int32_t i = s_.set_offsets[b]; i < s_.set_offsets[b + 1]; ++i) {
      if (InAlt(state, s_.set_data[i])) return false;
    }
    return true;
  }
  // The terminal an Emit is fed to the parser as: the best-ranked string
  // terminal equal to its text that the scanner has (Lark's "unless"
  // retyping of keywords), else its own terminal.
  int32_t EmitType(int32_t state, int32_t item) const {
    int32_t type = s_.item_terminal[item];
    const int32_t f = s_.item_full[item];
    int32_t best_rank = INT32_MAX;
    for (int32_t i = s_.set_offsets[f]; i < s_.set_offsets[f + 1]; ++i) {
      const int32_t k = s_.set_data[i];
      if (InTerms(state, k) && s_.terminal_rank[k] < best_rank) {
        best_rank = s_.terminal_rank[k];
        type = k;
      }
    }
    return type;
  }
  // Can a Tail still end in `state`: some terminal of it that the scanner
  // takes, not blocked by an earlier-ranked full match, is taken
  // (`takes(t)`; the indenter's newline through `takes_newline(t)`), or
  // retyped to a keyword it is still a prefix of and that is taken, or is
  // %ignore'd and some terminal that may follow its greedy match is taken
  // (or the input may end there: `takes_end()`).
  // A terminal t that some terminals the grammar lets follow it cannot
  // follow in text (its greedy match would swallow them:
  // !terminal_next_any[t]) is taken only if `takes_then(type, t)`: after
  // feeding it as `type`, one that can is taken (FollowerTaken).
  template <class Takes, class TakesNewline, class TakesEnd, class TakesThen>
  bool TailOk(int32_t state, int32_t item, Takes takes, TakesNewline takes_newline,
              TakesEnd takes_end, TakesThen takes_then) const {
    const int32_t alive = s_.item_blockers[item], matched = s_.item_full[item];
    // Lexed in a lexer mode whose foreign terminals this scanner has: the
    // wrong mode (LexItem::slot), whatever is alive.
    const int32_t foreign = s_.item_slot[item];
    if (foreign >= 0) {
      for (int32_t i = s_.set_offsets[foreign]; i < s_.set_offsets[foreign + 1]; ++i) {
        if (InTerms(state, s_.set_data[i])) return false;
      }
    }
    for (int32_t i = s_.set_offsets[alive]; i < s_.set_offsets[alive + 1]; ++i) {
      const int32_t t = s_.set_data[i];
      if (!InAlt(state, t)) continue;
      bool blocked = false;
      for (int32_t j = s_.set_offsets[matched]; j < s_.set_offsets[matched + 1] && !blocked; ++j) {
        const int32_t u = s_.set_data[j];
        blocked = s_.terminal_rank[u] < s_.terminal_rank[t] && InAlt(state, u);
      }
      if (blocked) continue;
      if (s_.terminal_ignored[t]) {
        if (IgnoredMayEnd(state, t, takes, takes_newline, takes_end)) return true;
        continue;
      }
      if (t == s_.indenter_nl && s_.indenter_nl >= 0) {
        if (takes_newline(t)) return true;
        continue;
      }
      const bool free = s_.terminal_next_any[t];
      if (takes(t) && (free || takes_then(t, t))) return true;
      // t's match may still be retyped to a keyword k it matches in full,
      // but only if the text so far is a prefix of k (k still alive).
      for (int32_t j = s_.unless_offsets[t]; j < s_.unless_offsets[t + 1]; ++j) {
        const int32_t k = s_.unless_data[j];
        if (InTerms(state, k) && s_.SetContains(alive, k) && takes(k) &&
            (free || takes_then(k, t)))
          return true;
      }
    }
    return false;
  }

  // After %ignore'd terminal t ends, the parser state is unchanged: some
  // terminal that can come next (CompiledStore::terminal_next_*), scanned in
  // `state`, must be taken, or the input end there.  A comment after `x =`
  // leaves only the newline, which the parser cannot take.
  template <class Takes, class TakesNewline, class TakesEnd>
  bool IgnoredMayEnd(int32_t state, int32_t t, Takes takes, TakesNewline takes_newline,
                     TakesEnd takes_end) const {
    return s_.terminal_next_any[t] || FollowerTaken(state, t, takes, takes_newline, takes_end);
  }
  // Some terminal that can start where terminal t's match stops
  // (CompiledStore::terminal_next_*), scanned in parser state `state`, is
  // taken, or the input may end.
  template <class Takes, class TakesNewline, class TakesEnd>
  bool FollowerTaken(int32_t state, int32_t t, Takes takes, TakesNewline takes_newline,
                     TakesEnd takes_end) const {
    for (int32_t i = s_.terminal_next_offsets[t]; i < s_.terminal_next_offsets[t + 1]; ++i) {
      const int32_t u = s_.terminal_next_data[i];
      if (!InTerms(state, u)) continue;
      if (u == s_.indenter_nl && s_.indenter_nl >= 0) {
        if (takes_newline(u)) return true;
        continue;
      }
      if (takes(u)) return true;
      for (int32_t j = s_.unless_offsets[u]; j < s_.unless_offsets[u + 1]; ++j) {
        const int32_t k = s_.unless_data[j];
        if (InTerms(state, k) && takes(k)) return true;
      }
    }
    return takes_end();
  }

 private:
  const CompiledStore& s_;
};

// The end of long reduction chains, remembered per thread.  A terminal
// checked after the elements of a long right-recursive list (the strict
// grammar's comma lists: a table of 8,000 tuples) reduces through every
// element; each step asks that for many rows, so a step's cost grew with the
// list.  From a configuration (a base stack node N with one state g pushed
// on it, the rest of the stack below N fixed by N itself) and a lookahead t,
// the rest of LrFeed is a function of (N, g, t): its outcome, the node it
// pops down to and the states it leaves above.  ChainFeed records that at
// configurations met past kDeep reductions (the first kWindow of a chain,
// then every kStride-th), and a later feed that meets a recorded one jumps
// to its end (Rebase, which reads the node the chain ended on, so the row
// memo's key, runtime/row_memo.h, is what it was).  Entries keep their node
// alive (a held LrStack), so a node's address names one stack while its
// entry lives: exact, and compared with the memo off in
// tests/row_check_test.cc (ChainMemo).  Two generations of at most
// kGeneration entries bound it; a hit in the old one moves to the young one.
class ChainMemo {
 public:
  static constexpr int32_t kDeep = 32;
  static constexpr int32_t kWindow = 8;
  static constexpr int32_t kStride = 64;
  static constexpr size_t kGeneration = size_t{1} << 10;
  struct Key {
    const LrStack::Node* node;
    int32_t state, terminal;
    bool operator==(const Key& o) const {
      return node == o.node && state == o.state && terminal == o.terminal;
    }
  };
  struct Result {
    LrStack keep;  // holds Key::node (and `base`, below it)
    LrOutcome outcome;
    const LrStack::Node* base;
    std::vector<int32_t> above;
  };

  static ChainMemo& ForThread() {
    thread_local ChainMemo memo;
    return memo;
  }
  // Off: every feed walks its whole chain (the reference the tests compare with).
  bool enabled = true;
  // Reductions this thread's feeds made (a chain cut short by a hit counts
  // up to the hit): the work a step's checks did on the parser stack.
  int64_t reductions = 0;
  int64_t hits = 0, puts = 0;

  const Result* Find(const Key& k) {
    auto it = young_.find(k);
    if (it != young_.end()) return &it->second;
    auto o = old_.find(k);
    if (o == old_.end()) return nullptr;
    Result r = std::move(o->second);
    old_.erase(o);
    return &Insert(k, std::move(r));
  }
  void Put(const Key& k, LrOutcome outcome, const LrStack::Node* base, std::vector<int32_t> above) {
    ++puts;
    Insert(k, Result{LrStack::Build(k.node, nullptr, 0), outcome, base, std::move(above)});
  }
  void Clear() {
    young_.clear();
    old_.clear();
  }

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = reinterpret_cast<uintptr_t>(k.node) * 0x9E3779B97F4A7C15ull;
      h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.state)) << 32 |
            static_cast<uint32_t>(k.terminal)) * 0xBF58476D1CE4E5B9ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  Result& Insert(const Key& k, Result r) {
    if (young_.size() >= kGeneration) {
      old_ = std::move(young_);
      young_.clear();
    }
    return young_.insert_or_assign(k, std::move(r)).first->second;
  }
  std::unordered_map<Key, Result, KeyHash> young_, old_;
};

// LrFeed through this thread's ChainMemo, over an LrOverlay or an LrScratch.
template <class Stack>
LrResult ChainFeed(const LrTables& lr, int32_t t, Stack* stack) {
  ChainMemo& memo = ChainMemo::ForThread();
  int32_t reductions = 0;
  thread_local std::vector<ChainMemo::Key> met;  // recorded below (no feed runs inside another)
  met.clear();
  const LrResult r = LrFeedHooked(lr, t, stack, [&](LrResult* out) {
    ++reductions;
    if (reductions < ChainMemo::kDeep || !memo.enabled || !stack->OneAboveBase()) return false;
    const ChainMemo::Key key{stack->base(), stack->Above(0), t};
    if (const ChainMemo::Result* hit = memo.Find(key)) {
      ++memo.hits;
      stack->Rebase(hit->base, hit->above.data(), static_cast<int32_t>(hit->above.size()));
      *out = {hit->outcome};
      return true;
    }
    // The first kWindow met (the next step's chain, one element longer,
    // meets them within a few reductions) and every kStride-th (a chain
    // entered at another offset meets one within kStride).
    const int32_t past = reductions - ChainMemo::kDeep;
    if (past < ChainMemo::kWindow || past % ChainMemo::kStride == 0) met.push_back(key);
    return false;
  });
  memo.reductions += reductions;
  // kStopped (a cycle or the size limit) and kBelow are not the chain's own
  // answers: not recorded.
  if (!met.empty() && (r.outcome == LrOutcome::kShift || r.outcome == LrOutcome::kReject ||
                       r.outcome == LrOutcome::kAccept)) {
    std::vector<int32_t> above(static_cast<size_t>(stack->StatesAbove()));
    for (size_t i = 0; i < above.size(); ++i) above[i] = stack->Above(static_cast<int32_t>(i));
    for (const ChainMemo::Key& k : met) memo.Put(k, r.outcome, stack->base(), above);
  }
  return r;
}

// Would `terminal` be taken on top of `view`?  LrWouldTake through ChainFeed.
inline bool ChainWouldTake(const LrTables& lr, const LrOverlay& view, int32_t terminal) {
  LrScratch s(view.base(), view.overlay().data(), static_cast<int32_t>(view.overlay().size()),
              &view);
  return LrTaken(ChainFeed(lr, terminal, &s));
}

// The parser state of one lexing hypothesis while a sequence of items is
// checked: its LR stack as an overlay view (parser/lr_core.h), the
// indenter's stack and bracket depth, and the scanners of the open slots.
// Copyable: a copy is an independent cursor over the same base stack.
struct HypothesisParser {
  const CompiledStore* s;
  LrTables lr;
  LrOverlay stack;
  std::vector<int32_t> indent;
  int32_t paren;
  std::vector<uint64_t> slots;  // scanner_words per slot
  std::vector<int32_t>* trace = nullptr;  // when set: every terminal fed, in order
  // When set: Accepts' answers for this stack, one per parse terminal (-1:
  // not asked yet), shared by the copies that have not fed anything since
  // (the row walk's siblings, runtime/session.cc); Feed drops it.
  int8_t* accepts_memo = nullptr;

  int32_t Top() const { return stack.Top(); }
  // Shifts terminal t after the reductions it triggers; false if rejected.
  // For $END, true once the input is accepted.
  bool Feed(int32_t t) {
    accepts_memo = nullptr;  // its answers were for the stack before
    if (s->viability && !s->viability->Takes(ViabilityState(), t)) return false;
    if (trace) trace->push_back(t);
    return LrTaken(ChainFeed(lr, t, &stack));
  }
  // The stack-viability state of the view (CompiledStore::viability, set):
  // a terminal is taken only into a stack that can still complete.  It
  // reads the whole stack, so a row memo's key (runtime/row_memo.h) is then
  // the whole stack.
  int32_t ViabilityState() const {
    if (size_t* low = stack.low()) *low = 0;
    return s->viability->ViewState(stack.base(), stack.overlay().data(),
                                   static_cast<int32_t>(stack.overlay().size()));
  }
  bool Newline(int32_t col) {
    if (paren > 0) return true;  // Lark's indenter drops newlines inside brackets
    if (!Feed(s->indenter_nl)) return false;
    if (col > indent.back()) {
      indent.push_back(col);
      return Feed(s->indenter_indent);
    }
    while (col < indent.back()) {
      indent.pop_back();
      if (!Feed(s->indenter_dedent)) return false;
    }
    return col == indent.back();
  }
  // Would terminal t be shifted now?  Simulated on a scratch overlay:
  // nothing is copied or allocated.
  bool Accepts(int32_t t) const {
    if (!accepts_memo) return Takes(t);
    int8_t& a = accepts_memo[t];
    if (a < 0) a = Takes(t) ? 1 : 0;
    return a == 1;
  }
  bool Takes(int32_t t) const {
    if (s->viability) return s->viability->Takes(ViabilityState(), t);
    return ChainWouldTake(lr, stack, t);
  }
  bool TailOk(int32_t item) const {
    return ItemScanner(*s).TailOk(
        Top(), item, [&](int32_t t) { return Accepts(t); },
        [&](int32_t t) { return paren > 0 || Accepts(t); }, [&] { return CanFinish(); },
        [&](int32_t type, int32_t lexed) { return TakesThen(type, lexed); });
  }
  // Fed `type` (lexed as terminal `lexed`), would the parser then take a
  // terminal that can follow lexed's match, or end?  On a copy (the
  // thread's scratch one, whose vectors keep their capacity: no allocation
  // once warm; nothing below calls TakesThen again).
  bool TakesThen(int32_t type, int32_t lexed) const {
    thread_local HypothesisParser c;
    c = *this;
    c.trace = nullptr;
    if (!c.Feed(type)) return false;
    if (s->terminal_open_paren[type]) ++c.paren;
    if (s->terminal_close_paren[type]) --c.paren;
    return ItemScanner(*s).FollowerTaken(
        c.Top(), lexed, [&](int32_t u) { return c.Accepts(u); },
        [&](int32_t u) { return c.paren > 0 || c.Accepts(u); }, [&] { return c.CanFinish(); });
  }
  // Would Finish() succeed now?  On a copy (the thread's scratch one, apart
  // from TakesThen's, which calls this): the cursor is left as it is.
  bool CanFinish() const {
    thread_local HypothesisParser copy;
    copy = *this;
    copy.trace = nullptr;
    return copy.Finish();
  }
  // What Item(item, carried_col) returns, without applying the item: for the
  // last item of a sequence, after which the parser is not read.  An Emit's
  // terminal is then asked of the parser as Accepts (the reductions and
  // shift that Feed would make, simulated on a scratch view: nothing is
  // copied), except the indenter's newline, checked by Item on a copy.
  // Compared with Item on a copy in tests/row_check_test.cc.
  bool ItemOk(int32_t item, int32_t carried_col) const {
    const ItemKind kind = s->KindOf(item);
    if (kind != ItemKind::kEmit) {
      if (kind == ItemKind::kTail) return TailOk(item);
      const int32_t t = s->item_terminal[item];  // kHit: as Item
      const size_t at = static_cast<size_t>(s->item_slot[item]) * s->scanner_words + t / 64;
      if (at >= slots.size()) return false;
      return !((slots[at] >> (t & 63)) & 1);
    }
    const ItemScanner scanner(*s);
    const int32_t state = Top();
    if (!scanner.EmitScanned(state, item)) return false;
    if (static_cast<int64_t>(slots.size() / s->scanner_words) != s->item_slot[item]) return false;
    if (s->terminal_ignored[s->item_terminal[item]]) return true;
    const int32_t type = scanner.EmitType(state, item);
    if (type == s->indenter_nl && s->indenter_nl >= 0) {
      thread_local HypothesisParser c;
      c = *this;
      c.trace = nullptr;
      return c.Item(item, carried_col);
    }
    return Accepts(type);
  }
  // Checks item `item` and applies it; false if the hypothesis dies.
  // `carried_col` is the column carried into the token (-1: none yet);
  // `col_override` replaces an Emit's resolved column when set.
  bool Item(int32_t item, int32_t carried_col, int32_t col_override = INT32_MIN) {
    const int32_t t = s->item_terminal[item];
    if (s->KindOf(item) == ItemKind::kHit) {
      // A store the compiler wrote always names an open slot; a crafted one
      // that passes the loader's checks may not, and is refused here.
      const size_t at = static_cast<size_t>(s->item_slot[item]) * s->scanner_words + t / 64;
      if (at >= slots.size()) return false;
      const uint64_t w = slots[at];
      return !((w >> (t & 63)) & 1);
    }
    if (s->KindOf(item) == ItemKind::kTail) return TailOk(item);
    const ItemScanner scanner(*s);
    const int32_t state = Top();
    if (!scanner.EmitScanned(state, item)) return false;
    // The Emit opens slot item_slot: always the next one in a compiled store.
    if (static_cast<int64_t>(slots.size() / s->scanner_words) != s->item_slot[item]) return false;
    const uint64_t* alt = s->scanner_alt.data() + static_cast<size_t>(state) * s->scanner_words;
    slots.insert(slots.end(), alt, alt + s->scanner_words);
    if (s->terminal_ignored[t]) return true;
    const int32_t type = scanner.EmitType(state, item);
    if (type == s->indenter_nl && s->indenter_nl >= 0) {
      int32_t col = ColumnDelta::Resolve(s->item_col_abs[item], s->item_col[item], carried_col);
      if (col_override != INT32_MIN) col = col_override;
      if (col < 0) return false;  // a newline token without '\n': Lark's indenter fails
      return Newline(col);
    }
    if (!Feed(type)) return false;
    if (s->terminal_open_paren[type]) ++paren;
    if (s->terminal_close_paren[type]) --paren;
    return true;
  }
  // Ends the input: the indenter's closing dedents, then $END.
  bool Finish() {
    if (s->indenter_nl >= 0) {
      while (indent.size() > 1) {
        indent.pop_back();
        if (!Feed(s->indenter_dedent)) return false;
      }
    }
    return Feed(s->num_parse_terminals - 1);
  }
};

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_HYPOTHESIS_PARSER_H_
