// Store compilation: the phases before the vocabulary walk (grammar, LALR
// tables, terminal automaton, tokenizer, the store's grammar tables) and the
// driver that runs every phase in order, times it and reports progress; the
// walk and the store phase are vocab_walk.cc.  See store_builder.h.
// Tested by vocab_walk_test.cc.
#include "maskstore/store_builder.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "grammar/check.h"
#include "grammar/lark_reader.h"
#include "lexer/terminal_automaton.h"
#include "lexer/tokenizer/tokenizer.h"
#include "lexer/vocab_trie.h"
#include "maskstore/vocab_walk.h"
#include "parser/lalr.h"
#include "parser/lr_core.h"

namespace cfgmask {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void CopyVocabulary(const CompiledStore& from, CompiledStore* s) {
  s->tokenizer_name = from.tokenizer_name;
  s->tokenizer_identity = from.tokenizer_identity;
  s->vocab_size = from.vocab_size;
  s->token_offsets = from.token_offsets;
  s->token_bytes = from.token_bytes;
  s->token_special = from.token_special;
  s->eos_ids = from.eos_ids;
}

void FillVocabulary(const Vocabulary& vocab, CompiledStore* s) {
  s->tokenizer_name = vocab.name;
  s->tokenizer_identity = vocab.identity;
  s->vocab_size = vocab.size();
  s->token_offsets.assign(1, 0);
  for (const std::string& t : vocab.tokens) {
    s->token_bytes.append(t.begin(), t.end());
    s->token_offsets.push_back(static_cast<int32_t>(s->token_bytes.size()));
  }
  s->token_special = vocab.special;
  s->token_special.resize(vocab.tokens.size(), 0);
  s->eos_ids = vocab.eos_ids;
}

// Lookaheads the contextual lexer can never produce, and states they strand.
//
// Lark's scanner of a parser state tries its terminals in a fixed order and
// the first that matches at all wins; a string terminal k that a regexp r of
// the scanner matches in full is produced only by r's "unless" callback
// retyping r's token, and an ignored r's token is dropped even when retyped.
// So a plain string terminal k (no flags) is never produced in a state when
// no non-ignored regexp of its scanner retypes to k and either
//  - k is not in the state's alternation (an ignored regexp embeds it), or
//  - a terminal u earlier in the alternation matches a non-empty prefix of
//    k's text without looking around: u then matches at that position
//    whatever follows, and wins.
// A terminal that is only %declare'd and not produced by the indenter never
// comes at all.
// Every action on k in that state needs k lexed in that state (the contextual
// lexer scans with the state's scanner before any reduction), so it is
// removed; the scanner itself stays Lark's.  CloseDeadStates then removes
// the states this strands.  Both steps remove only moves that no text Lark accepts makes:
// masks shrink exactly by tokens that lead to dead ends (e.g.
// `comment: /#[^\n]*\n/ "\n"` with `%ignore /[ \t\n]+/`).
void PruneUnlexableLookaheads(const Grammar& g, const TerminalAutomaton& a, CompiledStore* s) {
  const int32_t T = static_cast<int32_t>(g.terminals.size());
  const int32_t NT = s->num_parse_terminals;
  const size_t W = static_cast<size_t>(s->scanner_words);
  auto bit = [&](const StoreArray<uint64_t>& v, int32_t st, int32_t t) {
    return (v[static_cast<size_t>(st) * W + t / 64] >> (t & 63)) & 1;
  };
  std::vector<uint8_t> plain(T, 0);
  std::vector<std::vector<int32_t>> blockers(T), retypers(T);
  bool any = false;
  for (int32_t k = 0; k < T; ++k) {
    const TerminalDef& def = g.terminals[k];
    if (!a.IsLexed(k) || !a.IsStringTerminal(k) || !def.flags.empty() || def.value.empty()) continue;
    plain[k] = 1;
    any = true;
    for (int32_t u = 0; u < T; ++u) {
      if (u == k || !a.IsLexed(u)) continue;
      if (!a.IsStringTerminal(u) && !s->terminal_ignored[u] && a.UnlessOk(u, k)) {
        retypers[k].push_back(u);
      }
      if (a.rank(u) < a.rank(k) && !a.LooksAround(u) && a.MatchTerminal(u, def.value) > 0) {
        blockers[k].push_back(u);
      }
    }
  }
  // A %declare'd terminal is produced only by the Python indenter
  // (_INDENT, _DEDENT); any other can never come.
  for (int32_t k = 0; k < T; ++k) {
    if (a.IsLexed(k) || k == s->indenter_indent || k == s->indenter_dedent) continue;
    for (int32_t st = 0; st < s->num_states; ++st) s->action[static_cast<size_t>(st) * NT + k] = 0;
  }
  for (int32_t st = 0; any && st < s->num_states; ++st) {
    for (int32_t k = 0; k < T; ++k) {
      if (!plain[k] || !bit(s->scanner_terms, st, k)) continue;
      bool retyped = false;
      for (int32_t r : retypers[k]) retyped = retyped || bit(s->scanner_terms, st, r);
      if (retyped) continue;
      bool never = !bit(s->scanner_alt, st, k);
      for (int32_t u : blockers[k]) never = never || bit(s->scanner_alt, st, u);
      if (never) s->action[static_cast<size_t>(st) * NT + k] = 0;
    }
  }
}

// States from which no completion exists, whatever the stack below:
// live(q) when q accepts, shifts to a live state, or reduces by A -> x1..xn
// where some state p with a path of n transitions to q has a live
// goto(p, A).  Every state on a completing run of the parser is live, so
// the rest are dead: their actions and the shifts into them go.  Run after
// PruneUnlexableLookaheads, whose removals can leave states stranded.
void CloseDeadStates(CompiledStore* s) {
  const LrTables lr = s->lr();
  const int32_t NT = lr.num_terminals, S = lr.num_states;
  const LrPredecessors preds(lr, -1);
  std::vector<std::vector<int32_t>> dependents(S);  // live(x) makes each of dependents[x] live
  std::vector<int32_t> work;
  std::vector<uint8_t> live(S, 0);
  std::vector<int32_t> targets;
  for (int32_t q = 0; q < S; ++q) {
    targets.clear();
    for (int32_t t = 0; t < NT; ++t) {
      if (lr.AcceptsOn(q, t)) {
        if (!live[q]) live[q] = 1, work.push_back(q);
      } else if (const int32_t to = lr.ShiftTo(q, t); to >= 0) {
        targets.push_back(to);
      } else if (const int32_t r = lr.ReduceBy(q, t); r >= 0) {
        for (int32_t p : preds.Frontier(q, lr.rule_length[r])) {
          const int32_t to = lr.Goto(p, lr.rule_lhs[r]);
          if (to >= 0) targets.push_back(to);
        }
      }
    }
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    for (int32_t x : targets) dependents[x].push_back(q);
  }
  while (!work.empty()) {
    const int32_t x = work.back();
    work.pop_back();
    for (int32_t q : dependents[x]) {
      if (!live[q]) live[q] = 1, work.push_back(q);
    }
  }
  // Removing actions edits the tables (as their builder does).
  for (int32_t st = 0; st < S; ++st) {
    for (int32_t t = 0; t < NT; ++t) {
      const int32_t to = lr.ShiftTo(st, t);
      if (!live[st] || (to >= 0 && !live[to])) s->action[static_cast<size_t>(st) * NT + t] = 0;
    }
  }
}

// ---------------------------------------------------------------- phases
//
// The compile is a pipeline: each phase below takes what the earlier ones
// made and returns its own product; CompileStoreWith runs them in order,
// times them and reports progress.

// Phase 1: the .lark file read into BNF, and the indenter decided.
struct GrammarPhase {
  Grammar g;
  bool use_indenter = false;
  int32_t nl = -1, ind = -1, ded = -1;  // _NEWLINE, _INDENT, _DEDENT (-1: none)
};

Status ReadGrammarPhase(const std::string& grammar_path, const CompileOptions& options,
                        GrammarPhase* out) {
  Grammar& g = out->g;
  LarkReaderOptions ro;
  ro.import_paths = options.import_paths;
  ro.lark_grammars_dir = options.lark_grammars_dir;
  if (!options.start.empty()) ro.start = {options.start};
  ro.warnings = options.warnings;
  CFGMASK_RETURN_IF_ERROR(ReadLarkFile(grammar_path, ro, &g));

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
  if (options.warnings != nullptr) {
    for (int32_t t : g.declared) {
      if (use_indenter && (t == ind || t == ded)) continue;
      options.warnings->push_back(grammar_path + ": warning: %declare'd terminal " +
                                  g.terminals[t].name +
                                  " is produced by nothing (only the Python indenter makes "
                                  "_INDENT and _DEDENT), so the rules that need it never match");
    }
  }
  out->use_indenter = use_indenter;
  out->nl = nl;
  out->ind = ind;
  out->ded = ded;
  return Status::Ok();
}

// Phase 3 (after the LALR tables, parser/lalr.h): the terminal automaton.
Status BuildAutomatonPhase(const GrammarPhase& gp, const CompileOptions& options,
                           std::shared_ptr<TerminalAutomaton>* out) {
  std::unique_ptr<TerminalAutomaton> built;
  TerminalAutomatonOptions ao;
  ao.max_lexer_states = options.max_lexer_states;
  CFGMASK_RETURN_IF_ERROR(
      TerminalAutomaton::Build(gp.g, gp.use_indenter ? gp.nl : -1, ao, &built));
  *out = std::shared_ptr<TerminalAutomaton>(std::move(built));
  return Status::Ok();
}

// The store's grammar side: terminals, the parse tables and each parser
// state's scanner, with the lookaheads no scanner can produce removed.
void FillGrammarTables(const GrammarPhase& gp, const ParseTables& pt, const TerminalAutomaton& a,
                       CompiledStore* out) {
  const Grammar& g = gp.g;
  CompiledStore& s = *out;
  // Terminals.
  const int32_t T = g.num_terminals();
  s.num_terminals = T;
  s.terminal_rank.resize(T);
  s.terminal_ignored.assign(T, 0);
  s.terminal_open_paren.assign(T, 0);
  s.terminal_close_paren.assign(T, 0);
  for (int32_t t = 0; t < T; ++t) {
    s.terminal_names.push_back(g.terminals[t].name);
    s.terminal_rank[t] = a.rank(t);
  }
  for (int32_t t : g.ignore) s.terminal_ignored[t] = 1;
  s.terminal_is_string.assign(T, 0);
  s.unless_offsets.assign(1, 0);
  for (int32_t t = 0; t < T; ++t) {
    s.terminal_is_string[t] = a.IsLexed(t) && a.IsStringTerminal(t);
    if (a.IsLexed(t) && !a.IsStringTerminal(t)) {
      for (int32_t k = 0; k < T; ++k) {
        if (a.IsLexed(k) && a.UnlessOk(t, k)) s.unless_data.push_back(k);
      }
    }
    s.unless_offsets.push_back(static_cast<int32_t>(s.unless_data.size()));
  }
  if (gp.use_indenter) {
    s.indenter_nl = gp.nl;
    s.indenter_indent = gp.ind;
    s.indenter_dedent = gp.ded;
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
    if (gp.use_indenter) in[gp.nl] = 1;
    std::vector<uint8_t> alt = in;
    for (int32_t r = 0; r < T; ++r) {
      if (!in[r] || !a.IsLexed(r) || a.IsStringTerminal(r)) continue;
      for (int32_t k = 0; k < T; ++k) {
        if (in[k] && a.IsLexed(k) && a.Embeds(r, k)) alt[k] = 0;
      }
    }
    for (int32_t t = 0; t < T; ++t) {
      if (!a.IsLexed(t)) continue;  // declared terminals are never scanned
      uint64_t bit = uint64_t{1} << (t & 63);
      if (in[t]) s.scanner_terms[static_cast<size_t>(st) * s.scanner_words + t / 64] |= bit;
      if (alt[t]) s.scanner_alt[static_cast<size_t>(st) * s.scanner_words + t / 64] |= bit;
    }
  }

  PruneUnlexableLookaheads(g, a, &s);
  CloseDeadStates(&s);
}

}  // namespace

