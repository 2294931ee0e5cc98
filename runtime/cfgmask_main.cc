// The `cfgmask` command: compile a grammar and a tokenizer into a store file,
// describe a store, teacher-force files through a Session (`check`, `bench`)
// and draw random texts from the masks (`sample`).  Argument handling and
// printing only; the engine is maskstore/ and runtime/session.h, the
// segmentation and token drawing are runtime/cli.h.
//
// Exit status: 0 success, 1 `check` found a failing file or `sample` could
// not end a sample with EOS, 2 an error on user input (bad arguments,
// unreadable or malformed grammar, tokenizer or store) reported as one line
// "cfgmask: FILE:LINE:COL: what is wrong".  `compile` writes its store
// atomically (store_file.cc); `sample` writes each DIR/sample_K.txt only once
// that sample is complete.
// Tested by tests/py/test_cli.py and tests/py/test_cli_corpus.py.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/status.h"
#include "maskstore/compiled_store.h"
#include "maskstore/row_codec.h"
#include "maskstore/store_builder.h"
#include "runtime/cli.h"
#include "runtime/compile.h"
#include "runtime/session.h"

namespace cfgmask {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // `check`: some file did not pass; `sample`: a sample not ended
constexpr int kExitUsage = 2;   // error on user input

const char kUsage[] =
    "usage: cfgmask compile GRAMMAR.lark --tokenizer TOK [--start RULE] "
    "[--indenter auto|python|none] [--no-streamline] [--no-pair-pruning] [--max-lexer-states N] [--max-roots N] [--max-memory BYTES[K|M|G]] [--eos TOKEN] [--threads N] [--lark-grammars DIR] [--quiet] "
    "-o OUT.cfgm\n"
    "       cfgmask stats   STORE.cfgm [--json]\n"
    "       cfgmask check   STORE.cfgm FILE... [--segment greedy|random|bytes|canonical] "
    "[--seed S] [--verify-masks N]\n"
    "       cfgmask sample  STORE.cfgm -n N [--seed S] [--max-tokens T] [--eos-bias P] [--ascii] -o DIR\n"
    "       cfgmask bench   STORE.cfgm FILE... [--json] [--segment greedy|random|bytes|canonical] "
    "[--seed S] [--memo-mb M]\n"
    "--segment canonical reads the tokenizer's own encoding of FILE from FILE.ids (token ids\n"
    "separated by white space, e.g. from tests/tools/canonical_ids.py); their bytes must spell\n"
    "FILE exactly.  `sample` ends every walk that reaches --max-tokens with a shortest\n"
    "completion, so every sample is a complete text ended by EOS.\n";

struct CommandSpec {
  const char* name;
  const char* usage;                 // one line
  std::set<std::string> valued;      // flags that take a value
  std::set<std::string> booleans;    // flags without a value
  size_t min_positional;
  size_t max_positional;             // SIZE_MAX = any
};

const CommandSpec kCommands[] = {
    {"compile",
     "usage: cfgmask compile GRAMMAR.lark --tokenizer TOK [--start RULE] "
     "[--indenter auto|python|none] [--no-streamline] [--no-pair-pruning] [--max-lexer-states N] [--max-roots N] [--max-memory BYTES[K|M|G]] [--eos TOKEN] [--threads N] [--lark-grammars DIR] [--quiet] "
     "-o OUT.cfgm",
     {"--tokenizer", "--start", "--indenter", "--max-lexer-states", "--max-roots", "--max-memory", "--eos", "--threads", "--lark-grammars", "-o"},
     {"--no-streamline", "--no-pair-pruning", "--quiet"},
     1,
     1},
    {"stats", "usage: cfgmask stats STORE.cfgm [--json]", {}, {"--json"}, 1, 1},
    {"check",
     "usage: cfgmask check STORE.cfgm FILE... [--segment greedy|random|bytes|canonical] "
     "[--seed S] [--verify-masks N]  (canonical: token ids read from FILE.ids)",
     {"--segment", "--seed", "--verify-masks"},
     {},
     2,
     SIZE_MAX},
    {"sample",
     "usage: cfgmask sample STORE.cfgm -n N [--seed S] [--max-tokens T] [--eos-bias P] [--ascii] "
     "-o DIR",
     {"-n", "--seed", "--max-tokens", "--eos-bias", "-o"},
     {"--ascii"},
     1,
     1},
    {"bench",
     "usage: cfgmask bench STORE.cfgm FILE... [--json] "
     "[--segment greedy|random|bytes|canonical] [--seed S] [--memo-mb M]  (canonical: token ids "
     "read from FILE.ids; M: the session's row memo in MiB, 0 = off)",
     {"--segment", "--seed", "--memo-mb"},
     {"--json"},
     2,
     SIZE_MAX},
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;
  std::set<std::string> flags;

  bool Has(const std::string& f) const { return flags.count(f) || values.count(f); }
  std::string Get(const std::string& f, const std::string& def = "") const {
    auto it = values.find(f);
    return it == values.end() ? def : it->second;
  }
};

// Every message is one line, whatever the engine put in it.
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

int Error(const std::string& message) {
  std::fprintf(stderr, "cfgmask: %s\n", OneLine(message).c_str());
  return kExitUsage;
}

int UsageError(const CommandSpec* spec, const std::string& message) {
  std::fprintf(stderr, "cfgmask: %s\n", message.c_str());
  if (spec) std::fprintf(stderr, "%s\n", spec->usage);
  else std::fputs(kUsage, stderr);
  return kExitUsage;
}

// Parses argv[first..] against `spec`; "--flag value", "--flag=value" and a
// lone "--" (everything after is positional) are accepted.
bool ParseArgs(const CommandSpec& spec, int argc, char** argv, int first, Args* out,
               std::string* error) {
  bool only_positional = false;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      out->positional.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    if (spec.valued.count(a)) {
      if (!has_value) {
        if (i + 1 >= argc) {
          *error = "option " + a + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      out->values[a] = value;
    } else if (spec.booleans.count(a) && !has_value) {
      out->flags.insert(a);
    } else {
      *error = "unknown option '" + std::string(argv[i]) + "'";
      return false;
    }
  }
  if (out->positional.size() < spec.min_positional) {
    *error = "missing argument";
    return false;
  }
  if (out->positional.size() > spec.max_positional) {
    *error = "unexpected argument '" + out->positional[spec.max_positional] + "'";
    return false;
  }
  return true;
}

bool ParseInt(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& text, double lo, double hi, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

// Reads an integer flag; on a bad value prints the error and returns false.
bool IntFlag(const CommandSpec& spec, const Args& args, const std::string& flag, int64_t def,
             int64_t lo, int64_t hi, int64_t* out) {
  *out = def;
  if (!args.values.count(flag)) return true;
  if (ParseInt(args.Get(flag), lo, hi, out)) return true;
  UsageError(&spec, "option " + flag + ": expected an integer in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got '" + args.Get(flag) + "'");
  return false;
}

// A byte count with an optional binary suffix K, M or G (1M = 1048576).
bool BytesFlag(const CommandSpec& spec, const Args& args, const std::string& flag, int64_t* out) {
  *out = 0;
  if (!args.values.count(flag)) return true;
  std::string v = args.Get(flag);
  int shift = 0;
  if (!v.empty()) {
    const char last = v.back();
    if (last == 'K' || last == 'k') shift = 10;
    if (last == 'M' || last == 'm') shift = 20;
    if (last == 'G' || last == 'g') shift = 30;
    if (shift > 0) v.pop_back();
  }
  int64_t n = 0;
  if (ParseInt(v, 1, INT64_MAX >> 30, &n)) {
    *out = n << shift;
    return true;
  }
  UsageError(&spec, "option " + flag + ": expected a positive byte count (e.g. 4G, 512M), got '" +
                        args.Get(flag) + "'");
  return false;
}

bool SegmentFlag(const CommandSpec& spec, const Args& args, SegmentMode* mode) {
  const std::string v = args.Get("--segment", "greedy");
  if (v == "greedy") *mode = SegmentMode::kGreedy;
  else if (v == "random") *mode = SegmentMode::kRandom;
  else if (v == "bytes") *mode = SegmentMode::kBytes;
  else if (v == "canonical") *mode = SegmentMode::kCanonical;
  else {
    UsageError(&spec, "option --segment: expected greedy, random, bytes or canonical, got '" +
                          v + "'");
    return false;
  }
  return true;
}

bool ReadFile(const std::string& path, std::string* out, std::string* error) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    *error = path + ": is a directory, not a file";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot read: " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *error = path + ": read failed";
    return false;
  }
  *out = ss.str();
  return true;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

std::string Bytes(int64_t n) {
  char buf[64];
  if (n < 1024) std::snprintf(buf, sizeof buf, "%" PRId64 " B", n);
  else if (n < 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
  else if (n < int64_t{1024} * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", n / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.2f GiB", n / 1073741824.0);
  return buf;
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

int64_t PeakRssBytes() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
}

bool IsEos(const CompiledStore& s, int32_t t) {
  return std::find(s.eos_ids.begin(), s.eos_ids.end(), t) != s.eos_ids.end();
}

bool Allowed(const std::vector<uint32_t>& mask, int32_t t) { return (mask[t >> 5] >> (t & 31)) & 1u; }

std::string TokenLabel(const CompiledStore& s, int32_t t) {
  return "token " + std::to_string(t) + " \"" + Printable(s.TokenBytes(t)) + "\"";
}

// ---------------------------------------------------------------- compile

// Progress on a terminal: one line rewritten in place, at most 10 times a
// second.  Nothing when stderr is not a terminal.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(Clock::now()) {}
  ~Progress() { Clear(); }

  void Update(const std::string& phase, double share) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (phase == phase_ && now - last_ < std::chrono::milliseconds(100)) return;
    phase_ = phase;
    last_ = now;
    std::fprintf(stderr, "\r\033[Kcfgmask: compile: %-9s %3d%%  %.1fs", phase.c_str(),
                 static_cast<int>(share * 100 + 0.5), Seconds());
    std::fflush(stderr);
    shown_ = true;
  }
  void Clear() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }
  double Seconds() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  Clock::time_point start_, last_;
  std::string phase_;
  bool shown_ = false;
};

