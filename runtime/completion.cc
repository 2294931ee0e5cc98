// The shortest-completion search (A* over appended bytes): see completion.h.
#include "runtime/completion.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <queue>
#include <random>
#include <string>
#include <tuple>
#include <unordered_set>

#include "lexer/terminal_automaton.h"
#include "parser/lr_core.h"

#include "runtime/suffix_quotient.h"

namespace cfgmask {

// Everything that decides the session's future (FutureHash): two sessions
// with equal keys accept the same continuations.  Without an indenter the
// column is left out, so that a run of blanks does not make new
// configurations forever.
uint64_t SessionKey(const Session& session) {
  uint64_t seed = 0xcbf29ce484222325ull;
  if (const ScopeLayer* layer = session.scope_layer()) {
    seed ^= layer->ReadingHash();
    if (layer->NamesMatter()) seed ^= layer->NamesHash() * 0x9E3779B97F4A7C15ull;
  }
  return FutureHash(session.live(), seed, session.store()->indenter_nl >= 0);
}

constexpr int32_t kInf = INT32_MAX / 4;

Completer::Completer(const CompiledStore& store) : s_(store) {
  const int32_t S = s_.num_states, P = s_.num_parse_terminals, N = s_.num_nonterminals;
  const LrTables lr = s_.lr();
  for (int32_t len : s_.rule_length) max_rule_length_ = std::max(max_rule_length_, len);
  keyed_ = S < (1 << 20) && P < (1 << 14) - 1 && max_rule_length_ < 255;
  // A terminal costs the fewest bytes the lexer ends as it (at least one;
  // $END and the indenter's _DEDENT none): the larger of the compile's
  // count (lexer/terminal_successors.h; it stops at a bound and then says 1,
  // which made every keyword of the strict Python grammar past three letters
  // cost one byte) and LexedMinBytes on the store's own lexer.  The
  // indenter's _INDENT costs one: it follows a newline whose indentation is
  // wider than the current one (so at least one blank), and the newline
  // terminal's own cost counts only its shortest spelling, the line break.
  terminal_cost_.assign(P, 1);
  const std::vector<int32_t> spelled = LexedMinBytes();
  for (int32_t t = 0; t < s_.num_terminals && t < P; ++t) {
    terminal_cost_[t] = std::max({1, s_.terminal_min_bytes[t], spelled[t]});
  }
  terminal_cost_[P - 1] = 0;
  if (s_.indenter_indent >= 0) terminal_cost_[s_.indenter_indent] = 1;
  if (s_.indenter_dedent >= 0) terminal_cost_[s_.indenter_dedent] = 0;
  // What the terminal in progress may already have written (Estimate's
  // credit): at most its cost, and for the indenter's newline the
  // indentation too, which the _INDENT after it is charged for.
  credit_cost_.assign(s_.num_terminals, 0);
  for (int32_t t = 0; t < s_.num_terminals; ++t) {
    credit_cost_[t] = t < P ? terminal_cost_[t] : 0;
    if (t == s_.indenter_nl && s_.indenter_indent >= 0) {
      credit_cost_[t] += terminal_cost_[s_.indenter_indent];
    }
    max_terminal_cost_ = std::max(max_terminal_cost_, credit_cost_[t]);
  }

  // The accessing symbol of every state (terminal t, or P + nonterminal) and
  // one predecessor: walking predecessors back from a state that reduces by
  // rule r spells r's right-hand side, since all transitions into an LR(0)
  // state carry the same symbol.
  std::vector<int32_t> access(S, -1), pred(S, -1);
  moves_.assign(S, {});
  reduces_.assign(S, {});
  reduce_on_.assign(S, {});
  num_shifts_.assign(S, 0);
  accepts_.assign(S, 0);
  std::vector<std::vector<int32_t>> reduce_rules(S);
  for (int32_t st = 0; st < S; ++st) {
    for (int32_t t = 0; t < P; ++t) {
      if (lr.AcceptsOn(st, t)) {
        accepts_[st] = 1;
      } else if (const int32_t to = lr.ShiftTo(st, t); to >= 0) {
        access[to] = t;
        pred[to] = st;
        moves_[st].emplace_back(to, terminal_cost_[t]);
      } else if (const int32_t r = lr.ReduceBy(st, t); r >= 0) {
        reduces_[st].push_back(r);
        reduce_on_[st].emplace_back(r, t);
      }
    }
    num_shifts_[st] = static_cast<int32_t>(moves_[st].size());
    std::sort(reduces_[st].begin(), reduces_[st].end());
    reduces_[st].erase(std::unique(reduces_[st].begin(), reduces_[st].end()), reduces_[st].end());
    for (int32_t x = 0; x < N; ++x) {
      const int32_t g = lr.Goto(st, x);
      if (g >= 0) {
        access[g] = P + x;
        pred[g] = st;
      }
    }
  }
  std::vector<std::vector<int32_t>> rhs(s_.rule_length.size());
  std::vector<uint8_t> known(s_.rule_length.size(), 0);
  for (int32_t st = 0; st < S; ++st) {
    for (int32_t r : reduces_[st]) {
      if (known[r]) continue;
      std::vector<int32_t> symbols(s_.rule_length[r]);
      int32_t cur = st;
      bool ok = true;
      for (int32_t k = s_.rule_length[r] - 1; k >= 0; --k) {
        if (cur < 0 || access[cur] < 0) {
          ok = false;
          break;
        }
        symbols[k] = access[cur];
        cur = pred[cur];
      }
      if (!ok) continue;
      rhs[r] = std::move(symbols);
      known[r] = 1;
    }
  }
  // nonterminal_cost_[st][A]: the fewest shifts that take the parser from a
  // stack topped by st to goto(st, A), a fixed point over the rules of A
  // (the shortest-derivation lengths of Knuth's grammar problem, per state).
  std::vector<std::vector<int32_t>> rules_of(N);
  for (size_t r = 0; r < rhs.size(); ++r) {
    if (known[r]) rules_of[s_.rule_lhs[r]].push_back(static_cast<int32_t>(r));
  }
  nonterminal_cost_.assign(static_cast<size_t>(S) * N, kInf);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t st = 0; st < S; ++st) {
      for (int32_t x = 0; x < N; ++x) {
        if (lr.Goto(st, x) < 0) continue;
        int32_t& best = nonterminal_cost_[static_cast<size_t>(st) * N + x];
        for (int32_t r : rules_of[x]) {
          int32_t cur = st, cost = 0;
          for (int32_t sym : rhs[r]) {
            const int32_t to = lr.Transition(cur, sym);  // a shift or a goto
            if (sym < P) {
              if (to < 0) {
                cost = kInf;
                break;
              }
              cost += terminal_cost_[sym];
              cur = to;
            } else {
              const int32_t c = nonterminal_cost_[static_cast<size_t>(cur) * N + (sym - P)];
              const int32_t g = to;
              if (g < 0 || c >= kInf) {
                cost = kInf;
                break;
              }
              cost += c;
              cur = g;
            }
          }
          if (cost < best) {
            best = cost;
            changed = true;
          }
        }
      }
    }
  }
  for (int32_t st = 0; st < S; ++st) {
    for (int32_t x = 0; x < N; ++x) {
      const int32_t g = lr.Goto(st, x);
      const int32_t c = nonterminal_cost_[static_cast<size_t>(st) * N + x];
      if (g >= 0 && c < kInf) moves_[st].emplace_back(g, c);
    }
  }
}

