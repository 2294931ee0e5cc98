// Exact masks for completion in the middle of a file: which configurations
// can still be continued by some middle m so that the text so far, then m,
// then the suffix S, is in the language.
//
// The session's byte steps (the store's frozen lexer states, their items and
// the LR core, as Session::AdvanceBytes reads bytes) form a pushdown system:
// a control state is what the session keeps besides the parser stack (the
// lexer state, the open slots' scanners, and between bytes the items still
// to apply, the terminal being fed or the reduction being popped), and the
// stack alphabet is the LR states.  Its rules are built from the store's
// tables: an Emit reads the top state (is the terminal in its scanner, which
// type does it get) and a feed is Lark's reduce-then-shift loop, one pop,
// goto or shift a rule (a reduction's pops below the top read any state: one
// wildcard transition; its goto is one rule family per feed state, applied
// through an index of the gotos into each state).  The layers of the control
// say where the text is:
// the middle (any byte), i bytes into S (only S[i]), or S read (only the end
// of the input: the end items, then $END accepted).
//
// The set of configurations from which an accepting one is reachable is
// regular, and pre* (Bouajjani, Esparza, Maler 1997, "Reachability analysis
// of pushdown automata"; the worklist saturation of Schwoon's thesis, 2002,
// algorithm 1) computes a P-automaton for it: its states are the control
// states plus one accepting state, ACC, that reads any stack; a stack read
// top first from control c's state to ACC means (c, stack) reaches an
// accepted end.  The middle layer's control states, read with the stack of
// a live hypothesis, give the check: exists a middle, then S, then the end.
// The suffix's layers make the right quotient by S (the configurations at
// the join from which S is accepted, suffix parsing from an unknown stack as
// in Bates and Lavie's substring recognition) and the middle layer applies
// pre* to it; both are one saturation.  Joins inside a terminal are exact:
// the middle layer reads S[0] from any lexer state, in the middle of a
// terminal too.
//
// The middle at the level of terminals (SuffixMiddle::kTerminals; the one
// the session builds where the byte-level middle's count fits, since it is
// smaller and faster there: SuffixMiddle::kAuto.  No shipped grammar whose
// byte-level middle does not fit fits this one, see docs/exactness.md).  In the byte-level
// middle a feed is a terminal together with the text's continuation after
// it (lexer state, slots, the items left), and each feed has its own
// reduction states, because the pushdown system must come back to that
// continuation after the pops: the strict Python grammar's middle needs 1.6
// billion rules that way.  In the terminal-level middle, an Emit at a
// boundary candidate that a blank would end in every parser state scanning
// it (BlankEnds: the candidate's step on ' ', its Hits passed, no slot left
// alive) forgets what follows: one control per Emit item feeds its terminal
// into one feed per terminal and hub (Key::mid), whose shift returns to the
// hub, the lexer after the token and a blank (HubAfter; one per lexer mode,
// since a blank keeps the mode it is lexed in).  Its reduction states are
// made once per terminal and hub.  Exact: the hub is the real configuration
// after the token and a blank, and a token that another byte ends is
// followed by the same tokens after a blank.  An Emit that a blank does not
// end everywhere (Python's newline, whose indentation a blank extends; a
// keyword-like name) feeds once per candidate and way on, the way on being
// the start of the next token (Boundary), which reads the byte that ended
// the token again, with every other; its slots keep only what a later Hit
// reads (HitReach).  An %ignore'd terminal (a comment, a blank) feeds
// nothing and takes the byte path: one eps rule, limited to the states that
// scan it where a mode's foreign terminals block it (AddEpsOn).  No feed is
// made where this byte or the next kills the way on (KillBits, DeadAhead).
// Bytes are read for the
// hypothesis's current token, for each next token's spelling (from the hub
// up to its Emit) and for the middle's last token, which may join S's first
// bytes (S[0] is read from any of these lexer states).  Those lexer states
// read no stack: they keep no P-automaton transitions of their own
// (Passthrough; copying every transition of the tokens they lead to into
// each of them was most of the automaton); their eps edges are followed
// instead, and a rule into one of them is made into its frontier.
//
// The %ignore'd and greedy terminals' tail checks (ItemScanner::TailOk) are
// not rules: they drop hypotheses that cannot reach an end, so leaving them
// out changes no reachable end.  Grammars with the Python indenter are not
// covered (the indentation stack is a second stack): Supported() is false
// and the session keeps the prefix mask there; so does a grammar whose
// automaton passes SuffixQuotientLimits (sql.lark: Fits refuses the
// byte-level middle in milliseconds, before any saturation; asked for, the
// terminal-level one now fits its rules but goes past the transitions'
// limit: 3.85 million, and the LR automaton's own pre* alone is 1.3 million
// for sql.lark and 11.6 million for the strict Python grammar: see
// docs/exactness.md).
//
// Tested by suffix_quotient_test.cc (against a breadth-first search for a
// middle on random grammars, both ways, with each middle).
#ifndef CFGMASK_RUNTIME_SUFFIX_QUOTIENT_H_
#define CFGMASK_RUNTIME_SUFFIX_QUOTIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "runtime/session.h"