struct RowCounts {
  int64_t list = 0, complement = 0, bitset = 0;
};

RowCounts CountRows(const CompiledStore& s) {
  RowCounts c;
  for (int32_t k : s.row_kind) {
    switch (static_cast<RowKind>(k)) {
      case RowKind::kList: ++c.list; break;
      case RowKind::kComplement: ++c.complement; break;
      case RowKind::kBitset: ++c.bitset; break;
    }
  }
  return c;
}

std::string EosList(const CompiledStore& s) {
  std::string out;
  for (int32_t e : s.eos_ids) out += (out.empty() ? "" : ", ") + std::to_string(e);
  return out.empty() ? "none" : out;
}

// The human-readable description shared by `compile` and `stats`.
std::string StreamlineLine(const CompiledStore& s) {
  const auto& st = s.stats;
  if (!st.streamlined) return "off (compiled with --no-streamline)";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "rows %" PRId64 " -> %" PRId64 " (%.2fx): %" PRId64 " never legal deleted, %" PRId64
                " always-legal suffixes folded, %.2f s",
                st.rows_before_streamlining, st.rows_after_fold,
                st.rows_after_fold ? static_cast<double>(st.rows_before_streamlining) / st.rows_after_fold
                                   : 0.0,
                st.rows_deleted, st.fold_proved, st.seconds_streamline);
  return buf;
}