std::vector<int32_t> Completer::LexedMinBytes() const {
  std::vector<int32_t> bytes;
  LexerSearch(&bytes, nullptr);
  return bytes;
}

void Completer::LexerSearch(std::vector<int32_t>* bytes, std::vector<std::string>* spellings) const {
  // A breadth-first search over the store's lexer (Session::AdvanceOne's
  // moves): a terminal's text is read by byte steps from the state where it
  // starts (the initial state, or where a terminal before it ended:
  // cand_to) to a state where it ends (a cand of it), passing through the
  // compaction at each token's end (compact_to, no byte).  The fewest bytes
  // from any such start to any such end is therefore at most the bytes of
  // any text lexed as it.  0 (and "") for a terminal never met.  With
  // `spellings`, each state's first parent (the state and byte it was
  // reached from; byte -1 for a compaction or a start) spells the text:
  // bytes are tried in increasing order, so among the shortest spellings the
  // first in byte order is kept.
  const int32_t L = s_.num_lex_states;
  std::vector<int32_t> depth(L, -1), parent(L, -1), via(L, -1);
  std::vector<uint8_t> found(s_.num_terminals, 0), done(L, 0);
  if (bytes) bytes->assign(s_.num_terminals, 0);
  if (spellings) spellings->assign(s_.num_terminals, std::string());
  // Dijkstra with unit (a byte) and zero (compaction) weights.
  using Entry = std::pair<int32_t, int32_t>;  // depth, state
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto relax = [&](int32_t to, int32_t d, int32_t from, int32_t byte) {
    if (to < 0 || to >= L || (depth[to] >= 0 && depth[to] <= d)) return;
    depth[to] = d;
    parent[to] = from;
    via[to] = byte;
    heap.emplace(d, to);
  };
  relax(s_.initial_lex_state, 0, -1, -1);
  for (int32_t q = 0; q < L; ++q) {
    if (s_.at_start[q]) relax(q, 0, -1, -1);
    for (int32_t c = s_.cand_offsets[q]; c < s_.cand_offsets[q + 1]; ++c) {
      relax(s_.cand_to[c], 0, -1, -1);
    }
  }
  while (!heap.empty()) {
    const auto [d, q] = heap.top();
    heap.pop();
    if (done[q] || d != depth[q]) continue;
    done[q] = 1;
    for (int32_t c = s_.cand_offsets[q]; c < s_.cand_offsets[q + 1]; ++c) {
      const int32_t t = s_.cand_terminal[c];
      if (t < 0 || t >= s_.num_terminals || found[t]) continue;
      found[t] = 1;
      if (bytes) (*bytes)[t] = d;
      if (!spellings) continue;
      std::string text;
      for (int32_t x = q; x >= 0; x = parent[x]) {
        if (via[x] >= 0) text.push_back(static_cast<char>(via[x]));
      }
      std::reverse(text.begin(), text.end());
      (*spellings)[t] = std::move(text);
    }
    relax(s_.compact_to[q], d, q, -1);
    for (int32_t k = s_.step_offsets[q]; k < s_.step_offsets[q + 1]; ++k) {
      relax(s_.step_to[k], d + 1, q, s_.step_byte[k]);
    }
  }
}

