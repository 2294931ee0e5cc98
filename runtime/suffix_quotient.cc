// The right quotient by a suffix and pre* of it: see suffix_quotient.h.
#include "runtime/suffix_quotient.h"

#include <algorithm>
#include <chrono>

#include "maskstore/hypothesis_parser.h"
#include "parser/lr_core.h"

namespace cfgmask {

namespace {

// The store's step of lexer state q on byte b (as Session::AdvanceOne reads
// it): the state reached and its Hit sequence, or -1.
int32_t StepOf(const CompiledStore& s, int32_t q, int32_t b, int32_t* hits) {
  const int32_t* begin = s.step_byte.data() + s.step_offsets[q];
  const int32_t* end = s.step_byte.data() + s.step_offsets[q + 1];
  const int32_t* it = std::lower_bound(begin, end, b);
  if (it == end || *it != b) return -1;
  const size_t i = it - s.step_byte.data();
  *hits = s.step_hits[i];
  return s.step_to[i];
}

}  // namespace

bool SuffixQuotient::Key::operator==(const Key& o) const {
  return kind == o.kind && layer == o.layer && q == o.q && slots == o.slots && cand == o.cand &&
         seq == o.seq && idx == o.idx && term == o.term && rule == o.rule && j == o.j &&
         parent == o.parent && end == o.end && mid == o.mid;
}

size_t SuffixQuotient::KeyHash::operator()(const Key& k) const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](int64_t v) { h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ull; };
  mix(static_cast<int32_t>(k.kind));
  mix(k.layer);
  mix(k.q);
  mix(k.slots);
  mix(k.cand);
  mix(k.seq);
  mix(k.idx);
  mix(k.term);
  mix(k.rule);
  mix(k.j);
  mix(k.parent);
  mix(k.end);
  mix(k.mid);
  return static_cast<size_t>(h ^ (h >> 29));
}

bool SuffixQuotient::Supported(const CompiledStore& store) { return store.indenter_nl < 0; }

SuffixQuotient::SuffixQuotient(const CompiledStore* store, std::string suffix,
                               SuffixQuotientLimits limits, bool estimate)
    : s_(store), suffix_(std::move(suffix)), limits_(limits), G_(store->lr().num_states),
      estimate_(estimate) {
  empty_slots_ = SlotsId({});
  const LrTables lr = store->lr();
  num_nt_ = lr.num_nonterminals;
  if (estimate_) {
    feed_rules_.assign(store->num_parse_terminals, -1);
    feed_shifts_.assign(store->num_parse_terminals, 0);
    return;  // no goto families are made
  }
  for (int32_t p = 0; p < G_; ++p) {
    for (int32_t a = 0; a < lr.num_nonterminals; ++a) {
      const int32_t g = lr.Goto(p, a);
      if (g >= 0) goto_into_[static_cast<uint64_t>(g) * num_nt_ + a].push_back(p);
    }
  }
}

Status SuffixQuotient::Fits(const CompiledStore* store, SuffixQuotientLimits limits,
                            SuffixQuotientStats* stats) {
  if (!Supported(*store)) {
    return Status(ErrorCode::kInvalidArgument,
                  "exact suffix masks do not cover grammars with an indenter");
  }
  const auto t0 = std::chrono::steady_clock::now();
  SuffixQuotient q(store, std::string(), limits, /*estimate=*/true);
  Key k{Kind::kLex};
  k.q = store->initial_lex_state;
  k.slots = q.SlotsId({});
  q.Intern(k);
  q.Generate();
  q.stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats) *stats = q.stats_;
  if (q.over_) {
    return Status(ErrorCode::kResourceLimit,
                  "the grammar's middle layer alone needs more than " +
                      std::to_string(limits.max_rules) + " pushdown rules");
  }
  return Status::Ok();
}

void SuffixQuotient::CountFeed(int32_t term) {
  if (feed_rules_[term] >= 0) return;
  const LrTables lr = s_->lr();
  int64_t rules = 0;
  std::unordered_map<int32_t, int32_t> longest;  // per nonterminal reduced to
  for (int32_t p = 0; p < G_; ++p) {
    const int32_t a = lr.Action(p, term);
    if (a == 0) continue;
    if (a == kAcceptAction) {
      ++rules;
      continue;
    }
    if (lr.ShiftTo(p, term) >= 0) {
      ++feed_shifts_[term];  // a rule only if the continuation lives
      continue;
    }
    const int32_t rule = lr.ReduceBy(p, term);
    const int32_t len = lr.RuleLength(rule);
    if (len == 0) {
      if (lr.GotoAfterReduce(p, rule) >= 0) ++rules;
      continue;
    }
    ++rules;
    int32_t& l = longest[lr.rule_lhs[rule]];
    l = std::max(l, len);
  }
  // A reduction state per (nonterminal, pops left), one rule each.
  for (const auto& [a, len] : longest) rules += len;
  feed_rules_[term] = rules;
}

