// The Python extension `cfgmask._core`: the compiled store, the decoding
// session and the batch calls of runtime/, as pybind11 classes.  No engine
// logic here: arguments are checked for shape and type, the GIL is released
// around every engine call, and a failing Status becomes `cfgmask.Error` (a
// ValueError) carrying the engine's one-line message.  The Python-facing API
// (GrammarMatcher, logits processors, `python -m cfgmask generate`) is the
// pure-Python package beside this file.
// Tested by tests/py/test_package.py, test_package_processors.py and
// test_package_llama.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "grammar/base/check.h"
#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "runtime/batch.h"
#include "grammar/base/utf8.h"
#include "runtime/completion.h"
#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"
#include "runtime/jump_forward.h"
#include "runtime/shared_session.h"
#include "runtime/mask_kernels.h"
#include "runtime/tools/report.h"
#include "runtime/row_memo.h"
#include "runtime/session.h"

namespace py = pybind11;

namespace cfgmask {
namespace {

// Raised as cfgmask.Error.  Messages quote user bytes (a refused string, a
// grammar's text): MessageLine makes them one line of valid UTF-8 under 1,000
// bytes (bytes that are not UTF-8 become \xNN), so that Python can make a
// str of the message.
struct EngineError : std::runtime_error {
  explicit EngineError(const std::string& what) : std::runtime_error(MessageLine(what)) {}
};

void ThrowIfError(const Status& st) {
  if (!st.ok()) throw EngineError(st.message());
}

using StorePtr = std::shared_ptr<CompiledStore>;

// The row memo shared by every session of one store (runtime/row_memo.h):
// matchers opened per request or per batch row keep each other's hits.  It
// is kept while its store is alive (its entry is dropped at the next call
// after the store is gone, and a new store at a freed address never gets a
// dead store's memo).
std::shared_ptr<RowMemo> MemoFor(const StorePtr& store) {
  static std::mutex mu;
  static std::map<const CompiledStore*, std::pair<std::weak_ptr<CompiledStore>, std::shared_ptr<RowMemo>>>
      memos;
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = memos.begin(); it != memos.end();) {  // the memos of dead stores
    it = it->second.first.expired() ? memos.erase(it) : std::next(it);
  }
  auto& slot = memos[store.get()];
  if (!slot.second || slot.first.lock() != store) {
    slot = {store, std::make_shared<RowMemo>(store.get(), SessionLimits{}.memo_bytes)};
  }
  return slot.second;
}

// What the completion search and the forced tokenizer precompute from a
// store (Completer's cost tables, JumpForwarder's vocabulary trie: tens of
// milliseconds at 49k-152k tokens), built once per store at first use and
// kept while the store is alive, as the row memo is.  A Completer keeps a
// memo while it searches, so searches on one store take turns (`mu`); the
// forwarder is read-only once built.
struct StoreSearch {
  std::mutex mu;
  std::unique_ptr<Completer> completer;
  std::once_flag forwarder_once;
  std::unique_ptr<JumpForwarder> forwarder;
};

std::shared_ptr<StoreSearch> SearchFor(const std::shared_ptr<CompiledStore>& store) {
  static std::mutex mu;
  static std::map<const CompiledStore*,
                  std::pair<std::weak_ptr<CompiledStore>, std::shared_ptr<StoreSearch>>>
      searches;
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = searches.begin(); it != searches.end();) {
    it = it->second.first.expired() ? searches.erase(it) : std::next(it);
  }
  auto& slot = searches[store.get()];
  if (!slot.second || slot.first.lock() != store) slot = {store, std::make_shared<StoreSearch>()};
  return slot.second;
}

// The store's cached Completer, held for one search.
class HeldCompleter {
 public:
  explicit HeldCompleter(const std::shared_ptr<CompiledStore>& store)
      : search_(SearchFor(store)), lock_(search_->mu) {
    if (!search_->completer) search_->completer = std::make_unique<Completer>(*store);
  }
  Completer& operator*() { return *search_->completer; }

 private:
  std::shared_ptr<StoreSearch> search_;
  std::lock_guard<std::mutex> lock_;
};

const JumpForwarder& ForwarderFor(const std::shared_ptr<CompiledStore>& store,
                                  std::shared_ptr<StoreSearch>* keep) {
  *keep = SearchFor(store);
  StoreSearch& s = **keep;
  std::call_once(s.forwarder_once, [&] { s.forwarder = std::make_unique<JumpForwarder>(*store); });
  return *s.forwarder;
}

// The result of Session::Advance / AdvanceBytes for Python: true when it
// moved, false when the grammar refused the token or text (kInvalidToken: the
// session is unchanged; token ids out of range are refused before, as
// errors), and every other failure raised: a refusal and an error are never
// confused (a busy matcher, a damaged store or a limit is no refusal).
bool Refused(const Status& st) {
  if (st.ok()) return true;
  if (st.code() == ErrorCode::kInvalidToken) return false;
  throw EngineError(st.message());
}

// The longest suffix (completion in the middle of a file) a session takes:
// Session::SetSuffix reads it again once per step, so its cost is that of a
// step per byte (about 2 us per byte: 64 KiB, some 0.1 s per step); a longer
// one is an error, never a step that takes seconds.
constexpr size_t kMaxSuffixBytes = 64 * 1024;

// A session and the store it reads, kept alive together.
// A session is used by one thread at a time (stores are shared freely): a
// call that finds its session busy in another thread raises instead of
// racing on it (the guard is the decode library's, runtime/shared_session.h;
// `session` is reached only under an InUse).
struct PySession {
  StorePtr store;
  SharedSession shared;
  Session& session = shared.unguarded();
  // Nanoseconds the last `step` spent accepting tokens, filling the mask
  // and masking the logits (what a processor benchmark subtracts).
  int64_t step_ns[3] = {0, 0, 0};
  PySession(StorePtr s, SessionLimits limits)
      : store(std::move(s)), shared(store.get(), limits, MemoFor(store)) {}
  PySession(StorePtr s, Session forked) : store(std::move(s)), shared(std::move(forked)) {}
};

// Holds a session for the length of one call; a busy session raises
// (SharedSession's kBusy error, "in use by another thread"), never a False.
class InUse {
 public:
  explicit InUse(const PySession& s) : hold_(const_cast<PySession&>(s).shared.Take()) {
    if (!hold_.ok()) {
      throw EngineError(
          "this GrammarMatcher is in use by another thread; a matcher serves one thread at a "
          "time (fork() gives each thread its own)");
    }
  }
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;

 private:
  SharedSession::Hold hold_;
};

// A writable, C-contiguous buffer (numpy array, memoryview, ...) of 1 or 2
// dimensions: its data, rows (1 for a vector), row length and item format.
struct Buffer2D {
  void* data = nullptr;
  int64_t rows = 0, cols = 0;
  std::string format;
  int64_t itemsize = 0;
};

Buffer2D WritableBuffer(const py::buffer& b, const char* what) {
  py::buffer_info info = b.request(/*writable=*/true);
  Buffer2D out;
  out.data = info.ptr;
  out.format = info.format;
  out.itemsize = info.itemsize;
  if (info.ndim == 1) {
    out.rows = 1;
    out.cols = info.shape[0];
  } else if (info.ndim == 2) {
    out.rows = info.shape[0];
    out.cols = info.shape[1];
  } else {
    throw py::type_error(std::string(what) + " must have 1 or 2 dimensions");
  }
  const bool contiguous =
      info.strides.back() == info.itemsize &&
      (info.ndim == 1 || out.rows <= 1 || info.strides[0] == out.cols * info.itemsize);
  if (!contiguous) throw py::type_error(std::string(what) + " must be C-contiguous");
  return out;
}