int32_t Completer::StackCost(const std::vector<int32_t>& stack) const {
  // Dijkstra over (j, t, m, a): the stack cut to stack[0..j], then m states
  // pushed over it, the last one t, and a the lookahead the parser has
  // committed to (-1 none yet).  Shifting a terminal or deriving a
  // nonterminal pushes a state; a reduction of m or more states pops back to
  // the real stack (shorter ones are already counted by nonterminal_cost_:
  // deriving their left side from the state they uncover).
  //
  // Why this is a lower bound (admissible).  Take any text c that completes
  // the text, and the terminals a1 .. ak (then $END) that the parser shifts
  // for it from this stack.  The LALR parser's run on them is a sequence of
  // shifts, reductions and gotos; each reduction and the accept happen on a
  // lookahead, the next terminal of the sequence, and the action of a state
  // on a lookahead is unique.  That run is a path here: before a terminal is
  // shifted the parser has committed to it as its lookahead (a free choice
  // at a = -1, cost 0), every reduction on the way is the table's action on
  // a (a pop into the real stack keeps a; a pop of fewer states than were
  // pushed is a derivation, which the path takes instead as one nonterminal
  // move from the state it started in: nonterminal_cost_ is at most the
  // shifts' cost of any derivation of it, and the move forgets a), the shift
  // of a costs terminal_cost_[a] and accepting needs a = $END.  So the
  // path's cost is at most the sum of terminal_cost_ over a1 .. ak, and each
  // terminal_cost_ is at most the bytes of any spelling of it (for _INDENT,
  // the byte of indentation its newline carries at least: a new line must
  // be wider than the current one, which is at least empty; _DEDENT and
  // $END are free): at most |c| plus what the terminal in progress has
  // written already, which Estimate credits.  The minimum over all paths is
  // then at most the shortest completion.  The lookahead is what the old
  // estimate relaxed: a reduction on any lookahead, then a shift of another.
  const LrTables lr = s_.lr();
  if (!keyed_) return stack.empty() ? INT32_MAX : 0;  // past the key's range: no bound
  using Entry = std::pair<int32_t, uint64_t>;  // cost, key
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  std::unordered_map<uint64_t, int32_t> dist;
  // j: 22 bits, t: 20, m: 8, a + 1: 14 (checked in the constructor).
  auto key = [](int32_t j, int32_t t, int32_t m, int32_t a) {
    return (static_cast<uint64_t>(j) << 42) | (static_cast<uint64_t>(t) << 22) |
           (static_cast<uint64_t>(m) << 14) | static_cast<uint64_t>(a + 1);
  };
  auto push = [&](int32_t c, int32_t j, int32_t t, int32_t m, int32_t a) {
    const uint64_t k = key(j, t, m, a);
    auto [it, fresh] = dist.emplace(k, c);
    if (!fresh && it->second <= c) return;
    it->second = c;
    heap.emplace(c, k);
  };
  const int32_t n = static_cast<int32_t>(stack.size()) - 1;
  if (n < 0 || n >= (1 << 22)) return n < 0 ? INT32_MAX : 0;  // 0: no bound past the key's range
  push(0, n, stack[n], 0, -1);
  while (!heap.empty()) {
    auto [c, k] = heap.top();
    heap.pop();
    if (dist[k] < c) continue;
    const int32_t j = static_cast<int32_t>(k >> 42);
    const int32_t t = static_cast<int32_t>((k >> 22) & ((1u << 20) - 1));
    const int32_t m = static_cast<int32_t>((k >> 14) & 0xff);
    const int32_t a = static_cast<int32_t>(k & 0x3fff) - 1;
    // A reduction by r on the committed lookahead.
    auto reduce = [&](int32_t r, int32_t la) {
      const int32_t len = lr.RuleLength(r);
      if (len < m) return;  // counted by a nonterminal move
      const int32_t jj = j - (len - m);
      if (jj < 0) return;
      const int32_t g = lr.GotoAfterReduce(stack[jj], r);
      if (g >= 0) push(c, jj, g, 1, la);
    };
    if (a < 0) {
      if (accepts_[t]) return c;
      // Commit to a lookahead: every terminal that t acts on (a shift is
      // taken at once, a reduction keeps it).
      if (m < max_rule_length_) {
        for (auto [to, cost] : moves_[t]) push(c + cost, j, to, m + 1, -1);
      }
      for (const auto& [r, la] : reduce_on_[t]) reduce(r, la);
    } else {
      // Committed: the table's one action on a.
      if (lr.AcceptsOn(t, a)) return c;
      if (const int32_t to = lr.ShiftTo(t, a); to >= 0) {
        if (m < max_rule_length_) push(c + terminal_cost_[a], j, to, m + 1, -1);
      } else if (const int32_t r = lr.ReduceBy(t, a); r >= 0) {
        reduce(r, a);
      }
      // A derivation that starts here (its first shift may be a's).
      if (m < max_rule_length_) {
        for (size_t i = num_shifts_[t]; i < moves_[t].size(); ++i) {
          push(c + moves_[t][i].second, j, moves_[t][i].first, m + 1, -1);
        }
      }
    }
  }
  return INT32_MAX;
}