// The tokenizer is asked for once the grammar's tables are built (a bad
// grammar is reported before the tokenizer file is read).
using TokenizerSource = std::function<Status(const PreparedTokenizer**)>;

// The driver: runs the phases in order, times each (the store's
// seconds_* figures) and reports progress.
static Status CompileStoreWith(const std::string& grammar_path,
                               const TokenizerSource& get_tokenizer,
                               const CompileOptions& options, CompiledStore* out) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double walk_share = 0;  // of the vocabulary walk, for every report
  auto progress = [&](const char* phase) {
    if (options.progress) options.progress(CompileProgress{phase, walk_share, Since(start)});
  };
  CompiledStore s;
  auto t0 = start;
  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(
               std::chrono::duration<double>(options.max_seconds > 0 ? options.max_seconds : 0));

  progress("grammar");
  GrammarPhase gp;
  CFGMASK_RETURN_IF_ERROR(ReadGrammarPhase(grammar_path, options, &gp));
  if (options.grammar_out) *options.grammar_out = gp.g;
  s.grammar_name = grammar_path.substr(grammar_path.find_last_of('/') + 1);
  s.start = gp.g.start.empty() ? "start" : gp.g.start[0];
  s.stats.seconds_grammar = Since(t0);

  t0 = Clock::now();
  progress("lalr");
  ParseTables pt;
  CFGMASK_RETURN_IF_ERROR(BuildParseTables(gp.g, &pt));
  s.stats.seconds_lalr = Since(t0);

  // seconds_automaton spans the automaton, the tokenizer and the walk.
  t0 = Clock::now();
  progress("automaton");
  std::shared_ptr<TerminalAutomaton> a;
  CFGMASK_RETURN_IF_ERROR(BuildAutomatonPhase(gp, options, &a));

  const auto tok0 = Clock::now();
  progress("tokenizer");
  const PreparedTokenizer* tok = nullptr;
  CFGMASK_RETURN_IF_ERROR(get_tokenizer(&tok));
  s.stats.seconds_tokenizer = Since(tok0);
  CopyVocabulary(tok->tokens, &s);
  VocabTrie subset_trie;
  if (!options.vocab_subset.empty()) subset_trie = VocabTrie::Build(tok->vocab, options.vocab_subset);
  const VocabTrie& trie = options.vocab_subset.empty() ? tok->trie : subset_trie;

  FillGrammarTables(gp, pt, *a, &s);

  progress("walk");
  VocabularyWalkInput input;
  input.grammar_path = grammar_path;
  input.options = &options;
  input.grammar = &gp.g;
  input.indenter_nl = gp.use_indenter ? gp.nl : -1;
  input.automaton = a.get();
  input.trie = &trie;
  input.deadline = deadline;
  input.progress = [&](double share) {
    walk_share = std::max(walk_share, share);  // roots found later lower the share
    progress("walk");
  };
  VocabularyWalk walk;
  CFGMASK_RETURN_IF_ERROR(walk.Run(input, &s));
  walk_share = 1;
  s.stats.seconds_automaton = Since(t0);

  t0 = Clock::now();
  progress("store");
  walk.Freeze(a.get(), &s);
  s.stats.seconds_store = Since(t0);
  if (options.record != nullptr) {
    options.record->automaton = a;
    options.record->roots = walk.roots();
    options.record->indenter_nl = gp.use_indenter ? gp.nl : -1;
    options.record->ignored = s.terminal_ignored.ToVector();
  }
  *out = std::move(s);
  return Status::Ok();
}

