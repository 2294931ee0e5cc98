// The compile driver: see compile.h.
#include "runtime/compile/compile.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <new>

#include "grammar/base/stop_check.h"
#include "grammar/lark_reader.h"
#include "lexer/terminal_automaton.h"
#include "maskstore/row_codec.h"
#include "maskstore/scanner_tables.h"
#include "parser/lalr.h"
#include "streamline/streamline.h"

namespace cfgmask {

namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---------------------------------------------------------------- phases
//
// The compile is a pipeline: each phase below takes what the earlier ones
// made and returns its own product; CompileStoreWith runs the store phases
// in order, times them and reports progress, and Finish runs streamlining.

// Phase 1: the .lark file read into BNF, and the indenter decided.
struct GrammarPhase {
  Grammar g;
  IndenterTerminals indenter;  // all -1 without the indenter
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
  if (use_indenter) out->indenter = IndenterTerminals{nl, ind, ded};
  return Status::Ok();
}

// Phase 3 (after the LALR tables, parser/lalr.h): the terminal automaton.
Status BuildAutomatonPhase(const GrammarPhase& gp, const CompileOptions& options,
                           StopCheck* stop, std::shared_ptr<TerminalAutomaton>* out) {
  std::unique_ptr<TerminalAutomaton> built;
  TerminalAutomatonOptions ao;
  ao.max_lexer_states = options.max_lexer_states;
  ao.stop = stop;
  CFGMASK_RETURN_IF_ERROR(
      TerminalAutomaton::Build(gp.g, gp.indenter.nl, ao, &built));
  *out = std::shared_ptr<TerminalAutomaton>(std::move(built));
  return Status::Ok();
}

// Seconds as the user wrote them ("3", "0.5"), for messages.
std::string SecondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

// The budget (and `hook`, the progress report where Python looks for
// signals) inside the long loops of the automaton, LALR and streamline
// phases, counted from `start`.
StopCheck BudgetCheck(const std::string& grammar_path, const CompileOptions& options,
                      std::chrono::steady_clock::time_point start,
                      std::function<void(const char*)> hook) {
  return StopCheck(options.max_seconds > 0,
                   start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(options.max_seconds)),
                   grammar_path + ": compile exceeded " + SecondsText(options.max_seconds) +
                       " s (max_seconds, --max-seconds)",
                   std::move(hook));
}

// The vocabulary walk's share of the compile's options.
WalkOptions WalkOptionsOf(const CompileOptions& o) {
  WalkOptions w;
  w.max_lexer_states = o.max_lexer_states;
  w.max_roots = o.max_roots;
  w.max_store_entries = o.max_store_entries;
  w.max_store_rows = o.max_store_rows;
  w.max_seconds = o.max_seconds;
  w.max_walk_hypotheses = o.max_walk_hypotheses;
  w.walk_memo_bytes = o.walk_memo_bytes;
  w.prune_pairs = o.prune_pairs;
  w.num_threads = o.num_threads;
  w.record = o.record;
  return w;
}

// The tokenizer is asked for once the grammar's tables are built (a bad
// grammar is reported before the tokenizer file is read).
using TokenizerSource = std::function<Status(const PreparedTokenizer**)>;