Status SuffixQuotient::Build(const CompiledStore* store, std::string_view suffix,
                             SuffixQuotientLimits limits, std::shared_ptr<SuffixQuotient>* out,
                             SuffixQuotientStats* stats, std::shared_ptr<SuffixLexings> lexings) {
  if (!Supported(*store)) {
    return Status(ErrorCode::kInvalidArgument,
                  "exact suffix masks do not cover grammars with an indenter");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool terminals = limits.middle == SuffixMiddle::kTerminals;
  if (!terminals) {
    if (Status st = Fits(store, limits, stats); !st.ok()) return st;
  }
  if (lexings == nullptr || lexings->store() != store) {
    lexings = std::make_shared<SuffixLexings>(store);
  }
  Status st = BuildWith(store, suffix, limits, terminals || limits.middle == SuffixMiddle::kAuto,
                        out, stats, lexings);
  if (!st.ok() && limits.middle == SuffixMiddle::kAuto) {
    // The terminal-level middle went past the limits where the byte-level
    // one's count fits: build that one.
    st = BuildWith(store, suffix, limits, false, out, stats, lexings);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats) stats->seconds = seconds;
  if (!st.ok()) return st;
  (*out)->stats_.seconds = seconds;
  return Status::Ok();
}

Status SuffixQuotient::BuildWith(const CompiledStore* store, std::string_view suffix,
                                 SuffixQuotientLimits limits, bool terminal_middle,
                                 std::shared_ptr<SuffixQuotient>* out,
                                 SuffixQuotientStats* stats,
                                 std::shared_ptr<SuffixLexings> lexings) {
  std::shared_ptr<SuffixQuotient> q(new SuffixQuotient(store, std::string(suffix), limits));
  q->lexings_ = std::move(lexings);
  q->terminal_middle_ = terminal_middle;
  q->stats_.terminal_middle = terminal_middle;
  q->acc_ = q->Intern(Key{Kind::kAcc});
  q->gen_todo_.clear();
  for (int32_t g = 0; g < q->G_; ++g) q->AddTrans(q->acc_, g, q->acc_);
  Key k{Kind::kLex};
  k.q = store->initial_lex_state;
  k.slots = q->empty_slots_;
  q->Intern(k);
  q->Generate();
  q->LinkPassthrough();
  q->Saturate();
  if (stats) *stats = q->stats_;
  if (q->over_) {
    return Status(ErrorCode::kResourceLimit,
                  "the suffix's quotient needs more than " +
                      std::to_string(limits.max_transitions) + " transitions or " +
                      std::to_string(limits.max_rules) + " rules (" +
                      (terminal_middle ? "terminal" : "byte") + "-level middle; stopped at " +
                      std::to_string(q->stats_.controls) + " controls, " +
                      std::to_string(q->stats_.rules) + " rules, " +
                      std::to_string(q->stats_.transitions) + " transitions)");
  }
  *out = std::move(q);
  return Status::Ok();
}

int32_t SuffixQuotient::SlotsId(const std::vector<uint64_t>& slots) {
  std::string key(reinterpret_cast<const char*>(slots.data()), slots.size() * sizeof(uint64_t));
  auto [it, fresh] = slot_ids_.emplace(std::move(key), static_cast<int32_t>(slot_sets_.size()));
  if (fresh) slot_sets_.push_back(slots);
  return it->second;
}

int32_t SuffixQuotient::Intern(const Key& k) {
  auto [it, fresh] = ids_.emplace(k, static_cast<int32_t>(keys_.size()));
  if (fresh) {
    keys_.push_back(k);
    bool virt = false;
    if (terminal_middle_ && k.kind == Kind::kItems) {
      int32_t count = 0;
      const int32_t item = ItemAt(k, k.idx, &count);
      virt = k.idx < count && s_->KindOf(item) == ItemKind::kEmit &&
             !s_->terminal_ignored[s_->item_terminal[item]];
    }
    virtual_emit_.push_back(virt ? 1 : 0);
    holder_.push_back(HolderOf(k));
    int32_t link = -2;
    if (terminal_middle_ && k.kind == Kind::kItems && !virt) {
      int32_t count = 0;
      const int32_t item = ItemAt(k, k.idx, &count);
      if (k.idx < count && s_->KindOf(item) == ItemKind::kEmit && k.cand != -2 && k.seq >= 0 &&
          s_->terminal_ignored[s_->item_terminal[item]]) {
        link = IgnoredOn(k);
      }
    }
    ignored_link_.push_back(link);
    gen_todo_.push_back(it->second);
    ++stats_.controls;
  }
  return it->second;
}

const char* SuffixQuotientStats::HolderName(int32_t h) {
  static const char* const kNames[] = {
      "hubs",        "Boundary states", "other lexer states", "item controls",
      "hub feeds",   "Boundary feeds",  "continuation feeds", "$END feeds",
      "byte feeds",  "hub feeds' goto states", "Boundary feeds' goto states",
      "other goto states", "pops left (wildcard)", "accepting state"};
  return h >= 0 && h < kNumHolders ? kNames[h] : "?";
}

// The kind of control k is, for the transitions' count by holder (its
// parent, a feed or a hub, is interned before it).
uint8_t SuffixQuotient::HolderOf(const Key& k) const {
  using S = SuffixQuotientStats;
  switch (k.kind) {
    case Kind::kAcc:
      return S::kAccept;
    case Kind::kLex:
      if (k.mid) return k.cand == -3 ? S::kBoundary : S::kHub;
      return S::kOtherLex;
    case Kind::kItems:
      return S::kItems;
    case Kind::kFeed: {
      if (k.end) return S::kEndFeed;
      if (!k.mid) return S::kByteFeed;
      const Key& to = keys_[k.parent];
      if (to.kind == Kind::kLex && to.mid) return to.cand == -3 ? S::kBoundaryFeed : S::kHubFeed;
      return S::kContFeed;
    }
    case Kind::kPop: {
      if (k.j > 0) return S::kPops;
      const uint8_t feed = holder_[k.parent];
      return feed == S::kHubFeed        ? S::kHubGoto
             : feed == S::kBoundaryFeed ? S::kBoundaryGoto
                                        : S::kOtherGoto;
    }
  }
  return S::kItems;
}

int32_t SuffixQuotient::ItemAt(const Key& k, int32_t idx, int32_t* count) const {
  if (k.cand == -2) {  // a shared Emit of the terminal-level middle
    *count = 1;
    return idx == 0 ? k.rule : -1;
  }
  if (k.seq < 0) {  // a candidate's Emit without the byte after it (Boundary)
    *count = 1;
    return idx == 0 ? s_->cand_item[k.cand] : -1;
  }
  const int32_t begin = s_->seq_offsets[k.seq], len = s_->seq_offsets[k.seq + 1] - begin;
  if (k.end || k.cand < 0) {
    *count = len;
    return idx < len ? s_->seq_data[begin + idx] : -1;
  }
  *count = len + 1;
  if (idx == 0) return s_->cand_item[k.cand];
  return idx <= len ? s_->seq_data[begin + idx - 1] : -1;
}

bool SuffixQuotient::NormalizeKey(Key* key) {
  Key& k = *key;
  const int32_t words = s_->scanner_words;
  for (;;) {
    int32_t count = 0;
    const int32_t item = ItemAt(k, k.idx, &count);
    if (k.idx >= count) break;
    switch (s_->KindOf(item)) {
      case ItemKind::kHit: {
        const std::vector<uint64_t>& slots = slot_sets_[k.slots];
        const int32_t t = s_->item_terminal[item];
        const size_t at = static_cast<size_t>(s_->item_slot[item]) * words + t / 64;
        if (at >= slots.size() || ((slots[at] >> (t & 63)) & 1)) return false;
        ++k.idx;
        break;
      }
      case ItemKind::kTail:
        ++k.idx;  // a pruning, no rule (see the head of suffix_quotient.h)
        break;
      case ItemKind::kEmit:
        k.kind = Kind::kItems;
        // The terminal-level middle: a token's end at a boundary candidate
        // may go on at the hub (RulesOf decides per parser state).  Where
        // a blank ends it in every parser state that scans it, what follows
        // is forgotten: one control per Emit item (cand -2), shared by every
        // text that leads to it.
        // An %ignore'd terminal feeds nothing: it takes the byte path (the
        // hub is inside a blank, and the byte that ends the blank there
        // must be read on, not dropped for the hub again).
        k.mid = terminal_middle_ && k.layer == 0 && !k.end && k.cand >= 0 && k.idx == 0 &&
                !s_->terminal_ignored[s_->item_terminal[item]];
        if (k.mid) {
          const int32_t kill = SlotsId(KillBits(k, item));
          const int32_t hub = BlankHubEverywhere(k.cand, k.slots, item, kill);
          const int64_t open = static_cast<int64_t>(slot_sets_[k.slots].size() / words);
          if (open != s_->item_slot[item]) return false;
          if (hub < 0) {
            // No blank ends it everywhere: the Emit at the candidate,
            // without the byte that followed (seq -1).  Its way on reads
            // that byte again, with every other, from the start of the
            // next token (RulesOf: the feed returns to Boundary), so the
            // feeds are made per candidate, not per byte and way on.
            Key e{Kind::kItems};
            e.mid = true;
            e.q = -1;
            e.cand = k.cand;
            e.seq = -1;
            e.slots = k.slots;
            k = e;
            return true;
          }
          Key m{Kind::kItems};
          m.mid = true;
          m.cand = -2;
          m.rule = item;
          m.slots = empty_slots_;
          m.parent = hub;  // the hub of the mode the blank is lexed in
          m.q = kill;      // the parser states this byte's Hits kill
          k = m;
        }
        return true;
    }
  }
  if (k.end) {
    // $END: nothing reads the lexer or the slots after it, so every end
    // of the same layer shares one feed and its reduction states.
    Key e{Kind::kFeed};
    e.layer = k.layer;
    e.end = true;
    e.term = s_->num_parse_terminals - 1;
    k = e;
    return true;
  }
  const int32_t q = s_->compact_to[k.q];
  if (q < 0) return false;
  // The compaction's slot map, as Session::AdvanceOne applies it.
  const std::vector<uint64_t> old = slot_sets_[k.slots];
  std::vector<uint64_t> slots;
  const int32_t map = s_->compact_map[k.q];
  for (int32_t i = s_->set_offsets[map]; i < s_->set_offsets[map + 1]; ++i) {
    const int32_t ns = s_->set_data[i] >> 16, o = s_->set_data[i] & 0xFFFF;
    if (slots.size() < static_cast<size_t>(ns + 1) * words) {
      slots.resize(static_cast<size_t>(ns + 1) * words, 0);
    }
    for (int32_t w = 0; w < words; ++w) {
      const size_t from = static_cast<size_t>(o) * words + w;
      if (from < old.size()) slots[static_cast<size_t>(ns) * words + w] |= old[from];
    }
  }
  Key l{Kind::kLex};
  l.layer = k.layer;
  l.q = q;
  l.slots = SlotsId(slots);
  k = l;
  return true;
}

int32_t SuffixQuotient::Normalize(Key k) {
  if (!NormalizeKey(&k)) return -1;
  return k.kind == Kind::kLex ? LexState(k) : Intern(k);
}

void SuffixQuotient::ByteSuccessors(const Key& k, int32_t b, int32_t layer, std::vector<Key>* out) {
  int32_t hits = 0;
  const int32_t to = StepOf(*s_, k.q, b, &hits);
  if (to >= 0) {
    Key x{Kind::kItems};
    x.layer = layer;
    x.q = to;
    x.slots = k.slots;
    x.seq = hits;
    if (NormalizeKey(&x)) out->push_back(x);
  }
  for (int32_t ci = s_->cand_offsets[k.q]; ci < s_->cand_offsets[k.q + 1]; ++ci) {
    int32_t h2 = 0;
    const int32_t q2 = StepOf(*s_, s_->cand_to[ci], b, &h2);
    if (q2 < 0) continue;
    Key x{Kind::kItems};
    x.layer = layer;
    x.q = q2;
    x.slots = k.slots;
    x.cand = ci;
    x.seq = h2;
    if (NormalizeKey(&x)) out->push_back(x);
  }
}

// Inside S, a lexer state whose next byte has one way on that reads no
// stack (the inside of a string, a run of blanks) is the same automaton
// state as the one it leads to: such runs are followed here and every key
// on the way is an alias, so that a long suffix costs states only where
// its terminals meet the parser.
int32_t SuffixQuotient::LexState(Key l) {
  const int32_t n = static_cast<int32_t>(suffix_.size());
  std::vector<Key> chain, succ;
  int32_t id = -1;
  for (;;) {
    if (auto it = ids_.find(l); it != ids_.end()) {
      id = it->second;
      break;
    }
    if (l.layer == 0 || l.layer >= n) {
      id = Intern(l);
      break;
    }
    succ.clear();
    ByteSuccessors(l, static_cast<uint8_t>(suffix_[l.layer]), l.layer + 1, &succ);
    if (succ.empty()) break;  // dead
    if (succ.size() != 1 || succ[0].kind != Kind::kLex) {
      id = Intern(l);
      break;
    }
    chain.push_back(l);
    l = succ[0];
  }
  for (const Key& k : chain) ids_.emplace(k, id);
  return id;
}

void SuffixQuotient::Generate() {
  while (!gen_todo_.empty() && !over_) {
    const int32_t c = gen_todo_.back();
    gen_todo_.pop_back();
    RulesOf(c);
  }
}

void SuffixQuotient::RulesOf(int32_t c) {
  const Key k = keys_[c];  // a copy: Intern may grow keys_
  const LrTables lr = s_->lr();
  const int32_t n = static_cast<int32_t>(suffix_.size());
  switch (k.kind) {
    case Kind::kAcc:
      return;
    case Kind::kLex: {
      if (!estimate_ && k.layer == n && k.cand != -3) {
        for (int32_t e = s_->eof_offsets[k.q]; e < s_->eof_offsets[k.q + 1]; ++e) {
          // The end items read the slots, not the lexer state: the
          // lexer states with the same end sequence share its feeds.
          Key x{Kind::kItems};
          x.layer = n;
          x.q = -1;
          x.slots = k.slots;
          x.seq = s_->eof_seq[e];
          x.end = true;
          const int32_t y = Normalize(x);
          if (y >= 0) AddEps(c, y);
        }
        // The empty suffix: the middle layer is the end layer too (the
        // input may end here or go on).
        if (n > 0) return;
      }
      // The bytes read here and the layer each leads to: in the middle any
      // byte (staying there) or S's first; in S its next byte.
      std::vector<Key> succ;
      auto byte_alternatives = [&](int32_t b, int32_t layer) {
        succ.clear();
        ByteSuccessors(k, b, layer, &succ);
        for (const Key& x : succ) {
          const int32_t y = x.kind == Kind::kLex ? LexState(x) : Intern(x);
          if (y >= 0) AddEps(c, y);
        }
      };
      if (k.layer == 0) {
        std::vector<uint8_t> bytes(256, 0);
        for (int32_t i = s_->step_offsets[k.q]; i < s_->step_offsets[k.q + 1]; ++i) {
          bytes[s_->step_byte[i]] = 1;
        }
        for (int32_t ci = s_->cand_offsets[k.q]; ci < s_->cand_offsets[k.q + 1]; ++ci) {
          const int32_t q1 = s_->cand_to[ci];
          for (int32_t i = s_->step_offsets[q1]; i < s_->step_offsets[q1 + 1]; ++i) {
            bytes[s_->step_byte[i]] = 1;
          }
        }
        for (int32_t b = 0; b < 256; ++b) {
          if (bytes[b]) byte_alternatives(b, 0);
        }
        if (!estimate_ && n > 0) byte_alternatives(static_cast<uint8_t>(suffix_[0]), 1);
      } else {
        byte_alternatives(static_cast<uint8_t>(suffix_[k.layer]), k.layer + 1);
      }
      return;
    }
    case Kind::kItems: {
      int32_t count = 0;
      const int32_t item = ItemAt(k, k.idx, &count);
      const int32_t words = s_->scanner_words;
      const std::vector<uint64_t> slots = slot_sets_[k.slots];
      const bool shared = k.cand == -2;  // checked when it was made
      if (!shared && static_cast<int64_t>(slots.size() / words) != s_->item_slot[item]) return;
      const ItemScanner scanner(*s_);
      const int32_t t = s_->item_terminal[item];
      // The slot this Emit opens keeps its scanner only if something reads
      // it: a Hit later in this byte's items or the compaction at the end
      // of the byte.  Otherwise it is kept empty, so that the feeds of
      // states with different scanners are one control state.  Only with
      // the terminal-level middle (its suffix layers): in the byte-level
      // middle it would leave Fits more lexer states to walk before its
      // count passes the limit (sql.lark: refused in 0.2 s instead of 45 ms)
      // and the strict Python grammar still 64 times past it.
      const bool boundary = !shared && k.seq < 0;  // the Emit without its byte
      bool slot_read = !terminal_middle_ || boundary;
      if (!slot_read && !shared) {
        const int32_t si = s_->item_slot[item];
        for (int32_t i = k.idx + 1; i < count && !slot_read; ++i) {
          const int32_t later = ItemAt(k, i, &count);
          slot_read = s_->KindOf(later) == ItemKind::kHit && s_->item_slot[later] == si;
        }
        if (!k.end && !slot_read) {
          const int32_t map = s_->compact_map[k.q];
          for (int32_t i = s_->set_offsets[map]; i < s_->set_offsets[map + 1] && !slot_read; ++i) {
            slot_read = (s_->set_data[i] & 0xFFFF) == si;
          }
        }
      }
      // The same candidate ended by a blank instead of this byte: its step,
      // and the Hits of that step, read per parser state below.
      int32_t blank_hits = 0, blank_q = -1, hub = shared ? k.parent : -1;
      if (k.mid && !shared) {
        blank_q = StepOf(*s_, s_->cand_to[k.cand], ' ', &blank_hits);
        if (blank_q >= 0 && s_->compact_to[blank_q] < 0) blank_q = -1;
      }
      // The parser states whose scanner this byte's own Hits on the new
      // slot kill (a keyword that wins over a name at its end): no rule.
      const std::vector<uint64_t> kill =
          shared ? slot_sets_[k.q]
                 : (terminal_middle_ ? KillBits(k, item) : std::vector<uint64_t>());
      bool counted = !k.mid || shared;
      // An %ignore'd terminal that every state on top at a token's end
      // scans, into the same way on whatever the state (its slot unread):
      // one eps rule instead of a swap per state (a swap into a pass-through
      // state is made again into each state of its frontier).
      // Scanned by some of them only (a mode's foreign terminals block it
      // in the others): one eps rule limited to those states (AddEpsOn).
      if (IgnoredLink(c)) {  // !slot_read: IgnoredOn decided it when c was made
        Key x = k;
        std::vector<uint64_t> grown = slots;
        grown.resize(grown.size() + words, 0);
        x.slots = SlotsId(grown);
        ++x.idx;
        x.mid = false;
        const int32_t y = Normalize(x);
        if (y < 0) return;
        if (ignored_link_[c] == -1) {
          AddEps(c, y);
        } else {
          AddEpsOn(c, y, ignored_link_[c]);
        }
        return;
      }
      for (int32_t p = 0; p < G_; ++p) {
        if (!scanner.EmitScanned(p, item) || Killed(kill, p)) continue;
        if (shared || (k.mid && BlankEnds(slots, p, item, blank_q, blank_hits))) {
          // The token ends at a blank that leaves no scanner alive: the
          // middle goes on from the hub (a blank, then any terminal).  This
          // byte's own way on is then one of the hub's.
          if (hub < 0) hub = HubAfter(blank_q);
          Key f{Kind::kFeed};
          f.mid = true;
          f.term = scanner.EmitType(p, item);
          f.parent = hub;
          AddSwap(c, p, Intern(f), p);
          continue;
        }
        if (boundary) {
          // The way on from the start of the next token, the slot's
          // scanner cut to what a later Hit can read there (Boundary).
          std::vector<uint64_t> grown = slots;
          const uint64_t* alt = s_->scanner_alt.data() + static_cast<size_t>(p) * words;
          grown.insert(grown.end(), alt, alt + words);
          Key f{Kind::kFeed};
          f.mid = true;
          f.term = scanner.EmitType(p, item);
          f.parent = Boundary(s_->cand_to[k.cand], grown);
          if (!counted) {
            counted = true;
            std::vector<int64_t>& by_term = stats_.byte_path_emits;
            if (by_term.size() <= static_cast<size_t>(t)) by_term.resize(t + 1, 0);
            ++by_term[t];
          }
          AddSwap(c, p, Intern(f), p);
          continue;
        }
        if (!counted) {
          counted = true;
          std::vector<int64_t>& by_term = stats_.byte_path_emits;
          if (by_term.size() <= static_cast<size_t>(t)) by_term.resize(t + 1, 0);
          ++by_term[t];
        }
        std::vector<uint64_t> grown = slots;
        const uint64_t* alt = s_->scanner_alt.data() + static_cast<size_t>(p) * words;
        if (slot_read) {
          grown.insert(grown.end(), alt, alt + words);
        } else {
          grown.resize(grown.size() + words, 0);
        }
        Key x = k;
        x.slots = SlotsId(grown);
        ++x.idx;
        x.mid = false;  // a blank would not end it here: the exact way on
        if (k.mid && DeadAhead(x)) continue;  // no feed for a way on that dies
        int32_t y;
        if (s_->terminal_ignored[t]) {
          y = Normalize(x);
        } else if (terminal_middle_) {
          // A feed's rules read only its terminal and the control its
          // shift returns to (the items after the Emit, normalized): keyed
          // by those two (as the hub's feeds are), the feeds of Emits whose
          // ways on differ only before the normalization (a slot no Hit
          // reads, a Tail, a run of S that reads no stack) are one, with
          // one set of reduction states.  A way on that dies makes no feed:
          // its reductions come back to it and its shift leads nowhere
          // (only $END accepts, and no Emit feeds it).
          const int32_t cont = Normalize(x);
          if (cont < 0) continue;
          Key f{Kind::kFeed};
          f.mid = true;
          f.term = scanner.EmitType(p, item);
          f.parent = cont;
          y = Intern(f);
        } else {
          x.kind = Kind::kFeed;
          x.term = scanner.EmitType(p, item);
          y = Intern(x);
        }
        if (y >= 0) AddSwap(c, p, y, p);
      }
      return;
    }
    case Kind::kFeed: {
      if (estimate_) {
        // The rules this feed would make, and the continuation a shift
        // leads to (the only control its rules reach besides its own
        // reduction states, the feed itself and ACC).
        CountFeed(k.term);
        stats_.rules += feed_rules_[k.term];
        if (feed_shifts_[k.term] > 0) {
          Key x = k;
          x.kind = Kind::kItems;
          x.term = -1;
          if (Normalize(x) >= 0) stats_.rules += feed_shifts_[k.term];
        }
        if (stats_.rules > limits_.max_rules) over_ = true;
        return;
      }
      for (int32_t p = 0; p < G_; ++p) {
        const int32_t a = lr.Action(p, k.term);
        if (a == 0) continue;
        if (a == kAcceptAction) {
          AddSwap(c, p, acc_, p);
          continue;
        }
        const int32_t shift = lr.ShiftTo(p, k.term);
        if (shift >= 0) {
          Key x = k;
          x.kind = Kind::kItems;
          x.term = -1;
          const int32_t y = k.mid ? k.parent : Normalize(x);
          if (y >= 0) AddPush(c, p, y, shift, p);
          continue;
        }
        const int32_t rule = lr.ReduceBy(p, k.term);
        const int32_t len = lr.RuleLength(rule);
        if (len == 0) {
          const int32_t g = lr.GotoAfterReduce(p, rule);
          if (g >= 0) AddPush(c, p, c, g, p);
          continue;
        }
        Key x{Kind::kPop};
        x.parent = c;
        x.rule = lr.rule_lhs[rule];  // the pops and the goto read only the length and the lhs
        x.j = len - 1;
        AddPop(c, p, Intern(x));
      }
      return;
    }
    case Kind::kPop: {
      if (k.j > 0) {
        Key x = k;
        --x.j;
        const int32_t y = Intern(x);
        AddWild(c, y);
        return;
      }
      // The goto: <c, u> -> <parent, goto(u, A) u> for every u with a goto
      // on A, kept as one family (GotoFamily) instead of a rule per u.
      CountRule();
      goto_family_[k.parent].emplace_back(k.rule, c);
      const std::vector<int32_t> gs = OutSymbols(k.parent);
      for (int32_t g : gs) {
        const std::vector<int32_t> targets = out_[Pair(k.parent, g)];
        for (int32_t y : targets) GotoFamily(c, k.rule, g, y);
      }
      return;
    }
  }
}

bool SuffixQuotient::TransitionSet::Insert(uint64_t key) {
  if (2 * (size_ + 1) > table_.size()) {
    std::vector<uint64_t> old(table_.size() * 2, kEmpty);
    old.swap(table_);
    size_ = 0;
    for (uint64_t k : old) {
      if (k != kEmpty) Insert(k);
    }
  }
  const size_t mask = table_.size() - 1;
  for (size_t i = (key * 0x9e3779b97f4a7c15ull) >> 20;; ++i) {
    uint64_t& slot = table_[i & mask];
    if (slot == key) return false;
    if (slot == kEmpty) {
      slot = key;
      ++size_;
      return true;
    }
  }
}

void SuffixQuotient::AddTrans(int32_t from, int32_t g, int32_t to) {
  if (over_) return;
  if (Pair(from, g) >> 32) {  // past what the set's keys hold: give up
    over_ = true;
    return;
  }
  if (!trans_.Insert(Pair(from, g) << 32 | static_cast<uint32_t>(to))) return;
  std::vector<int32_t>& targets = out_[Pair(from, g)];
  if (targets.empty()) out_symbols_[from].push_back(g);
  targets.push_back(to);
  work_.emplace_back(Pair(from, g), to);
  ++stats_.transitions_by_holder[holder_[from]];
  ++stats_.transitions;
  if (stats_.transitions > limits_.max_transitions) over_ = true;
}

std::vector<int32_t> SuffixQuotient::OutSymbols(int32_t c) const {
  auto it = out_symbols_.find(c);
  return it == out_symbols_.end() ? std::vector<int32_t>() : it->second;
}

void SuffixQuotient::AddEps(int32_t from, int32_t to) {
  CountRule();
  eps_by_[to].push_back(from);
  if (Passthrough(from) || Passthrough(to)) {
    eps_fwd_[from].emplace_back(to, -1);  // LinkPassthrough copies what it must
    return;
  }
  const std::vector<int32_t> gs = OutSymbols(to);
  for (int32_t g : gs) {
    const std::vector<int32_t> targets = out_[Pair(to, g)];
    for (int32_t x : targets) AddTrans(from, g, x);
  }
}

// Would the candidate `item`, Emitted in parser state p with the slots
// `slots` open, end at a blank (the step blank_q of its candidate's target
// on ' ', whose Hits are blank_hits) with every Hit passed and no slot left
// alive by that byte's compaction?  Then a blank followed by any token is
// what the text can go on with, as from the hub.
bool SuffixQuotient::BlankEnds(const std::vector<uint64_t>& slots, int32_t p, int32_t item,
                               int32_t blank_q, int32_t blank_hits) const {
  if (blank_q < 0) return false;
  const int32_t words = s_->scanner_words;
  std::vector<uint64_t> grown = slots;
  const uint64_t* alt = s_->scanner_alt.data() + static_cast<size_t>(p) * words;
  grown.insert(grown.end(), alt, alt + words);
  (void)item;
  for (int32_t i = s_->seq_offsets[blank_hits]; i < s_->seq_offsets[blank_hits + 1]; ++i) {
    const int32_t h = s_->seq_data[i];
    switch (s_->KindOf(h)) {
      case ItemKind::kHit: {
        const int32_t u = s_->item_terminal[h];
        const size_t at = static_cast<size_t>(s_->item_slot[h]) * words + u / 64;
        if (at >= grown.size() || ((grown[at] >> (u & 63)) & 1)) return false;
        break;
      }
      case ItemKind::kTail:
        break;
      case ItemKind::kEmit:
        return false;
    }
  }
  const int32_t map = s_->compact_map[blank_q];
  for (int32_t i = s_->set_offsets[map]; i < s_->set_offsets[map + 1]; ++i) {
    const int32_t old = s_->set_data[i] & 0xFFFF;
    for (int32_t w = 0; w < words; ++w) {
      const size_t from = static_cast<size_t>(old) * words + w;
      if (from < grown.size() && grown[from] != 0) return false;
    }
  }
  return true;
}

// Does the way on after an Emit (x: the items after it, the slots with its
// scanner) die within this byte or at the next one, whatever that byte is?
// Then no feed is made for it.  A name ended by the first byte of a
// multi-byte character, where a keyword that only a blank ends would have
// won (sql.lark's `with` + the first byte of `é`): the character's next byte
// hits the name's own shadow.  Exact: only ways on that every byte kills
// are dropped (no end of input, no boundary candidate in between).
bool SuffixQuotient::DeadAhead(Key x) {
  x.kind = Kind::kItems;
  if (!NormalizeKey(&x)) return true;
  if (x.kind != Kind::kLex) return false;
  const uint64_t key = static_cast<uint64_t>(x.q) << 32 | static_cast<uint32_t>(x.slots);
  if (auto it = dead_ahead_.find(key); it != dead_ahead_.end()) return it->second;
  bool dead = s_->eof_offsets[x.q] == s_->eof_offsets[x.q + 1] &&
              s_->cand_offsets[x.q] == s_->cand_offsets[x.q + 1];
  for (int32_t i = s_->step_offsets[x.q]; i < s_->step_offsets[x.q + 1] && dead; ++i) {
    Key y{Kind::kItems};
    y.layer = x.layer;
    y.q = s_->step_to[i];
    y.slots = x.slots;
    y.seq = s_->step_hits[i];
    dead = !NormalizeKey(&y);
  }
  dead_ahead_.emplace(key, dead);
  return dead;
}

// The control at the start of the next token after an Emit at a boundary
// candidate (q = the candidate's target, the slots with the new one), as
// the terminal-level middle's feeds return to it: it reads every byte the
// lexer can read there, S[0] too, but not the end of the input (the text
// that ends with the token reads its end from before the token's end, as
// the session does).  Each slot keeps only the terminals that a Hit can
// read in it from here on (HitReach): the others are never read, and
// parser states whose scanners differ only there share one control.
int32_t SuffixQuotient::Boundary(int32_t q, std::vector<uint64_t> slots) {
  const int32_t words = s_->scanner_words;
  for (size_t o = 0; o * words < slots.size(); ++o) {
    const std::vector<uint64_t>& reach = HitReach(q, static_cast<int32_t>(o));
    for (int32_t w = 0; w < words; ++w) slots[o * words + w] &= reach[w];
  }
  Key l{Kind::kLex};
  l.q = q;
  l.slots = SlotsId(slots);
  l.mid = true;
  l.cand = -3;
  return Intern(l);
}

// The terminals that a Hit on slot o can name from lexer state q on: the
// Hits of every byte's step (and of every boundary candidate's step) and
// of the end of the input, following the slot through the compactions
// until none keeps it.  Past 4,096 states visited: every terminal.
const std::vector<uint64_t>& SuffixQuotient::HitReach(int32_t q, int32_t o) {
  const uint64_t key = static_cast<uint64_t>(q) << 32 | static_cast<uint32_t>(o);
  if (auto it = hit_reach_.find(key); it != hit_reach_.end()) return it->second;
  const int32_t words = s_->scanner_words;
  std::vector<uint64_t> reach(words, 0);
  std::unordered_set<uint64_t> seen;
  std::vector<std::pair<int32_t, int32_t>> stack = {{q, o}};
  auto read = [&](int32_t seq, int32_t slot) {
    for (int32_t i = s_->seq_offsets[seq]; i < s_->seq_offsets[seq + 1]; ++i) {
      const int32_t h = s_->seq_data[i];
      if (s_->KindOf(h) == ItemKind::kHit && s_->item_slot[h] == slot) {
        const int32_t u = s_->item_terminal[h];
        reach[u / 64] |= uint64_t{1} << (u & 63);
      }
    }
  };
  bool all = false;
  while (!stack.empty() && !all) {
    const auto [x, slot] = stack.back();
    stack.pop_back();
    if (!seen.insert(static_cast<uint64_t>(x) << 32 | static_cast<uint32_t>(slot)).second) {
      continue;
    }
    if (seen.size() > 4096) all = true;
    for (int32_t e = s_->eof_offsets[x]; e < s_->eof_offsets[x + 1]; ++e) read(s_->eof_seq[e], slot);
    auto steps_of = [&](int32_t from) {
      for (int32_t i = s_->step_offsets[from]; i < s_->step_offsets[from + 1]; ++i) {
        read(s_->step_hits[i], slot);
        const int32_t to = s_->step_to[i];
        if (s_->compact_to[to] < 0) continue;
        const int32_t map = s_->compact_map[to];
        for (int32_t j = s_->set_offsets[map]; j < s_->set_offsets[map + 1]; ++j) {
          if ((s_->set_data[j] & 0xFFFF) == slot) {
            stack.emplace_back(s_->compact_to[to], s_->set_data[j] >> 16);
          }
        }
      }
    };
    steps_of(x);
    for (int32_t ci = s_->cand_offsets[x]; ci < s_->cand_offsets[x + 1]; ++ci) steps_of(s_->cand_to[ci]);
  }
  if (all) reach.assign(words, ~uint64_t{0});
  return hit_reach_.emplace(key, std::move(reach)).first->second;
}

// An %ignore'd Emit (control key k) of the terminal-level middle whose new
// slot nothing reads (no Hit later in the byte, not kept by the byte's
// compaction) goes on into one way on whatever the state on top: -1 if
// every state on top between tokens scans it (one eps rule), else the set
// of the states that do (one AddEpsOn).  -2: its slot is read, a swap per
// state (RulesOf).
int32_t SuffixQuotient::IgnoredOn(const Key& k) {
  int32_t count = 0;
  const int32_t item = ItemAt(k, k.idx, &count);
  const int32_t si = s_->item_slot[item];
  for (int32_t i = k.idx + 1; i < count; ++i) {
    const int32_t later = ItemAt(k, i, &count);
    if (s_->KindOf(later) == ItemKind::kHit && s_->item_slot[later] == si) return -2;
  }
  if (!k.end) {
    const int32_t map = s_->compact_map[k.q];
    for (int32_t i = s_->set_offsets[map]; i < s_->set_offsets[map + 1]; ++i) {
      if ((s_->set_data[i] & 0xFFFF) == si) return -2;
    }
  }
  const std::vector<uint64_t> kill = KillBits(k, item);
  const ItemScanner scanner(*s_);
  bool every = true;
  std::string on(G_, '\0');
  for (int32_t p = 0; p < G_; ++p) {
    if (scanner.EmitScanned(p, item) && !Killed(kill, p)) {
      on[p] = 1;
    } else if (OnTop(p)) {
      every = false;
    }
  }
  if (every) return -1;
  auto [it, fresh] = state_set_ids_.emplace(on, static_cast<int32_t>(state_sets_.size()));
  if (fresh) state_sets_.push_back(std::move(on));
  return it->second;
}

// The symbols both filters let through (-1 every symbol, else a state
// set), or kNoSymbol.
int32_t SuffixQuotient::Meet(int32_t a, int32_t b) {
  if (a < 0) return b;
  if (b < 0 || a == b) return a;
  std::string both = state_sets_[a];
  bool any = false;
  for (int32_t g = 0; g < G_; ++g) {
    both[g] = both[g] && state_sets_[b][g];
    any = any || both[g];
  }
  if (!any) return kNoSymbol;
  auto [it, fresh] = state_set_ids_.emplace(both, static_cast<int32_t>(state_sets_.size()));
  if (fresh) state_sets_.push_back(std::move(both));
  return it->second;
}

// Can LR state p be on top of the stack between tokens (the start state,
// or a state some terminal is shifted to)?  The others are on top only
// inside a feed, so a rule of a lexer or Emit control on them never fires.
bool SuffixQuotient::OnTop(int32_t p) {
  if (on_top_.empty()) {
    const LrTables lr = s_->lr();
    on_top_.assign(G_, 0);
    on_top_[s_->start_state] = 1;
    for (int32_t u = 0; u < G_; ++u) {
      for (int32_t a = 0; a < lr.num_terminals; ++a) {
        const int32_t to = lr.ShiftTo(u, a);
        if (to >= 0) on_top_[to] = 1;
      }
    }
  }
  return on_top_[p] != 0;
}

// The terminals of the Hits on the slot that Emit `item` of control k
// opens, later in the same byte: a parser state whose scanner holds one of
// them cannot end the token with this byte (Killed).
std::vector<uint64_t> SuffixQuotient::KillBits(const Key& k, int32_t item) const {
  const int32_t words = s_->scanner_words;
  std::vector<uint64_t> bits(words, 0);
  int32_t count = 0;
  ItemAt(k, k.idx, &count);
  for (int32_t i = k.idx + 1; i < count; ++i) {
    const int32_t later = ItemAt(k, i, &count);
    if (s_->KindOf(later) == ItemKind::kHit && s_->item_slot[later] == s_->item_slot[item]) {
      const int32_t u = s_->item_terminal[later];
      bits[u / 64] |= uint64_t{1} << (u & 63);
    }
  }
  return bits;
}

bool SuffixQuotient::Killed(const std::vector<uint64_t>& kill, int32_t p) const {
  const uint64_t* alt = s_->scanner_alt.data() + static_cast<size_t>(p) * s_->scanner_words;
  for (size_t w = 0; w < kill.size(); ++w) {
    if (kill[w] & alt[w]) return true;
  }
  return false;
}

// BlankEnds for every parser state whose scanner Emits `item` and that
// this byte's Hits (`kill`, a slot set id) do not kill: the hub after the
// blank, or -1; memoized per (candidate, slots, kill).
int32_t SuffixQuotient::BlankHubEverywhere(int32_t cand, int32_t slots_id, int32_t item,
                                           int32_t kill_id) {
  const auto key = std::make_tuple(cand, slots_id, kill_id);
  if (auto it = blank_everywhere_.find(key); it != blank_everywhere_.end()) return it->second;
  const std::vector<uint64_t> kill = slot_sets_[kill_id];
  int32_t hits = 0;
  int32_t q = StepOf(*s_, s_->cand_to[cand], ' ', &hits);
  if (q >= 0 && s_->compact_to[q] < 0) q = -1;
  const ItemScanner scanner(*s_);
  const std::vector<uint64_t> slots = slot_sets_[slots_id];
  bool all = q >= 0;
  for (int32_t p = 0; p < G_ && all; ++p) {
    if (scanner.EmitScanned(p, item) && !Killed(kill, p)) {
      all = BlankEnds(slots, p, item, q, hits);
    }
  }
  const int32_t hub = all ? HubAfter(q) : -1;
  blank_everywhere_.emplace(key, hub);
  return hub;
}

// The hub a blank leads to: the lexer state after the candidate's step on
// ' ', compacted, with its slots empty (BlankEnds: none is left alive), as
// a control of its own (Key::mid) that keeps its transitions.  It is the
// real configuration after the token and a blank; with lexer modes it
// holds the mode the blank was lexed in, and the token after the blank
// starts there (a blank is shared: it keeps the mode).  Without modes it
// is one state, which reads what the initial lexer state reads.
int32_t SuffixQuotient::HubAfter(int32_t blank_q) {
  const int32_t words = s_->scanner_words;
  size_t n = 0;
  const int32_t map = s_->compact_map[blank_q];
  for (int32_t i = s_->set_offsets[map]; i < s_->set_offsets[map + 1]; ++i) {
    n = std::max(n, static_cast<size_t>((s_->set_data[i] >> 16) + 1) * words);
  }
  Key l{Kind::kLex};
  l.q = s_->compact_to[blank_q];
  l.slots = SlotsId(std::vector<uint64_t>(n, 0));
  l.mid = true;
  return Intern(l);
}

// The storing states below each storing state y through pass-through
// lexer states (up_), and the transitions of y copied to them, for the
// eps edges made since the last call (the graph only grows: edges start at
// states generated since).
void SuffixQuotient::LinkPassthrough() {
  if (!terminal_middle_) return;
  // A rule into a pass-through state (the byte-level way on after a token
  // that no blank ends) is one rule into each state of its frontier, for
  // the symbols the links on the way let through.
  std::vector<Deferred> deferred;
  deferred.swap(deferred_);
  for (const Deferred& d : deferred) {
    const std::vector<Link> frontier =
        VirtualEmit(d.to) ? std::vector<Link>{{d.to, -1}} : Frontier(d.to);
    for (auto [f, filter] : frontier) {
      if (VirtualEmit(f)) {
        // Into the feeds of the Emit's swaps on the symbol the rule leaves on top.
        auto et = vedges_.find(f);
        if (et == vedges_.end()) continue;
        const std::vector<std::pair<int32_t, int32_t>> edges = et->second;
        for (auto [feed, p] : edges) {
          if (!Passes(filter, p)) continue;
          if (d.g1 == -2) {
            if (state_sets_[d.g2][p]) AddSwap(d.from, p, feed, p);
          } else if (d.g1 < 0) {
            if (d.g2 == p) AddSwap(d.from, d.g, feed, d.g2);
          } else if (d.g1 == p) {
            AddPush(d.from, d.g, feed, d.g1, d.g2);
          }
        }
        continue;
      }
      if (d.g1 == -2) {
        const int32_t on = Meet(d.g2, filter);
        if (on != kNoSymbol) AddEpsOn(d.from, f, on);
      } else if (d.g1 < 0) {
        if (Passes(filter, d.g2)) AddSwap(d.from, d.g, f, d.g2);
      } else if (Passes(filter, d.g1)) {
        AddPush(d.from, d.g, f, d.g1, d.g2);
      }
    }
  }
  std::vector<Link> stack;
  std::unordered_set<uint64_t> seen;
  for (const auto& [a, firsts] : eps_fwd_) {
    if (Passthrough(a)) continue;
    seen.clear();
    stack = firsts;
    while (!stack.empty()) {
      const auto [x, filter] = stack.back();
      stack.pop_back();
      if (!seen.insert(static_cast<uint64_t>(x) << 32 | static_cast<uint32_t>(filter + 1)).second) {
        continue;
      }
      if (LexPass(x) || IgnoredLink(x)) {
        if (auto it = eps_fwd_.find(x); it != eps_fwd_.end()) {
          for (auto [y, f2] : it->second) {
            const int32_t m = Meet(filter, f2);
            if (m != kNoSymbol) stack.emplace_back(y, m);
          }
        }
        continue;
      }
      if (x == a || !up_pairs_.emplace(x, a, filter).second) continue;
      up_[x].emplace_back(a, filter);
      if (VirtualEmit(x)) {  // what its swaps' feeds read on their symbols
        auto et = vedges_.find(x);
        if (et == vedges_.end()) continue;
        const std::vector<std::pair<int32_t, int32_t>> edges = et->second;
        for (auto [feed, p] : edges) {
          if (!Passes(filter, p)) continue;
          auto it = out_.find(Pair(feed, p));
          if (it == out_.end()) continue;
          const std::vector<int32_t> targets = it->second;
          for (int32_t to : targets) AddTrans(a, p, to);
        }
        continue;
      }
      for (int32_t g : OutSymbols(x)) {
        if (!Passes(filter, g)) continue;
        const std::vector<int32_t> targets = out_[Pair(x, g)];
        for (int32_t to : targets) AddTrans(a, g, to);
      }
    }
  }
}

// The storing states (and VirtualEmits) a pass-through state's eps paths
// lead to first, with the symbols the links on the way let through.
const std::vector<SuffixQuotient::Link>& SuffixQuotient::Frontier(int32_t c) {
  auto it = frontier_.find(c);
  if (it != frontier_.end()) return it->second;
  std::vector<Link> out, stack = {{c, -1}};
  std::unordered_set<uint64_t> seen;
  while (!stack.empty()) {
    const auto [x, filter] = stack.back();
    stack.pop_back();
    if (!seen.insert(static_cast<uint64_t>(x) << 32 | static_cast<uint32_t>(filter + 1)).second) {
      continue;
    }
    if (x != c && !LexPass(x) && !IgnoredLink(x)) {
      out.emplace_back(x, filter);
      continue;
    }
    if (auto jt = eps_fwd_.find(x); jt != eps_fwd_.end()) {
      for (auto [y, f2] : jt->second) {
        const int32_t m = Meet(filter, f2);
        if (m != kNoSymbol) stack.emplace_back(y, m);
      }
    }
  }
  return frontier_.emplace(c, std::move(out)).first->second;
}

// <from, g> -> <to, g> for every g in the state set `on` (state_sets_):
// one rule, kept as a link (eps_on_) along which Saturate copies the
// transitions on those symbols, instead of a swap per state.
void SuffixQuotient::AddEpsOn(int32_t from, int32_t to, int32_t on) {
  if (IgnoredLink(from)) {  // a filtered link through a pass-through state
    CountRule();
    eps_fwd_[from].emplace_back(to, on);
    return;
  }
  if (Passthrough(to)) {  // made again into its frontier by LinkPassthrough
    deferred_.push_back(Deferred{from, -1, to, -2, on});
    return;
  }
  CountRule();
  eps_on_[to].emplace_back(from, on);
  const std::string& set = state_sets_[on];
  for (int32_t g : OutSymbols(to)) {
    if (!set[g]) continue;
    const std::vector<int32_t> targets = out_[Pair(to, g)];
    for (int32_t x : targets) AddTrans(from, g, x);
  }
}

void SuffixQuotient::AddSwap(int32_t from, int32_t g, int32_t to, int32_t g2) {
  if (VirtualEmit(from) && g == g2 && !Passthrough(to)) {
    // Kept as a link, not as copies (see VirtualEmit).
    CountRule();
    std::vector<int32_t>& feeds = vswap_[Pair(from, g)];
    if (std::find(feeds.begin(), feeds.end(), to) != feeds.end()) return;
    feeds.push_back(to);
    vup_[Pair(to, g)].push_back(from);
    vedges_[from].emplace_back(to, g);
    auto ut = up_.find(from);
    auto it = out_.find(Pair(to, g));
    if (ut == up_.end() || it == out_.end()) return;
    const std::vector<Link> ups = ut->second;
    const std::vector<int32_t> targets = it->second;
    for (auto [a, filter] : ups) {
      if (!Passes(filter, g)) continue;
      for (int32_t x : targets) AddTrans(a, g, x);
    }
    return;
  }
  if (VirtualEmit(from)) {  // not made: an Emit swaps into feeds on the symbol it reads
    over_ = true;
    return;
  }
  if (Passthrough(to)) {  // made again into its frontier by LinkPassthrough
    deferred_.push_back(Deferred{from, g, to, -1, g2});
    return;
  }
  CountRule();
  swap_by_[Pair(to, g2)].emplace_back(from, g);
  auto it = out_.find(Pair(to, g2));
  if (it == out_.end()) return;
  const std::vector<int32_t> targets = it->second;
  for (int32_t x : targets) AddTrans(from, g, x);
}

void SuffixQuotient::AddPush(int32_t from, int32_t g, int32_t to, int32_t g1, int32_t g2) {
  if (Passthrough(to)) {
    deferred_.push_back(Deferred{from, g, to, g1, g2});
    return;
  }
  CountRule();
  push_by_[Pair(to, g1)].emplace_back(from, g, g2);
  auto it = out_.find(Pair(to, g1));
  if (it == out_.end()) return;
  const std::vector<int32_t> mids = it->second;
  for (int32_t y : mids) AddDerived(from, g, y, g2);
}

// A reduction's pops below its top read any state: one transition for all
// of them (a state of kind kPop with j > 0 has no other).  Such a state is
// the middle of a push rule's two-symbol path (from a feed's first pop)
// and never the right-hand side of a rule, so only those derived rules
// (wild_swaps_) meet it.
void SuffixQuotient::AddWild(int32_t from, int32_t to) {
  CountRule();
  if (over_) return;
  std::vector<int32_t>& w = wild_[from];
  if (std::find(w.begin(), w.end(), to) != w.end()) return;
  w.push_back(to);
  ++stats_.transitions_by_holder[holder_[from]];
  ++stats_.transitions;
  auto it = wild_swaps_.find(from);
  if (it == wild_swaps_.end()) return;
  const std::vector<std::pair<int32_t, int32_t>> rules = it->second;
  for (auto [f, g0] : rules) AddTrans(f, g0, to);
}

// The derived rule <f, g0> -> <y, g2> of a push rule whose first symbol
// led to y; with y a wildcard state, g2 is read by its wildcard.
void SuffixQuotient::AddDerived(int32_t f, int32_t g0, int32_t y, int32_t g2) {
  if (IsWild(y)) {
    wild_swaps_[y].emplace_back(f, g0);
    auto it = wild_.find(y);
    if (it == wild_.end()) return;
    const std::vector<int32_t> targets = it->second;
    for (int32_t x : targets) AddTrans(f, g0, x);
    return;
  }
  swap_by_[Pair(y, g2)].emplace_back(f, g0);
  auto jt = out_.find(Pair(y, g2));
  if (jt == out_.end()) return;
  const std::vector<int32_t> targets = jt->second;
  for (int32_t x : targets) AddTrans(f, g0, x);
}

void SuffixQuotient::AddPop(int32_t from, int32_t g, int32_t to) {
  CountRule();
  AddTrans(from, g, to);
}

// Schwoon's pre* worklist: a new transition (c, g, to) lets every rule whose
// right-hand side starts with (c, g) add its left-hand side's transition.
// A transition (parent, g, y) of a feed state meets the goto family of its
// reduction state c to nonterminal a: for every u with goto(u, a) = g, the
// derived rule <c, u> -> <y, u>.
void SuffixQuotient::GotoFamily(int32_t c, int32_t a, int32_t g, int32_t y) {
  auto it = goto_into_.find(static_cast<uint64_t>(g) * num_nt_ + a);
  if (it == goto_into_.end()) return;
  for (int32_t u : it->second) AddDerived(c, u, y, u);
}

void SuffixQuotient::Saturate() {
  while (!work_.empty() && !over_) {
    const auto [pair, to] = work_.back();
    work_.pop_back();
    const int32_t c = static_cast<int32_t>(pair / G_), g = static_cast<int32_t>(pair % G_);
    if (auto it = goto_family_.find(c); it != goto_family_.end()) {
      const std::vector<std::pair<int32_t, int32_t>> family = it->second;
      for (auto [a, pop] : family) GotoFamily(pop, a, g, to);
    }
    if (auto it = eps_by_.find(c); it != eps_by_.end()) {
      const std::vector<int32_t> froms = it->second;
      for (int32_t f : froms) {
        if (!Passthrough(f)) AddTrans(f, g, to);
      }
    }
    if (auto it = up_.find(c); it != up_.end()) {
      const std::vector<Link> ups = it->second;
      for (auto [a, filter] : ups) {
        if (Passes(filter, g)) AddTrans(a, g, to);
      }
    }
    if (auto it = vup_.find(pair); it != vup_.end()) {  // Emits that read g as c does
      const std::vector<int32_t> emits = it->second;
      for (int32_t e : emits) {
        auto ut = up_.find(e);
        if (ut == up_.end()) continue;
        const std::vector<Link> ups = ut->second;
        for (auto [a, filter] : ups) {
          if (Passes(filter, g)) AddTrans(a, g, to);
        }
      }
    }
    if (auto it = eps_on_.find(c); it != eps_on_.end()) {
      const std::vector<std::pair<int32_t, int32_t>> links = it->second;
      for (auto [a, on] : links) {
        if (state_sets_[on][g]) AddTrans(a, g, to);
      }
    }
    if (auto it = swap_by_.find(pair); it != swap_by_.end()) {
      const std::vector<std::pair<int32_t, int32_t>> rules = it->second;
      for (auto [f, g0] : rules) AddTrans(f, g0, to);
    }
    if (auto it = push_by_.find(pair); it != push_by_.end()) {
      const std::vector<std::tuple<int32_t, int32_t, int32_t>> rules = it->second;
      for (auto [f, g0, g2] : rules) AddDerived(f, g0, to, g2);
    }
  }
}

bool SuffixQuotient::Viable(const LiveState& l) {
  std::lock_guard<std::mutex> lock(mu_);
  return ViableLocked(l);
}

std::shared_ptr<const SuffixLexClasses> SuffixLexings::Of(int32_t q) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = classes_.find(q);
    if (it != classes_.end()) return it->second;
  }
  std::shared_ptr<const SuffixLexClasses> cls = Make(q);  // outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = classes_.find(q);
  if (it != classes_.end()) return it->second;  // made meanwhile on another thread
  // Bounded: past 64 lexer states' worth of tokens, start again.
  if (tokens_ > 64 * static_cast<int64_t>(s_->vocab_size)) {
    classes_.clear();
    tokens_ = 0;
  }
  tokens_ += s_->vocab_size;
  ++made_;
  classes_.emplace(q, cls);
  return cls;
}