void PrintSummary(const CompiledStore& s, const std::string& path) {
  const RowCounts rc = CountRows(s);
  const auto& st = s.stats;
  const double total = st.seconds_grammar + st.seconds_lalr + st.seconds_automaton +
                       st.seconds_store + st.seconds_streamline;
  std::printf("%s: grammar %s (start: %s)\n", path.c_str(), s.grammar_name.c_str(), s.start.c_str());
  std::printf("  tokenizer        %s, %d tokens, EOS %s\n", s.tokenizer_name.c_str(), s.vocab_size,
              EosList(s).c_str());
  std::printf("  terminals        %d\n", s.num_terminals);
  std::printf("  rules            %zu (%d nonterminals)\n", s.rule_lhs.size(), s.num_nonterminals);
  std::printf("  LALR states      %d\n", s.num_states);
  std::printf("  lexer states     %d (%d at token boundaries)\n", s.num_lex_states, s.num_roots);
  std::printf("  nfa_transition   %" PRId64 " entries\n", st.nfa_transition_entries);
  std::printf("  store rows       %zu (list %" PRId64 ", complement %" PRId64 ", bitset %" PRId64
              "); %" PRId64 " keyed by terminals alone\n",
              s.row_seq.size(), rc.list, rc.complement, rc.bitset, TerminalSequenceKeys(s));
  std::printf("  simulated tokens %zu (root, token) pairs checked at run time\n", s.sim_token.size());
  std::printf("  streamlining     %s\n", StreamlineLine(s).c_str());
  std::printf("  size             %s on disk, %s in memory\n", Bytes(FileSize(path)).c_str(),
              Bytes(static_cast<int64_t>(s.MemoryBytes())).c_str());
  std::printf("  seconds          grammar %.2f, lalr %.2f, automaton+walk %.2f (tokenizer %.2f), "
              "store %.2f, streamline %.2f, total %.2f\n",
              st.seconds_grammar, st.seconds_lalr, st.seconds_automaton, st.seconds_tokenizer,
              st.seconds_store, st.seconds_streamline, total);
}