int32_t Completer::Credit(int32_t q) {
  auto it = credit_memo_.find(q);
  if (it != credit_memo_.end()) return it->second;
  if (visit_stamp_.empty()) visit_stamp_.assign(s_.num_lex_states, 0);
  ++stamp_;
  int32_t credit = 0;
  std::vector<int32_t> frontier{q}, next;
  visit_stamp_[q] = stamp_;
  // At depth d a terminal t that ends there has written at most
  // cost(t) - d of what StackCost counts for it; deeper levels credit less.
  for (int32_t d = 0; d < max_terminal_cost_ && !frontier.empty(); ++d) {
    for (int32_t x : frontier) {
      for (int32_t c = s_.cand_offsets[x]; c < s_.cand_offsets[x + 1]; ++c) {
        const int32_t t = s_.cand_terminal[c];
        // An ignored terminal is not counted by StackCost: no credit.
        credit = std::max(credit, credit_cost_[t] - d);
      }
    }
    if (credit >= max_terminal_cost_ - d - 1) break;  // deeper levels give less
    next.clear();
    for (int32_t x : frontier) {
      for (int32_t i = s_.step_offsets[x]; i < s_.step_offsets[x + 1]; ++i) {
        const int32_t to = s_.step_to[i];
        if (to >= 0 && visit_stamp_[to] != stamp_) {
          visit_stamp_[to] = stamp_;
          next.push_back(to);
        }
      }
    }
    frontier.swap(next);
  }
  if (credit_memo_.size() > (1u << 20)) credit_memo_.clear();
  credit_memo_.emplace(q, credit);
  return credit;
}

int32_t Completer::Estimate(const Session& session) {
  int32_t best = INT32_MAX;
  // With an exact suffix, a hypothesis from which no middle meets the
  // suffix completes nothing (SuffixQuotient::Viable).
  SuffixQuotient* quotient = session.suffix_quotient().get();
  for (const LiveState& l : session.live()) {
    if (quotient != nullptr && !quotient->Viable(l)) continue;
    const uint64_t h = l.stack.Hash();
    auto it = stack_cost_memo_.find(h);
    if (it == stack_cost_memo_.end()) {
      if (stack_cost_memo_.size() > (1u << 20)) stack_cost_memo_.clear();
      it = stack_cost_memo_.emplace(h, StackCost(l.stack.States())).first;
    }
    int32_t cost = it->second;
    // Inside a terminal, part of its text may be written already: credit
    // the most a terminal still alive there can have counted (a lower bound
    // stays a lower bound).
    if (cost != INT32_MAX && l.q >= 0 && !s_.at_start[l.q]) {
      int32_t credit = 0;
      const int32_t tail = s_.tail_item[l.q];
      if (tail >= 0) {
        const int32_t set = s_.item_blockers[tail];
        for (int32_t i = s_.set_offsets[set]; i < s_.set_offsets[set + 1]; ++i) {
          const int32_t t = s_.set_data[i];
          credit = std::max({credit, s_.terminal_min_bytes[t], credit_cost_[t]});
        }
      } else {
        credit = max_terminal_cost_;
      }
      credit = std::min(credit, Credit(l.q));
      cost = std::max(0, cost - credit);
    }
    best = std::min(best, cost);
  }
  // With a suffix S the goal is text + m + S complete.  The bound above is
  // at most the terminals' costs in any completion, here m + S, less the
  // credit: at most |m| plus the costs of the terminals that end inside S
  // (one begun in m included), which SuffixCredit bounds.  So |m| is at
  // least the bound less SuffixCredit(S) (never more than without the
  // suffix).
  if (best != INT32_MAX && !session.suffix().empty()) {
    best = static_cast<int32_t>(std::max<int64_t>(0, best - SuffixCredit(session.suffix())));
  }
  return best;
}

