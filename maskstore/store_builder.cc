// Store compilation: see store_builder.h.
#include "maskstore/store_builder.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "grammar/check.h"
#include "grammar/lark_reader.h"
#include "lexer/terminal_automaton.h"
#include "lexer/tokenizer.h"
#include "lexer/vocab_trie.h"
#include "parser/lalr.h"

namespace cfgmask {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

class Interner {
 public:
  int32_t Item(const LexItem& it) {
    std::string key(reinterpret_cast<const char*>(&it.kind), 1);
    for (int32_t v : {it.terminal, it.blockers, it.full_match, static_cast<int32_t>(it.col_absolute),
                      it.col, it.slot}) {
      key.append(reinterpret_cast<const char*>(&v), 4);
    }
    auto [pos, inserted] = items_.emplace(key, static_cast<int32_t>(item_list.size()));
    if (inserted) item_list.push_back(it);
    return pos->second;
  }
  int32_t Seq(const std::vector<LexItem>& items) {
    std::vector<int32_t> ids;
    ids.reserve(items.size());
    for (const LexItem& it : items) ids.push_back(Item(it));
    return SeqIds(ids);
  }
  // The sequence `seq` followed by item `item`, memoised.
  int32_t Append(int32_t seq, int32_t item) {
    const uint64_t key = (static_cast<uint64_t>(seq) << 32) | static_cast<uint32_t>(item);
    auto it = appended_.find(key);
    if (it != appended_.end()) return it->second;
    std::vector<int32_t> ids = seq_list[seq];
    ids.push_back(item);
    const int32_t id = SeqIds(ids);
    appended_.emplace(key, id);
    return id;
  }
  int32_t SeqIds(const std::vector<int32_t>& ids) {
    std::string key(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
    auto [pos, inserted] = seqs_.emplace(key, static_cast<int32_t>(seq_list.size()));
    if (inserted) seq_list.push_back(ids);
    return pos->second;
  }
  std::vector<LexItem> item_list;
  std::vector<std::vector<int32_t>> seq_list;

 private:
  std::unordered_map<std::string, int32_t> items_, seqs_;
  std::unordered_map<uint64_t, int32_t> appended_;
};

// Which terminal can immediately follow which in some sentential form (the
// FOLLOW sets of terminals, computed over all symbols).  Two terminals that
// never touch cannot be consecutive Emits of one token, whatever the parser
// state: pruning such splits keeps tokens like "================" from
// producing exponentially many candidate lexings.
class FollowRelation {
 public:
  explicit FollowRelation(const Grammar& g) : T_(g.num_terminals()) {
    const int32_t n = g.num_symbols();
    std::vector<uint8_t> nullable(n, 0);
    std::vector<std::vector<uint8_t>> first(n, std::vector<uint8_t>(T_, 0)),
        follow(n, std::vector<uint8_t>(T_, 0));
    for (int32_t t = 0; t < T_; ++t) first[t][t] = 1;
    auto unite = [&](std::vector<uint8_t>& dst, const std::vector<uint8_t>& src) {
      bool changed = false;
      for (int32_t i = 0; i < T_; ++i) {
        if (src[i] && !dst[i]) dst[i] = 1, changed = true;
      }
      return changed;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (const Rule& r : g.rules) {
        bool all = true;
        for (SymbolId x : r.rhs) {
          changed |= unite(first[r.lhs], first[x]);
          if (!nullable[x]) {
            all = false;
            break;
          }
        }
        if (all && !nullable[r.lhs]) nullable[r.lhs] = 1, changed = true;
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (const Rule& r : g.rules) {
        for (size_t i = 0; i < r.rhs.size(); ++i) {
          bool rest_nullable = true;
          for (size_t j = i + 1; j < r.rhs.size(); ++j) {
            changed |= unite(follow[r.rhs[i]], first[r.rhs[j]]);
            if (!nullable[r.rhs[j]]) {
              rest_nullable = false;
              break;
            }
          }
          if (rest_nullable) changed |= unite(follow[r.rhs[i]], follow[r.lhs]);
        }
      }
    }
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
  TerminalAutomaton* a;
  int32_t nl;                      // indenter newline terminal, -1 without indenter
  const std::vector<uint8_t>* ignored;
  const FollowRelation* follow;
};

// Could Emit e2 come right after Emit e1 (either may be retyped by Lark's
// "unless" into one of its full-match strings)?  A newline next to anything
// is kept: the indenter may drop it or add _INDENT/_DEDENT around it.
bool PairPossible(const WalkContext& c, const LexItem& e1, const LexItem& e2) {
  if (e1.terminal == c.nl || e2.terminal == c.nl) return true;
  auto types = [&](const LexItem& e) {
    std::vector<int32_t> t = {e.terminal};
    for (int32_t k : c.a->Set(e.full_match)) t.push_back(k);
    return t;
  };
  for (int32_t x : types(e1)) {
    for (int32_t y : types(e2)) {
      if (c.follow->CanFollow(x, y)) return true;
    }
  }
  return false;
}

// Advances a set of walk states by one byte, taking every legal terminal
// boundary before the byte.
void AdvanceWalk(const WalkContext& c, Interner* in, const std::vector<WalkState>& states,
                 uint8_t b, std::vector<WalkState>* out) {
  TerminalAutomaton* a = c.a;
  const int32_t nl = c.nl;
  out->clear();
  std::vector<LexItem> hits;
  auto add_hits = [&](int32_t seq) {
    for (const LexItem& h : hits) seq = in->Append(seq, in->Item(h));
    return seq;
  };
  for (const WalkState& ws : states) {
    hits.clear();
    int32_t q2 = a->Step(ws.q, b, &hits);
    if (q2 >= 0) {
      WalkState n{q2, add_hits(ws.seq), ws.last_emit, ws.col};
      n.col.Feed(b);
      out->push_back(n);
    }
    const LexItem* last = ws.last_emit >= 0 ? &in->item_list[ws.last_emit] : nullptr;
    for (int32_t t : a->BoundaryCandidates(ws.q)) {
      LexItem emit;
      int32_t q1 = a->Boundary(ws.q, t, &emit);
      if (q1 < 0) continue;
      if (last && !(*c.ignored)[t] && !PairPossible(c, *last, emit)) continue;
      if (t == nl) {
        emit.col_absolute = ws.col.absolute;
        emit.col = ws.col.value;
      }
      hits.clear();
      int32_t q3 = a->Step(q1, b, &hits);
      if (q3 < 0) continue;
      const int32_t emit_id = in->Item(emit);
      WalkState n{q3, add_hits(in->Append(ws.seq, emit_id)),
                  (*c.ignored)[t] ? ws.last_emit : emit_id, ColumnDelta::TerminalStart()};
      n.col.Feed(b);
      out->push_back(n);
    }
  }
  if (out->size() > 1) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
}

void FillVocabulary(const Vocabulary& vocab, CompiledStore* s) {
  s->tokenizer_name = vocab.name;
  s->tokenizer_identity = vocab.identity;
  s->vocab_size = vocab.size();
  s->token_offsets.assign(1, 0);
  for (const std::string& t : vocab.tokens) {
    s->token_bytes += t;
    s->token_offsets.push_back(static_cast<int32_t>(s->token_bytes.size()));
  }
  s->token_special = vocab.special;
  s->token_special.resize(vocab.tokens.size(), 0);
  s->eos_ids = vocab.eos_ids;
}

}  // namespace

Status CompileStore(const std::string& grammar_path, const std::string& tokenizer_path,
                    const CompileOptions& options, CompiledStore* out) {
  auto progress = [&](const std::string& phase, double share) {
    if (options.progress) options.progress(phase, share);
  };
  CompiledStore s;
  auto t0 = std::chrono::steady_clock::now();
  progress("grammar", 0);
  Grammar g;
  LarkReaderOptions ro;
  ro.import_paths = options.import_paths;
  if (!options.start.empty()) ro.start = {options.start};
  CFGMASK_RETURN_IF_ERROR(ReadLarkFile(grammar_path, ro, &g));
  s.grammar_name = grammar_path.substr(grammar_path.find_last_of('/') + 1);
  s.start = g.start.empty() ? "start" : g.start[0];
  s.stats.seconds_grammar = Since(t0);

  // The Python indenter (Lark's PythonIndenter) when asked for, or when the
  // grammar declares its _INDENT/_DEDENT terminals.
  const int32_t nl = g.FindTerminal("_NEWLINE"), ind = g.FindTerminal("_INDENT"),
                ded = g.FindTerminal("_DEDENT");
  bool use_indenter = options.indenter == "python";
  if (options.indenter == "auto") use_indenter = nl >= 0 && ind >= 0 && ded >= 0;
  if (use_indenter && (nl < 0 || ind < 0 || ded < 0)) {
    return Status(ErrorCode::kGrammarSemantics,
                  grammar_path + ": --indenter python needs terminals _NEWLINE, _INDENT, _DEDENT");
  }

  t0 = std::chrono::steady_clock::now();
  progress("lalr", 0);
  ParseTables pt;
  CFGMASK_RETURN_IF_ERROR(BuildParseTables(g, &pt));
  s.stats.seconds_lalr = Since(t0);

  t0 = std::chrono::steady_clock::now();
  progress("automaton", 0);
  std::unique_ptr<TerminalAutomaton> a;
  TerminalAutomatonOptions ao;
  ao.max_lexer_states = options.max_lexer_states;
  CFGMASK_RETURN_IF_ERROR(TerminalAutomaton::Build(g, use_indenter ? nl : -1, ao, &a));

  Vocabulary vocab;
  CFGMASK_RETURN_IF_ERROR(LoadVocabulary(tokenizer_path, &vocab));
  FillVocabulary(vocab, &s);
  VocabTrie trie = VocabTrie::Build(vocab);

  // Terminals.
  const int32_t T = g.num_terminals();
  s.num_terminals = T;
  s.terminal_rank.resize(T);
  s.terminal_ignored.assign(T, 0);
  s.terminal_open_paren.assign(T, 0);
  s.terminal_close_paren.assign(T, 0);
  for (int32_t t = 0; t < T; ++t) {
    s.terminal_names.push_back(g.terminals[t].name);
    s.terminal_rank[t] = a->rank(t);
  }
  for (int32_t t : g.ignore) s.terminal_ignored[t] = 1;
  s.terminal_is_string.assign(T, 0);
  s.unless_offsets.assign(1, 0);
  for (int32_t t = 0; t < T; ++t) {
    s.terminal_is_string[t] = a->IsLexed(t) && a->IsStringTerminal(t);
    if (a->IsLexed(t) && !a->IsStringTerminal(t)) {
      for (int32_t k = 0; k < T; ++k) {
        if (a->IsLexed(k) && a->UnlessOk(t, k)) s.unless_data.push_back(k);
      }
    }
    s.unless_offsets.push_back(static_cast<int32_t>(s.unless_data.size()));
  }
  if (use_indenter) {
    s.indenter_nl = nl;
    s.indenter_indent = ind;
    s.indenter_dedent = ded;
    for (const char* n : {"LPAR", "LSQB", "LBRACE"}) {
      if (g.FindTerminal(n) >= 0) s.terminal_open_paren[g.FindTerminal(n)] = 1;
    }
    for (const char* n : {"RPAR", "RSQB", "RBRACE"}) {
      if (g.FindTerminal(n) >= 0) s.terminal_close_paren[g.FindTerminal(n)] = 1;
    }
  }

  // Parser and scanners.
  s.num_states = pt.num_states;
  s.num_parse_terminals = pt.num_terminals;
  s.num_nonterminals = pt.num_nonterminals;
  s.start_state = pt.start_state.empty() ? 0 : pt.start_state[0];
  s.action = pt.action;
  s.goto_table = pt.goto_table;
  s.rule_lhs = pt.rule_lhs;
  s.rule_length = pt.rule_length;
  s.scanner_words = (T + 63) / 64;
  s.scanner_terms.assign(static_cast<size_t>(pt.num_states) * s.scanner_words, 0);
  s.scanner_alt.assign(s.scanner_terms.size(), 0);
  for (int32_t st = 0; st < pt.num_states; ++st) {
    std::vector<uint8_t> in(T, 0);
    for (int32_t t : pt.AcceptedTerminals(st)) in[t] = 1;
    for (int32_t t : g.ignore) in[t] = 1;
    if (use_indenter) in[nl] = 1;
    std::vector<uint8_t> alt = in;
    for (int32_t r = 0; r < T; ++r) {
      if (!in[r] || !a->IsLexed(r) || a->IsStringTerminal(r)) continue;
      for (int32_t k = 0; k < T; ++k) {
        if (in[k] && a->IsLexed(k) && a->Embeds(r, k)) alt[k] = 0;
      }
    }
    for (int32_t t = 0; t < T; ++t) {
      if (!a->IsLexed(t)) continue;  // declared terminals are never scanned
      uint64_t bit = uint64_t{1} << (t & 63);
      if (in[t]) s.scanner_terms[static_cast<size_t>(st) * s.scanner_words + t / 64] |= bit;
      if (alt[t]) s.scanner_alt[static_cast<size_t>(st) * s.scanner_words + t / 64] |= bit;
    }
  }

  Interner in;
  in.SeqIds({});  // seq 0: empty

  // Rows, stored adaptively, emitted as soon as a root's walk ends so that
  // only one root's rows are ever held as plain lists.
  const int32_t V = s.vocab_size;
  int32_t text_tokens = 0;
  for (int32_t t = 0; t < V; ++t) text_tokens += !s.token_special[t];
  const int32_t words = s.mask_words();
  int64_t row_count = 0;
  s.root_row_offsets.assign(1, 0);
  auto emit_rows = [&](std::map<int32_t, std::vector<int32_t>>& root_rows) {
    // Rows in lexicographic order of their item sequences, so that the
    // runtime walks them as a trie: a shared prefix is checked once, and a
    // rejected prefix skips every row below it.
    std::vector<std::pair<const std::vector<int32_t>*, std::vector<int32_t>*>> order;
    for (auto& [seq, toks] : root_rows) order.emplace_back(&in.seq_list[seq], &toks);
    std::sort(order.begin(), order.end(),
              [](const auto& x, const auto& y) { return *x.first < *y.first; });
    for (auto& [items, toks_ptr] : order) {
      const int32_t seq = in.SeqIds(*items);
      std::vector<int32_t>& toks = *toks_ptr;
      std::sort(toks.begin(), toks.end());
      toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
      const int64_t n = static_cast<int64_t>(toks.size());
      const int64_t comp = text_tokens - n;
      s.row_seq.push_back(seq);
      // Long lists are ORed faster as bitsets (word-wise, SIMD) than scattered.
      if (n <= comp && n <= words / 4) {
        s.row_kind.push_back(static_cast<int32_t>(RowKind::kList));
        s.row_offset.push_back(static_cast<int32_t>(s.row_tokens.size()));
        s.row_length.push_back(static_cast<int32_t>(n));
        s.row_tokens.insert(s.row_tokens.end(), toks.begin(), toks.end());
      } else if (comp <= words / 4) {
        s.row_kind.push_back(static_cast<int32_t>(RowKind::kComplement));
        s.row_offset.push_back(static_cast<int32_t>(s.row_tokens.size()));
        size_t i = 0;
        int32_t len = 0;
        for (int32_t t = 0; t < V; ++t) {
          if (s.token_special[t]) continue;
          if (i < toks.size() && toks[i] == t) {
            ++i;
            continue;
          }
          s.row_tokens.push_back(t);
          ++len;
        }
        s.row_length.push_back(len);
      } else {
        s.row_kind.push_back(static_cast<int32_t>(RowKind::kBitset));
        s.row_offset.push_back(static_cast<int32_t>(s.row_bits.size()));
        s.row_length.push_back(words);
        size_t base = s.row_bits.size();
        s.row_bits.resize(base + words, 0);
        for (int32_t t : toks) s.row_bits[base + t / 32] |= 1u << (t % 32);
      }
      ++row_count;
    }
    s.root_row_offsets.push_back(static_cast<int32_t>(s.row_seq.size()));
    root_rows.clear();
  };

  // The vocabulary walk.
  progress("store", 0);
  FollowRelation follow(g);
  const WalkContext walk{a.get(), use_indenter ? nl : -1, &s.terminal_ignored, &follow};
  std::unordered_map<int32_t, int32_t> root_of;  // lexer state -> root index
  std::vector<int32_t> roots;
  std::deque<int32_t> queue;
  auto add_root = [&](int32_t q) {
    if (root_of.count(q)) return;
    root_of[q] = static_cast<int32_t>(roots.size());
    if (std::getenv("CFGMASK_DEBUG_ROOTS")) {
      std::fprintf(stderr, "root %zu: %s\n", roots.size(), a->DebugString(q).c_str());
    }
    roots.push_back(q);
    queue.push_back(q);
  };
  add_root(a->initial_state());
  std::unordered_map<int32_t, std::pair<int32_t, int32_t>> compaction;  // state -> (to, map set)
  std::map<int32_t, std::vector<int32_t>> root_rows;  // seq -> tokens, current root
  std::vector<int32_t> tail_cache;                     // lexer state -> Tail item id
  std::vector<std::vector<WalkState>> level(trie.max_depth() + 2);
  int64_t entries = 0;
  std::vector<int32_t> slot_map;
  size_t done = 0;
  while (!queue.empty()) {
    int32_t root = queue.front();
    queue.pop_front();
    if (static_cast<int32_t>(roots.size()) > options.max_roots) {
      return Status(ErrorCode::kResourceLimit,
                    grammar_path + ": more than " + std::to_string(options.max_roots) +
                        " lexer states at token boundaries (--max-roots)");
    }
    CFGMASK_CHECK(root_of[root] == static_cast<int32_t>(done));
    level[0].assign(1, WalkState{root, 0, -1, ColumnDelta{false, 0}});
    for (int32_t n = 1; n < trie.num_nodes();) {
      const int32_t d = trie.depth(n);
      AdvanceWalk(walk, &in, level[d - 1], trie.byte(n), &level[d]);
      if (level[d].empty()) {
        n = trie.subtree_end(n);
        continue;
      }
      auto toks = trie.tokens_at(n);
      if (!toks.empty()) {
        for (const WalkState& ws : level[d]) {
          auto it = compaction.find(ws.q);
          if (it == compaction.end()) {
            int32_t to = a->CompactSlots(ws.q, &slot_map);
            if (to < 0) {
              return Status(ErrorCode::kResourceLimit,
                            grammar_path + ": more than " + std::to_string(ao.max_lexer_states) +
                                " lexer states (--max-lexer-states)");
            }
            it = compaction.emplace(ws.q, std::make_pair(to, a->InternSet(slot_map))).first;
          }
          add_root(it->second.first);
          // The row's sequence: the walk state's items, then the Tail of
          // its lexer state.
          if (static_cast<int32_t>(tail_cache.size()) <= ws.q) tail_cache.resize(ws.q + 1, -1);
          if (tail_cache[ws.q] < 0) tail_cache[ws.q] = in.Item(a->Tail(ws.q));
          const int32_t seq = in.Append(ws.seq, tail_cache[ws.q]);
          auto& row = root_rows[seq];
          row.insert(row.end(), toks.begin(), toks.end());
          entries += static_cast<int64_t>(toks.size());
        }
        if (entries > options.max_store_entries) {
          return Status(ErrorCode::kResourceLimit, grammar_path + ": mask store exceeds " +
                                                       std::to_string(options.max_store_entries) +
                                                       " entries");
        }
      }
      ++n;
    }
    emit_rows(root_rows);
    ++done;
    if ((done & 15) == 0) progress("store", static_cast<double>(done) / roots.size());
  }
  if (a->num_states() >= ao.max_lexer_states) {
    return Status(ErrorCode::kResourceLimit, grammar_path + ": more than " +
                                                 std::to_string(ao.max_lexer_states) +
                                                 " lexer states (--max-lexer-states)");
  }
  s.stats.nfa_transition_entries = entries;
  s.stats.seconds_automaton = Since(t0);

  // End of input at each root.
  std::vector<std::vector<int32_t>> eof(roots.size());
  for (size_t r = 0; r < roots.size(); ++r) {
    for (auto& alt : a->EndOfInput(roots[r])) eof[r].push_back(in.Seq(alt.items));
  }

  // Freeze the automaton.
  t0 = std::chrono::steady_clock::now();
  const int32_t Q = a->num_states();
  s.num_lex_states = Q;
  s.initial_lex_state = a->initial_state();
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
    if (!a->AtTerminalStart(q)) s.tail_item[q] = in.Item(a->Tail(q));
    for (auto& cs : a->ComputedSteps(q)) {
      s.step_byte.push_back(cs.byte);
      s.step_to.push_back(cs.to);
      s.step_hits.push_back(cs.hits.empty() ? 0 : in.Seq(cs.hits));
    }
    s.step_offsets.push_back(static_cast<int32_t>(s.step_byte.size()));
    for (int32_t t : a->BoundaryCandidates(q)) {
      LexItem emit;
      int32_t to = a->BoundaryIfComputed(q, t, &emit);
      if (to < 0) continue;
      s.cand_terminal.push_back(t);
      s.cand_to.push_back(to);
      s.cand_item.push_back(in.Item(emit));
    }
    s.cand_offsets.push_back(static_cast<int32_t>(s.cand_terminal.size()));
    s.num_slots[q] = a->NumOpenSlots(q);
    s.at_start[q] = a->AtTerminalStart(q);
    auto it = compaction.find(q);
    if (it != compaction.end()) {
      s.compact_to[q] = it->second.first;
      s.compact_map[q] = it->second.second;
    }
    auto r = root_of.find(q);
    if (r != root_of.end()) {
      s.root_index[q] = r->second;
      for (int32_t seq : eof[r->second]) s.eof_seq.push_back(seq);
    }
    s.eof_offsets.push_back(static_cast<int32_t>(s.eof_seq.size()));
  }
  CFGMASK_CHECK(a->num_states() == Q);

