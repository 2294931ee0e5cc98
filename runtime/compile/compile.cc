// The compile driver: see compile.h.
#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "grammar/base/stop_check.h"
#include "grammar/lark_reader.h"
#include "lexer/terminal_automaton.h"
#include "maskstore/row_codec.h"
#include "maskstore/scanner_tables.h"
#include "maskstore/store_input.h"
#include "parser/lalr.h"
#include "parser/lexer_modes.h"
#include "streamline/streamline.h"

namespace cfgmask {

namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---------------------------------------------------------------- phases
//
// The compile is a pipeline: each phase below takes what the earlier ones
// made and returns its own product; RunPipeline runs them in layer order
// (grammar/, parser/, lexer/, maskstore/, streamline/), times them and
// reports progress.  A product is handed to the phase that uses it last and
// released there (maskstore/store_input.h, StreamlineCompiledStore), so that
// the driver never goes back to a folder it has left.

// Phase 1: the .lark file read into BNF, and the indenter decided.
Status ReadGrammarPhase(const std::string& grammar_path, const CompileOptions& options,
                        Grammar* out, IndenterTerminals* indenter) {
  Grammar& g = *out;
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
  if (use_indenter) *indenter = IndenterTerminals{nl, ind, ded};
  return Status::Ok();
}

// Phase 3 (after the LALR tables, parser/lalr.h): the terminal automaton.
// Its lexer modes come from the tables (parser/lexer_modes.h).
Status BuildAutomatonPhase(const Grammar& g, const ParseTables& tables,
                           const IndenterTerminals& indenter, const CompileOptions& options,
                           StopCheck* stop, std::shared_ptr<TerminalAutomaton>* out) {
  std::unique_ptr<TerminalAutomaton> built;
  TerminalAutomatonOptions ao;
  ao.max_lexer_states = options.max_lexer_states;
  ao.stop = stop;
  std::vector<int32_t> shared(g.ignore.begin(), g.ignore.end());
  if (indenter.used()) shared.push_back(indenter.nl);
  ao.modes =
      options.lexer_modes
          ? ComputeLexerModes(g, tables, shared, indenter.used() ? indenter.indent : -1,
                              indenter.used() ? indenter.dedent : -1)
          : LexerModes{};
  const int32_t indenter_nl = indenter.used() ? indenter.nl : -1;
  CFGMASK_RETURN_IF_ERROR(TerminalAutomaton::Build(g, indenter_nl, ao, &built));
  *out = std::shared_ptr<TerminalAutomaton>(std::move(built));
  return Status::Ok();
}

// A side task of the compile: `work`, run on a thread of its own beside the
// phases that follow when `parallel` and a thread can be had (the memory
// limit counts a thread's stack), else on the caller's thread by Wait(),
// where the serial compile runs it.  Wait() returns its Status and rethrows
// what it threw (std::bad_alloc under the memory limit); the destructor
// waits for the thread, so that an early return or an exception never leaves
// it running over what it reads.
class SideTask {
 public:
  SideTask(bool parallel, std::function<Status()> work) : work_(std::move(work)) {
    if (!parallel) return;
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
    }
  }
  SideTask(const SideTask&) = delete;
  SideTask& operator=(const SideTask&) = delete;
  ~SideTask() { Join(); }

  Status Wait() {
    Join();
    if (!done_) Run();
    if (thrown_) std::rethrow_exception(thrown_);
    return status_;
  }
  // Whether the work runs on a thread of its own.
  bool on_thread() const { return thread_.joinable(); }
  // Waits for the thread (if any) without running the work or reading it.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    try {
      status_ = work_();
    } catch (...) {
      thrown_ = std::current_exception();
    }
    done_ = true;
  }

  std::function<Status()> work_;
  std::thread thread_;
  Status status_;
  std::exception_ptr thrown_;
  bool done_ = false;
};