namespace cfgmask {

struct SuffixQuotientLimits {
  // Transitions of the P-automaton; past it the build gives up
  // (kResourceLimit) and the caller keeps the prefix mask.  A grammar with
  // many LR states and rules (sql.lark: 1,573 states) can need more: each
  // terminal fed inside a byte makes its own reduction states.
  int64_t max_transitions = int64_t{1} << 20;
  // Pushdown rules made; past it too.
  int64_t max_rules = int64_t{1} << 20;
  // Which middle layer to build (see the head of the file); kAuto: the
  // terminal-level one where the byte-level one's count fits (Fits), the
  // byte-level one if that goes past the limits.
  SuffixMiddle middle = SuffixMiddle::kBytes;
};

struct SuffixQuotientStats {
  int64_t controls = 0;     // control states made
  int64_t rules = 0;        // pushdown rules made
  int64_t transitions = 0;  // P-automaton transitions
  double seconds = 0;       // building, saturation included
  bool terminal_middle = false;  // the middle layer is the terminal-level one
  // The terminal-level middle: per terminal (CompiledStore::terminal_names),
  // the Emit controls of the middle that no blank ends in some parser state
  // (they feed per candidate and way on: Boundary): where its size comes from.
  std::vector<int64_t> byte_path_emits;
  // The P-automaton's transitions by the kind of control that holds them
  // (Holder): where the automaton's size sits, for the benchmark's report.
  enum Holder : int32_t {
    kHub = 0,           // the hubs (the lexer after a token and a blank)
    kBoundary,          // the starts of the next token where no blank ends one
    kOtherLex,          // other lexer states that store (the suffix's layers)
    kItems,             // controls inside a byte (Emits and items that store)
    kHubFeed,           // feeds whose shift returns to a hub
    kBoundaryFeed,      // ... to a Boundary
    kContFeed,          // ... to the items after the Emit (the join, the suffix)
    kEndFeed,           // $END
    kByteFeed,          // the byte-level middle's feeds
    kHubGoto,           // the goto state (no pops left) of a hub feed's reduction
    kBoundaryGoto,      // ... of a Boundary feed's
    kOtherGoto,         // ... of any other feed's
    kPops,              // reduction states with pops left (one wildcard each)
    kAccept,            // the accepting state
    kNumHolders
  };
  static const char* HolderName(int32_t h);
  std::vector<int64_t> transitions_by_holder = std::vector<int64_t>(kNumHolders, 0);
};

// The vocabulary's lexings from one lexer state without the parser (each
// token's raw end states and items, as Session::AdvanceOne walks its bytes),
// grouped into classes of equal lexings: what SuffixQuotient::Filter checks,
// once per class and hypothesis.  They are a function of the store alone, so
// the sessions of one store share one cache (RowMemo::suffix_lexings): a
// server that sets a suffix per request walks a lexer state's vocabulary
// once, not once per request (that walk is the exact suffix masks' slowest
// step: a step that meets a lexer state for the first time).
struct SuffixLexing {
  int32_t q;                   // raw end state
  std::vector<int32_t> items;  // in order: cand items and Hits
};
struct SuffixLexClasses {
  std::vector<int32_t> of_token;                   // class per token; -1 none, -2 too many
  std::vector<std::vector<SuffixLexing>> lexings;  // per class
};
class SuffixLexings {
 public:
  explicit SuffixLexings(const CompiledStore* store) : s_(store) {}
  SuffixLexings(const SuffixLexings&) = delete;
  SuffixLexings& operator=(const SuffixLexings&) = delete;
  // The classes of lexer state q: made on first use (outside the lock, so
  // that other threads go on meanwhile), then kept.  Thread-safe.  Bounded:
  // past 64 lexer states' worth of tokens the cache starts again.
  std::shared_ptr<const SuffixLexClasses> Of(int32_t q);
  // A token with more lexings than this is class -2 (asked of the slow path).
  static constexpr size_t kMaxLexings = 4096;
  const CompiledStore* store() const { return s_; }
  int64_t made() const;  // lexer states walked so far (for tests)