// The format codes of a 4-byte signed integer ("i", "<i", "=i", "l" on some
// platforms) all end in 'i' or 'l' with itemsize 4.
bool IsInt32(const Buffer2D& b) {
  return b.itemsize == 4 && !b.format.empty() &&
         (b.format.back() == 'i' || b.format.back() == 'l') && b.format[0] != '>';
}

Buffer2D BitmaskBuffer(const py::buffer& b) {
  Buffer2D out = WritableBuffer(b, "bitmask");
  if (!IsInt32(out)) throw py::type_error("bitmask must be an int32 array");
  return out;
}

// Store.stats(): the figures of runtime/tools/report.h as a dict.
py::dict StoreStats(const CompiledStore& store) {
  bool rows_ok;
  {
    py::gil_scoped_release release;
    rows_ok = store.AllRowsOk();
  }
  if (!rows_ok) throw EngineError(DamagedRowsMessage());
  const StoreReport r = MakeStoreReport(store, "", 0);
  py::dict d;
  d["grammar"] = r.grammar;
  d["start"] = r.start;
  d["tokenizer"] = r.tokenizer_name;
  d["vocab_size"] = r.vocab_size;
  d["eos_ids"] = r.eos_ids;
  d["terminals"] = r.terminals;
  d["rules"] = r.rules;
  d["nonterminals"] = r.nonterminals;
  d["lalr_states"] = r.lalr_states;
  d["lexer_states"] = r.lexer_states;
  d["roots"] = r.roots;
  d["nfa_transition_entries"] = r.nfa_transition_entries;
  d["rows"] = r.rows;
  d["rows_before_streamlining"] = r.rows_before_streamlining;
  d["terminal_sequence_keys"] = r.terminal_sequence_keys;
  d["simulated_pairs"] = r.simulated_pairs;
  py::dict row_kinds;
  row_kinds["list"] = r.rows_list;
  row_kinds["complement"] = r.rows_complement;
  row_kinds["bitset"] = r.rows_bitset;
  d["row_kinds"] = row_kinds;
  d["memory_bytes"] = r.memory_bytes;
  py::dict seconds;
  for (const auto& [phase, value] : r.seconds) seconds[py::str(phase)] = value;
  d["seconds"] = seconds;
  // Rows after each streamlining step (the same figures as `cfgmask stats --json`).
  py::list steps;
  py::dict first;
  first["step"] = "nfa_transition";
  first["rows"] = r.rows_before_streamlining;
  first["row_bytes"] = r.row_bytes_before;
  steps.append(first);
  if (r.streamlined) {
    py::dict never, fold;
    never["step"] = "delete_never_legal";
    never["rows"] = r.rows_before_streamlining - r.rows_deleted;
    never["rows_deleted"] = r.rows_deleted;
    steps.append(never);
    fold["step"] = "fold_always_legal";
    fold["rows"] = r.rows_after_fold;
    fold["row_bytes"] = r.row_bytes_after;
    fold["rows_folded"] = r.rows_folded;
    steps.append(fold);
  }
  py::dict streamlining;
  streamlining["applied"] = r.streamlined;
  streamlining["steps"] = steps;
  d["streamlining"] = streamlining;
  return d;
}

using TokenizerPtr = std::shared_ptr<PreparedTokenizer>;  // read-only once made

// A new T filled by `fill` (an engine call returning a Status) without the
// GIL; an error becomes cfgmask.Error.
template <class T, class F>
std::shared_ptr<T> MakeWithoutGil(const F& fill) {
  auto out = std::make_shared<T>();
  Status st;
  {
    py::gil_scoped_release release;
    st = fill(out.get());
  }
  ThrowIfError(st);
  return out;
}

TokenizerPtr PrepareTokenizerFile(const std::string& path) {
  return MakeWithoutGil<PreparedTokenizer>(
      [&](PreparedTokenizer* tok) { return PrepareTokenizer(path, tok); });
}

// Thrown through the engine when the Python progress callback raised; the
// Python error stays set on the thread until the GIL is taken back.
struct ProgressRaised {};

// Lark's grammars folder, for `%import python.X` and the like (common.lark is
// built in): $CFGMASK_LARK_GRAMMARS, else the lark package's when installed.
std::string LarkGrammarsDir() {
  if (const char* env = std::getenv("CFGMASK_LARK_GRAMMARS"); env != nullptr && *env != 0) return env;
  try {
    py::object file = py::module_::import("lark").attr("__file__");
    return py::module_::import("os.path").attr("dirname")(file).cast<std::string>() + "/grammars";
  } catch (const py::error_already_set&) {
    return "";
  }
}

// Store.compile: `Tokenizer` is a file path or a prepared tokenizer.
// `progress` (None or a callable) gets (phase, walk fraction, seconds).
template <class Tokenizer>
StorePtr CompileStoreWith(const std::string& grammar_path, const Tokenizer& tokenizer,
                          const std::string& start, const std::string& indenter,
                          int32_t max_lexer_states, const std::vector<std::string>& import_paths,
                          bool streamline, int32_t num_threads, bool prune_pairs,
                          int32_t max_roots, int64_t max_memory, const std::string& eos,
                          const py::object& progress, double max_seconds, bool lexer_modes) {
  CompileOptions options;
  // At every progress report (each phase, each batch of roots of the walk)
  // the compile takes the GIL to look for a signal (Ctrl-C: KeyboardInterrupt
  // stops the compile) and to call the caller's callback.
  options.progress = [&progress](const CompileProgress& p) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw ProgressRaised{};
    if (progress.is_none()) return;
    try {
      progress(p.phase, p.walk_fraction, p.seconds);
    } catch (py::error_already_set& e) {
      e.restore();
      throw ProgressRaised{};
    }
  };
  options.max_seconds = max_seconds;
  options.max_roots = max_roots;
  options.max_memory = max_memory;
  options.num_threads = num_threads;
  options.prune_pairs = prune_pairs;
  options.lexer_modes = lexer_modes;
  options.start = start;
  options.indenter = indenter;
  options.max_lexer_states = max_lexer_states;
  options.import_paths = import_paths;
  options.lark_grammars_dir = LarkGrammarsDir();
  std::vector<std::string> warnings;
  options.warnings = &warnings;
  StorePtr store;
  try {
    store = MakeWithoutGil<CompiledStore>([&](CompiledStore* out) {
      if constexpr (std::is_same_v<Tokenizer, TokenizerPtr>) {
        return CompileGrammar(grammar_path, *tokenizer, options, streamline, out, eos);
      } else {
        return CompileGrammar(grammar_path, tokenizer, options, streamline, out, eos);
      }
    });
  } catch (const ProgressRaised&) {
    throw py::error_already_set();  // the callback's own exception
  }
  // Likely mistakes the compile accepted, as Python warnings (UserWarning).
  py::object warn = py::module_::import("warnings").attr("warn");
  for (const std::string& w : warnings) warn(MessageLine(w));
  return store;
}

StorePtr LoadStoreFile(const std::string& path, bool verify) {
  return MakeWithoutGil<CompiledStore>(
      [&](CompiledStore* store) { return ReadStoreFile(path, store, {.verify = verify}); });
}

void FillMaskRow(PySession& s, const py::buffer& bitmask, int64_t index) {
  const Buffer2D buf = BitmaskBuffer(bitmask);
  const int64_t rows = buf.rows, words = buf.cols;
  if (index < 0 || index >= rows) {
    throw py::index_error("bitmask row " + std::to_string(index) + " out of range [0, " +
                          std::to_string(rows) + ")");
  }
  const int32_t need = s.store->mask_words();
  if (words < need) {
    throw EngineError("bitmask rows have " + std::to_string(words) + " words, the vocabulary needs " +
                      std::to_string(need));
  }
  uint32_t* row = static_cast<uint32_t*>(buf.data) + index * words;
  InUse in_use(s);
  py::gil_scoped_release release;
  std::memset(row + need, 0, sizeof(uint32_t) * static_cast<size_t>(words - need));
  s.session.FillMask(row);
  if (Status st = s.session.store_status(); !st.ok()) throw EngineError(st.message());
}

