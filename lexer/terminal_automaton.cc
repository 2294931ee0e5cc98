// Terminal automaton: see terminal_automaton.h for the model.
//
// Per-terminal states are priority-ordered entry lists, the leftmost-first
// DFA construction RE2 uses for Perl semantics, extended with two things
// Python's re has and RE2 does not: negative lookaheads, carried by each
// entry as the set of live positions of the lookahead body ("vetoes"; the
// entry dies when a body reaches its match), and single-character
// lookbehinds, decided from the byte just consumed.  A match reached with
// pending vetoes is a conditional marker: it becomes the terminal's match
// only once its vetoes die, and until then lower-priority entries are kept.
// Tested by vocab_walk_test.cc.
#include "lexer/terminal_automaton.h"

#include <algorithm>
#include <unordered_set>
#include <cstring>
#include <set>
#include <sstream>

#include "grammar/base/check.h"
#include "grammar/terminal_join.h"

namespace cfgmask {

struct TerminalAutomaton::Entry {
  int32_t pc = -1;     // >= 0: a thread waiting at a kByteRange; -1: a match marker
  uint8_t now = 0;     // marker created at the current position
  uint8_t good = 0;    // shadow tag: this marker winning is the expected outcome
  std::vector<uint32_t> vetoes;  // sorted (sub << 24) | sub_pc
};

namespace {

enum Resolution : uint8_t { kPending, kGood, kBad, kNoMatch };

constexpr int32_t kDead = 0;
constexpr int32_t kNotComputed = -2;

void AppendInt(std::string* key, int64_t v) {
  key->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

struct TerminalAutomaton::TermTable {
  const Nfa* nfa = nullptr;
  std::vector<std::vector<Entry>> states;
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::vector<int32_t>> trans;  // lazily sized 256
  std::vector<uint8_t> has_now, exists, resolution, exists_eof, resolution_eof, eof_now;
  std::vector<uint8_t> has_thread;

  static std::string EntryKey(const std::vector<Entry>& list) {
    std::string key;
    for (const Entry& e : list) {
      AppendInt(&key, e.pc);
      key.push_back(static_cast<char>(e.now));
      key.push_back(static_cast<char>(e.good));
      AppendInt(&key, static_cast<int64_t>(e.vetoes.size()));
      for (uint32_t v : e.vetoes) AppendInt(&key, v);
    }
    return key;
  }

  // Id 0 is the dead state (no entry left).
  void InitDead() {
    states.emplace_back();
    trans.emplace_back();
    for (auto* v : {&has_now, &exists, &exists_eof, &eof_now, &has_thread}) v->push_back(0);
    resolution.push_back(kNoMatch);
    resolution_eof.push_back(kNoMatch);
  }

  int32_t Intern(std::vector<Entry> list) {
    if (list.empty()) return kDead;
    std::string key = EntryKey(list);
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    int32_t id = static_cast<int32_t>(states.size());
    ids.emplace(std::move(key), id);
    // Attributes.
    bool now = false, ex = false, thread = false;
    for (const Entry& e : list) {
      if (e.pc < 0 && e.now) now = true;
      if (e.pc < 0 && e.vetoes.empty()) ex = true;
      if (e.pc >= 0) thread = true;
    }
    Resolution r = kPending;
    if (list[0].pc < 0 && list[0].vetoes.empty()) {
      r = list[0].good ? kGood : kBad;
    } else {
      // A shadow whose expected winners are all gone can only end badly.
      bool any_good = false;
      for (const Entry& e : list) any_good |= e.pc < 0 && e.good;
      if (!any_good) r = kBad;
    }
    Resolution reof = kNoMatch;
    bool eof_now_marker = false, ex_eof = false;
    // At the end of the input every pending look-ahead body dies, except one
    // waiting at \Z, which matches: its marker is vetoed.
    auto fires_at_eof = [&](const Entry& e) {
      for (uint32_t v : e.vetoes) {
        const Nfa& sub = nfa->subs[v >> 24];
        if (sub.insts[v & 0xFFFFFF].op == NfaInst::kEndOfText) return true;
      }
      return false;
    };
    for (const Entry& e : list) {
      if (e.pc < 0 && !fires_at_eof(e)) {
        reof = e.good ? kGood : kBad;
        eof_now_marker = e.now;
        ex_eof = true;
        break;
      }
    }
    states.push_back(std::move(list));
    trans.emplace_back();
    has_now.push_back(now);
    exists.push_back(ex);
    resolution.push_back(r);
    exists_eof.push_back(ex_eof);
    resolution_eof.push_back(reof);
    eof_now.push_back(eof_now_marker);
    has_thread.push_back(thread);
    return id;
  }
};

namespace {

// Plain (unordered) closure of a lookahead body; true if its match is reached.
// Live positions are appended to *out (SortUnique makes it the set).
bool VetoClosure(const Nfa& sub, uint32_t sub_index, int32_t pc, std::vector<uint32_t>* out,
                 std::vector<uint8_t>* seen) {
  std::vector<int32_t> stack = {pc};
  bool fired = false;
  while (!stack.empty()) {
    int32_t p = stack.back();
    stack.pop_back();
    if (p < 0 || (*seen)[p]) continue;
    (*seen)[p] = 1;
    const NfaInst& in = sub.insts[p];
    switch (in.op) {
      case NfaInst::kByteRange: out->push_back((sub_index << 24) | static_cast<uint32_t>(p)); break;
      case NfaInst::kSplit: stack.push_back(in.out1); stack.push_back(in.out); break;
      case NfaInst::kNop: stack.push_back(in.out); break;
      case NfaInst::kMatch: fired = true; break;
      // \Z: kept as a live position; it fires at the end of the input and
      // dies on any byte.
      case NfaInst::kEndOfText: out->push_back((sub_index << 24) | static_cast<uint32_t>(p)); break;
      default: stack.push_back(in.out); break;  // bodies have no lookarounds
    }
  }
  return fired;
}

// Sorted, without duplicates: the set of live look-ahead positions.
void SortUnique(std::vector<uint32_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

bool InByteSet(const uint64_t set[4], int b) { return (set[b >> 6] >> (b & 63)) & 1; }

// A closure entry with pending look-aheads (pc, vetoes), hashed for the
// visited set (membership only: its order is never read).
struct VetoedHash {
  size_t operator()(const std::pair<int32_t, std::vector<uint32_t>>& e) const {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ static_cast<uint32_t>(e.first);
    for (uint32_t v : e.second) h = (h ^ v) * 0xff51afd7ed558ccdULL, h ^= h >> 32;
    return static_cast<size_t>(h);
  }
};

struct ClosureCtx {
  const Nfa* nfa;
  int prev;  // byte just consumed, -1 at the start of the terminal
  std::unordered_set<std::pair<int32_t, std::vector<uint32_t>>, VetoedHash> visited;  // entries with vetoes
  std::vector<TerminalAutomaton::Entry>* out;
  bool lookbehind_at_start = false;
  std::vector<uint8_t> visited_plain = {};  // by pc, entries without vetoes (the common case)
};

}  // namespace

static void Closure(ClosureCtx* c, int32_t pc, const std::vector<uint32_t>& vetoes,
                    uint8_t good) {
  if (pc < 0) return;
  if (vetoes.empty()) {
    if (c->visited_plain.empty()) c->visited_plain.assign(c->nfa->insts.size(), 0);
    if (c->visited_plain[pc]) return;
    c->visited_plain[pc] = 1;
  } else if (!c->visited.emplace(pc, vetoes).second) {
    return;
  }
  const NfaInst& in = c->nfa->insts[pc];
  switch (in.op) {
    case NfaInst::kByteRange: {
      TerminalAutomaton::Entry e;
      e.pc = pc;
      e.vetoes = vetoes;
      c->out->push_back(std::move(e));
      break;
    }
    case NfaInst::kSplit:
      Closure(c, in.out, vetoes, good);
      Closure(c, in.out1, vetoes, good);
      break;
    case NfaInst::kNop:
      Closure(c, in.out, vetoes, good);
      break;
    case NfaInst::kMatch: {
      TerminalAutomaton::Entry e;
      e.pc = -1;
      e.now = 1;
      e.good = good;
      e.vetoes = vetoes;
      c->out->push_back(std::move(e));
      break;
    }
    case NfaInst::kNegLookahead: {
      const Nfa& sub = c->nfa->subs[in.sub];
      std::vector<uint32_t> live(vetoes.begin(), vetoes.end());
      std::vector<uint8_t> seen(sub.insts.size(), 0);
      if (VetoClosure(sub, static_cast<uint32_t>(in.sub), sub.start, &live, &seen)) return;
      SortUnique(&live);
      Closure(c, in.out, live, good);
      break;
    }
    case NfaInst::kLookbehind: {
      if (c->prev < 0) {
        c->lookbehind_at_start = true;
        return;
      }
      if (InByteSet(in.set, c->prev) != in.negative) Closure(c, in.out, vetoes, good);
      break;
    }
    case NfaInst::kEndOfText:
      // \Z exists only inside look-ahead bodies (the regex compiler refuses
      // it elsewhere), which VetoClosure walks.
      CFGMASK_CHECK(false);
      break;
  }
}

// Advances vetoes by one byte; returns false if one of them fired.
static bool StepVetoes(const Nfa& nfa, const std::vector<uint32_t>& vetoes, uint8_t b,
                       std::vector<uint32_t>* out) {
  if (vetoes.empty()) {  // the common case: nothing to advance, nothing allocated
    out->clear();
    return true;
  }
  std::vector<uint32_t> next;
  std::vector<std::vector<uint8_t>> seen(nfa.subs.size());
  for (uint32_t v : vetoes) {
    uint32_t sub_index = v >> 24;
    int32_t pc = static_cast<int32_t>(v & 0xFFFFFF);
    const Nfa& sub = nfa.subs[sub_index];
    const NfaInst& in = sub.insts[pc];
    if (in.op != NfaInst::kByteRange || b < in.lo || b > in.hi) continue;
    if (seen[sub_index].empty()) seen[sub_index].assign(sub.insts.size(), 0);
    if (VetoClosure(sub, sub_index, in.out, &next, &seen[sub_index])) return false;
  }
  SortUnique(&next);
  *out = std::move(next);
  return true;
}

// Drops duplicate entries and everything after the first confirmed marker.
static void Canonicalize(std::vector<TerminalAutomaton::Entry>* list) {
  // In place, without allocating: entries without vetoes are deduplicated
  // by pc through a stamp per pc (markers, pc -1, at index 0), the rare
  // ones with vetoes through a set.
  thread_local std::vector<uint32_t> stamp;
  thread_local uint32_t generation = 0;
  if (++generation == 0) {
    std::fill(stamp.begin(), stamp.end(), 0);
    generation = 1;
  }
  std::set<std::pair<int32_t, std::vector<uint32_t>>> seen;  // entries with vetoes
  size_t kept = 0;
  for (size_t i = 0; i < list->size(); ++i) {
    TerminalAutomaton::Entry& e = (*list)[i];
    if (e.vetoes.empty()) {
      const size_t slot = static_cast<size_t>(e.pc + 1);
      if (slot >= stamp.size()) stamp.resize(slot + 1, 0);
      if (stamp[slot] == generation) continue;
      stamp[slot] = generation;
    } else if (!seen.emplace(e.pc, e.vetoes).second) {
      continue;
    }
    const bool confirmed = e.pc < 0 && e.vetoes.empty();
    if (kept != i) (*list)[kept] = std::move(e);
    ++kept;
    if (confirmed) break;
  }
  list->resize(kept);
}

Status TerminalAutomaton::Build(const Grammar& grammar, int32_t indenter_nl,
                                const TerminalAutomatonOptions& options,
                                std::unique_ptr<TerminalAutomaton>* out) {
  std::unique_ptr<TerminalAutomaton> a(new TerminalAutomaton());
  a->grammar_ = &grammar;
  a->num_terminals_ = grammar.num_terminals();
  a->indenter_nl_ = indenter_nl;
  a->max_states_ = options.max_lexer_states;
  const int32_t n = a->num_terminals_;
  a->nfas_.resize(n);
  a->widths_.resize(n);
  a->rank_.assign(n, -1);
  a->is_string_.assign(n, 0);
  std::vector<int32_t> lexed;
  auto chars = [](const std::string& s) {
    int64_t c = 0;
    for (unsigned char ch : s) c += (ch & 0xC0) != 0x80;
    return c;
  };
  StopCheck never;
  StopCheck& stop = options.stop != nullptr ? *options.stop : never;
  for (int32_t t = 0; t < n; ++t) {
    CFGMASK_RETURN_IF_ERROR(stop.Now("automaton"));
    const TerminalDef& def = grammar.terminals[t];
    if (def.kind == PatternKind::kDeclared) continue;
    a->is_string_[t] = def.kind == PatternKind::kString;
    Status st = CompileRegex(def.ToRegexp(), "", def.name, &a->nfas_[t], &a->widths_[t]);
    if (!st.ok()) return def.where.empty() ? st : Status(st.code(), def.where + ": " + st.message());
    // A pending look-ahead is kept as (sub << 24) | pc: 256 bodies of at
    // most 2^24 instructions each.
    bool too_big = a->nfas_[t].subs.size() > 256;
    for (const Nfa& sub : a->nfas_[t].subs) too_big = too_big || sub.insts.size() >= (size_t{1} << 24);
    if (too_big) {
      return Status(ErrorCode::kResourceLimit,
                    grammar.WherePrefix(t) + "terminal " + def.name + ": " +
                        std::to_string(a->nfas_[t].subs.size()) +
                        " look-ahead assertions after the terminals it uses are inlined; at most "
                        "256 are supported");
    }
    // Lark's Pattern.min_width / max_width: len(value) for a string,
    // get_regexp_width() for a regexp -- the pattern's sre width except that
    // Lark first rewrites every `\p{Name}` (even after a backslash) to a letter.
    if (a->is_string_[t]) {
      a->widths_[t].lo = a->widths_[t].hi = static_cast<unsigned __int128>(chars(def.value));
    } else {
      const RegexWidth sre = a->widths_[t];
      if (!lark::RegexpWidth(def.ToRegexp(), &a->widths_[t])) {
        // The rewrite broke the pattern; Lark then asks the `regex` module
        // only whether the empty string matches.
        a->widths_[t] = {std::min<unsigned __int128>(sre.lo, 1), kRegexMaxWidth};
      }
    }
    if (a->widths_[t].lo == 0) {
      return Status(ErrorCode::kGrammarSemantics,
                    grammar.WherePrefix(t) + "terminal " + def.name + ": matches the empty string (Lark does not allow "
                    "zero-width terminals)");
    }
    lexed.push_back(t);
  }
  std::sort(lexed.begin(), lexed.end(), [&](int32_t x, int32_t y) {
    const TerminalDef& a1 = grammar.terminals[x];
    const TerminalDef& b1 = grammar.terminals[y];
    if (a1.priority != b1.priority) return a1.priority > b1.priority;
    if (a->widths_[x].hi != a->widths_[y].hi) return a->widths_[x].hi > a->widths_[y].hi;
    int64_t lx = chars(a1.value), ly = chars(b1.value);
    if (lx != ly) return lx > ly;
    return a1.name < b1.name;
  });
  a->order_ = lexed;
  for (size_t i = 0; i < lexed.size(); ++i) a->rank_[lexed[i]] = static_cast<int32_t>(i);

  a->unless_ok_.assign(n, std::vector<uint8_t>(n, 0));
  a->embeds_.assign(n, std::vector<uint8_t>(n, 0));
  for (int32_t r : lexed) {
    if (a->is_string_[r]) continue;
    const TerminalDef& rd = grammar.terminals[r];
    for (int32_t k : lexed) {
      CFGMASK_RETURN_IF_ERROR(stop.Poll("automaton"));
      if (!a->is_string_[k]) continue;
      const TerminalDef& kd = grammar.terminals[k];
      if (kd.priority != rd.priority) continue;
      if (MatchPrefix(a->nfas_[r], kd.value) != static_cast<int64_t>(kd.value.size())) continue;
      a->unless_ok_[r][k] = 1;
      bool subset = std::all_of(kd.flags.begin(), kd.flags.end(), [&](char f) {
        return rd.flags.find(f) != std::string::npos;
      });
      a->embeds_[r][k] = subset;
    }
  }

  a->tables_.resize(n);
  LexState init;
  for (int32_t t : lexed) {
    CFGMASK_RETURN_IF_ERROR(stop.Now("automaton"));
    auto table = std::make_unique<TermTable>();
    table->nfa = &a->nfas_[t];
    table->InitDead();
    std::vector<Entry> list;
    ClosureCtx c{table->nfa, -1, {}, &list};
    Closure(&c, table->nfa->start, {}, 0);
    if (c.lookbehind_at_start) {
      return Status(ErrorCode::kRegexUnsupported,
                    grammar.WherePrefix(t) + "terminal " + grammar.terminals[t].name +
                        ": a lookbehind at the start of a terminal depends on the previous "
                        "terminal's text and is not supported");
    }
    Canonicalize(&list);
    int32_t s = table->Intern(std::move(list));
    a->tables_[t] = std::move(table);
    if (s != kDead) init.cur.emplace_back(t, s);
  }
  // Lexer modes: each mode's start lists, and the modes after each terminal.
  const LexerModes& mo = options.modes;
  if (mo.num_modes > 255 || (mo.num_modes > 0 && n >= (1 << 24))) {
    return Status(ErrorCode::kResourceLimit,
                  "the grammar's scanners split into " + std::to_string(mo.num_modes) +
                      " lexer modes over " + std::to_string(n) +
                      " terminals; at most 255 modes and 2^24 terminals are supported");
  }
  if (mo.num_modes > 0 &&
      (static_cast<int32_t>(mo.mode_of.size()) != n || static_cast<int32_t>(mo.after.size()) != n ||
       mo.initial_mode < 0 || mo.initial_mode >= mo.num_modes)) {
    return Status(ErrorCode::kInvalidArgument, "lexer modes: the tables do not match the " +
                                                   std::to_string(n) + " terminals");
  }
  a->num_modes_ = std::max(1, mo.num_modes);
  a->mode_start_.assign(a->num_modes_, {});
  for (auto& [t, s] : init.cur) {
    const int32_t mt = mo.num_modes > 0 ? mo.mode_of[t] : 0;
    for (int32_t k = 0; k < a->num_modes_; ++k) {
      if (mt == k || mt == LexerModes::kShared) a->mode_start_[k].emplace_back(t, s);
    }
  }
  a->after_.assign(static_cast<size_t>(a->num_modes_) * n, {});
  for (int32_t k = 0; k < a->num_modes_; ++k) {
    for (int32_t t = 0; t < n; ++t) {
      std::vector<int32_t>& v = a->after_[static_cast<size_t>(k) * n + t];
      if (mo.num_modes == 0) {
        v = {0};
        continue;
      }
      for (int32_t m2 : mo.after[t]) {
        if (m2 < 0 || m2 >= mo.num_modes) {
          return Status(ErrorCode::kInvalidArgument, "lexer modes: mode " + std::to_string(m2) +
                                                  " after terminal " + grammar.terminals[t].name +
                                                  " is out of range");
        }
        v.push_back(m2);
      }
      if (mo.mode_of[t] == LexerModes::kShared) v.push_back(k);
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
  }
  const int32_t init_mode = mo.num_modes > 0 ? mo.initial_mode : 0;
  init.cur = a->mode_start_[init_mode];
  init.mode = init_mode;
  init.at_start = true;
  a->InternSet({});  // set 0: empty
  a->shared_.assign(n, 0);
  a->foreign_set_.assign(a->num_modes_, -1);
  if (mo.num_modes > 0) {
    if (static_cast<int32_t>(mo.foreign.size()) != mo.num_modes) {
      return Status(ErrorCode::kInvalidArgument, "lexer modes: no foreign terminals per mode");
    }
    for (int32_t t = 0; t < n; ++t) a->shared_[t] = mo.mode_of[t] == LexerModes::kShared;
    for (int32_t k = 0; k < mo.num_modes; ++k) {
      std::vector<int32_t> f;
      for (int32_t t : mo.foreign[k]) {
        if (t >= 0 && t < n && a->IsLexed(t)) f.push_back(t);
      }
      if (!f.empty()) a->foreign_set_[k] = a->InternSet(std::move(f));
    }
    a->certain_.assign(static_cast<size_t>(mo.num_modes) * n, 0);
    if (static_cast<int32_t>(mo.certain.size()) == mo.num_modes) {
      for (int32_t k = 0; k < mo.num_modes; ++k) {
        for (int32_t t : mo.certain[k]) {
          if (t >= 0 && t < n) a->certain_[static_cast<size_t>(k) * n + t] = 1;
        }
      }
    }
    a->retype_target_.assign(n, 0);
    for (int32_t r = 0; r < n; ++r) {
      for (int32_t k = 0; k < n; ++k) {
        if (a->unless_ok_[r][k]) a->retype_target_[k] = 1;
      }
    }
  }
  a->hit_lists_.emplace_back();  // list 0: empty
  a->initial_ = a->Intern(std::move(init));
  *out = std::move(a);
  return Status::Ok();
}

TerminalAutomaton::~TerminalAutomaton() = default;

std::string TerminalAutomaton::Key(const LexState& st) const {
  std::string key;
  key.push_back(st.at_start ? 1 : 0);
  AppendInt(&key, st.mode);
  AppendInt(&key, st.num_slots);
  AppendInt(&key, static_cast<int64_t>(st.cur.size()));
  for (auto& [t, s] : st.cur) {
    AppendInt(&key, (static_cast<int64_t>(t) << 32) | static_cast<uint32_t>(s));
  }
  for (const ShadowRef& r : st.shadows) {
    AppendInt(&key, r.slot);
    AppendInt(&key, (static_cast<int64_t>(r.terminal) << 32) | static_cast<uint32_t>(r.tstate));
    key.push_back(static_cast<char>(r.own));
  }
  return key;
}

int32_t TerminalAutomaton::Intern(LexState st) {
  std::string key = Key(st);
  auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  if (static_cast<int32_t>(states_.size()) >= max_states_) return -3;
  int32_t id = static_cast<int32_t>(states_.size());
  state_ids_.emplace(std::move(key), id);
  states_.push_back(std::move(st));
  return id;
}

int32_t TerminalAutomaton::InternSet(std::vector<int32_t> s) {
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::string key;
  for (int32_t v : s) AppendInt(&key, v);
  auto it = set_ids_.find(key);
  if (it != set_ids_.end()) return it->second;
  int32_t id = static_cast<int32_t>(sets_.size());
  set_ids_.emplace(std::move(key), id);
  sets_.push_back(std::move(s));
  return id;
}

namespace {
int32_t DoTermStep(TerminalAutomaton::TermTable* table, int32_t s, uint8_t b) {
  if (s == kDead) return kDead;
  auto& tr = table->trans[s];
  if (tr.empty()) tr.assign(256, kNotComputed);
  if (tr[b] != kNotComputed) return tr[b];
  const Nfa& nfa = *table->nfa;
  std::vector<TerminalAutomaton::Entry> next;
  ClosureCtx c{&nfa, b, {}, &next};
  // Read in place: nothing below adds states before the loop ends (Intern,
  // which may reallocate `states`, comes after it).
  const std::vector<TerminalAutomaton::Entry>& list = table->states[s];
  std::vector<uint32_t> v2;
  for (const auto& e : list) {
    if (e.pc >= 0) {
      const NfaInst& in = nfa.insts[e.pc];
      if (b < in.lo || b > in.hi) continue;
      if (!StepVetoes(nfa, e.vetoes, b, &v2)) continue;
      Closure(&c, in.out, v2, 0);
    } else {
      if (!StepVetoes(nfa, e.vetoes, b, &v2)) continue;
      TerminalAutomaton::Entry m;
      m.pc = -1;
      m.now = 0;
      m.good = e.good;
      m.vetoes = std::move(v2);
      next.push_back(std::move(m));
    }
  }
  Canonicalize(&next);
  int32_t id = table->Intern(std::move(next));
  table->trans[s][b] = id;
  return id;
}
}  // namespace

int32_t TerminalAutomaton::Step(int32_t q, uint8_t byte, std::vector<LexItem>* items) {
  {
    LexState& st = states_[q];
    if (st.step_to.empty()) {
      st.step_to.assign(256, kNotComputed);
      st.step_hits.assign(256, 0);
    }
    if (st.step_to[byte] != kNotComputed) {
      int32_t h = st.step_hits[byte];
      if (h > 0) items->insert(items->end(), hit_lists_[h].begin(), hit_lists_[h].end());
      return st.step_to[byte];
    }
  }
  // A reference: Intern, which may reallocate states_, comes after the last
  // use of st (copying the state would copy its 256-entry step tables).
  const LexState& st = states_[q];
  LexState next;
  next.at_start = false;
  next.num_slots = st.num_slots;
  next.mode = st.mode;
  bool any_thread = false;
  for (auto& [t, s] : st.cur) {
    int32_t s2 = DoTermStep(tables_[t].get(), s, byte);
    if (s2 == kDead) continue;
    next.cur.emplace_back(t, s2);
    // Viable while some terminal can still end: now, or after more bytes.
    if (tables_[t]->has_thread[s2] || tables_[t]->has_now[s2]) any_thread = true;
  }
  // A regexp every scanner of this mode holds has matched here: no terminal
  // after it in the order can win at this start any more (it or an earlier
  // one does), so those are dropped, but for the strings it may be retyped to.
  if (!certain_.empty()) {
    const uint8_t* certain = certain_.data() + static_cast<size_t>(st.mode) * num_terminals_;
    size_t first = next.cur.size();
    for (size_t i = 0; i < next.cur.size(); ++i) {
      const auto [t, s2] = next.cur[i];
      if (certain[t] && !is_string_[t] && tables_[t]->exists[s2]) {
        first = i;
        break;
      }
    }
    if (first + 1 < next.cur.size()) {
      size_t w = first + 1;
      for (size_t i = first + 1; i < next.cur.size(); ++i) {
        if (is_string_[next.cur[i].first] && retype_target_[next.cur[i].first]) {
          next.cur[w++] = next.cur[i];
        }
      }
      next.cur.resize(w);
      any_thread = false;
      for (auto& [t, s2] : next.cur) {
        any_thread = any_thread || tables_[t]->has_thread[s2] || tables_[t]->has_now[s2];
      }
    }
  }
  std::vector<LexItem> hits;
  bool dead = !any_thread;
  for (const ShadowRef& r : st.shadows) {
    if (dead) break;
    TermTable* table = tables_[r.terminal].get();
    int32_t s2 = DoTermStep(table, r.tstate, byte);
    if (r.own) {
      Resolution res = s2 == kDead ? kNoMatch : static_cast<Resolution>(table->resolution[s2]);
      if (res == kGood) continue;
      if (res == kBad || res == kNoMatch) {
        dead = true;
        break;
      }
      next.shadows.push_back({r.slot, r.terminal, s2, 1});
    } else {
      if (s2 == kDead) continue;
      if (table->exists[s2]) {
        LexItem h;
        h.kind = LexItem::kHit;
        h.terminal = r.terminal;
        h.slot = r.slot;
        hits.push_back(h);
        continue;
      }
      next.shadows.push_back({r.slot, r.terminal, s2, 0});
    }
  }
  int32_t to = -1;
  int32_t hid = 0;
  if (!dead) {
    to = Intern(std::move(next));
    if (to == -3) to = -1;
    if (!hits.empty()) {
      hid = static_cast<int32_t>(hit_lists_.size());
      hit_lists_.push_back(hits);
    }
  }
  states_[q].step_to[byte] = to;
  states_[q].step_hits[byte] = hid;
  if (to >= 0) items->insert(items->end(), hits.begin(), hits.end());
  return to;
}

int32_t TerminalAutomaton::StepIfComputed(int32_t q, uint8_t byte,
                                          std::vector<LexItem>* items) const {
  const LexState& st = states_[q];
  if (st.step_to.empty() || st.step_to[byte] == kNotComputed) return kNotComputed;
  const int32_t h = st.step_hits[byte];
  if (h > 0) items->insert(items->end(), hit_lists_[h].begin(), hit_lists_[h].end());
  return st.step_to[byte];
}

void TerminalAutomaton::ComputedSelfLoops(int32_t q, uint64_t out[2]) const {
  out[0] = out[1] = 0;
  const LexState& st = states_[q];
  if (st.step_to.empty()) return;
  for (int b = 1; b < 128; ++b) {
    if (st.step_to[b] == q && st.step_hits[b] <= 0) out[b / 64] |= uint64_t{1} << (b % 64);
  }
}

const std::vector<int32_t>& TerminalAutomaton::BoundaryCandidates(int32_t q) {
  LexState& st = states_[q];
  if (!st.candidates_done) {
    st.candidates_done = true;
    if (!st.at_start) {
      for (auto& [t, s] : st.cur) {
        if (tables_[t]->has_now[s]) st.candidates.push_back(t);
      }
    }
  }
  return st.candidates;
}

int32_t TerminalAutomaton::Boundary(int32_t q, int32_t t, int32_t mode, LexItem* emit) {
  const uint64_t mkey = BoundaryKey(q, t, mode);
  auto memo = boundary_memo_.find(mkey);
  if (memo != boundary_memo_.end()) {
    if (memo->second < 0) return -1;
    *emit = boundary_emits_[memo->second].first;
    return boundary_emits_[memo->second].second;
  }
  int32_t to = BoundaryUncached(q, t, mode, emit);
  boundary_memo_[mkey] = to < 0 ? -1 : static_cast<int32_t>(boundary_emits_.size());
  if (to >= 0) boundary_emits_.emplace_back(*emit, to);
  return to;
}

int32_t TerminalAutomaton::BoundaryIfComputed(int32_t q, int32_t t, int32_t mode,
                                              LexItem* emit) const {
  const uint64_t mkey = BoundaryKey(q, t, mode);
  auto memo = boundary_memo_.find(mkey);
  if (memo == boundary_memo_.end()) return -2;
  if (memo->second < 0) return -1;
  *emit = boundary_emits_[memo->second].first;
  return boundary_emits_[memo->second].second;
}

int32_t TerminalAutomaton::BoundaryUncached(int32_t q, int32_t t, int32_t mode, LexItem* emit) {
  const LexState& st = states_[q];  // not used after Intern (see Step)
  int32_t t_state = -1;
  for (auto& [u, s] : st.cur) {
    if (u == t) t_state = s;
  }
  if (t_state < 0 || st.at_start) return -1;
  const std::vector<int32_t>& modes = ModesAfter(q, t);
  if (!std::binary_search(modes.begin(), modes.end(), mode)) return -1;
  TermTable* tt = tables_[t].get();
  if (!tt->has_now[t_state]) return -1;
  // Own shadow: entries up to and including the last marker created here.
  std::vector<Entry> own = tt->states[t_state];
  int32_t last_now = -1;
  for (size_t i = 0; i < own.size(); ++i) {
    if (own[i].pc < 0 && own[i].now) last_now = static_cast<int32_t>(i);
  }
  own.resize(last_now + 1);
  for (Entry& e : own) {
    e.good = (e.pc < 0 && e.now) ? 1 : 0;
    e.now = 0;
  }
  LexState next;
  next.at_start = true;
  next.num_slots = st.num_slots + 1;
  next.shadows = st.shadows;
  const int32_t slot = st.num_slots;
  int32_t own_id = tt->Intern(std::move(own));
  Resolution res = static_cast<Resolution>(tt->resolution[own_id]);
  if (res == kBad || res == kNoMatch) return -1;
  if (res == kPending) next.shadows.push_back({slot, t, own_id, 1});
  std::vector<int32_t> blockers, full;
  for (auto& [u, s] : st.cur) {
    if (u == t) continue;
    TermTable* ut = tables_[u].get();
    if (rank_[u] < rank_[t]) {
      if (ut->exists[s]) {
        blockers.push_back(u);
      } else {
        std::vector<Entry> list = ut->states[s];
        for (Entry& e : list) {
          e.now = 0;
          e.good = 0;
        }
        next.shadows.push_back({slot, u, ut->Intern(std::move(list)), 0});
      }
    }
    if (is_string_[u] && unless_ok_[t][u] && ut->has_now[s] && ut->exists[s]) full.push_back(u);
  }
  // Initial state of the next terminal in `mode`.
  next.cur = mode_start_[mode];
  next.mode = mode;
  std::sort(next.shadows.begin(), next.shadows.end(), [&](const ShadowRef& a, const ShadowRef& b) {
    if (a.slot != b.slot) return a.slot < b.slot;
    if (a.own != b.own) return a.own > b.own;
    return rank_[a.terminal] < rank_[b.terminal];
  });
  AddForeignBlockers(st.mode, t, &blockers);
  emit->kind = LexItem::kEmit;
  emit->terminal = t;
  emit->blockers = InternSet(blockers);
  emit->full_match = InternSet(full);
  emit->slot = slot;
  int32_t to = Intern(std::move(next));
  return to == -3 ? -1 : to;
}

// A shared terminal is in every scanner: the foreign terminals of its mode
// tell a scanner of another mode (LexerModes::foreign).
void TerminalAutomaton::AddForeignBlockers(int32_t mode, int32_t t,
                                           std::vector<int32_t>* blockers) const {
  if (!shared_[t] || foreign_set_[mode] < 0) return;
  const std::vector<int32_t>& f = sets_[foreign_set_[mode]];
  blockers->insert(blockers->end(), f.begin(), f.end());
}

LexItem TerminalAutomaton::Tail(int32_t q) {
  const LexState& st = states_[q];
  std::vector<int32_t> alive, matched;
  bool shared_alive = false;
  for (auto& [t, s] : st.cur) {
    TermTable* tt = tables_[t].get();
    if (tt->has_thread[s] || tt->has_now[s]) {
      alive.push_back(t);
      shared_alive = shared_alive || shared_[t];
    }
    if (tt->exists[s]) matched.push_back(t);
  }
  LexItem it;
  it.kind = LexItem::kTail;
  it.blockers = InternSet(alive);
  it.full_match = InternSet(matched);
  // A shared terminal in progress is taken by every scanner: the mode is
  // checked by the foreign terminals instead (LexItem::slot).
  if (shared_alive) it.slot = foreign_set_[st.mode];
  return it;
}

std::vector<TerminalAutomaton::EofAlternative> TerminalAutomaton::EndOfInput(int32_t q) {
  const LexState& st = states_[q];
  std::vector<LexItem> hits;
  for (const ShadowRef& r : st.shadows) {
    TermTable* table = tables_[r.terminal].get();
    if (r.own) {
      if (table->resolution_eof[r.tstate] != kGood) return {};
    } else if (table->exists_eof[r.tstate]) {
      LexItem h;
      h.kind = LexItem::kHit;
      h.terminal = r.terminal;
      h.slot = r.slot;
      hits.push_back(h);
    }
  }
  std::vector<EofAlternative> alts;
  if (st.at_start) {
    alts.push_back({hits});
    return alts;
  }
  for (auto& [t, s] : st.cur) {
    TermTable* tt = tables_[t].get();
    if (!tt->exists_eof[s] || !tt->eof_now[s]) continue;
    std::vector<int32_t> blockers, full;
    for (auto& [u, su] : st.cur) {
      if (u == t) continue;
      TermTable* ut = tables_[u].get();
      if (rank_[u] < rank_[t] && ut->exists_eof[su]) blockers.push_back(u);
      if (is_string_[u] && unless_ok_[t][u] && ut->has_now[su] && ut->exists_eof[su]) {
        full.push_back(u);
      }
    }
    AddForeignBlockers(st.mode, t, &blockers);
    EofAlternative alt;
    alt.items = hits;
    LexItem e;
    e.kind = LexItem::kEmit;
    e.terminal = t;
    e.blockers = InternSet(blockers);
    e.full_match = InternSet(full);
    e.slot = st.num_slots;
    alt.items.push_back(e);
    alts.push_back(std::move(alt));
  }
  return alts;
}

int32_t TerminalAutomaton::CompactSlots(int32_t q, std::vector<int32_t>* slot_map) {
  // Slots whose shadows are identical (same terminals in the same states)
  // will match or die together: they merge into one slot, whose scanner
  // condition at run time is the union of theirs.  Without this, a run such
  // as "0 0 0 0" (each NUMBER leaving a FLOAT shadow that waits for a '.')
  // would need unboundedly many slots.
  const LexState& st = states_[q];
  slot_map->clear();
  std::vector<std::pair<std::string, int32_t>> groups;  // signature -> new slot
  std::vector<int32_t> new_of_old(st.num_slots, -1);
  for (size_t i = 0; i < st.shadows.size();) {
    const int32_t old = st.shadows[i].slot;
    std::string sig;
    size_t j = i;
    for (; j < st.shadows.size() && st.shadows[j].slot == old; ++j) {
      AppendInt(&sig, st.shadows[j].terminal);
      AppendInt(&sig, st.shadows[j].tstate);
      sig.push_back(static_cast<char>(st.shadows[j].own));
    }
    int32_t ns = -1;
    for (auto& [g, id] : groups) {
      if (g == sig) ns = id;
    }
    if (ns < 0) {
      ns = static_cast<int32_t>(groups.size());
      groups.emplace_back(sig, ns);
    }
    new_of_old[old] = ns;
    slot_map->push_back((ns << 16) | old);
    i = j;
  }
  bool identity = static_cast<int32_t>(groups.size()) == st.num_slots;
  for (int32_t o = 0; identity && o < st.num_slots; ++o) identity = new_of_old[o] == o;
  if (identity) return q;
  LexState next;
  next.at_start = st.at_start;
  next.mode = st.mode;
  next.cur = st.cur;
  next.num_slots = static_cast<int32_t>(groups.size());
  for (const ShadowRef& r : st.shadows) {
    next.shadows.push_back({new_of_old[r.slot], r.terminal, r.tstate, r.own});
  }
  // Keep the canonical order (slot, own first, rank).
  std::sort(next.shadows.begin(), next.shadows.end(), [&](const ShadowRef& a, const ShadowRef& b) {
    if (a.slot != b.slot) return a.slot < b.slot;
    if (a.own != b.own) return a.own > b.own;
    return rank_[a.terminal] < rank_[b.terminal];
  });
  next.shadows.erase(std::unique(next.shadows.begin(), next.shadows.end()), next.shadows.end());
  int32_t to = Intern(std::move(next));
  return to == -3 ? -1 : to;
}

std::vector<TerminalAutomaton::ComputedStep> TerminalAutomaton::ComputedSteps(int32_t q) const {
  std::vector<ComputedStep> out;
  const LexState& st = states_[q];
  for (int b = 0; b < static_cast<int>(st.step_to.size()); ++b) {
    if (st.step_to[b] == kNotComputed || st.step_to[b] < 0) continue;
    out.push_back({static_cast<uint8_t>(b), st.step_to[b], hit_lists_[st.step_hits[b]]});
  }
  return out;
}

bool TerminalAutomaton::UnlessOk(int32_t r, int32_t k) const { return unless_ok_[r][k]; }
bool TerminalAutomaton::Embeds(int32_t r, int32_t k) const { return embeds_[r][k]; }

bool TerminalAutomaton::LooksAround(int32_t t) const {
  for (const NfaInst& i : nfas_[t].insts) {
    if (i.op == NfaInst::kNegLookahead || i.op == NfaInst::kLookbehind ||
        i.op == NfaInst::kEndOfText) {
      return true;
    }
  }
  return false;
}

int64_t TerminalAutomaton::MatchTerminal(int32_t t, const std::string& text) const {
  return MatchPrefix(nfas_[t], text);
}

std::string TerminalAutomaton::DebugString(int32_t q) const {
  const LexState& st = states_[q];
  std::ostringstream os;
  os << "q" << q << (st.at_start ? " start" : "");
  if (num_modes_ > 1) os << " mode " << st.mode;
  os << " cur{";
  for (auto& [t, s] : st.cur) os << " " << grammar_->terminals[t].name << ":" << s;
  os << " } shadows{";
  for (const ShadowRef& r : st.shadows) {
    os << " [" << r.slot << (r.own ? " own " : " blk ") << TerminalStateString(r.terminal, r.tstate)
       << "]";
  }
  os << " } slots=" << st.num_slots;
  return os.str();
}

std::string TerminalAutomaton::TerminalStateString(int32_t t, int32_t tstate) const {
  std::ostringstream os;
  os << grammar_->terminals[t].name << ":" << tstate << " [";
  for (const Entry& e : tables_[t]->states[tstate]) {
    if (e.pc >= 0) {
      os << " T" << e.pc;
    } else {
      os << " M" << (e.now ? "n" : "") << (e.good ? "g" : "");
    }
    if (!e.vetoes.empty()) os << "v" << e.vetoes.size();
  }
  os << " ] res=" << int(tables_[t]->resolution[tstate]);
  return os.str();
}

std::vector<TerminalAutomaton::TerminalCensus> TerminalAutomaton::Census() const {
  std::vector<TerminalCensus> census(static_cast<size_t>(num_terminals_));
  std::vector<int32_t> seen_in(static_cast<size_t>(num_terminals_), -1);
  for (int32_t q = 0; q < num_states(); ++q) {
    auto count = [&](int32_t t) {
      if (seen_in[t] != q) seen_in[t] = q, ++census[t].lexer_states;
    };
    for (const auto& [t, tstate] : states_[q].cur) count(t);
    for (const ShadowRef& sh : states_[q].shadows) count(sh.terminal);
  }
  std::vector<TerminalCensus> out;
  for (int32_t t = 0; t < num_terminals_; ++t) {
    if (census[t].lexer_states == 0) continue;
    census[t].terminal = t;
    // Id 0 of a table is its dead state, not a thread state.
    const TermTable* table = tables_[t].get();
    census[t].thread_states = table == nullptr ? 0 : static_cast<int64_t>(table->states.size()) - 1;
    out.push_back(census[t]);
  }
  std::sort(out.begin(), out.end(), [](const TerminalCensus& a, const TerminalCensus& b) {
    if (a.thread_states != b.thread_states) return a.thread_states > b.thread_states;
    if (a.lexer_states != b.lexer_states) return a.lexer_states > b.lexer_states;
    return a.terminal < b.terminal;
  });
  return out;
}

size_t TerminalAutomaton::MemoryBytes() const {
  size_t bytes = states_.size() * sizeof(LexState);
  for (const LexState& s : states_) {
    bytes += s.cur.size() * 8 + s.shadows.size() * sizeof(ShadowRef) + s.step_to.size() * 8;
  }
  for (const auto& t : tables_) {
    if (!t) continue;
    for (const auto& tr : t->trans) bytes += tr.size() * 4;
    for (const auto& l : t->states) bytes += l.size() * sizeof(Entry);
  }
  return bytes;
}

}  // namespace cfgmask