 private:
  std::shared_ptr<const SuffixLexClasses> Make(int32_t q) const;
  const CompiledStore* s_;
  mutable std::mutex mu_;
  std::unordered_map<int32_t, std::shared_ptr<const SuffixLexClasses>> classes_;
  int64_t tokens_ = 0;  // of_token entries held, for the cap
  int64_t made_ = 0;
};

class SuffixQuotient {
 public:
  // Can the store's grammar get exact suffix masks?  Not with the indenter.
  static bool Supported(const CompiledStore& store);

  // Does the middle layer (the part of the pushdown system that no suffix
  // changes: the controls any text reaches from the initial lexer state,
  // with every terminal's reduce-then-shift rules) stay within
  // limits.max_rules?  It is counted without saturating and without making
  // the reduction states (their number per feed is a function of the fed
  // terminal, counted once per terminal), so a grammar past the limit is
  // told apart cheaply; every suffix's build makes at least these rules, so
  // kResourceLimit here means Build would give up too.  `stats` (optional):
  // the controls met and the rules counted, up to where it stopped.
  static Status Fits(const CompiledStore* store, SuffixQuotientLimits limits,
                     SuffixQuotientStats* stats = nullptr);

  // The quotient of the store's language by `suffix`.  The byte-level
  // middle checks Fits first: a store past the limit is refused at that
  // cost.  limits.middle = kTerminals builds the terminal-level middle
  // (no Fits first), kAuto as said at SuffixQuotientLimits.  With the empty suffix
  // it is pre* of the accepting configurations: Viable says whether a
  // hypothesis can still reach an accepted end at all (the viable-prefix
  // oracle of tests/viable_prefix_test.cc).
  // `stats` (optional): filled whether the build succeeds or stops.
  // `lexings` (optional): the store's shared lexing classes (a session
  // passes its row memo's); null or another store's: the quotient keeps its
  // own.
  static Status Build(const CompiledStore* store, std::string_view suffix,
                      SuffixQuotientLimits limits, std::shared_ptr<SuffixQuotient>* out,
                      SuffixQuotientStats* stats = nullptr,
                      std::shared_ptr<SuffixLexings> lexings = nullptr);

  // Is there a text m such that hypothesis l, reading m and then the
  // suffix, ends in an accepted input?  Thread-safe (a hypothesis in a lexer
  // state not met yet extends the automaton under a lock); a hypothesis that
  // would take the automaton past its limit is answered true (the prefix
  // mask's answer).
  bool Viable(const LiveState& l);

  // Clears in `mask` the tokens after which no hypothesis of `live` is
  // Viable (special tokens are left as they are).  Per lexer state, the
  // vocabulary's lexings without the parser (end state and items, as
  // Session::AdvanceOne walks a token's bytes) are found once and grouped
  // into classes of equal lexings; a step then checks one class once per
  // hypothesis: apply its items to the hypothesis's parser, compact, and
  // ask Viable.  A token with more than SuffixLexings::kMaxLexings lexings is asked of
  // `slow(token)` (the session's own AdvanceOne and Viable).
  template <class Slow>
  void Filter(const std::vector<LiveState>& live, uint32_t* mask, Slow slow);

  const SuffixQuotientStats& stats() const { return stats_; }

 private:
  explicit SuffixQuotient(const CompiledStore* store, std::string suffix,
                          SuffixQuotientLimits limits, bool estimate = false);
  static Status BuildWith(const CompiledStore* store, std::string_view suffix,
                          SuffixQuotientLimits limits, bool terminal_middle,
                          std::shared_ptr<SuffixQuotient>* out, SuffixQuotientStats* stats,
                          std::shared_ptr<SuffixLexings> lexings);