int Compile(const CommandSpec& spec, const Args& args) {
  if (!args.values.count("--tokenizer")) return UsageError(&spec, "missing --tokenizer TOK");
  if (!args.values.count("-o")) return UsageError(&spec, "missing -o OUT.cfgm");
  CompileOptions options;
  options.start = args.Get("--start");
  options.indenter = args.Get("--indenter", "auto");
  if (options.indenter != "auto" && options.indenter != "python" && options.indenter != "none") {
    return UsageError(&spec, "option --indenter: expected auto, python or none, got '" +
                                 options.indenter + "'");
  }
  int64_t max_lexer_states = 0;
  if (!IntFlag(spec, args, "--max-lexer-states", options.max_lexer_states, 1, INT32_MAX,
               &max_lexer_states)) {
    return kExitUsage;
  }
  options.max_lexer_states = static_cast<int32_t>(max_lexer_states);
  int64_t max_roots = 0;
  if (!IntFlag(spec, args, "--max-roots", options.max_roots, 1, INT32_MAX, &max_roots)) {
    return kExitUsage;
  }
  options.max_roots = static_cast<int32_t>(max_roots);
  if (!BytesFlag(spec, args, "--max-memory", &options.max_memory)) return kExitUsage;
  int64_t threads = 0;  // 0: all cores; the store is the same for any count
  if (!IntFlag(spec, args, "--threads", 0, 0, 1024, &threads)) return kExitUsage;
  options.num_threads = static_cast<int32_t>(threads);
  const bool quiet = args.Has("--quiet");
  const bool streamline = !args.Has("--no-streamline");
  options.prune_pairs = !args.Has("--no-pair-pruning");
  // Lark's grammars folder, for `%import python.X` and the like (common.lark is built in).
  const char* lark_env = std::getenv("CFGMASK_LARK_GRAMMARS");
  options.lark_grammars_dir = args.Get("--lark-grammars", lark_env != nullptr ? lark_env : "");

  const std::string grammar = args.positional[0], out = args.Get("-o");
  // Never write the store over an input: a typo in -o must not destroy the grammar.
  for (const std::string& input : {grammar, args.Get("--tokenizer")}) {
    std::error_code ec;
    if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(out, input, ec) && !ec) {
      return Error(out + ": -o names the input file " + input + "; refusing to overwrite it");
    }
  }
  Progress progress(!quiet && isatty(STDERR_FILENO));
  options.progress = [&](const std::string& phase, double share) {
    progress.Update(phase, share);
  };
  std::vector<std::string> warnings;
  options.warnings = &warnings;
  CompiledStore store;
  Status st = CompileGrammar(grammar, args.Get("--tokenizer"), options, streamline, &store,
                             args.Get("--eos"));
  if (st.ok()) {
    progress.Update("write", 1);
    st = WriteStoreFile(store, out);
  }
  progress.Clear();
  if (!st.ok()) return Error(st.message());
  for (const std::string& w : warnings) std::fprintf(stderr, "cfgmask: %s\n", OneLine(w).c_str());
  if (store.eos_ids.empty()) {
    std::fprintf(stderr,
                 "cfgmask: warning: %s: the tokenizer names no end-of-sequence token, so "
                 "generation under this store can never end; name one with --eos TOKEN\n",
                 OneLine(args.Get("--tokenizer")).c_str());
  }
  if (!quiet) PrintSummary(store, out);
  return kExitOk;
}

// ---------------------------------------------------------------- stats