// The driver: runs the phases in order, times each (the store's
// seconds_* figures) and reports progress.
Status CompileStoreWith(const std::string& grammar_path,
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

  // The wall-time budget, checked as each phase ends (the walk also checks
  // it inside, per batch of roots; the LALR construction has its own limit).
  auto over_time = [&](const char* phase) {
    if (options.max_seconds <= 0 || Clock::now() <= deadline) return Status::Ok();
    return Status(ErrorCode::kResourceLimit,
                  grammar_path + ": compile exceeded " + SecondsText(options.max_seconds) +
                      " s (max_seconds, --max-seconds) in the " + phase + " phase");
  };

  StopCheck stop = BudgetCheck(grammar_path, options, start, progress);
  progress("grammar");
  GrammarPhase gp;
  CFGMASK_RETURN_IF_ERROR(ReadGrammarPhase(grammar_path, options, &gp));
  if (options.grammar_out) *options.grammar_out = gp.g;
  s.grammar_name = grammar_path.substr(grammar_path.find_last_of('/') + 1);
  s.start = gp.g.start.empty() ? "start" : gp.g.start[0];
  s.stats.seconds_grammar = Since(t0);
  CFGMASK_RETURN_IF_ERROR(over_time("grammar"));

  t0 = Clock::now();
  progress("lalr");
  ParseTables pt;
  // The LALR construction's limits (table bytes, states, seconds) concern
  // the whole grammar: no position, but the file is named.
  LalrLimits lalr_limits;
  lalr_limits.stop = &stop;
  if (Status st = BuildParseTables(gp.g, &pt, nullptr, lalr_limits); !st.ok()) {
    if (st.code() != ErrorCode::kResourceLimit || st.message().rfind(grammar_path, 0) == 0) {
      return st;
    }
    return Status(st.code(), grammar_path + ": " + st.message());
  }
  s.stats.seconds_lalr = Since(t0);
  CFGMASK_RETURN_IF_ERROR(over_time("lalr"));

  // seconds_automaton spans the automaton, the tokenizer and the walk.
  t0 = Clock::now();
  progress("automaton");
  std::shared_ptr<TerminalAutomaton> a;
  CFGMASK_RETURN_IF_ERROR(BuildAutomatonPhase(gp, options, &stop, &a));
  CFGMASK_RETURN_IF_ERROR(over_time("automaton"));

  const auto tok0 = Clock::now();
  progress("tokenizer");
  const PreparedTokenizer* tok = nullptr;
  CFGMASK_RETURN_IF_ERROR(get_tokenizer(&tok));
  s.stats.seconds_tokenizer = Since(tok0);
  CFGMASK_RETURN_IF_ERROR(over_time("tokenizer"));
  CopyVocabulary(tok->tokens, &s);
  VocabTrie subset_trie;
  if (!options.vocab_subset.empty()) subset_trie = VocabTrie::Build(tok->vocab, options.vocab_subset);
  const VocabTrie& trie = options.vocab_subset.empty() ? tok->trie : subset_trie;

  TerminalSuccessors successors;
  CFGMASK_RETURN_IF_ERROR(ComputeTerminalSuccessors(gp.g, gp.indenter.nl,
                                                   kSuccessorMaxStates, &successors));
  FillGrammarTables(gp.g, pt, *a, gp.indenter, successors, &s);

  progress("walk");
  VocabularyWalkInput input;
  input.grammar_path = grammar_path;
  input.options = WalkOptionsOf(options);
  input.grammar = &gp.g;
  input.indenter_nl = gp.indenter.nl;
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
  CFGMASK_RETURN_IF_ERROR(over_time("store"));
  if (options.record != nullptr) {
    options.record->automaton = a;
    options.record->roots = walk.roots();
    options.record->indenter_nl = gp.indenter.nl;
    options.record->ignored = s.terminal_ignored.ToVector();
  }
  *out = std::move(s);
  return Status::Ok();
}


// Phase "streamline": streamlining (unless turned off) and the statistics,
// after the store build.
Status Finish(const CompileOptions& options, bool streamline, const Grammar& grammar,
              StopCheck* stop, CompiledStore* out, CompileDetails* details) {
  Status st;
  auto& stats = out->stats;
  stats.rows_before_streamlining = static_cast<int64_t>(out->row_seq.size());
  stats.row_bytes_before = RowPayloadBytes(*out);
  if (!streamline) return Status::Ok();
  if (details && details->unstreamlined) *details->unstreamlined = *out;
  if (options.progress) options.progress(CompileProgress{"streamline", 1, 0});
  StreamlineStats sl;
  StreamlineOptions so;
  so.grammar = &grammar;  // the interchangeable step reports its classes
  so.num_threads = options.num_threads;
  so.stop = stop;
  st = StreamlineStore(out, so, &sl);
  if (!st.ok()) return st;
  if (details) {
    details->streamline_steps = sl.steps;
    details->interchangeable.clear();
    for (const auto& cls : sl.interchangeable) {
      details->interchangeable.emplace_back();
      for (int32_t t : cls) details->interchangeable.back().push_back(grammar.terminals[t].name);
    }
  }
  stats.streamlined = 1;
  stats.rows_deleted = sl.rows_deleted;
  stats.never_queries = sl.never_queries;
  stats.rows_after_fold = sl.rows_after;
  stats.row_bytes_after = sl.bytes_after;
  stats.fold_queries = sl.queries;
  stats.fold_proved = sl.proved;
  stats.seconds_streamline = sl.seconds;
  return Status::Ok();
}

constexpr int64_t kMinMaxMemory = int64_t{1} << 20;