  // A control state of the pushdown system (see the head of the file).
  enum class Kind : int32_t {
    kLex = 0,    // between bytes: (layer, q, slots)
    kItems = 1,  // inside a byte: raw state, slots, items (cand, seq) from idx
    kFeed = 2,   // feeding terminal `term`, then the items from idx
    kPop = 3,    // reducing to nonterminal `rule`: j more states to pop, then its goto; parent: the feed
    kAcc = 4,    // accepted: reads any stack
  };
  struct Key {
    Kind kind;
    int32_t layer = 0;  // 0 the middle, i in 1..n: S[0..i) read; end: at n, items are the eof seq
    int32_t q = 0, slots = 0, cand = -1, seq = 0, idx = 0, term = -1, rule = -1, j = 0,
            parent = -1;
    bool end = false;  // the items are an end-of-input sequence, then $END
    // The terminal-level middle: a boundary candidate's Emit that may go on
    // at a hub (kItems; with cand == -2 one control per Emit item `rule`, hub
    // `parent` and set of killing terminals `q` (KillBits), whatever text
    // led to it), a feed of `term` whose shift returns to control `parent`
    // (kFeed: a hub, a Boundary, or the normalized items after the Emit, so
    // that Emits with the same way on share one feed and its reduction
    // states), or a hub (kLex: see HubAfter).
    bool mid = false;
    bool operator==(const Key& o) const;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };

  int32_t SlotsId(const std::vector<uint64_t>& slots);
  int32_t Intern(const Key& k);
  // Applies the items that read no stack (Hits; Tails, which are no rules)
  // and at the end of a byte the store's compaction: the control state that
  // next reads the stack, the next byte's, or -1 (dead).
  int32_t Normalize(Key k);
  bool NormalizeKey(Key* k);  // the same without interning; false: dead
  // The normalized keys byte b leads to from lexer state k, in `layer`.
  void ByteSuccessors(const Key& k, int32_t b, int32_t layer, std::vector<Key>* out);
  int32_t LexState(Key l);  // interns a kLex key, through runs of S without the stack
  int32_t ItemAt(const Key& k, int32_t idx, int32_t* count) const;
  // Makes the rules of control state c (and, through the worklist, those of
  // every state they reach).
  void Generate();
  void RulesOf(int32_t c);

  // Saturation (pre*).
  void AddEps(int32_t from, int32_t to);                       // <from> -> <to>, any top
  void AddSwap(int32_t from, int32_t g, int32_t to, int32_t g2);  // <from,g> -> <to,g2>
  void AddPush(int32_t from, int32_t g, int32_t to, int32_t g1, int32_t g2);  // -> <to,g1 g2>
  void AddPop(int32_t from, int32_t g, int32_t to);            // <from,g> -> <to,eps>
  void AddWild(int32_t from, int32_t to);                      // <from,g> -> <to,eps>, every g
  void AddDerived(int32_t f, int32_t g0, int32_t y, int32_t g2);
  void CountRule() {
    if (++stats_.rules > limits_.max_rules) over_ = true;
  }
  bool IsWild(int32_t c) const { return keys_[c].kind == Kind::kPop && keys_[c].j > 0; }
  void AddTrans(int32_t from, int32_t g, int32_t to);
  void Saturate();
  uint64_t Pair(int32_t c, int32_t g) const { return static_cast<uint64_t>(c) * G_ + g; }

  using Lexing = SuffixLexing;
  using LexClasses = SuffixLexClasses;
  bool ClassViable(const LiveState& l, const std::vector<Lexing>& lexings);  // under mu_
  bool ViableLocked(const LiveState& l);
  // The lexing classes per lexer state: the store's shared cache, or the
  // quotient's own (thread-safe either way; read without mu_).
  std::shared_ptr<SuffixLexings> lexings_;