  // Items, sets, sequences.
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
  for (int32_t i = 0; i < a->num_sets(); ++i) {
    for (int32_t v : a->Set(i)) s.set_data.push_back(v);
    s.set_offsets.push_back(static_cast<int32_t>(s.set_data.size()));
  }
  // Only the sequences the runtime reads are written (the walk also
  // interned every prefix), renumbered densely; seq 0 stays the empty one.
  std::vector<int32_t> new_id(in.seq_list.size(), -1);
  new_id[0] = 0;
  for (int32_t v : s.row_seq) new_id[v] = 0;
  for (int32_t v : s.eof_seq) new_id[v] = 0;
  for (int32_t v : s.step_hits) new_id[v] = 0;
  s.seq_offsets.assign(1, 0);
  int32_t next_id = 0;
  for (size_t i = 0; i < in.seq_list.size(); ++i) {
    if (new_id[i] < 0) continue;
    new_id[i] = next_id++;
    s.seq_data.insert(s.seq_data.end(), in.seq_list[i].begin(), in.seq_list[i].end());
    s.seq_offsets.push_back(static_cast<int32_t>(s.seq_data.size()));
  }
  for (int32_t& v : s.row_seq) v = new_id[v];
  for (int32_t& v : s.eof_seq) v = new_id[v];
  for (int32_t& v : s.step_hits) v = new_id[v];

  s.num_roots = static_cast<int32_t>(roots.size());
  s.stats.rows_before_streamlining = row_count;
  s.stats.seconds_store = Since(t0);
  progress("store", 1);
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace cfgmask