int Stats(const CommandSpec& spec, const Args& args) {
  const std::string path = args.positional[0];
  CompiledStore s;
  Status st = ReadStoreFile(path, &s);
  if (!st.ok()) return Error(st.message());
  if (!args.Has("--json")) {
    PrintSummary(s, path);
    return kExitOk;
  }
  const RowCounts rc = CountRows(s);
  const auto& t = s.stats;
  std::string eos = "[";
  for (size_t i = 0; i < s.eos_ids.size(); ++i) eos += (i ? ", " : "") + std::to_string(s.eos_ids[i]);
  eos += "]";
  char identity[32];
  std::snprintf(identity, sizeof identity, "%016" PRIx64, s.tokenizer_identity);
  std::printf("{\n");
  std::printf("  \"file\": %s,\n", JsonString(path).c_str());
  std::printf("  \"grammar\": %s,\n", JsonString(s.grammar_name).c_str());
  std::printf("  \"start\": %s,\n", JsonString(s.start).c_str());
  std::printf("  \"tokenizer\": {\"name\": %s, \"vocab_size\": %d, \"eos_ids\": %s, "
              "\"identity\": \"%s\"},\n",
              JsonString(s.tokenizer_name).c_str(), s.vocab_size, eos.c_str(), identity);
  std::printf("  \"terminals\": %d,\n", s.num_terminals);
  std::printf("  \"rules\": %zu,\n", s.rule_lhs.size());
  std::printf("  \"nonterminals\": %d,\n", s.num_nonterminals);
  std::printf("  \"lalr_states\": %d,\n", s.num_states);
  std::printf("  \"lexer_states\": %d,\n", s.num_lex_states);
  std::printf("  \"roots\": %d,\n", s.num_roots);
  std::printf("  \"items\": %zu,\n", s.item_kind.size());
  std::printf("  \"sequences\": %zu,\n", s.seq_offsets.empty() ? 0 : s.seq_offsets.size() - 1);
  std::printf("  \"nfa_transition_entries\": %" PRId64 ",\n", t.nfa_transition_entries);
  std::printf("  \"rows\": %zu,\n", s.row_seq.size());
  std::printf("  \"rows_before_streamlining\": %" PRId64 ",\n", t.rows_before_streamlining);
  std::printf("  \"terminal_sequence_keys\": %" PRId64 ",\n", TerminalSequenceKeys(s));
  std::printf("  \"simulated_pairs\": %zu,\n", s.sim_token.size());
  std::printf("  \"streamlining\": {\"applied\": %s, \"steps\": [\n"
              "    {\"step\": \"nfa_transition\", \"rows\": %" PRId64 ", \"row_bytes\": %" PRId64 "}",
              t.streamlined ? "true" : "false", t.rows_before_streamlining, t.row_bytes_before);
  if (t.streamlined) {
    std::printf(",\n    {\"step\": \"delete_never_legal\", \"rows\": %" PRId64
                ", \"rows_deleted\": %" PRId64 ", \"queries\": %" PRId64 "}",
                t.rows_before_streamlining - t.rows_deleted, t.rows_deleted, t.never_queries);
    std::printf(",\n    {\"step\": \"fold_always_legal\", \"rows\": %" PRId64
                ", \"row_bytes\": %" PRId64 ", \"queries\": %" PRId64
                ", \"rows_folded\": %" PRId64 ", \"seconds\": %.6f}",
                t.rows_after_fold, t.row_bytes_after, t.fold_queries, t.fold_proved,
                t.seconds_streamline);
  }
  std::printf("]},\n");
  std::printf("  \"row_kinds\": {\"list\": %" PRId64 ", \"complement\": %" PRId64
              ", \"bitset\": %" PRId64 "},\n",
              rc.list, rc.complement, rc.bitset);
  std::printf("  \"row_token_entries\": %zu,\n", s.row_tokens.size());
  std::printf("  \"row_bitset_words\": %zu,\n", s.row_bits.size());
  std::printf("  \"file_bytes\": %" PRId64 ",\n", FileSize(path));
  std::printf("  \"memory_bytes\": %zu,\n", s.MemoryBytes());
  std::printf("  \"seconds\": {\"grammar\": %.6f, \"lalr\": %.6f, \"automaton\": %.6f, "
              "\"tokenizer\": %.6f, \"store\": %.6f, \"streamline\": %.6f, \"total\": %.6f}\n",
              t.seconds_grammar, t.seconds_lalr, t.seconds_automaton, t.seconds_tokenizer,
              t.seconds_store, t.seconds_streamline,
              t.seconds_grammar + t.seconds_lalr + t.seconds_automaton + t.seconds_store +
                  t.seconds_streamline);
  std::printf("}\n");
  return kExitOk;
}

// ---------------------------------------------------------------- check

struct Teacher {
  const CompiledStore* store;
  std::vector<std::string> files;  // paths
  std::vector<std::string> texts;
  std::vector<std::vector<Segment>> canonical;  // kCanonical: per file, from FILE.ids
  SegmentMode mode = SegmentMode::kGreedy;
  uint64_t seed = 0;

  // The steps of file f: its canonical ids, or a cut of its text.
  std::vector<Segment> Steps(const Segmenter& segmenter, size_t f, std::mt19937_64* rng) const {
    if (mode == SegmentMode::kCanonical) return canonical[f];
    return segmenter.Cut(texts[f], mode, rng);
  }
};

// Loads the store and every file; false after printing the error.
bool LoadTeacher(const CommandSpec& spec, const Args& args, CompiledStore* store, Teacher* t,
                 int* exit_code) {
  *exit_code = kExitUsage;
  int64_t seed = 0;
  if (!SegmentFlag(spec, args, &t->mode) ||
      !IntFlag(spec, args, "--seed", 0, 0, INT64_MAX, &seed)) {
    return false;
  }
  t->seed = static_cast<uint64_t>(seed);
  Status st = ReadStoreFile(args.positional[0], store);
  if (!st.ok()) {
    Error(st.message());
    return false;
  }
  t->store = store;
  for (size_t i = 1; i < args.positional.size(); ++i) {
    std::string text, error;
    if (!ReadFile(args.positional[i], &text, &error)) {
      Error(error);
      return false;
    }
    if (t->mode == SegmentMode::kCanonical) {
      const std::string ids_path = args.positional[i] + ".ids";
      std::string ids;
      std::vector<Segment> steps;
      if (!ReadFile(ids_path, &ids, &error)) {
        Error(error + " (--segment canonical reads the token ids of FILE from FILE.ids)");
        return false;
      }
      st = ReadTokenIds(*store, ids_path, ids, args.positional[i], text, &steps);
      if (!st.ok()) {
        Error(st.message());
        return false;
      }
      t->canonical.push_back(std::move(steps));
    }
    t->files.push_back(args.positional[i]);
    t->texts.push_back(std::move(text));
  }
  return true;
}