// An out-of-memory of a side task, rethrown where the serial compile ran it:
// it names that phase, for the compile's out-of-memory error.
class PhaseOutOfMemory : public std::bad_alloc {
 public:
  explicit PhaseOutOfMemory(const char* phase) : phase_(phase) {}
  const char* phase() const { return phase_; }
  const char* what() const noexcept override { return "out of memory"; }

 private:
  const char* phase_;
};

// Threads the compile may use: options.num_threads, all cores for 0.
int32_t CompileThreads(const CompileOptions& o) {
  if (o.num_threads > 0) return o.num_threads;
  return std::max<int32_t>(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
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

// The tokenizer phase: asked for once the grammar's tables are built (a bad
// grammar is reported before the tokenizer file is read); sets
// input->tokenizer, and input->owned_tokenizer when it made one.
// `prepared`: handed in ready (no tokenizer work in this compile, so the
// store's seconds_tokenizer is 0).
struct TokenizerSource {
  std::function<Status(StorePhaseInput*)> get;
  bool prepared = false;
};

// How far RunPipeline goes: the store phases only (CompileStore), or on
// through the statistics and streamlining (CompileGrammar).
enum class Until { kStore, kStreamline };

// Phase "streamline": streamlining (unless turned off) and the statistics,
// after the store build; the pass owns the grammar and releases it.
Status StreamlinePhase(const CompileOptions& options, bool streamline,
                       std::unique_ptr<const Grammar> grammar, StopCheck* stop, CompiledStore* out,
                       CompileDetails* details) {
  auto& stats = out->stats;
  stats.rows_before_streamlining = static_cast<int64_t>(out->row_seq.size());
  stats.row_bytes_before = RowPayloadBytes(*out);
  if (!streamline) return Status::Ok();
  if (details && details->unstreamlined) *details->unstreamlined = *out;
  if (options.progress) options.progress(CompileProgress{"streamline", 1, 0});
  StreamlineStats sl;
  StreamlineOptions so;
  so.num_threads = options.num_threads;
  so.stop = stop;
  // The interchangeable step reports its classes from the grammar.
  CFGMASK_RETURN_IF_ERROR(StreamlineCompiledStore(out, std::move(grammar), so, &sl));
  if (details) {
    // By name: the store's terminal names are the grammar's (FillGrammarTables).
    details->streamline_steps = sl.steps;
    details->interchangeable.clear();
    for (const auto& cls : sl.interchangeable) {
      details->interchangeable.emplace_back();
      for (int32_t t : cls) details->interchangeable.back().push_back(out->terminal_names[t]);
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

// Where the compile puts its store: the caller's, or one the store phases
// make (the caller holds it only from the compile on).
class StoreSink {
 public:
  explicit StoreSink(CompiledStore* out) : out_(out) {}
  explicit StoreSink(std::unique_ptr<CompiledStore>* made) : made_(made) {}
  // An empty store, at the start of the store phases.
  CompiledStore* Open() {
    if (made_ != nullptr) {
      *made_ = std::make_unique<CompiledStore>();
      return made_->get();
    }
    *out_ = CompiledStore();
    return out_;
  }
  CompiledStore* store() const { return made_ != nullptr ? made_->get() : out_; }
  // After an error: no store (an empty one for the caller's).
  void Clear() {
    if (made_ != nullptr) {
      made_->reset();
    } else {
      *out_ = CompiledStore();
    }
  }

 private:
  CompiledStore* out_ = nullptr;
  std::unique_ptr<CompiledStore>* made_ = nullptr;
};

// The driver: runs the phases in order, times each (the store's seconds_*
// figures) and reports progress.  The store is built in `sink` from the
// store phases on; on an error there it is left empty.
Status RunPipeline(const std::string& grammar_path, const TokenizerSource& tokenizer,
                   const CompileOptions& options, Until until, bool streamline,
                   StoreSink* sink, CompileDetails* details) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double walk_share = 0;  // of the vocabulary walk, for every report
  auto progress = [&](const char* phase) {
    if (options.progress) options.progress(CompileProgress{phase, walk_share, Since(start)});
  };
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
  // grammar/: the BNF grammar, used by every phase up to streamlining.
  progress("grammar");
  auto grammar = std::make_unique<Grammar>();
  IndenterTerminals indenter;
  CFGMASK_RETURN_IF_ERROR(ReadGrammarPhase(grammar_path, options, grammar.get(), &indenter));
  if (options.grammar_out) *options.grammar_out = *grammar;
  const std::string start_rule = grammar->start.empty() ? "start" : grammar->start[0];
  const double seconds_grammar = Since(t0);
  CFGMASK_RETURN_IF_ERROR(over_time("grammar"));

  // lexer/: what may follow each terminal (about 1.5 s of a Python grammar's
  // compile), from the grammar alone and read first by streamlining.  With
  // more than one thread it runs beside the LALR tables, the automaton, the
  // tokenizer and the walk, and is waited for as the store phases end; with
  // one, where the serial compile runs it, after the automaton.  Either way
  // its error is the compile's where the serial compile would meet it
  // (`then`): before any error of a later phase.  The grammar is not changed
  // from here on; the task is joined before the grammar can be released.
  auto successors = std::make_unique<TerminalSuccessors>();
  SideTask successors_task(CompileThreads(options) > 1, [&g = *grammar, nl = indenter.nl,
                                                          out = successors.get()] {
    return ComputeTerminalSuccessors(g, nl, kSuccessorMaxStates, out);
  });
  auto successors_status = [&successors_task]() -> Status {
    try {
      return successors_task.Wait();
    } catch (const std::bad_alloc&) {
      throw PhaseOutOfMemory("automaton");
    }
  };
  // A later phase's error `st`, unless the successors failed first.
  auto then = [&](Status st) {
    Status first = successors_status();
    return first.ok() ? st : first;
  };

  // parser/: the LALR(1) tables.
  t0 = Clock::now();
  progress("lalr");
  auto pt = std::make_unique<ParseTables>();
  // The LALR construction's limits (table bytes, states, seconds) concern
  // the whole grammar: no position, but the file is named.
  LalrLimits lalr_limits;
  lalr_limits.stop = &stop;
  if (Status st = BuildParseTables(*grammar, pt.get(), nullptr, lalr_limits); !st.ok()) {
    if (st.code() != ErrorCode::kResourceLimit || st.message().rfind(grammar_path, 0) == 0) {
      return st;
    }
    return Status(st.code(), grammar_path + ": " + st.message());
  }
  const double seconds_lalr = Since(t0);
  CFGMASK_RETURN_IF_ERROR(over_time("lalr"));

  // lexer/: the terminal automaton (and, in the serial compile, what may
  // follow each terminal).  seconds_automaton spans these, the tokenizer and
  // the walk.
  t0 = Clock::now();
  progress("automaton");
  std::shared_ptr<TerminalAutomaton> a;
  CFGMASK_RETURN_IF_ERROR(BuildAutomatonPhase(*grammar, *pt, indenter, options, &stop, &a));
  if (!successors_task.on_thread()) CFGMASK_RETURN_IF_ERROR(successors_status());
  CFGMASK_RETURN_IF_ERROR(over_time("automaton"));

  // maskstore/: the tokenizer, then the store phases, which take over the
  // products they use last (released when `in` goes, at the end of the
  // block).
  {
    const auto tok0 = Clock::now();
    progress("tokenizer");
    StorePhaseInput in;
    // Declared after `in`, so gone before it: the successors task is joined
    // before `in` can release the grammar, on every way out of the block.
    struct JoinFirst {
      SideTask* task;
      ~JoinFirst() { task->Join(); }
    } join_first{&successors_task};
    if (Status st = tokenizer.get(&in); !st.ok()) return then(st);
    const double seconds_tokenizer = tokenizer.prepared ? 0 : Since(tok0);
    if (Status st = over_time("tokenizer"); !st.ok()) return then(st);
    in.grammar = grammar.get();
    in.indenter = indenter;
    in.parse_tables = std::move(pt);
    in.automaton = std::move(a);
    if (until == Until::kStore || !streamline) in.owned_grammar = std::move(grammar);
    in.UseSubset(options.vocab_subset);

    CompiledStore& s = *sink->Open();
    auto fail = [&](Status st) {
      sink->Clear();
      return then(st);
    };
    s.grammar_name = grammar_path.substr(grammar_path.find_last_of('/') + 1);
    s.start = start_rule;
    s.stats.seconds_grammar = seconds_grammar;
    s.stats.seconds_lalr = seconds_lalr;
    s.stats.seconds_tokenizer = seconds_tokenizer;
    CopyVocabulary(in.tokenizer->tokens, &s);
    FillGrammarTables(*in.grammar, *in.parse_tables, *in.automaton, in.indenter, &s);

    progress("walk");
    VocabularyWalkInput input;
    input.grammar_path = grammar_path;
    input.options = WalkOptionsOf(options);
    input.grammar = in.grammar;
    input.indenter_nl = in.indenter.nl;
    input.automaton = in.automaton.get();
    input.trie = &in.trie();
    input.deadline = deadline;
    input.progress = [&](double share) {
      walk_share = std::max(walk_share, share);  // roots found later lower the share
      progress("walk");
    };
    VocabularyWalk walk;
    if (Status st = walk.Run(input, &s); !st.ok()) return fail(st);
    walk_share = 1;
    s.stats.seconds_automaton = Since(t0);

    t0 = Clock::now();
    progress("store");
    walk.Freeze(in.automaton.get(), &s);
    if (Status st = successors_status(); !st.ok()) return fail(st);
    in.successors = std::move(successors);
    FillSuccessorTables(*in.successors, &s);
    s.stats.seconds_store = Since(t0);
    if (Status st = over_time("store"); !st.ok()) return fail(st);
    if (options.record != nullptr) {
      options.record->automaton = in.automaton;
      options.record->roots = walk.roots();
      options.record->indenter_nl = in.indenter.nl;
      options.record->ignored = s.terminal_ignored.ToVector();
    }
  }
  if (until == Until::kStore) return Status::Ok();

  // streamline/: the pass, the grammar's last user.
  return StreamlinePhase(options, streamline, std::move(grammar), &stop, sink->store(), details);
}

constexpr int64_t kMinMaxMemory = int64_t{1} << 20;

// Options a caller can get wrong (the command line checks the same ranges
// before it gets here; the Python package passes them through).
Status CheckOptions(const CompileOptions& o) {
  auto bad = [](const std::string& what) { return Status(ErrorCode::kInvalidArgument, what); };
  if (!IsIndenterChoice(o.indenter)) {
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

Status CompileGuarded(const std::string& grammar_path, const TokenizerSource& tokenizer,
                      const CompileOptions& options, bool streamline, StoreSink* out,
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
    Status fin = RunPipeline(grammar_path, tokenizer, tracked, Until::kStreamline, streamline, out,
                             details);
    if (!fin.ok()) out->Clear();  // a pass stopped half way
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (fin.ok() && options.max_seconds > 0 && took > options.max_seconds) {
      out->Clear();
      return Status(ErrorCode::kResourceLimit,
                    grammar_path + ": compile exceeded " + SecondsText(options.max_seconds) +
                        " s (max_seconds, --max-seconds) in the streamline phase");
    }
    return fin;
  } catch (const std::bad_alloc& e) {
    out->Clear();
    if (const auto* side = dynamic_cast<const PhaseOutOfMemory*>(&e)) phase = side->phase();
    return Status(ErrorCode::kResourceLimit,
                  grammar_path + ": out of memory in the " + phase + " phase of the compile " +
                      "(memory limit " + std::to_string(budget) +
                      " bytes; raise it with --max-memory / max_memory)");
  } catch (...) {  // from the progress callback
    out->Clear();
    throw;
  }
}

}  // namespace

namespace {

// The tokenizer read from `tokenizer_path` (without its trie for a
// vocabulary subset: the store phases build their own), `eos` applied.
TokenizerSource ReadTokenizer(const std::string& tokenizer_path, const CompileOptions& options,
                              const std::string& eos) {
  return {[&tokenizer_path, &options, &eos](StorePhaseInput* in) {
            auto prepared = std::make_unique<PreparedTokenizer>();
            CFGMASK_RETURN_IF_ERROR(
                PrepareTokenizer(tokenizer_path, prepared.get(), options.vocab_subset.empty()));
            if (!eos.empty()) CFGMASK_RETURN_IF_ERROR(SetEos(eos, prepared.get()));
            in->tokenizer = prepared.get();
            in->owned_tokenizer = std::move(prepared);
            return Status::Ok();
          },
          false};
}

// A tokenizer prepared once for many compiles; with `eos`, a copy of it
// with that EOS.
TokenizerSource PreparedSource(const PreparedTokenizer& tokenizer, const std::string& eos) {
  if (eos.empty()) {
    return {[&tokenizer](StorePhaseInput* in) {
              in->tokenizer = &tokenizer;
              return Status::Ok();
            },
            true};
  }
  return {[&tokenizer, &eos](StorePhaseInput* in) {
            auto copy = std::make_unique<PreparedTokenizer>(tokenizer);
            CFGMASK_RETURN_IF_ERROR(SetEos(eos, copy.get()));
            in->tokenizer = copy.get();
            in->owned_tokenizer = std::move(copy);
            return Status::Ok();
          },
          true};
}

}  // namespace

Status CompileStore(const std::string& grammar_path, const std::string& tokenizer_path,
                    const CompileOptions& options, CompiledStore* out) {
  const std::string no_eos;
  StoreSink sink(out);
  try {
    return RunPipeline(grammar_path, ReadTokenizer(tokenizer_path, options, no_eos), options,
                       Until::kStore, false, &sink, nullptr);
  } catch (...) {  // from the progress callback: no half-built store
    sink.Clear();
    throw;
  }
}

Status CompileStore(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                    const CompileOptions& options, CompiledStore* out) {
  const std::string no_eos;
  StoreSink sink(out);
  try {
    return RunPipeline(grammar_path, PreparedSource(tokenizer, no_eos), options, Until::kStore,
                       false, &sink, nullptr);
  } catch (...) {  // from the progress callback: no half-built store
    sink.Clear();
    throw;
  }
}

bool IsIndenterChoice(std::string_view v) {
  for (std::string_view c : defaults::kIndenterChoices) {
    if (v == c) return true;
  }
  return false;
}

int64_t DefaultMaxMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return int64_t{8} << 30;
  return static_cast<int64_t>(pages) * page / 4 * 3;
}

Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos, CompileDetails* details) {
  StoreSink sink(out);
  return CompileGuarded(grammar_path, ReadTokenizer(tokenizer_path, options, eos), options,
                        streamline, &sink, details);
}

Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline,
                      std::unique_ptr<CompiledStore>* out, const std::string& eos,
                      CompileDetails* details) {
  StoreSink sink(out);
  return CompileGuarded(grammar_path, ReadTokenizer(tokenizer_path, options, eos), options,
                        streamline, &sink, details);
}

Status CompileGrammar(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos, CompileDetails* details) {
  StoreSink sink(out);
  return CompileGuarded(grammar_path, PreparedSource(tokenizer, eos), options, streamline, &sink,
                        details);
}

Status WriteCompiledStore(const CompiledStore& store, const std::string& path) {
  return WriteStoreFile(store, path);
}

}  // namespace cfgmask