namespace {

// Without the trie when the compile walks a subset of the vocabulary.
Status Prepare(const std::string& tokenizer_path, bool with_trie, PreparedTokenizer* out) {
  const auto t0 = std::chrono::steady_clock::now();
  PreparedTokenizer p;
  CFGMASK_RETURN_IF_ERROR(LoadVocabulary(tokenizer_path, &p.vocab));
  FillVocabulary(p.vocab, &p.tokens);
  if (with_trie) p.trie = VocabTrie::Build(p.vocab);
  p.seconds = Since(t0);
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace

Status PrepareTokenizer(const std::string& tokenizer_path, PreparedTokenizer* out) {
  return Prepare(tokenizer_path, true, out);
}

Status CompileStore(const std::string& grammar_path, const std::string& tokenizer_path,
                    const CompileOptions& options, CompiledStore* out) {
  PreparedTokenizer prepared;
  return CompileStoreWith(
      grammar_path,
      [&](const PreparedTokenizer** tok) {
        CFGMASK_RETURN_IF_ERROR(Prepare(tokenizer_path, options.vocab_subset.empty(), &prepared));
        *tok = &prepared;
        return Status::Ok();
      },
      options, out);
}

Status CompileStore(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                    const CompileOptions& options, CompiledStore* out) {
  const Status st = CompileStoreWith(
      grammar_path,
      [&](const PreparedTokenizer** tok) {
        *tok = &tokenizer;
        return Status::Ok();
      },
      options, out);
  if (st.ok()) out->stats.seconds_tokenizer = 0;
  return st;
}

}  // namespace cfgmask