int64_t Completer::SuffixCredit(const std::string& suffix) {
  if (suffix == credit_suffix_) return credit_suffix_value_;
  const int64_t n = static_cast<int64_t>(suffix.size());
  int64_t value = n;  // always an upper bound: a terminal costs at most its bytes
  // The most, over every way the store's lexer can read S from any state
  // (the parser ignored, so more ways than the session has), of the costs
  // of the terminals that end inside S or at its end (credit_cost_: an
  // _INDENT after a newline counted with it; ignored terminals cost 0).  A
  // dynamic programme over S's bytes and lexer states, as
  // Session::AdvanceOne moves: a byte steps the terminal in progress, or
  // ends it (a cand: its cost) and steps from where the next one starts;
  // after each byte the state may be compacted.  Given up (|S| kept) past a
  // bound on the work.
  const int32_t L = s_.num_lex_states;
  // Dense per-state values (-1: not reached) with lists of the states set.
  std::vector<int64_t> cur_v(static_cast<size_t>(L), 0), next_v(static_cast<size_t>(L), -1);
  std::vector<int32_t> cur, next;
  cur.reserve(static_cast<size_t>(L));
  for (int32_t q = 0; q < L; ++q) cur.push_back(q);
  int64_t work = 0;
  constexpr int64_t kMaxWork = int64_t{1} << 27;
  bool gave_up = false;
  auto set = [&](int32_t q, int64_t v) {
    if (next_v[q] < 0) next.push_back(q);
    if (next_v[q] < v) next_v[q] = v;
  };
  auto put = [&](int32_t q, int64_t v) {
    if (q < 0 || q >= L) return;
    set(q, v);
    const int32_t c = s_.compact_to[q];
    if (c >= 0 && c < L && c != q) set(c, v);
  };
  auto step = [&](int32_t q, uint8_t b) {
    if (q < 0) return -1;
    const int32_t* begin = s_.step_byte.data() + s_.step_offsets[q];
    const int32_t* end = s_.step_byte.data() + s_.step_offsets[q + 1];
    const int32_t* it = std::lower_bound(begin, end, static_cast<int32_t>(b));
    return it == end || *it != b ? -1 : s_.step_to[it - s_.step_byte.data()];
  };
  for (int64_t i = 0; i < n && !cur.empty() && !gave_up; ++i) {
    const uint8_t b = static_cast<uint8_t>(suffix[i]);
    next.clear();
    for (int32_t q : cur) {
      const int64_t v = cur_v[q];
      work += 1 + (s_.cand_offsets[q + 1] - s_.cand_offsets[q]);
      put(step(q, b), v);
      for (int32_t c = s_.cand_offsets[q]; c < s_.cand_offsets[q + 1]; ++c) {
        const int32_t t = s_.cand_terminal[c];
        const int64_t cost = t >= 0 && t < s_.num_terminals ? credit_cost_[t] : 0;
        put(step(s_.cand_to[c], b), v + cost);
      }
    }
    if (work > kMaxWork) gave_up = true;
    for (int32_t q : cur) cur_v[q] = -1;
    for (int32_t q : next) {
      cur_v[q] = next_v[q];
      next_v[q] = -1;
    }
    cur.swap(next);
  }
  if (!gave_up) {
    int64_t most = 0;  // no way read S: nothing after it counts (the goal is never met)
    for (int32_t q : cur) {
      const int64_t v = cur_v[q];
      int64_t end = 0;
      for (int32_t c = s_.cand_offsets[q]; c < s_.cand_offsets[q + 1]; ++c) {
        const int32_t t = s_.cand_terminal[c];
        if (t >= 0 && t < s_.num_terminals) end = std::max<int64_t>(end, credit_cost_[t]);
      }
      most = std::max(most, v + end);
    }
    value = std::min(value, most);
  }
  credit_suffix_ = suffix;
  credit_suffix_value_ = value;
  return value;
}

