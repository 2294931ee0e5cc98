// The offline pipeline: see compile.h.
#include "runtime/compile.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <new>

#include "maskstore/row_codec.h"
#include "streamline/streamline.h"

namespace cfgmask {

namespace {

// Streamlining (unless turned off) and the statistics, after the store build.
Status Finish(const CompileOptions& options, bool streamline, const Grammar& grammar,
              CompiledStore* out, CompileDetails* details) {
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

// Options a caller can get wrong (the command line checks the same ranges
// before it gets here; the Python package passes them through).
Status CheckOptions(const CompileOptions& o) {
  auto bad = [](const std::string& what) { return Status(ErrorCode::kInvalidArgument, what); };
  if (o.indenter != "auto" && o.indenter != "python" && o.indenter != "none") {
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
    return Finish(tracked, streamline, grammar, out, details);
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
    for (int32_t t = 0; t < v.size() && id < 0; ++t) {
      if (v.tokens[t] == eos) id = t;
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

}  // namespace cfgmask