// A logits buffer as a processor is handed it: 1 or 2 dimensions, any
// strides that are whole elements (llama-cpp-python's logits are a field of
// an array of records), float32, float16, or bfloat16 seen as int16/uint16
// (numpy has no bfloat16; torch's view(torch.int16).numpy() is one).
struct LogitsBuffer {
  char* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 0;  // in elements
  LogitsDType dtype = LogitsDType::kFloat32;
};

LogitsBuffer LogitsOf(const py::buffer& b, bool bf16) {
  py::buffer_info info = b.request(/*writable=*/true);
  LogitsBuffer out;
  const char f = info.format.empty() ? '?' : info.format.back();
  if (bf16) {
    if (info.itemsize != 2 || (f != 'h' && f != 'H')) {
      throw py::type_error("bfloat16 logits must be passed as an int16 view, got format '" +
                           info.format + "'");
    }
    out.dtype = LogitsDType::kBFloat16;
  } else if (info.itemsize == 4 && f == 'f') {
    out.dtype = LogitsDType::kFloat32;
  } else if (info.itemsize == 2 && f == 'e') {
    out.dtype = LogitsDType::kFloat16;
  } else {
    throw py::type_error("logits must be float32, float16 or bfloat16, got format '" +
                         info.format + "'");
  }
  if (info.ndim != 1 && info.ndim != 2) throw py::type_error("logits must have 1 or 2 dimensions");
  out.data = static_cast<char*>(info.ptr);
  out.rows = info.ndim == 1 ? 1 : info.shape[0];
  out.cols = info.shape[info.ndim - 1];
  const int64_t cs = info.strides[info.ndim - 1], rs = info.ndim == 1 ? 0 : info.strides[0];
  if (cs <= 0 || cs % info.itemsize != 0 || rs < 0 || rs % info.itemsize != 0) {
    throw py::type_error("logits strides must be positive whole elements");
  }
  out.col_stride = cs / info.itemsize;
  out.row_stride = rs / info.itemsize;
  return out;
}

// Masks row r of `l` in place by a bitmask row.
void MaskLogitsRow(const LogitsBuffer& l, int64_t r, const int32_t* mask, int32_t words) {
  const int64_t itemsize = l.dtype == LogitsDType::kFloat32 ? 4 : 2;
  ThrowIfError(ApplyTokenBitmaskStridedCpu(l.data + r * l.row_stride * itemsize, l.dtype,
                                           static_cast<int32_t>(l.cols), l.col_stride, mask,
                                           words));
}

// Token ids handed by a framework: int32 or int64, 1 or 2 dimensions, any
// strides; element (r, i).
struct TokenIds {
  const char* data = nullptr;
  int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0, itemsize = 0;
  int64_t At(int64_t r, int64_t i) const {
    const char* p = data + r * row_stride + i * col_stride;
    if (itemsize == 4) {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
};

TokenIds TokenIdsOf(const py::buffer& b) {
  py::buffer_info info = b.request();
  const char f = info.format.empty() ? '?' : info.format.back();
  if ((info.itemsize != 4 && info.itemsize != 8) || (f != 'i' && f != 'l' && f != 'q') ||
      info.format[0] == '>') {
    throw py::type_error("token ids must be an int32 or int64 array, got format '" + info.format +
                         "'");
  }
  if (info.ndim != 1 && info.ndim != 2) throw py::type_error("token ids must have 1 or 2 dimensions");
  TokenIds out;
  out.data = static_cast<const char*>(info.ptr);
  out.itemsize = info.itemsize;
  out.rows = info.ndim == 1 ? 1 : info.shape[0];
  out.cols = info.shape[info.ndim - 1];
  out.col_stride = info.strides[info.ndim - 1];
  out.row_stride = info.ndim == 1 ? 0 : info.strides[0];
  return out;
}

int64_t NanosSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
      .count();
}

// Accepts row `r` of `tokens` into `s`, up to a stop token (what follows
// one is the framework's padding); sets *taken to the count accepted.  On a
// refusal rolls the call's tokens back and returns the refused token's
// index, else -1.
// Session.step: one logits-processor call in one engine call.  Accepts
// `tokens` (the ids the sampler added since the last call), then fills
// `bitmask` (one row) with the next-token mask, or with exactly the ids of
// `only` when given (steering), and masks `logits` (one row) in place.
// Returns -1, or the index of the first refused token, with the session
// left as before the call and nothing masked.
// A step's engine part, the GIL released by the caller: accepts ids
// [begin, end) of row 0, fills `row` (`words` words; with `only`, those
// tokens instead of the mask) and masks row 0 of `l` with it, timing each
// part (Session.step_times).  -1, or the index from `begin` of the id the
// grammar refuses.  (Session.step, and the llama.cpp hook on its own row.)
int64_t AcceptFillMask(PySession& s, const TokenIds& ids, int64_t begin, int64_t end,
                       const LogitsBuffer& l, uint32_t* row, int64_t words,
                       const std::vector<int32_t>& only) {
  auto t0 = std::chrono::steady_clock::now();
  int64_t taken = 0;
  const int64_t refused = AcceptTokens(
      &s.session, end - begin, [&](int64_t i) { return ids.At(0, begin + i); }, &taken);
  if (refused >= 0) return refused;
  s.step_ns[0] = NanosSince(t0);
  t0 = std::chrono::steady_clock::now();
  const int32_t need = s.store->mask_words();
  if (only.empty()) {
    std::memset(row + need, 0, sizeof(uint32_t) * static_cast<size_t>(words - need));
    s.session.FillMask(row);
  } else {
    std::memset(row, 0, sizeof(uint32_t) * static_cast<size_t>(words));
    for (int32_t t : only) row[t >> 5] |= 1u << (t & 31);
  }
  s.step_ns[1] = NanosSince(t0);
  t0 = std::chrono::steady_clock::now();
  MaskLogitsRow(l, 0, reinterpret_cast<const int32_t*>(row), static_cast<int32_t>(words));
  s.step_ns[2] = NanosSince(t0);
  return -1;
}

int64_t SessionStep(PySession& s, const py::buffer& tokens, const py::buffer& logits,
                    const py::buffer& bitmask, const std::vector<int32_t>& only, bool bf16) {
  const TokenIds ids = TokenIdsOf(tokens);
  const LogitsBuffer l = LogitsOf(logits, bf16);
  const Buffer2D mask = BitmaskBuffer(bitmask);
  const int32_t need = s.store->mask_words();
  if (mask.rows != 1 || l.rows != 1 || ids.rows != 1) {
    throw EngineError("Session.step takes one row of token ids, logits and bitmask");
  }
  if (mask.cols < need) {
    throw EngineError("bitmask rows have " + std::to_string(mask.cols) +
                      " words, the vocabulary needs " + std::to_string(need));
  }
  if (l.cols < s.store->vocab_size) {
    throw EngineError("logits have " + std::to_string(l.cols) +
                      " entries, fewer than the grammar store's vocabulary of " +
                      std::to_string(s.store->vocab_size) + ": wrong tokenizer?");
  }
  for (int32_t t : only) {
    if (t < 0 || t >= s.store->vocab_size) throw py::index_error("token id out of range");
  }
  InUse in_use(s);
  py::gil_scoped_release release;
  return AcceptFillMask(s, ids, 0, ids.cols, l, static_cast<uint32_t*>(mask.data), mask.cols, only);
}

// LlamaCppLogitsProcessor.attach's hook (cfgmask.processors), in the engine:
// llama-cpp-python's `Llama.sample` on one instance is replaced by this
// callable, which, per call, accepts the ids sampled since the last call
// (read from the Llama's own `input_ids` buffer up to `n_tokens`), fills the
// processor's bitmask and masks, in place, the llama.cpp context's own
// contiguous float32 logits row -- the one `Llama.sample` is about to read,
// at get_logits(ctx, idx - n_tokens or -1) -- then calls the original
// `sample` with the same arguments.  No Python code runs between the model's
// forward pass and the sampler but this call: no numpy view of the row, no
// ctypes call, no slicing; the GIL is released for the accept, the fill and
// the masking.  A Python call after the forward pass finds the interpreter's
// code and objects out of the caches (the weights went through them), so
// each bytecode the hook saves is worth several of a warm one
// (docs/performance.md, "A real generation through llama-cpp-python").
//
// `get_logits` is the address of llama.cpp's llama_get_logits_ith and `ctx`
// that of the llama_context (`ctx_object` is the ctypes object that holds
// it: a call that finds another object, or None, in `llm._ctx.ctx` goes to
// `fallback`, the processor's Python hook, which reads the context anew).
// Nothing here links against llama.cpp.  The processor's `prompt_len`,
// `accepted`, `calls` and `mask_seconds` are kept as its own Python hook
// keeps them; while its `steer_to_end` is set, calls go to `fallback`.
// Tested by tests/py/test_package_llama.py (test_attached_hook_matches_session_step:
// against Session.step on seeded walks; test_attach_masks_llama_cpp_logits_row: a real model).
using LlamaGetLogitsIth = float* (*)(void* ctx, int32_t i);

// A stand-in for llama_get_logits_ith whose "context" is the row itself
// (tests and benchmarks drive the hook without a model through it).
float* LogitsRowStub(void* ctx, int32_t) { return static_cast<float*>(ctx); }

class LlamaSampleHook {
 public:
  LlamaSampleHook(py::object processor, py::object session, py::buffer bitmask, py::object llm,
                  py::object sample, py::object fallback, uintptr_t get_logits,
                  py::object ctx_object, uintptr_t ctx, int64_t n_vocab, int64_t idx_position)
      : processor_(std::move(processor)), session_obj_(std::move(session)),
        bitmask_obj_(bitmask), llm_(std::move(llm)), sample_(std::move(sample)),
        fallback_(std::move(fallback)), ctx_object_(std::move(ctx_object)),
        get_logits_(reinterpret_cast<LlamaGetLogitsIth>(get_logits)),
        ctx_(reinterpret_cast<void*>(ctx)), n_vocab_(n_vocab), idx_position_(idx_position) {
    session_ = session_obj_.cast<PySession*>();
    const Buffer2D mask = BitmaskBuffer(bitmask);
    if (mask.rows != 1) throw EngineError("the hook's bitmask must have one row");
    if (mask.cols < session_->store->mask_words()) {
      throw EngineError("bitmask rows have " + std::to_string(mask.cols) +
                        " words, the vocabulary needs " +
                        std::to_string(session_->store->mask_words()));
    }
    row_ = static_cast<uint32_t*>(mask.data);
    words_ = mask.cols;
    if (n_vocab_ < session_->store->vocab_size) {
      throw EngineError("logits have " + std::to_string(n_vocab_) +
                        " entries, fewer than the grammar store's vocabulary of " +
                        std::to_string(session_->store->vocab_size) + ": wrong tokenizer?");
    }
    if (get_logits_ == nullptr || ctx_ == nullptr) {
      throw EngineError("no llama.cpp context to read logits from");
    }
    proc_dict_ = processor_.attr("__dict__");
    llm_dict_ = llm_.attr("__dict__");
    ctx_holder_ = llm_.attr("_ctx");
    ctx_dict_ = ctx_holder_.attr("__dict__");
  }