int64_t SuffixLexings::made() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_;
}

std::shared_ptr<const SuffixLexClasses> SuffixLexings::Make(int32_t q) const {
  using Lexing = SuffixLexing;
  auto cls = std::make_shared<SuffixLexClasses>();
  cls->of_token.assign(s_->vocab_size, -1);
  std::unordered_map<std::string, int32_t> ids;
  std::vector<Lexing> cur, next;
  for (int32_t t = 0; t < s_->vocab_size; ++t) {
    const std::string_view bytes = s_->TokenBytes(t);
    if (s_->token_special[t] || bytes.empty()) continue;
    cur.assign(1, Lexing{q, {}});
    bool many = false;
    for (unsigned char b : bytes) {
      next.clear();
      for (const Lexing& w : cur) {
        auto push_hits = [&](Lexing n, int32_t hits) {
          for (int32_t i = s_->seq_offsets[hits]; i < s_->seq_offsets[hits + 1]; ++i) {
            n.items.push_back(s_->seq_data[i]);
          }
          next.push_back(std::move(n));
        };
        int32_t hits = 0;
        const int32_t to = StepOf(*s_, w.q, b, &hits);
        if (to >= 0) push_hits(Lexing{to, w.items}, hits);
        for (int32_t c = s_->cand_offsets[w.q]; c < s_->cand_offsets[w.q + 1]; ++c) {
          int32_t h2 = 0;
          const int32_t q2 = StepOf(*s_, s_->cand_to[c], b, &h2);
          if (q2 < 0) continue;
          Lexing n{q2, w.items};
          n.items.push_back(s_->cand_item[c]);
          push_hits(std::move(n), h2);
        }
      }
      cur.swap(next);
      if (cur.empty()) break;
      if (cur.size() > kMaxLexings) {
        many = true;
        break;
      }
    }
    if (many) {
      cls->of_token[t] = -2;
      continue;
    }
    cur.erase(std::remove_if(cur.begin(), cur.end(),
                             [&](const Lexing& x) { return s_->compact_to[x.q] < 0; }),
              cur.end());
    if (cur.empty()) continue;
    std::sort(cur.begin(), cur.end(), [](const Lexing& a, const Lexing& b) {
      return a.q != b.q ? a.q < b.q : a.items < b.items;
    });
    std::string key;
    for (const Lexing& x : cur) {
      key.append(reinterpret_cast<const char*>(&x.q), sizeof x.q);
      const int32_t n = static_cast<int32_t>(x.items.size());
      key.append(reinterpret_cast<const char*>(&n), sizeof n);
      key.append(reinterpret_cast<const char*>(x.items.data()), n * sizeof(int32_t));
    }
    auto [jt, fresh] = ids.emplace(std::move(key), static_cast<int32_t>(cls->lexings.size()));
    if (fresh) cls->lexings.push_back(cur);
    cls->of_token[t] = jt->second;
  }
  return cls;
}