// Options a caller can get wrong (the command line checks the same ranges
// before it gets here; the Python package passes them through).
Status CheckOptions(const CompileOptions& o) {
  auto bad = [](const std::string& what) { return Status(ErrorCode::kInvalidArgument, what); };
  if (!defaults::IsIndenterChoice(o.indenter)) {
    return bad("indenter: expected auto, python or none, got '" + o.indenter + "'");
  }
  if (o.max_lexer_states < 1) {
    return bad("max_lexer_states must be at least 1, got " + std::to_string(o.max_lexer_states));
  }
  if (o.max_roots < 1) return bad("max_roots must be at least 1, got " + std::to_string(o.max_roots));
  if (o.num_threads < 0 || o.num_threads > 1024) {
    return bad("num_threads must be in [0, 1024] (0: all cores), got " +
               std::to_string(o.num_threads));
  }
  if (o.max_memory < 0) {
    return bad("max_memory must be a byte count (0: the default), got " +
               std::to_string(o.max_memory));
  }
  // The budget is the process's data limit while the compile runs: below a
  // megabyte, the unwinding of the out-of-memory error itself can fail (an
  // abort instead of the error), so such a budget is refused up front.
  if (o.max_memory > 0 && o.max_memory < kMinMaxMemory) {
    return bad("max_memory must be 0 (the default) or at least " + std::to_string(kMinMaxMemory) +
               " bytes (1M), got " + std::to_string(o.max_memory));
  }
  if (!(o.max_seconds >= 0) || o.max_seconds > 1e9) {
    return bad("max_seconds must be in [0, 1e9] (0: none), got " + std::to_string(o.max_seconds));
  }
  if (o.walk_memo_bytes < 0) {
    return bad("walk_memo_bytes must be a byte count, got " + std::to_string(o.walk_memo_bytes));
  }
  return Status::Ok();
}

// The soft RLIMIT_DATA of the process, lowered for the length of a compile
// to the heap in use plus the budget, so that any allocation past it fails
// (std::bad_alloc, caught below) wherever in the compile it happens.  Nested
// or concurrent compiles share the first one's limit.
class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t max_bytes) {
    std::lock_guard<std::mutex> lock(Mu());
    if (Active()++ > 0) return;
    if (getrlimit(RLIMIT_DATA, &Saved()) != 0) return;
    const uint64_t want = static_cast<uint64_t>(DataBytesInUse()) + static_cast<uint64_t>(max_bytes);
    rlimit lowered = Saved();
    if (Saved().rlim_cur == RLIM_INFINITY || want < Saved().rlim_cur) lowered.rlim_cur = want;
    Set() = setrlimit(RLIMIT_DATA, &lowered) == 0;
  }
  ~MemoryBudget() {
    std::lock_guard<std::mutex> lock(Mu());
    if (--Active() > 0) return;
    if (Set()) setrlimit(RLIMIT_DATA, &Saved());
    Set() = false;
  }

 private:
  static int64_t DataBytesInUse() {
    // /proc/self/statm: size resident shared text lib data dt (pages)
    FILE* f = std::fopen("/proc/self/statm", "r");
    long long v[6] = {0, 0, 0, 0, 0, 0};
    if (f != nullptr) {
      if (std::fscanf(f, "%lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4],
                      &v[5]) != 6) {
        v[5] = 0;
      }
      std::fclose(f);
    }
    return v[5] * sysconf(_SC_PAGESIZE);
  }
  static std::mutex& Mu() { static std::mutex m; return m; }
  static int& Active() { static int n = 0; return n; }
  static rlimit& Saved() { static rlimit r; return r; }
  static bool& Set() { static bool b = false; return b; }
};