  // The callable that replaces `Llama.sample`: a builtin function whose
  // self is this hook's Python object, called by CPython's vectorcall
  // protocol (METH_FASTCALL | METH_KEYWORDS), and forwarding the call's
  // arguments to the original method the same way: no tuple, no dict, no
  // pybind11 dispatch between the generate loop and the sampler.
  static py::object Function(py::handle self) {
    static PyMethodDef def = {
        "sample", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(&Entry)),
        METH_FASTCALL | METH_KEYWORDS,
        "Llama.sample, after the attached cfgmask processor masked the context's logits row."};
    PyObject* f = PyCFunction_NewEx(&def, self.ptr(), nullptr);
    if (f == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(f);
  }

  static PyObject* Entry(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
    try {
      auto* inst = reinterpret_cast<py::detail::instance*>(self);
      py::detail::value_and_holder vh = inst->get_value_and_holder();
      if (!vh.holder_constructed()) throw EngineError("this processor hook is not constructed");
      return static_cast<LlamaSampleHook*>(vh.value_ptr())->Call(args, nargs, kwnames);
    } catch (py::error_already_set& e) {
      e.restore();
    } catch (const py::builtin_exception& e) {
      e.set_error();
    } catch (const EngineError& e) {
      PyErr_SetString(error_type, e.what());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    return nullptr;
  }

  // cfgmask.Error (set when the module registers it).
  static inline PyObject* error_type = nullptr;

 private:
  // A borrowed value from an instance's __dict__ (where llama_cpp.Llama and
  // LlamaCppLogitsProcessor keep these attributes), else getattr.
  static py::object Get(const py::object& owner, const py::dict& dict, const py::str& key) {
    PyObject* v = PyDict_GetItemWithError(dict.ptr(), key.ptr());
    if (v != nullptr) return py::reinterpret_borrow<py::object>(v);
    if (PyErr_Occurred()) throw py::error_already_set();
    return owner.attr(key);
  }
  static void Set(const py::dict& dict, const py::str& key, py::object value) {
    if (PyDict_SetItem(dict.ptr(), key.ptr(), value.ptr()) != 0) throw py::error_already_set();
  }
  static int64_t Int(const py::object& o) {
    const long long v = PyLong_AsLongLong(o.ptr());
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return v;
  }

  PyObject* Call(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    if (session_ == nullptr) throw EngineError("this processor hook was cleared (detach it)");
    const auto start = std::chrono::steady_clock::now();
    // The context is still the one attached (a closed Llama holds None).
    const py::object ctx_holder = Get(llm_, llm_dict_, keys_.ctx_holder);
    if (!ctx_holder.is(ctx_holder_) || !Get(ctx_holder_, ctx_dict_, keys_.ctx).is(ctx_object_) ||
        PyObject_IsTrue(Get(processor_, proc_dict_, keys_.steer_to_end).ptr()) != 0) {
      return Forward(fallback_, args, nargs, kwnames);
    }
    const int64_t n_tokens = Int(Get(llm_, llm_dict_, keys_.n_tokens));
    PyObject* idx = nullptr;
    const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = nkw - 1; k >= 0 && idx == nullptr; --k) {  // idx comes last in generate
      PyObject* name = PyTuple_GET_ITEM(kwnames, k);
      if (name == keys_.idx.ptr() || PyUnicode_Compare(name, keys_.idx.ptr()) == 0) {
        idx = args[nargs + k];
      }
    }
    if (idx == nullptr && idx_position_ >= 0 && nargs > idx_position_) idx = args[idx_position_];
    int32_t ridx = -1;
    if (idx != nullptr && idx != Py_None) {
      ridx = static_cast<int32_t>(Int(py::reinterpret_borrow<py::object>(idx)) - n_tokens);
    }
    const py::object prompt_obj = Get(processor_, proc_dict_, keys_.prompt_len);
    int64_t prompt = n_tokens;
    if (prompt_obj.is_none()) {
      Set(proc_dict_, keys_.prompt_len, py::int_(n_tokens));
    } else {
      prompt = Int(prompt_obj);
    }
    const int64_t begin = prompt + Int(Get(processor_, proc_dict_, keys_.accepted));
    // The Llama's id buffer (llama_cpp allocates it once; load_state swaps it).
    const py::object input_ids = Get(llm_, llm_dict_, keys_.input_ids);
    if (!input_ids.is(ids_object_)) {
      ids_ = TokenIdsOf(input_ids);
      ids_object_ = input_ids;
    }
    const TokenIds& ids = ids_;
    if (ids.rows != 1 || begin < 0 || begin > n_tokens || n_tokens > ids.cols) {
      throw EngineError("token range [" + std::to_string(begin) + ", " +
                        std::to_string(n_tokens) + ") is outside the Llama's " +
                        std::to_string(ids.cols) + " ids");
    }
    int64_t refused;
    const auto stepped = std::chrono::steady_clock::now();
    {
      InUse in_use(*session_);
      py::gil_scoped_release release;
      refused = Step(ids, begin, n_tokens, ridx);
    }
    const auto after = std::chrono::steady_clock::now();
    if (refused == kNoLogits) {
      throw EngineError("llama.cpp has no logits for row " + std::to_string(ridx));
    }
    if (refused >= 0) {
      py::list before;
      for (int64_t i = 0; i < refused; ++i) before.append(ids.At(0, begin + i));
      processor_.attr("_refused")(ids.At(0, begin + refused), before);
      throw EngineError("the sampler picked a token the grammar refuses");
    }
    Set(proc_dict_, keys_.accepted, py::int_(n_tokens - prompt));
    Set(proc_dict_, keys_.calls, py::int_(Int(Get(processor_, proc_dict_, keys_.calls)) + 1));
    const auto end = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(end - start).count();
    const double before_s = Get(processor_, proc_dict_, keys_.mask_seconds).cast<double>();
    Set(proc_dict_, keys_.mask_seconds, py::float_(before_s + seconds));
    times_ns_[0] = std::chrono::duration_cast<std::chrono::nanoseconds>(stepped - start).count();
    times_ns_[1] = std::chrono::duration_cast<std::chrono::nanoseconds>(after - stepped).count();
    times_ns_[2] = std::chrono::duration_cast<std::chrono::nanoseconds>(end - after).count();
    return Forward(sample_, args, nargs, kwnames);
  }