// As Session::AdvanceOne ends a token: the items on the hypothesis's
// parser, the tail check, the compaction and its slot map; then Viable.
bool SuffixQuotient::ClassViable(const LiveState& l, const std::vector<Lexing>& lexings) {
  const int32_t words = s_->scanner_words;
  for (const Lexing& x : lexings) {
    HypothesisParser sim{s_, s_->lr(), LrOverlay(l.stack), l.indent, l.paren, l.slot_bits};
    bool ok = true;
    for (int32_t item : x.items) {
      if (!sim.Item(item, l.col)) {
        ok = false;
        break;
      }
    }
    if (ok && s_->tail_item[x.q] >= 0) ok = sim.TailOk(s_->tail_item[x.q]);
    if (!ok) continue;
    LiveState n;
    n.q = s_->compact_to[x.q];
    n.stack = sim.stack.Commit();
    const int32_t map = s_->compact_map[x.q];
    for (int32_t i = s_->set_offsets[map]; i < s_->set_offsets[map + 1]; ++i) {
      const int32_t ns = s_->set_data[i] >> 16, old = s_->set_data[i] & 0xFFFF;
      if (n.slot_bits.size() < static_cast<size_t>(ns + 1) * words) {
        n.slot_bits.resize(static_cast<size_t>(ns + 1) * words, 0);
      }
      for (int32_t k = 0; k < words; ++k) {
        n.slot_bits[static_cast<size_t>(ns) * words + k] |=
            sim.slots[static_cast<size_t>(old) * words + k];
      }
    }
    if (ViableLocked(n)) return true;
  }
  return false;
}