CompletionResult Completer::Search(Session* session, int64_t max_nodes, std::string* completion,
                                    int64_t* nodes_used) {
  if (nodes_used) *nodes_used = 0;
  completion->clear();
  if (session->CanEnd()) return CompletionResult::kFound;
  // A* over appended bytes: f = bytes so far + estimate; ties go to the
  // deeper node.  A node is its parent and one byte (16 bytes), replayed
  // from the session's state when expanded, so memory is linear in the
  // nodes made; every node made counts against the budget.  Expansion is
  // partial (Yoshizumi et al.'s PEA*): only the children whose f is at most
  // the parent's are made; the parent is queued again at the least f of the
  // others, which are made only if the search gets that far (kept per
  // node, 16 bytes each: not counted as nodes, but no more than 256 per
  // node expanded, so memory stays linear in the budget).
  struct Node {
    int64_t parent;
    uint8_t byte;
  };
  struct Open {
    int32_t f, g;
    int64_t id;
    bool operator>(const Open& o) const {
      return std::tie(f, o.g, id) > std::tie(o.f, g, o.id);
    }
  };
  std::vector<Node> nodes{Node{-1, 0}};
  std::priority_queue<Open, std::vector<Open>, std::greater<Open>> open;
  std::unordered_map<uint64_t, int32_t> seen{{SessionKey(*session), 0}};
  const int32_t h0 = Estimate(*session);
  if (h0 == INT32_MAX) return CompletionResult::kNone;
  open.push(Open{h0, 0, 0});
  std::string path;
  auto path_of = [&](int64_t id) {
    path.clear();
    for (; id > 0; id = nodes[id].parent) path.push_back(static_cast<char>(nodes[id].byte));
    std::reverse(path.begin(), path.end());
  };
  bool budget_hit = false;
  // The shortest completion met so far: a child that can end is not a node;
  // the search stops once no queued node can lead to a shorter one (every f
  // is a lower bound on the completions through its node), so the one
  // returned is a shortest one even though goals are met when made.
  int32_t best_len = INT32_MAX;
  std::string best;
  // Per node expanded once: the children not made yet (byte, f, key), so
  // that coming back does not replay the node.
  struct Deferred {
    uint64_t key;
    int32_t f;
    uint8_t byte;
  };
  std::unordered_map<int64_t, std::vector<Deferred>> deferred;
  while (!open.empty()) {
    if (open.top().f >= best_len) break;
    const Open node = open.top();
    open.pop();
    if (auto d = deferred.find(node.id); d != deferred.end()) {
      int32_t later = INT32_MAX;
      std::vector<Deferred> keep;
      for (const Deferred& c : d->second) {
        auto it = seen.find(c.key);
        if (it != seen.end() && it->second <= node.g + 1) continue;
        if (c.f > node.f) {
          later = std::min(later, c.f);
          keep.push_back(c);
        } else if (static_cast<int64_t>(nodes.size()) - 1 >= max_nodes) {
          budget_hit = true;
          break;
        } else {
          seen[c.key] = node.g + 1;
          nodes.push_back(Node{node.id, c.byte});
          open.push(Open{c.f, node.g + 1, static_cast<int64_t>(nodes.size() - 1)});
        }
      }
      if (budget_hit) break;
      if (later == INT32_MAX) {
        deferred.erase(d);
      } else {
        d->second = std::move(keep);
        open.push(Open{later, node.g, node.id});
      }
      continue;
    }
    path_of(node.id);
    if (!path.empty() && !session->AdvanceBytes(path).ok()) continue;
    int32_t later = INT32_MAX;  // the least f of the children not made
    std::vector<Deferred> defer;
    for (int pass = 0; pass < 2; ++pass) {
      // Printable ASCII, tab and newline first; other bytes only where none
      // of those fits (inside a multi-byte character).
      bool any = false;
      for (int b = 0; b < 256; ++b) {
        const bool ascii = (b >= 0x20 && b < 0x7f) || b == '\n' || b == '\t';
        if (ascii != (pass == 0)) continue;
        const char byte = static_cast<char>(b);
        if (!session->AdvanceBytes(std::string_view(&byte, 1)).ok()) continue;
        any = true;
        if (session->CanEnd()) {
          if (node.g + 1 < best_len) {
            best_len = node.g + 1;
            best = path + byte;
          }
          session->Rollback(1);
          continue;
        }
        const uint64_t k = SessionKey(*session);
        auto it = seen.find(k);
        if (it == seen.end() || it->second > node.g + 1) {
          const int32_t h = Estimate(*session);
          const int32_t f = h == INT32_MAX ? INT32_MAX : node.g + 1 + h;
          if (f == INT32_MAX) {
            // Can never end: not a node.
          } else if (f > node.f) {
            // Partial expansion: a child above the parent's f is not made
            // now; the parent comes back at the least such f.
            later = std::min(later, f);
            defer.push_back(Deferred{k, f, static_cast<uint8_t>(b)});
          } else if (static_cast<int64_t>(nodes.size()) - 1 >= max_nodes) {  // nodes[0]: the start
            budget_hit = true;
          } else {
            seen[k] = node.g + 1;
            nodes.push_back(Node{node.id, static_cast<uint8_t>(b)});
            open.push(Open{f, node.g + 1, static_cast<int64_t>(nodes.size() - 1)});
          }
        }
        session->Rollback(1);
      }
      if (any) break;
    }
    if (!path.empty()) session->Rollback(1);
    if (budget_hit) break;
    if (later != INT32_MAX) {
      deferred.emplace(node.id, std::move(defer));
      open.push(Open{later, node.g, node.id});
    }
  }
  if (nodes_used) *nodes_used = static_cast<int64_t>(nodes.size()) - 1;
  if (best_len < INT32_MAX) {
    // A shortest completion, unless the budget ran out first (then the
    // shortest one met).
    *completion = std::move(best);
    return CompletionResult::kFound;
  }
  // With the budget never hit, every configuration reachable from here was
  // expanded: the text has no completion at all.
  return budget_hit ? CompletionResult::kBudget : CompletionResult::kNone;
}

bool Completer::Find(Session* session, int64_t max_nodes, std::string* completion,
                     int64_t* nodes_used) {
  return Search(session, max_nodes, completion, nodes_used) == CompletionResult::kFound;
}

const std::vector<std::string>& Completer::Spellings() {
  if (!spelled_) {
    LexerSearch(nullptr, &spellings_);
    spelled_ = true;
  }
  return spellings_;
}