int Check(const CommandSpec& spec, const Args& args) {
  CompiledStore store;
  Teacher t;
  int code;
  if (!LoadTeacher(spec, args, &store, &t, &code)) return code;
  int64_t verify = 0;
  if (!IntFlag(spec, args, "--verify-masks", 0, 0, INT32_MAX, &verify)) return kExitUsage;

  Segmenter segmenter(store);
  std::mt19937_64 rng(t.seed);
  Session session(&store);
  int passed = 0, failed = 0;
  for (size_t f = 0; f < t.files.size(); ++f) {
    const std::string& file = t.files[f];
    const std::string& text = t.texts[f];
    const std::vector<Segment> steps = t.Steps(segmenter, f, &rng);
    const size_t n = steps.size();
    // Mask checks at steps 0..n (step n: the end of the file, where only EOS
    // matters); --verify-masks picks N of them evenly.
    std::set<size_t> verify_at;
    for (int64_t k = 0; k < verify && static_cast<size_t>(k) <= n; ++k) {
      verify_at.insert(verify >= static_cast<int64_t>(n + 1)
                           ? static_cast<size_t>(k)
                           : static_cast<size_t>(k * static_cast<int64_t>(n + 1) / verify));
    }
    session.Reset();
    std::string failure;
    int64_t mismatches = 0, raw_bytes = 0;
    std::vector<uint32_t> mask(store.mask_words());
    for (size_t i = 0; i <= n && failure.empty(); ++i) {
      const bool at_end = i == n;
      const size_t offset = at_end ? text.size() : static_cast<size_t>(steps[i].offset);
      const bool need_mask = verify_at.count(i) || at_end || steps[i].token >= 0;
      if (need_mask) session.FillMask(mask.data());
      if (verify_at.count(i)) {
        int64_t here = 0;
        for (int32_t tok = 0; tok < store.vocab_size; ++tok) {
          const bool fast = Allowed(mask, tok), slow = session.AllowsSlow(tok);
          if (fast == slow) continue;
          if (++here <= 3) {
            std::printf("%s: mask mismatch: %s is %s by the mask, %s by the slow reference\n",
                        TextPosition(file, text, offset).c_str(), TokenLabel(store, tok).c_str(),
                        fast ? "allowed" : "refused", slow ? "allowed" : "refused");
          }
        }
        if (here > 3) {
          std::printf("%s: mask mismatch: %" PRId64 " tokens in all at this step\n",
                      TextPosition(file, text, offset).c_str(), here);
        }
        mismatches += here;
      }
      if (at_end) {
        const bool can_end = session.CanEnd();
        bool eos_in_mask = false;
        for (int32_t e : store.eos_ids) eos_in_mask |= Allowed(mask, e);
        if (!can_end) {
          failure = TextPosition(file, text, offset) + ": end of file: EOS is not allowed";
        } else if (!eos_in_mask && !store.eos_ids.empty()) {
          failure = TextPosition(file, text, offset) +
                    ": end of file: CanEnd() is true but no EOS id is in the mask";
        }
        break;
      }
      const Segment& seg = steps[i];
      Status st;
      if (seg.token >= 0) {
        if (!Allowed(mask, seg.token)) {
          failure = TextPosition(file, text, offset) + ": " + TokenLabel(store, seg.token) +
                    " is not in the mask (slow reference: " +
                    (session.AllowsSlow(seg.token) ? "allowed" : "refused") + ")";
          break;
        }
        st = session.Advance(seg.token);
        if (!st.ok()) {
          failure = TextPosition(file, text, offset) + ": " + TokenLabel(store, seg.token) +
                    " is in the mask but Advance refuses it: " + OneLine(st.message());
        }
      } else {
        ++raw_bytes;
        st = session.AdvanceBytes(std::string_view(text).substr(offset, seg.length));
        if (!st.ok()) {
          failure = TextPosition(file, text, offset) + ": byte \"" +
                    Printable(std::string_view(text).substr(offset, 1)) +
                    "\" refused: " + OneLine(st.message());
        }
      }
    }
    if (failure.empty() && mismatches > 0) {
      failure = file + ": " + std::to_string(mismatches) + " mask bits differ from the slow reference";
    }
    if (failure.empty()) {
      ++passed;
      std::printf("%s: ok (%zu steps%s)\n", file.c_str(), n,
                  raw_bytes && t.mode != SegmentMode::kBytes
                      ? (", " + std::to_string(raw_bytes) + " bytes with no token").c_str()
                      : "");
    } else {
      ++failed;
      std::printf("%s\n", failure.c_str());
    }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? kExitFailed : kExitOk;
}

// ---------------------------------------------------------------- sample

bool WriteFileAtomically(const std::string& path, const std::string& data, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    *error = path + ": cannot write: " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = path + ": write failed: " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// Ends the walk of `session` with a shortest completion, cut into tokens
// each checked against its mask, then EOS.  When the search runs out of its
// node budget, the walk is rolled back by 8, 16, 32... tokens and the search
// retried from there.  When no completion is found at all (the search proves
// there is none, or every retry runs out of budget), the session is put back
// where the walk stopped and *why says which.  Sets *why to what was done.
bool Complete(const CompiledStore& store, const Segmenter& segmenter, Completer* completer,
              Session* session, int64_t* tokens, std::string* why) {
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
    const CompletionResult found = completer->Search(session, kNodes, &text, &nodes);
    if (found == CompletionResult::kFound) {
      std::mt19937_64 unused;
      std::vector<uint32_t> mask(store.mask_words());
      int64_t added = 0;
      for (const Segment& seg : segmenter.Cut(text, SegmentMode::kGreedy, &unused)) {
        session->FillMask(mask.data());
        if (seg.token < 0 || !Allowed(mask, seg.token)) {
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
      for (int32_t e : store.eos_ids) eos |= Allowed(mask, e);
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

int Sample(const CommandSpec& spec, const Args& args) {
  if (!args.values.count("-n")) return UsageError(&spec, "missing -n N");
  if (!args.values.count("-o")) return UsageError(&spec, "missing -o DIR");
  int64_t n = 0, seed = 0, max_tokens = 0;
  double eos_bias = 0.05;
  if (!IntFlag(spec, args, "-n", 1, 1, 1000000, &n) ||
      !IntFlag(spec, args, "--seed", 0, 0, INT64_MAX, &seed) ||
      !IntFlag(spec, args, "--max-tokens", 256, 1, INT32_MAX, &max_tokens)) {
    return kExitUsage;
  }
  if (args.values.count("--eos-bias") && !ParseDouble(args.Get("--eos-bias"), 0, 1, &eos_bias)) {
    return UsageError(&spec, "option --eos-bias: expected a probability in [0, 1], got '" +
                                 args.Get("--eos-bias") + "'");
  }
  CompiledStore store;
  Status st = ReadStoreFile(args.positional[0], &store);
  if (!st.ok()) return Error(st.message());
  const std::string dir = args.Get("-o");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return Error(dir + ": cannot create directory" + (ec ? ": " + ec.message() : ""));
  }

  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  Session session(&store);
  Segmenter segmenter(store);
  Completer completer(store);
  int64_t incomplete = 0;
  for (int64_t k = 1; k <= n; ++k) {
    session.Reset();
    std::string ending;
    int64_t tokens = 0;
    bool complete = false;
    for (; tokens < max_tokens; ++tokens) {
      const int32_t tok = DrawToken(store, session.Mask(), eos_bias, &rng, args.Has("--ascii"));
      if (tok < 0) {
        ending = "stopped: the mask is empty and EOS is not allowed (a prefix)";
        break;
      }
      if (IsEos(store, tok)) {
        ending = "ended with EOS";
        complete = true;
        break;
      }
      st = session.Advance(tok);
      if (!st.ok()) {
        ending = "stopped: " + TokenLabel(store, tok) + " is in the mask but Advance refuses it: " +
                 OneLine(st.message()) + " (a prefix)";
        break;
      }
    }
    if (ending.empty()) {
      std::string why;
      const int64_t walked = tokens;
      if (Complete(store, segmenter, &completer, &session, &tokens, &why)) {
        ending = "reached --max-tokens " + std::to_string(max_tokens) + ", " + why +
                 ", ended with EOS";
        complete = true;
      } else {
        ending = "reached --max-tokens " + std::to_string(max_tokens) + " after " +
                 std::to_string(walked) + " tokens; " + why + " (a prefix)";
      }
    }
    if (!complete) ++incomplete;
    const std::string path = (std::filesystem::path(dir) / ("sample_" + std::to_string(k) + ".txt")).string();
    std::string error;
    if (!WriteFileAtomically(path, session.text(), &error)) return Error(error);
    std::printf("=== %s: %" PRId64 " tokens, %s ===\n%s\n", path.c_str(), tokens, ending.c_str(),
                session.text().c_str());
    std::fflush(stdout);
  }
  if (incomplete) {
    std::printf("%" PRId64 " of %" PRId64 " samples are not complete\n", incomplete, n);
    return kExitFailed;
  }
  return kExitOk;
}

// ---------------------------------------------------------------- bench

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * (sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

int Bench(const CommandSpec& spec, const Args& args) {
  CompiledStore store;
  Teacher t;
  int code;
  const auto load0 = std::chrono::steady_clock::now();
  if (!LoadTeacher(spec, args, &store, &t, &code)) return code;
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load0).count();
  int64_t memo_mb = 0;
  if (!IntFlag(spec, args, "--memo-mb", SessionLimits{}.memo_bytes >> 20, 0, 1 << 20, &memo_mb)) {
    return kExitUsage;
  }
  Segmenter segmenter(store);
  std::mt19937_64 rng(t.seed);
  SessionLimits limits;
  limits.memo_bytes = memo_mb << 20;
  Session session(&store, limits);
  std::vector<uint32_t> mask(store.mask_words());
  std::vector<double> mask_us, hit_us, miss_us;
  double advance_seconds = 0;
  int64_t advanced = 0, bad_files = 0;
  size_t max_live = 0;
  using Clock = std::chrono::steady_clock;
  for (size_t f = 0; f < t.files.size(); ++f) {
    const std::string& text = t.texts[f];
    session.Reset();
    for (const Segment& seg : t.Steps(segmenter, f, &rng)) {
      const int64_t misses = session.memo_misses();
      auto t0 = Clock::now();
      session.FillMask(mask.data());
      auto t1 = Clock::now();
      const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
      mask_us.push_back(us);
      (session.memo_misses() == misses ? hit_us : miss_us).push_back(us);
      Status st = seg.token >= 0
                      ? session.Advance(seg.token)
                      : session.AdvanceBytes(std::string_view(text).substr(seg.offset, seg.length));
      advance_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
      if (!st.ok()) {
        std::fprintf(stderr, "cfgmask: %s: not teacher-forced to the end: %s\n",
                     TextPosition(t.files[f], text, seg.offset).c_str(),
                     OneLine(st.message()).c_str());
        ++bad_files;
        break;
      }
      ++advanced;
      max_live = std::max(max_live, session.num_live());
    }
  }
  std::vector<double> sorted = mask_us;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : sorted) sum += v;
  const double mean = sorted.empty() ? 0 : sum / sorted.size();
  const double tokens_per_s = advance_seconds > 0 ? advanced / advance_seconds : 0;
  const int64_t rss = PeakRssBytes();
  std::sort(hit_us.begin(), hit_us.end());
  std::sort(miss_us.begin(), miss_us.end());
  const int64_t hits = session.memo_hits(), misses = session.memo_misses();
  if (args.Has("--json")) {
    std::printf("{\n  \"files\": %zu,\n  \"files_not_finished\": %" PRId64 ",\n"
                "  \"steps\": %zu,\n  \"segment\": %s,\n"
                "  \"mask_us\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"max\": %.3f, "
                "\"mean\": %.3f},\n"
                "  \"advance_tokens_per_s\": %.1f,\n  \"max_live\": %zu,\n"
                "  \"store_load_seconds\": %.6f,\n  \"peak_rss_bytes\": %" PRId64 ",\n"
                "  \"memo\": {\"mb\": %" PRId64 ", \"hits\": %" PRId64 ", \"misses\": %" PRId64
                ", \"steps_without_miss\": %zu, \"p50_without_miss\": %.3f, "
                "\"p50_with_miss\": %.3f}\n}\n",
                t.files.size(), bad_files, sorted.size(),
                JsonString(args.Get("--segment", "greedy")).c_str(), Percentile(sorted, 0.5),
                Percentile(sorted, 0.9), Percentile(sorted, 0.99),
                sorted.empty() ? 0 : sorted.back(), mean, tokens_per_s, max_live, load_seconds,
                rss, memo_mb, hits, misses, hit_us.size(), Percentile(hit_us, 0.5),
                Percentile(miss_us, 0.5));
  } else {
    std::printf("%zu files, %zu steps (%s segmentation)\n", t.files.size(), sorted.size(),
                args.Get("--segment", "greedy").c_str());
    std::printf("  FillMask µs      p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean %.1f\n",
                Percentile(sorted, 0.5), Percentile(sorted, 0.9), Percentile(sorted, 0.99),
                sorted.empty() ? 0 : sorted.back(), mean);
    std::printf("  Advance          %.0f tokens/s, at most %zu live hypotheses\n", tokens_per_s,
                max_live);
    std::printf("  store load       %.3f s\n", load_seconds);
    std::printf("  peak RSS         %s\n", Bytes(rss).c_str());
    if (memo_mb > 0) {
      std::printf("  row memo         %" PRId64 " MiB: %" PRId64 " hits, %" PRId64
                  " misses; steps without a miss %zu (p50 %.1f µs), with one %zu (p50 %.1f µs)\n",
                  memo_mb, hits, misses, hit_us.size(), Percentile(hit_us, 0.5), miss_us.size(),
                  Percentile(miss_us, 0.5));
    }
    if (bad_files) std::printf("  %" PRId64 " files not teacher-forced to the end\n", bad_files);
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  const CommandSpec* spec = nullptr;
  for (const CommandSpec& c : kCommands) {
    if (command == c.name) spec = &c;
  }
  if (!spec) return UsageError(nullptr, "unknown command '" + command + "'");
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("%s\n", spec->usage);
      return kExitOk;
    }
  }
  Args args;
  std::string error;
  if (!ParseArgs(*spec, argc, argv, 2, &args, &error)) return UsageError(spec, error);
  if (command == "compile") return Compile(*spec, args);
  if (command == "stats") return Stats(*spec, args);
  if (command == "check") return Check(*spec, args);
  if (command == "sample") return Sample(*spec, args);
  return Bench(*spec, args);
}

}  // namespace
}  // namespace cfgmask

int main(int argc, char** argv) { return cfgmask::Main(argc, argv); }