  const CompiledStore* s_;
  std::string suffix_;
  SuffixQuotientLimits limits_;
  int32_t G_ = 0;  // stack alphabet: LR states
  int32_t num_nt_ = 0;
  // goto_into_[g * num_nt_ + a]: the states u with goto(u, a) = g.
  std::unordered_map<uint64_t, std::vector<int32_t>> goto_into_;
  // Per feed state: the (nonterminal, reduction state with no pops left)
  // whose goto returns to it.
  std::unordered_map<int32_t, std::vector<std::pair<int32_t, int32_t>>> goto_family_;
  void GotoFamily(int32_t c, int32_t a, int32_t g, int32_t y);
  int32_t acc_ = -1;
  // The terminal-level middle (limits_.middle resolved).  Its hubs: the
  // lexer after a token and a blank, one per lexer state a blank leads to
  // (one per lexer mode; HubAfter).
  bool terminal_middle_ = false;
  int32_t HubAfter(int32_t blank_q);
  int32_t empty_slots_ = -1;
  // The middle's lexer states besides the hub (the rest of the current
  // token, the spelling of the next one) keep no transitions of their own:
  // they read no stack, and copying every transition of the tokens they
  // lead to into each of them is what made the automaton large.  Their eps
  // edges (eps_fwd_) are followed instead: up_[y] = the storing states that
  // reach storing state y through them (LinkPassthrough), and a query from
  // one of them starts at its Frontier.
  //
  // The Emits keep none either (VirtualEmit: an Emit of a terminal that is
  // not %ignore'd, whose rules are only swaps <e, p> -> <feed, p> into
  // storing feeds): e reads p as the feeds of its swaps on p read it
  // (vswap_), so copying those into e stored each feed's transitions once
  // more per Emit.  up_[e] holds the storing states above it, and a new
  // transition (feed, p, to) reaches them through vup_.
  bool LexPass(int32_t c) const {
    return terminal_middle_ && keys_[c].kind == Kind::kLex && keys_[c].layer == 0 && !keys_[c].mid;
  }
  bool VirtualEmit(int32_t c) const { return virtual_emit_[c] != 0; }
  // An %ignore'd Emit whose rule is one eps link (AddEps, or AddEpsOn
  // limited to a set of top states) is passed through as the lexer states
  // are; ignored_link_[c]: -2 not such a control, -1 the eps rule, else the
  // state set of its AddEpsOn (IgnoredOn).
  bool IgnoredLink(int32_t c) const { return ignored_link_[c] != -2; }
  bool Passthrough(int32_t c) const { return LexPass(c) || VirtualEmit(c) || IgnoredLink(c); }
  int32_t IgnoredOn(const Key& k);
  std::vector<uint8_t> virtual_emit_;  // per control
  std::vector<uint8_t> holder_;        // per control: SuffixQuotientStats::Holder
  uint8_t HolderOf(const Key& k) const;
  std::vector<int32_t> ignored_link_;  // per control
  // Links through pass-through states keep the symbols they let through:
  // (state, filter), the filter -1 for every symbol, else a state set.
  using Link = std::pair<int32_t, int32_t>;
  static constexpr int32_t kNoSymbol = -3;
  bool Passes(int32_t filter, int32_t g) const { return filter < 0 || state_sets_[filter][g]; }
  int32_t Meet(int32_t a, int32_t b);
  std::unordered_map<uint64_t, std::vector<int32_t>> vswap_;  // Pair(e, p) -> feeds
  std::unordered_map<uint64_t, std::vector<int32_t>> vup_;    // Pair(feed, p) -> Emits
  std::unordered_map<int32_t, std::vector<std::pair<int32_t, int32_t>>> vedges_;  // e -> (feed, p)
  void LinkPassthrough();
  bool BlankEnds(const std::vector<uint64_t>& slots, int32_t p, int32_t item, int32_t blank_q,
                 int32_t blank_hits) const;
  int32_t BlankHubEverywhere(int32_t cand, int32_t slots_id, int32_t item, int32_t kill_id);
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> blank_everywhere_;
  std::vector<uint64_t> KillBits(const Key& k, int32_t item) const;
  bool DeadAhead(Key x);
  bool OnTop(int32_t p);
  void AddEpsOn(int32_t from, int32_t to, int32_t on);
  std::vector<std::string> state_sets_;  // per id: one byte per LR state
  std::unordered_map<std::string, int32_t> state_set_ids_;
  std::unordered_map<int32_t, std::vector<std::pair<int32_t, int32_t>>> eps_on_;  // to -> (from, set)
  int32_t Boundary(int32_t q, std::vector<uint64_t> slots);
  const std::vector<uint64_t>& HitReach(int32_t q, int32_t o);
  std::unordered_map<uint64_t, std::vector<uint64_t>> hit_reach_;
  std::vector<uint8_t> on_top_;
  std::unordered_map<uint64_t, bool> dead_ahead_;
  bool Killed(const std::vector<uint64_t>& kill, int32_t p) const;
  const std::vector<Link>& Frontier(int32_t c);
  std::unordered_map<int32_t, std::vector<Link>> eps_fwd_, up_, frontier_;
  std::set<std::tuple<int32_t, int32_t, int32_t>> up_pairs_;
  struct Deferred {
    int32_t from, g, to, g1, g2;  // a swap (g1 -1: <from,g> -> <to,g2>), a push, or
                                  // an AddEpsOn (g1 -2, g2 the state set)
  };
  std::vector<Deferred> deferred_;  // rules into pass-through states, until LinkPassthrough
  // Fits' count: feeds are not expanded; their rules come from CountFeed.
  bool estimate_ = false;
  // Per parse terminal: the rules a feed of it makes besides its shifts and
  // its goto families' derived ones (one per parser state that accepts or
  // reduces on it, one per reduction state: per nonterminal, its longest
  // rule reduced on the terminal; -1 not counted yet), and the states that
  // shift it (a rule each where the continuation after the shift lives).
  std::vector<int64_t> feed_rules_;
  std::vector<int32_t> feed_shifts_;
  void CountFeed(int32_t term);
  bool over_ = false;  // past the limit: every answer is true