  static PyObject* Forward(const py::object& f, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames) {
    return PyObject_Vectorcall(f.ptr(), args, static_cast<size_t>(nargs), kwnames);
  }

  struct Keys {
    py::str ctx_holder{"_ctx"}, ctx{"ctx"}, n_tokens{"n_tokens"}, input_ids{"input_ids"},
        idx{"idx"}, steer_to_end{"steer_to_end"}, prompt_len{"prompt_len"},
        accepted{"accepted"}, calls{"calls"}, mask_seconds{"mask_seconds"};
    Keys() {
      for (py::str* k : {&ctx_holder, &ctx, &n_tokens, &input_ids, &idx, &steer_to_end,
                         &prompt_len, &accepted, &calls, &mask_seconds}) {
        PyObject* p = k->release().ptr();
        PyUnicode_InternInPlace(&p);
        *k = py::reinterpret_steal<py::str>(p);
      }
    }
  };

 private:
  static constexpr int64_t kNoLogits = -2;


  // Accept, fill, mask; -1, the refused index from `begin`, or kNoLogits.
  int64_t Step(const TokenIds& ids, int64_t begin, int64_t end, int32_t ridx) {
    float* logits = get_logits_(ctx_, ridx);
    if (logits == nullptr) return kNoLogits;
    LogitsBuffer l;
    l.data = reinterpret_cast<char*>(logits);
    l.rows = 1;
    l.cols = n_vocab_;
    l.col_stride = 1;
    return AcceptFillMask(*session_, ids, begin, end, l, row_, words_, {});
  }

  py::object processor_, session_obj_, bitmask_obj_, llm_, sample_, fallback_, ctx_object_;
  py::object ctx_holder_, ids_object_;
  py::dict proc_dict_, llm_dict_, ctx_dict_;
  Keys keys_;
  TokenIds ids_;

 public:
  // Nanoseconds of the last call's parts: before the engine (reading the
  // Llama's and the processor's state), the engine's part (Session.step's
  // step_times and the row, the hold and the GIL around them), after it.
  py::tuple Times() const { return py::make_tuple(times_ns_[0], times_ns_[1], times_ns_[2]); }
  int64_t times_ns_[3] = {0, 0, 0};

  int Traverse(visitproc visit, void* arg) {
    for (py::object* o : Held()) Py_VISIT(o->ptr());
    return 0;
  }
  void Clear() {
    session_ = nullptr;
    row_ = nullptr;
    for (py::object* o : Held()) *o = py::object();
  }

 private:
  std::array<py::object*, 12> Held() {
    return {&processor_, &session_obj_, &bitmask_obj_, &llm_, &sample_, &fallback_,
            &ctx_object_, &ctx_holder_, &ids_object_, &proc_dict_, &llm_dict_, &ctx_dict_};
  }
  PySession* session_ = nullptr;
  LlamaGetLogitsIth get_logits_;
  void* ctx_;
  int64_t n_vocab_, idx_position_;
  uint32_t* row_ = nullptr;
  int64_t words_ = 0;
};

// Logits given as (address, rows, cols, row stride, column stride, dtype
// code), strides in elements and the code LogitsDType's: HFLogitsProcessor
// hands a CPU torch tensor this way (its data_ptr() and stride()) instead of
// a numpy view, which costs more than the rest of its call.  Tested by
// tests/py/test_package_processors.py (test_hf_cpu_tensor_masked_by_address).
LogitsBuffer LogitsAt(const py::tuple& t) {
  if (t.size() != 6) throw py::type_error("logits address: 6 fields");
  LogitsBuffer out;
  const auto ptr = t[0].cast<uintptr_t>();
  const auto code = t[5].cast<int64_t>();
  out.rows = t[1].cast<int64_t>();
  out.cols = t[2].cast<int64_t>();
  out.row_stride = t[3].cast<int64_t>();
  out.col_stride = t[4].cast<int64_t>();
  if (ptr == 0 || out.rows < 0 || out.cols < 0 || out.row_stride < 0 || out.col_stride <= 0 ||
      code < 0 || code > 2) {
    throw EngineError("logits address out of range");
  }
  out.data = reinterpret_cast<char*>(ptr);
  out.dtype = static_cast<LogitsDType>(code);
  return out;
}

class PyBatchMatcher {
 public:
  void Fill(const std::vector<PySession*>& sessions, const py::buffer& bitmask) {
    const Buffer2D buf = BitmaskBuffer(bitmask);
    const int64_t rows = buf.rows, words = buf.cols;
    if (rows < static_cast<int64_t>(sessions.size())) {
      throw EngineError("bitmask has " + std::to_string(rows) + " rows for " +
                        std::to_string(sessions.size()) + " matchers");
    }
    std::vector<Session*> ss;
    std::vector<const CompiledStore*> stores;
    std::vector<std::unique_ptr<InUse>> held;
    Split(sessions, &ss, &stores, &held);
    int32_t* out = static_cast<int32_t*>(buf.data);
    Status st;
    {
      py::gil_scoped_release release;
      st = batch_.FillNextTokenBitmask(ss, stores, out, static_cast<int32_t>(words));
    }
    ThrowIfError(st);
  }