namespace {

bool WordByte(uint8_t b) {
  return (b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '_' ||
         b >= 0x80;
}

// The width of the blanks in `text` from `from` on, as the indenter counts
// a line's indentation (ColumnDelta: a tab 8); *end: the first other byte.
int32_t BlankWidth(const std::string& text, size_t from, size_t* end) {
  ColumnDelta width{true, 0};
  size_t i = from;
  for (; i < text.size() && (text[i] == ' ' || text[i] == '\t'); ++i) {
    width.Feed(static_cast<uint8_t>(text[i]));
  }
  *end = i;
  return width.value;
}

}  // namespace

CompletionResult Completer::SearchSpelled(Session* session, int64_t max_nodes,
                                          std::string* completion, int64_t* nodes_used) {
  if (nodes_used) *nodes_used = 0;
  completion->clear();
  if (session->CanEnd()) return CompletionResult::kFound;
  const std::vector<std::string>& spelled = Spellings();
  const bool indenter = s_.indenter_nl >= 0;
  // The words: every terminal's spelling but the ignored ones' and the
  // indenter's newline (its edges carry the indentation), each once.
  // Punctuation (a spelling that starts with no word byte) other than
  // brackets only as the first edge, unless the text around the cut uses it
  // (the last 512 bytes before, the first 256 after): an operator rarely
  // opens what the suffix goes on in, and every one of them at every depth
  // is most of the breadth.
  const std::string& suffix = session->suffix();
  const std::string& before = session->text();
  const std::string near = before.substr(before.size() - std::min<size_t>(before.size(), 512)) +
                           "\n" + suffix.substr(0, 256);
  std::vector<std::string> words;
  std::vector<uint8_t> first_only;
  for (int32_t t = 0; t < s_.num_terminals; ++t) {
    if (spelled[t].empty() || s_.terminal_ignored[t] || (indenter && t == s_.indenter_nl)) continue;
    if (std::find(words.begin(), words.end(), spelled[t]) != words.end()) continue;
    words.push_back(spelled[t]);
    first_only.push_back(!WordByte(static_cast<uint8_t>(spelled[t][0])) &&
                         !s_.terminal_open_paren[t] && !s_.terminal_close_paren[t] &&
                         near.find(spelled[t]) == std::string::npos);
  }
  // Joins: the start of a spelling whose rest begins the suffix.
  std::vector<std::string> joins;
  for (int32_t t = 0; t < s_.num_terminals; ++t) {
    const std::string& w = spelled[t];
    for (size_t k = 1; k < w.size(); ++k) {
      if (suffix.compare(0, w.size() - k, w, k, std::string::npos) == 0 &&
          std::find(joins.begin(), joins.end(), w.substr(0, k)) == joins.end()) {
        joins.push_back(w.substr(0, k));
      }
    }
  }
  // The columns of the suffix's lines (after each line break, its blanks).
  std::vector<int32_t> suffix_cols;
  for (size_t i = suffix.find('\n'); i != std::string::npos; i = suffix.find('\n', i + 1)) {
    size_t j = 0;
    const int32_t col = BlankWidth(suffix, i + 1, &j);
    if (j < suffix.size() && suffix[j] != '\n' && suffix[j] != '\r' &&
        std::find(suffix_cols.begin(), suffix_cols.end(), col) == suffix_cols.end()) {
      suffix_cols.push_back(col);
      if (suffix_cols.size() >= 16) break;
    }
  }
  struct Node {
    int64_t parent;
    std::string edge;
  };
  std::vector<Node> nodes{Node{-1, std::string()}};
  std::deque<int64_t> open{0};
  std::unordered_set<uint64_t> seen{SessionKey(*session)};
  std::string path;
  auto path_of = [&](int64_t id) {
    std::vector<int64_t> chain;
    for (; id > 0; id = nodes[id].parent) chain.push_back(id);
    path.clear();
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) path += nodes[*it].edge;
  };
  // Is the session, after the edge just taken, complete with a join?
  auto goal = [&](std::string* found) {
    if (session->CanEnd()) {
      found->clear();
      return true;
    }
    for (const std::string& j : joins) {
      if (!session->AdvanceBytes(j).ok()) continue;
      const bool ok = session->CanEnd();
      session->Rollback(1);
      if (ok) {
        *found = j;
        return true;
      }
    }
    return false;
  };
  std::string tail;
  if (goal(&tail)) {
    *completion = tail;
    return CompletionResult::kFound;
  }
  bool budget_hit = false;
  std::vector<std::string> edges;
  while (!open.empty() && !budget_hit) {
    const int64_t id = open.front();
    open.pop_front();
    path_of(id);
    if (!path.empty() && !session->AdvanceBytes(path).ok()) continue;
    // At the start of a line (blanks only so far): its indentation.
    const std::string& text = session->text();
    const size_t nl = text.rfind('\n');
    size_t end = 0;
    const int32_t col = BlankWidth(text, nl == std::string::npos ? 0 : nl + 1, &end);
    const bool blank_line = end == text.size();
    const bool after_word = !text.empty() && WordByte(static_cast<uint8_t>(text.back()));
    edges.clear();
    for (size_t k = 0; k < words.size(); ++k) {
      if (first_only[k] && id != 0) continue;
      const std::string& w = words[k];
      edges.push_back(after_word && WordByte(static_cast<uint8_t>(w[0])) ? " " + w : w);
    }
    if (indenter) {
      std::vector<int32_t> cols = suffix_cols;
      for (const LiveState& l : session->live()) {
        for (int32_t level : l.indent) cols.push_back(level);
        if (!l.indent.empty()) cols.push_back(l.indent.back() + 4);
      }
      std::sort(cols.begin(), cols.end());
      cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
      for (int32_t c : cols) {
        if (c < 0 || c > 256) continue;
        edges.push_back("\n" + std::string(static_cast<size_t>(c), ' '));
        if (blank_line && c > col) edges.push_back(std::string(static_cast<size_t>(c - col), ' '));
      }
    }
    for (const std::string& e : edges) {
      if (!session->AdvanceBytes(e).ok()) continue;
      if (goal(&tail)) {
        *completion = path + e + tail;
        session->Rollback(1);
        if (!path.empty()) session->Rollback(1);
        if (nodes_used) *nodes_used = static_cast<int64_t>(nodes.size()) - 1;
        return CompletionResult::kFound;
      }
      if (seen.insert(SessionKey(*session)).second) {
        if (static_cast<int64_t>(nodes.size()) - 1 >= max_nodes) {
          budget_hit = true;
        } else {
          nodes.push_back(Node{id, e});
          open.push_back(static_cast<int64_t>(nodes.size()) - 1);
        }
      }
      session->Rollback(1);
      if (budget_hit) break;
    }
    if (!path.empty()) session->Rollback(1);
  }
  if (nodes_used) *nodes_used = static_cast<int64_t>(nodes.size()) - 1;
  return budget_hit ? CompletionResult::kBudget : CompletionResult::kNone;
}