  std::vector<Key> keys_;
  std::unordered_map<Key, int32_t, KeyHash> ids_;
  std::vector<std::vector<uint64_t>> slot_sets_;
  std::unordered_map<std::string, int32_t> slot_ids_;
  std::vector<int32_t> gen_todo_;

  // P-automaton: out_[(c, g)] = states reached; seen_ holds (c, g, to).
  std::unordered_map<uint64_t, std::vector<int32_t>> out_;
  // Per state, the symbols it has transitions on (a copy: callers add more).
  std::unordered_map<int32_t, std::vector<int32_t>> out_symbols_;
  std::vector<int32_t> OutSymbols(int32_t c) const;
  std::vector<std::pair<uint64_t, int32_t>> work_;
  // The transitions made, (c * G + g) << 32 | to: an open-addressing set.
  class TransitionSet {
   public:
    bool Insert(uint64_t key);  // false if present
   private:
    std::vector<uint64_t> table_ = std::vector<uint64_t>(1024, kEmpty);
    size_t size_ = 0;
    static constexpr uint64_t kEmpty = ~uint64_t{0};
  };
  TransitionSet trans_;
  // Rules by their right-hand side: eps_by_[to] = froms; swap_by_[(to, g2)]
  // = (from, g); push_by_[(to, g1)] = (from, g, g2).
  std::unordered_map<int32_t, std::vector<int32_t>> eps_by_;
  std::unordered_map<uint64_t, std::vector<std::pair<int32_t, int32_t>>> swap_by_;
  std::unordered_map<uint64_t, std::vector<std::tuple<int32_t, int32_t, int32_t>>> push_by_;
  // Wildcard states (IsWild): their targets, and the derived rules through them.
  std::unordered_map<int32_t, std::vector<int32_t>> wild_;
  std::unordered_map<int32_t, std::vector<std::pair<int32_t, int32_t>>> wild_swaps_;

  SuffixQuotientStats stats_;
  std::vector<uint32_t> mark_;  // ViableLocked's epoch stamps per state
  uint32_t epoch_ = 0;
  std::mutex mu_;
};

template <class Slow>
void SuffixQuotient::Filter(const std::vector<LiveState>& live, uint32_t* mask, Slow slow) {
  std::vector<std::shared_ptr<const LexClasses>> classes;
  std::vector<std::vector<int8_t>> verdicts(live.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (over_) return;
  }
  for (size_t i = 0; i < live.size(); ++i) {
    classes.push_back(lexings_->Of(live[i].q));
    verdicts[i].assign(classes.back()->lexings.size(), -1);
  }
  for (int32_t w = 0; w < s_->mask_words(); ++w) {
    for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
      const int32_t t = w * 32 + __builtin_ctz(bits);
      if (s_->token_special[t]) continue;
      bool keep = false;
      for (size_t i = 0; i < live.size() && !keep; ++i) {
        const int32_t c = classes[i]->of_token[t];
        if (c == -1) continue;
        if (c == -2) {
          keep = slow(t);
          break;
        }
        if (verdicts[i][c] < 0) {
          std::lock_guard<std::mutex> lock(mu_);
          verdicts[i][c] = ClassViable(live[i], classes[i]->lexings[c]) ? 1 : 0;
        }
        keep = verdicts[i][c] == 1;
      }
      if (!keep) mask[w] &= ~(1u << (t & 31));
    }
  }
}

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_SUFFIX_QUOTIENT_H_