bool SuffixQuotient::ViableLocked(const LiveState& l) {
  if (over_) return true;
  Key k{Kind::kLex};
  k.q = l.q;
  k.slots = SlotsId(l.slot_bits);
  const size_t before = keys_.size();
  const int32_t c = Intern(k);
  if (keys_.size() != before) {  // a lexer state not met yet: extend the automaton
    Generate();
    LinkPassthrough();
    Saturate();
    if (over_) return true;
  }
  // The P-automaton read from c, the stack top first (the states reached
  // deduplicated by an epoch stamp per state).
  if (mark_.size() < keys_.size()) mark_.resize(keys_.size(), 0);
  std::vector<int32_t> cur, next;
  if (LexPass(c)) {
    // The frontier's states whose links let the top state through.
    const LrStack::Node* top = l.stack.top_node();
    for (auto [x, filter] : Frontier(c)) {
      if (top && Passes(filter, top->state)) cur.push_back(x);
    }
  } else {
    cur.push_back(c);
  }
  for (const LrStack::Node* node = l.stack.top_node(); node; node = node->parent) {
    next.clear();
    if (++epoch_ == 0) {  // wrapped: forget every stamp
      std::fill(mark_.begin(), mark_.end(), 0);
      epoch_ = 1;
    }
    for (int32_t x : cur) {
      const std::vector<int32_t>* targets = nullptr;
      if (VirtualEmit(x)) {  // only in the first step: read through its feeds
        auto vt = vswap_.find(Pair(x, node->state));
        if (vt == vswap_.end()) continue;
        for (int32_t feed : vt->second) {
          auto it = out_.find(Pair(feed, node->state));
          if (it == out_.end()) continue;
          for (int32_t y : it->second) {
            if (y == acc_) return true;
            if (mark_[y] == epoch_) continue;
            mark_[y] = epoch_;
            next.push_back(y);
          }
        }
        continue;
      }
      if (IsWild(x)) {
        if (auto it = wild_.find(x); it != wild_.end()) targets = &it->second;
      } else if (auto it = out_.find(Pair(x, node->state)); it != out_.end()) {
        targets = &it->second;
      }
      if (!targets) continue;
      for (int32_t y : *targets) {
        if (y == acc_) return true;
        if (mark_[y] == epoch_) continue;
        mark_[y] = epoch_;
        next.push_back(y);
      }
    }
    if (next.empty()) return false;
    cur.swap(next);
  }
  return false;
}

}  // namespace cfgmask