template <class Tokenizer>
Status CompileGuarded(const std::string& grammar_path, const Tokenizer& tokenizer,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      CompileDetails* details) {
  CFGMASK_RETURN_IF_ERROR(CheckOptions(options));
  const int64_t budget = options.max_memory > 0 ? options.max_memory : DefaultMaxMemory();
  std::string phase = "grammar";
  const auto start = std::chrono::steady_clock::now();
  CompileOptions tracked = options;
  tracked.progress = [&](const CompileProgress& p) {
    phase = p.phase;
    if (!options.progress) return;
    CompileProgress report = p;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    options.progress(report);
  };
  try {
    MemoryBudget guard(budget);
    Grammar grammar;
    tracked.grammar_out = &grammar;
    CFGMASK_RETURN_IF_ERROR(CompileStore(grammar_path, tokenizer, tracked, out));
    StopCheck stop = BudgetCheck(grammar_path, options, start, [&](const char* phase) {
      tracked.progress(CompileProgress{phase, 1, 0});
    });
    Status fin = Finish(tracked, streamline, grammar, &stop, out, details);
    if (!fin.ok()) *out = CompiledStore();  // a pass stopped half way
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (fin.ok() && options.max_seconds > 0 && took > options.max_seconds) {
      *out = CompiledStore();
      return Status(ErrorCode::kResourceLimit,
                    grammar_path + ": compile exceeded " + SecondsText(options.max_seconds) +
                        " s (max_seconds, --max-seconds) in the streamline phase");
    }
    return fin;
  } catch (const std::bad_alloc&) {
    *out = CompiledStore();
    return Status(ErrorCode::kResourceLimit,
                  grammar_path + ": out of memory in the " + phase + " phase of the compile " +
                      "(memory limit " + std::to_string(budget) +
                      " bytes; raise it with --max-memory / max_memory)");
  } catch (...) {  // from the progress callback
    *out = CompiledStore();
    throw;
  }
}

}  // namespace

Status CompileStore(const std::string& grammar_path, const std::string& tokenizer_path,
                    const CompileOptions& options, CompiledStore* out) {
  PreparedTokenizer prepared;
  return CompileStoreWith(
      grammar_path,
      [&](const PreparedTokenizer** tok) {
        CFGMASK_RETURN_IF_ERROR(
            PrepareTokenizer(tokenizer_path, &prepared, options.vocab_subset.empty()));
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

int64_t DefaultMaxMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return int64_t{8} << 30;
  return static_cast<int64_t>(pages) * page / 4 * 3;
}

namespace {

// Makes the token `eos` names (decimal id, or exact text) the only EOS.
Status SetEos(const std::string& eos, PreparedTokenizer* tok) {
  Vocabulary& v = tok->vocab;
  int64_t id = -1;
  const bool digits = eos.find_first_not_of("0123456789") == std::string::npos && eos.size() < 10;
  if (digits) {
    id = std::stoll(eos);
  } else {
    // By the token's bytes, or by a special token's text ("<|endoftext|>",
    // whose bytes are empty).
    for (int32_t t = 0; t < v.size() && id < 0; ++t) {
      if (v.tokens[t] == eos) id = t;
    }
    for (int32_t t = 0; t < static_cast<int32_t>(v.special_names.size()) && id < 0; ++t) {
      if (v.special_names[t] == eos) id = t;
    }
  }
  if (id < 0 || id >= v.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  "eos: no token " + (digits ? "id " + eos : "'" + eos + "'") +
                      " in the tokenizer's vocabulary of " + std::to_string(v.size()));
  }
  v.special.resize(v.tokens.size(), 0);
  v.special[id] = 1;
  v.eos_ids = {static_cast<int32_t>(id)};
  v.tokens[id].clear();  // as the readers treat the EOS they find: never text
  tok->tokens.eos_ids = v.eos_ids;
  tok->tokens.token_special.resize(v.tokens.size(), 0);
  tok->tokens.token_special[id] = 1;
  tok->trie = VocabTrie::Build(v);
  return Status::Ok();
}

}  // namespace

Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos, CompileDetails* details) {
  if (eos.empty()) return CompileGuarded(grammar_path, tokenizer_path, options, streamline, out, details);
  CFGMASK_RETURN_IF_ERROR(CheckOptions(options));
  PreparedTokenizer tok;
  try {
    CFGMASK_RETURN_IF_ERROR(PrepareTokenizer(tokenizer_path, &tok));
  } catch (const std::bad_alloc&) {
    return Status(ErrorCode::kResourceLimit, tokenizer_path + ": out of memory reading the tokenizer");
  }
  CFGMASK_RETURN_IF_ERROR(SetEos(eos, &tok));
  return CompileGuarded(grammar_path, tok, options, streamline, out, details);
}

Status CompileGrammar(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos, CompileDetails* details) {
  if (eos.empty()) return CompileGuarded(grammar_path, tokenizer, options, streamline, out, details);
  PreparedTokenizer tok = tokenizer;
  CFGMASK_RETURN_IF_ERROR(SetEos(eos, &tok));
  return CompileGuarded(grammar_path, tok, options, streamline, out, details);
}

Status WriteCompiledStore(const CompiledStore& store, const std::string& path) {
  return WriteStoreFile(store, path);
}

}  // namespace cfgmask