CompletionResult Completer::SearchForSteering(Session* session, int64_t max_nodes,
                                              std::string* completion, int64_t* nodes_used) {
  int64_t used = 0;
  CompletionResult r = Search(session, max_nodes, completion, &used);
  if (r == CompletionResult::kBudget && !session->suffix().empty()) {
    int64_t more = 0;
    const CompletionResult spelled = SearchSpelled(session, max_nodes, completion, &more);
    used += more;
    if (spelled == CompletionResult::kFound) r = spelled;
  }
  if (nodes_used) *nodes_used = used;
  return r;
}

bool CompleteWithTokens(const CompiledStore& store, const Segmenter& segmenter,
                        Completer* completer, Session* session, int64_t* tokens,
                        std::string* why) {
  constexpr int64_t kNodes = 20000;
  const Session walked = session->Fork();
  const int64_t walked_tokens = *tokens;
  auto give_up = [&](std::string reason) {  // back to where the walk stopped
    *why = std::move(reason);
    *session = walked;
    *tokens = walked_tokens;
    return false;
  };
  int64_t back = 0;
  for (int64_t step = 8;; step *= 2) {
    std::string text;
    int64_t nodes = 0;
    const CompletionResult found = completer->SearchForSteering(session, kNodes, &text, &nodes);
    if (found == CompletionResult::kFound) {
      std::mt19937_64 unused;
      std::vector<uint32_t> mask(store.mask_words());
      int64_t added = 0;
      for (const Segment& seg : segmenter.Cut(text, SegmentMode::kGreedy, &unused)) {
        session->FillMask(mask.data());
        if (seg.token < 0 || !MaskAllows(mask, seg.token)) {
          return give_up("the completion \"" + Printable(text) + "\" needs " +
                         (seg.token < 0 ? std::string("a byte with no token")
                                        : TokenLabel(store, seg.token) + ", which is not in the mask"));
        }
        Status st = session->Advance(seg.token);
        if (!st.ok()) {
          return give_up("the completion: " + OneLine(st.message()));
        }
        ++added;
      }
      session->FillMask(mask.data());
      bool eos = false;
      for (int32_t e : store.eos_ids) eos |= MaskAllows(mask, e);
      if (!session->CanEnd() || (!eos && !store.eos_ids.empty())) {
        return give_up("the completion \"" + Printable(text) + "\" does not end the text");
      }
      *tokens += added;
      *why = (back ? "rolled back " + std::to_string(back) + " tokens, " : std::string()) +
             "completed with " + std::to_string(added) + " tokens (\"" + Printable(text) + "\")";
      return true;
    }
    if (found == CompletionResult::kNone && back == 0) {
      // Proved: nothing completes the text as walked.
      return give_up("no completion exists: the search went through all " +
                     std::to_string(nodes) + " configurations reachable from here");
    }
    const int64_t k = std::min<int64_t>(step, session->HistoryLength());
    if (k == 0) {
      return give_up("no completion found within the search budget of " +
                     std::to_string(kNodes) + " nodes, from the text as walked or after rolling back " +
                     std::to_string(back) + " tokens");
    }
    session->Rollback(static_cast<int32_t>(k));
    *tokens -= k;
    back += k;
  }
}

}  // namespace cfgmask