  // The batch form of Session.step (HF processors): the tokens are accepted
  // and the bitmask filled by the batch engine (BatchMatcher::AcceptAndFill,
  // runtime/batch.h), then row b of `logits` is masked in place (None: left
  // to the caller).  Returns -1, or (b, i) packed as b * k + i for the first
  // refused token, with every session of the batch left as before the call
  // and nothing masked.
  int64_t Step(const std::vector<PySession*>& sessions, const py::buffer& tokens,
               const py::buffer& bitmask, const py::object& logits, bool bf16,
               const py::object& only_obj) {
    const TokenIds ids = TokenIdsOf(tokens);
    // only[b], when not empty, replaces row b's mask by exactly those ids (steering).
    std::vector<std::vector<int32_t>> only;
    if (!only_obj.is_none()) {
      only = only_obj.cast<std::vector<std::vector<int32_t>>>();
      if (only.size() != sessions.size()) {
        throw EngineError("only: " + std::to_string(only.size()) + " rows for " +
                          std::to_string(sessions.size()) + " matchers");
      }
    }
    const bool masking = !logits.is_none();  // None: the caller masks (another device)
    LogitsBuffer l;
    if (masking) {
      l = py::isinstance<py::tuple>(logits) ? LogitsAt(logits.cast<py::tuple>())
                                             : LogitsOf(logits.cast<py::buffer>(), bf16);
    } else {
      l.rows = static_cast<int64_t>(sessions.size());
      l.cols = INT32_MAX;
    }
    const Buffer2D buf = BitmaskBuffer(bitmask);
    const int64_t b_count = static_cast<int64_t>(sessions.size());
    if (buf.rows < b_count || l.rows != b_count || ids.rows != b_count) {
      throw EngineError(std::to_string(b_count) + " matchers but " + std::to_string(ids.rows) +
                        " rows of token ids, " + std::to_string(l.rows) + " of logits and " +
                        std::to_string(buf.rows) + " of bitmask");
    }
    std::vector<Session*> ss;
    std::vector<const CompiledStore*> stores;
    std::vector<std::unique_ptr<InUse>> held;
    Split(sessions, &ss, &stores, &held);
    for (size_t b = 0; b < only.size(); ++b) {
      for (int32_t t : only[b]) {
        if (t < 0 || t >= stores[b]->vocab_size) throw py::index_error("token id out of range");
      }
    }
    for (const CompiledStore* store : stores) {
      if (buf.cols < store->mask_words()) {
        throw EngineError("bitmask rows have " + std::to_string(buf.cols) +
                          " words, the vocabulary needs " + std::to_string(store->mask_words()));
      }
      if (l.cols < store->vocab_size) {
        throw EngineError("logits have " + std::to_string(l.cols) +
                          " entries, fewer than the grammar store's vocabulary of " +
                          std::to_string(store->vocab_size) + ": wrong tokenizer?");
      }
    }
    py::gil_scoped_release release;
    uint32_t* out = static_cast<uint32_t*>(buf.data);
    const int64_t refused = batch_.AcceptAndFill(
        ss, stores, ids.cols, [&](int64_t b, int64_t i) { return ids.At(b, i); }, only, out,
        buf.cols, step_ns_);
    if (refused >= 0) return refused;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < b_count && masking; ++b) {
      if (ss[b]->IsTerminated()) continue;  // an ended row is left as it is
      MaskLogitsRow(l, b, reinterpret_cast<const int32_t*>(out + b * buf.cols),
                    static_cast<int32_t>(buf.cols));
    }
    step_ns_[2] = NanosSince(t0);
    return -1;
  }

  py::tuple StepTimes() const { return py::make_tuple(step_ns_[0], step_ns_[1], step_ns_[2]); }

  void Advance(const std::vector<PySession*>& sessions, const std::vector<int32_t>& tokens) {
    std::vector<Session*> ss;
    std::vector<const CompiledStore*> stores;
    std::vector<std::unique_ptr<InUse>> held;
    Split(sessions, &ss, &stores, &held);
    Status st;
    {
      py::gil_scoped_release release;
      st = batch_.AdvanceBatch(ss, tokens);
    }
    ThrowIfError(st);
  }

 private:
  // Refuses a matcher given twice (it would be advanced twice, concurrently)
  // and holds every matcher for the call (`held`).
  static void Split(const std::vector<PySession*>& in, std::vector<Session*>* ss,
                    std::vector<const CompiledStore*>* stores,
                    std::vector<std::unique_ptr<InUse>>* held) {
    std::map<const PySession*, size_t> seen;
    for (size_t i = 0; i < in.size(); ++i) {
      const PySession* p = in[i];
      if (p == nullptr) throw py::type_error("matchers must not contain None");
      auto [it, fresh] = seen.emplace(p, i);
      if (!fresh) {
        throw EngineError("matchers " + std::to_string(it->second) + " and " + std::to_string(i) +
                          " of the batch are the same matcher; each may appear once "
                          "(fork() it for a second sequence)");
      }
    }
    for (PySession* p : in) {
      held->push_back(std::make_unique<InUse>(*p));
      ss->push_back(&p->session);
      stores->push_back(p->store.get());
    }
  }

  BatchMatcher batch_;
  int64_t step_ns_[3] = {0, 0, 0};  // as PySession::step_ns, for the last Step
};

// HFLogitsProcessor's ids bookkeeping (cfgmask.processors; not a public
// API).  The processor keeps the ids of its calls in `hist` (rows x capacity
// int64, C order, its own buffer).  Reads the new call's ids where they lie
// (`ptr`: the data of a CPU int64 tensor or array, strides `s0`, `s1` in
// elements), compares every row's first `known` ids with hist's and, only
// where all rows match (no beam moved), copies columns [known, cols) into
// hist.  Returns -1, or the first row whose ids differ (hist untouched): the
// whole prefix is compared, so rows that beam search swapped are found even
// where their last ids agree.  Tested by tests/py/test_package_processors.py
// (test_hf_beam_swap_with_equal_last_ids, test_hf_history_edited_raises).
int64_t HfTrackIds(uintptr_t ptr, int64_t rows, int64_t cols, int64_t s0, int64_t s1,
                   const py::buffer& hist_obj, int64_t known) {
  py::buffer_info hist = hist_obj.request(true);
  if (hist.ndim != 2 || hist.itemsize != 8 || hist.format.empty() ||
      (hist.format.back() != 'l' && hist.format.back() != 'q') || hist.strides[1] != 8 ||
      hist.strides[0] != hist.shape[1] * 8) {
    throw py::type_error("history must be a C-ordered int64 array of 2 dimensions");
  }
  if (hist.shape[0] != rows || hist.shape[1] < cols || known < 0 || known > cols || rows < 0) {
    throw EngineError("history of shape (" + std::to_string(hist.shape[0]) + ", " +
                      std::to_string(hist.shape[1]) + ") for ids of shape (" +
                      std::to_string(rows) + ", " + std::to_string(cols) + "), " +
                      std::to_string(known) + " known");
  }
  if (rows == 0 || cols == 0) return -1;
  if (ptr == 0) throw EngineError("token ids have no data");
  const int64_t* ids = reinterpret_cast<const int64_t*>(ptr);
  int64_t* h = static_cast<int64_t*>(hist.ptr);
  const int64_t cap = hist.shape[1];
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t* row = ids + b * s0;
    const int64_t* prev = h + b * cap;
    if (s1 == 1) {
      if (std::memcmp(row, prev, static_cast<size_t>(known) * sizeof(int64_t)) != 0) return b;
    } else {
      for (int64_t i = 0; i < known; ++i) {
        if (row[i * s1] != prev[i]) return b;
      }
    }
  }
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t* row = ids + b * s0;
    int64_t* out = h + b * cap;
    for (int64_t i = known; i < cols; ++i) out[i] = row[i * s1];
  }
  return -1;
}

void ApplyBitmask(const py::buffer& logits, const py::buffer& bitmask) {
  const Buffer2D mask = BitmaskBuffer(bitmask);
  const Buffer2D l = WritableBuffer(logits, "logits");
  LogitsDType dtype;
  if (l.itemsize == 4 && l.format.back() == 'f') {
    dtype = LogitsDType::kFloat32;
  } else if (l.itemsize == 2 && l.format.back() == 'e') {
    dtype = LogitsDType::kFloat16;
  } else {
    throw py::type_error("logits must be float32 or float16, got format '" + l.format + "'");
  }
  if (mask.rows != l.rows) {
    throw EngineError("logits have " + std::to_string(l.rows) + " rows, the bitmask " +
                      std::to_string(mask.rows));
  }
  Status st;
  {
    py::gil_scoped_release release;
    st = ApplyTokenBitmaskInplaceCpu(l.data, dtype, static_cast<int32_t>(l.rows),
                                     static_cast<int32_t>(l.cols),
                                     static_cast<const int32_t*>(mask.data),
                                     static_cast<int32_t>(mask.cols));
  }
  ThrowIfError(st);
}

}  // namespace
}  // namespace cfgmask

PYBIND11_MODULE(_core, m) {
  using namespace cfgmask;
  m.doc() = "cfgmask engine: compiled mask stores, decoding sessions, batch masks";
  LlamaSampleHook::error_type =
      py::register_exception<EngineError>(m, "Error", PyExc_ValueError).ptr();
  m.attr("STORE_FORMAT_VERSION") = kStoreFormatVersion;
  m.attr("MAX_SUFFIX_BYTES") = kMaxSuffixBytes;
  // maskstore/defaults.h, for the package's signatures (cfgmask/__init__.py).
  {
    py::dict d;
    d["indenter"] = std::string(defaults::kIndenter);
    py::list choices;
    for (std::string_view c : defaults::kIndenterChoices) choices.append(std::string(c));
    d["indenter_choices"] = py::tuple(choices);
    d["max_lexer_states"] = defaults::kMaxLexerStates;
    d["max_roots"] = defaults::kMaxRoots;
    d["max_memory"] = defaults::kMaxMemory;
    d["max_seconds"] = defaults::kMaxSeconds;
    d["streamline"] = defaults::kStreamline;
    d["num_threads"] = defaults::kNumThreads;
    d["prune_pairs"] = defaults::kPrunePairs;
    d["lexer_modes"] = defaults::kLexerModes;
    d["max_live_states"] = defaults::kMaxLiveStates;
    d["session_memo_bytes"] = defaults::kSessionMemoBytes;
    m.attr("DEFAULTS") = d;
  }

  py::class_<PreparedTokenizer, TokenizerPtr>(m, "Tokenizer")
      .def(py::init(&PrepareTokenizerFile), py::arg("path"))
      .def_property_readonly("vocab_size",
                             [](const PreparedTokenizer& t) { return t.tokens.vocab_size; })
      .def_property_readonly("name", [](const PreparedTokenizer& t) { return t.tokens.tokenizer_name; })
      .def_property_readonly("eos_ids", [](const PreparedTokenizer& t) { return t.tokens.eos_ids.ToVector(); })
      .def_property_readonly("seconds", [](const PreparedTokenizer& t) { return t.seconds; });

  py::class_<CompiledStore, StorePtr> store_class(m, "Store");
  // Store.compile from a prepared Tokenizer or from a tokenizer file: one
  // argument list, the defaults of maskstore/defaults.h.
  auto def_compile = [&store_class](auto compile, const char* tokenizer_arg) {
    store_class.def_static(
        "compile", compile, py::arg("grammar_path"), py::arg(tokenizer_arg), py::arg("start") = "",
        py::arg("indenter") = std::string(defaults::kIndenter),
        py::arg("max_lexer_states") = defaults::kMaxLexerStates,
        py::arg("import_paths") = std::vector<std::string>{},
        py::arg("streamline") = defaults::kStreamline, py::arg("num_threads") = defaults::kNumThreads,
        py::arg("prune_pairs") = defaults::kPrunePairs, py::arg("max_roots") = defaults::kMaxRoots,
        py::arg("max_memory") = defaults::kMaxMemory, py::arg("eos") = "",
        py::arg("progress") = py::none(), py::arg("max_seconds") = defaults::kMaxSeconds,
        py::arg("lexer_modes") = defaults::kLexerModes);
  };
  def_compile(&CompileStoreWith<TokenizerPtr>, "tokenizer");
  def_compile(&CompileStoreWith<std::string>, "tokenizer_path");
  store_class
      .def_static("load", &LoadStoreFile, py::arg("path"), py::arg("verify") = false,
                  "Reads a store file (a private snapshot; CFGMASK_STORE_OPEN=map maps it); verify=True also checks the whole payload's "
                  "checksum")
      .def(
          "save",
          [](const CompiledStore& s, const std::string& path) {
            Status st;
            {
              py::gil_scoped_release release;
              st = WriteStoreFile(s, path);
            }
            ThrowIfError(st);
          },
          py::arg("path"))
      .def("stats", &StoreStats)
      .def_property_readonly("vocab_size", [](const CompiledStore& s) { return s.vocab_size; })
      .def_property_readonly("mask_words", &CompiledStore::mask_words)
      .def_property_readonly("eos_ids", [](const CompiledStore& s) { return s.eos_ids.ToVector(); })
      .def_property_readonly("terminal_names",
                             [](const CompiledStore& s) { return s.terminal_names; })
      .def(
          "token_bytes",
          [](const CompiledStore& s, int32_t t) {
            if (t < 0 || t >= s.vocab_size) throw py::index_error("token id out of range");
            const std::string_view b = s.TokenBytes(t);
            return py::bytes(b.data(), b.size());
          },
          py::arg("token"))
      .def(
          "is_special",
          [](const CompiledStore& s, int32_t t) {
            if (t < 0 || t >= s.vocab_size) throw py::index_error("token id out of range");
            return s.token_special[t] != 0;
          },
          py::arg("token"));

  py::class_<PySession>(m, "Session")
      .def(py::init([](StorePtr store, int32_t max_live_states) {
             if (!store) throw py::type_error("store must not be None");
             if (max_live_states < 1) {
               throw EngineError("max_live_states must be at least 1, got " +
                                 std::to_string(max_live_states));
             }
             return std::make_unique<PySession>(store, SessionLimits{max_live_states});
           }),
           py::arg("store"), py::arg("max_live_states") = defaults::kMaxLiveStates)
      .def_property_readonly("store", [](const PySession& s) { InUse in_use(s); return s.store; })
      .def("fill_mask", &FillMaskRow, py::arg("bitmask"), py::arg("index") = 0)
      .def("step", &SessionStep, py::arg("tokens"), py::arg("logits"), py::arg("bitmask"),
           py::arg("only") = std::vector<int32_t>{}, py::arg("bf16") = false)
      .def_property_readonly("step_times",
                             [](const PySession& s) {
                               return py::make_tuple(s.step_ns[0], s.step_ns[1], s.step_ns[2]);
                             },
                             "(accept, fill, mask) nanoseconds of the last step")
      .def(
          "advance",
          [](PySession& s, int32_t token) { InUse in_use(s);
            if (token < 0 || token >= s.store->vocab_size) {
              throw EngineError("token id " + std::to_string(token) + " is out of range [0, " +
                                std::to_string(s.store->vocab_size) + ")");
            }
            Status st;
            {
              py::gil_scoped_release release;
              st = s.session.Advance(token);
            }
            return Refused(st);
          },
          py::arg("token"),
          "True if the token was accepted, False if the grammar refuses it (the session is "
          "unchanged); any other error (busy matcher, damaged store, a limit) raises")
      .def(
          "advance_bytes",
          [](PySession& s, const py::bytes& data) { InUse in_use(s);
            std::string bytes = data;
            Status st;
            {
              py::gil_scoped_release release;
              st = s.session.AdvanceBytes(bytes);
            }
            return Refused(st);
          },
          py::arg("data"), "As advance, for raw bytes")
      .def(
          "rollback",
          [](PySession& s, int32_t k) { InUse in_use(s);
            Status st;
            {
              py::gil_scoped_release release;
              st = s.session.Rollback(k);
            }
            ThrowIfError(st);
          },
          py::arg("k"))
      .def("fork",
           [](const PySession& s) { InUse in_use(s);
             py::gil_scoped_release release;
             return std::make_unique<PySession>(s.store, s.session.Fork());
           })
      .def(
          "jump_forward_string",
          [](const PySession& s, int32_t max_bytes) { InUse in_use(s);
            std::string out;
            {
              py::gil_scoped_release release;
              out = s.session.JumpForwardString(max_bytes);
            }
            return py::bytes(out);
          },
          py::arg("max_bytes") = 256)
      .def(
          "shortest_completion",
          [](PySession& s, int64_t max_expansions, bool steering) -> py::object { InUse in_use(s);
            std::string completion;
            bool found;
            {
              py::gil_scoped_release release;
              HeldCompleter completer(s.store);
              found = steering ? (*completer).SearchForSteering(&s.session, max_expansions,
                                                                &completion) ==
                                     CompletionResult::kFound
                               : (*completer).Find(&s.session, max_expansions, &completion);
            }
            if (!found) return py::none();
            return py::bytes(completion);
          },
          py::arg("max_expansions") = 200000, py::arg("steering") = false)
      .def(
          "completion_search",
          [](PySession& s, int64_t max_nodes, bool steering) -> py::tuple { InUse in_use(s);
            std::string completion;
            int64_t used = 0;
            CompletionResult r;
            {
              py::gil_scoped_release release;
              HeldCompleter completer(s.store);
              r = steering ? (*completer).SearchForSteering(&s.session, max_nodes, &completion, &used)
                           : (*completer).Search(&s.session, max_nodes, &completion, &used);
            }
            const char* what = r == CompletionResult::kFound  ? "found"
                               : r == CompletionResult::kNone ? "none"
                                                              : "budget";
            return py::make_tuple(what, r == CompletionResult::kFound
                                            ? py::object(py::bytes(completion))
                                            : py::object(py::none()),
                                  used);
          },
          py::arg("max_nodes") = 200000, py::arg("steering") = false)
      .def(
          "tokenize_forced",
          [](const PySession& s, const py::bytes& data) { InUse in_use(s);
            std::string text = data;
            std::vector<int32_t> tokens;
            int32_t covered;
            {
              py::gil_scoped_release release;
              std::shared_ptr<StoreSearch> keep;
              covered = ForwarderFor(s.store, &keep).Tokenize(s.session, text, &tokens);
            }
            return py::make_tuple(tokens, covered);
          },
          py::arg("text"))
      .def("can_end",
           [](PySession& s) { InUse in_use(s);
             py::gil_scoped_release release;
             return s.session.CanEnd();
           })
      .def("is_terminated", [](const PySession& s) { InUse in_use(s); return s.session.IsTerminated(); })
      .def(
          "set_suffix",
          [](PySession& s, const py::bytes& data) { InUse in_use(s);
            std::string suffix = data;
            if (suffix.size() > kMaxSuffixBytes) {
              throw EngineError("suffix of " + std::to_string(suffix.size()) +
                                " bytes: more than the limit of " + std::to_string(kMaxSuffixBytes) +
                                " bytes (the suffix is read again at every step; give the text "
                                "up to the end of the enclosing block)");
            }
            s.session.SetSuffix(std::move(suffix));
          },
          py::arg("suffix"))
      .def_property_readonly("suffix",
                             [](const PySession& s) { InUse in_use(s); return py::bytes(s.session.suffix()); })
      .def_property_readonly("suffix_exact",
                             [](const PySession& s) { InUse in_use(s); return s.session.suffix_exact(); })
      .def("memo_stats",
           [](const PySession& s) { InUse in_use(s);
             return py::make_tuple(s.session.memo_hits(), s.session.memo_misses());
           },
           "(hits, misses) of the row memo this session shares with the store's other "
           "sessions")
      .def("reset", [](PySession& s) { InUse in_use(s); s.session.Reset(); })
      .def_property_readonly("history_length",
                             [](const PySession& s) { InUse in_use(s); return s.session.HistoryLength(); })
      .def_property_readonly("num_live", [](const PySession& s) { InUse in_use(s); return s.session.num_live(); })
      .def_property_readonly("text", [](const PySession& s) { InUse in_use(s); return py::bytes(s.session.text()); });

  py::class_<PyBatchMatcher>(m, "BatchMatcher")
      .def(py::init<>())
      .def("fill_next_token_bitmask", &PyBatchMatcher::Fill, py::arg("sessions"),
           py::arg("bitmask"))
      .def("advance", &PyBatchMatcher::Advance, py::arg("sessions"), py::arg("tokens"))
      .def("step", &PyBatchMatcher::Step, py::arg("sessions"), py::arg("tokens"),
           py::arg("bitmask"), py::arg("logits"), py::arg("bf16") = false,
           py::arg("only") = py::none())
      .def_property_readonly("step_times", &PyBatchMatcher::StepTimes,
                             "(accept, fill, mask) nanoseconds of the last step");

  m.def("apply_token_bitmask_inplace", &ApplyBitmask, py::arg("logits"), py::arg("bitmask"));
  // HFLogitsProcessor's ids bookkeeping (cfgmask.processors); not a public API.
  m.def("_hf_track_ids", &HfTrackIds, py::arg("ptr"), py::arg("rows"), py::arg("cols"),
        py::arg("s0"), py::arg("s1"), py::arg("hist"), py::arg("known"));
  // LlamaCppLogitsProcessor.attach's hook (cfgmask.processors); not a public API.
  // It holds the Llama whose `sample` it replaces (a cycle): the garbage
  // collector sees its references (tp_traverse) and can break it (tp_clear).
  py::class_<LlamaSampleHook>(
      m, "_LlamaSampleHook", py::custom_type_setup([](PyHeapTypeObject* heap_type) {
        PyTypeObject* type = &heap_type->ht_type;
        type->tp_flags |= Py_TPFLAGS_HAVE_GC;
        type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) {
          Py_VISIT(Py_TYPE(self));
          if (!reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder()
                   .holder_constructed()) {
            return 0;
          }
          return py::cast<LlamaSampleHook&>(py::handle(self)).Traverse(visit, arg);
        };
        type->tp_clear = [](PyObject* self) {
          if (reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder()
                  .holder_constructed()) {
            py::cast<LlamaSampleHook&>(py::handle(self)).Clear();
          }
          return 0;
        };
      }))
      .def(py::init<py::object, py::object, py::buffer, py::object, py::object, py::object,
                    uintptr_t, py::object, uintptr_t, int64_t, int64_t>(),
           py::arg("processor"), py::arg("session"), py::arg("bitmask"), py::arg("llm"),
           py::arg("sample"), py::arg("fallback"), py::arg("get_logits"), py::arg("ctx_object"),
           py::arg("ctx"), py::arg("n_vocab"), py::arg("idx_position"))
      .def("function", [](py::object self) { return LlamaSampleHook::Function(self); },
           "the callable that replaces Llama.sample")
      .def_property_readonly("times", &LlamaSampleHook::Times,
                             "(before, engine, after) nanoseconds of the last call");
  m.attr("_logits_row_stub") = py::int_(reinterpret_cast<uintptr_t>(&LogitsRowStub));
}
