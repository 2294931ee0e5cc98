// The `cfgmask` command: compile a grammar and a tokenizer into a store file,
// describe a store, teacher-force files through a Session (`check`, `bench`)
// and draw random texts from the masks (`sample`).  Argument handling and
// printing only: the compile is runtime/compile/compile.h, decoding
// runtime/session.h (segmentation runtime/segment.h), the offline tools
// runtime/tools/ (teacher forcing, the sampler, the bench loop, `reduction`
// and its plot, the statistics and their text and JSON renderings).  Each
// command is described once, in kCommands.
//
// Exit status: 0 success, 1 `check` found a failing file, `reduction` found
// masks that differ with and without streamlining, or `sample` could
// not end a sample with EOS, 2 an error on user input (bad arguments,
// unreadable or malformed grammar, tokenizer or store) reported as one line
// "cfgmask: FILE:LINE:COL: what is wrong".  `compile` writes its store
// atomically (runtime/compile/store_writer.cc); `sample` writes each DIR/sample_K.txt only once
// that sample is complete.
// Tested by tests/py/test_cli.py and tests/py/test_cli_corpus.py.
#include <sys/resource.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "runtime/tools/bench.h"
#include "runtime/tools/sample.h"
#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"
#include "runtime/tools/reduction.h"
#include "runtime/tools/report.h"
#include "runtime/session.h"
#include "runtime/tools/teacher_force.h"

namespace cfgmask {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // `check`: some file did not pass; `sample`: a sample not ended
constexpr int kExitUsage = 2;   // error on user input

// Notes printed after the commands' synopses in the full usage text.
const char kUsageNotes[] =
    "--segment canonical reads the tokenizer's own encoding of FILE from FILE.ids (token ids\n"
    "separated by white space, e.g. from tests/tools/canonical_ids.py); their bytes must spell\n"
    "FILE exactly.  `sample` ends every walk that reaches --max-tokens with a shortest\n"
    "completion, so every sample is a complete text ended by EOS.\n";

// The one description of each command: its usage line is "usage: cfgmask "
// + synopsis (+ "  (" note ")"), and the full usage text is every synopsis
// then kUsageNotes.
struct CommandSpec {
  const char* name;
  const char* synopsis;              // after "cfgmask "
  const char* note;                  // "" or a remark for this command's usage line
  std::set<std::string> valued;      // flags that take a value
  std::set<std::string> booleans;    // flags without a value
  size_t min_positional;
  size_t max_positional;             // SIZE_MAX = any
  std::string Usage() const {
    std::string u = std::string("usage: cfgmask ") + synopsis;
    if (*note) u += std::string("  (") + note + ")";
    return u;
  }
};

const CommandSpec kCommands[] = {
    {"compile",
     "compile GRAMMAR.lark --tokenizer TOK [--start RULE] "
     "[--indenter auto|python|none] [--no-streamline] [--no-pair-pruning] [--no-lexer-modes] [--max-lexer-states N] "
     "[--max-roots N] [--max-memory BYTES[K|M|G]] [--max-seconds S] [--eos TOKEN] [--threads N] "
     "[--lark-grammars DIR] [--quiet] -o OUT.cfgm",
     "--max-seconds: wall time of the whole compile, checked in every phase (default 3600; 0: none)",
     {"--tokenizer", "--start", "--indenter", "--max-lexer-states", "--max-roots", "--max-memory", "--max-seconds", "--eos", "--threads", "--lark-grammars", "-o"},
     {"--no-streamline", "--no-pair-pruning", "--no-lexer-modes", "--quiet"},
     1,
     1},
    {"stats", "stats STORE.cfgm [--json] [--verify]", "", {}, {"--json", "--verify"}, 1, 1},
    {"check",
     "check STORE.cfgm FILE... [--segment greedy|random|bytes|canonical] [--seed S] "
     "[--verify-masks N]",
     "canonical: token ids read from FILE.ids",
     {"--segment", "--seed", "--verify-masks"},
     {},
     2,
     SIZE_MAX},
    {"sample",
     "sample STORE.cfgm -n N [--seed S] [--max-tokens T] [--eos-bias P] [--ascii] -o DIR",
     "",
     {"-n", "--seed", "--max-tokens", "--eos-bias", "-o"},
     {"--ascii"},
     1,
     1},
    {"bench",
     "bench STORE.cfgm FILE... [--json] [--segment greedy|random|bytes|canonical] [--seed S] "
     "[--memo-mb M] [--prefault]",
     "canonical: token ids read from FILE.ids; M: the session's row memo in MiB, 0 = off; "
     "--prefault: every root's rows checked (and so read) before the first step",
     {"--segment", "--seed", "--memo-mb"},
     {"--json", "--prefault"},
     2,
     SIZE_MAX},
    {"reduction",
     "reduction GRAMMAR.lark --tokenizer TOK [--start RULE] [--indenter auto|python|none] "
     "[--corpus FILE... | --walks N] [--max-tokens T] [--seed S] [--threads N] "
     "[--lark-grammars DIR] [--max-memory BYTES] [--json] [--plot OUT.svg|.png] [-o STORE.cfgm]",
     "",
     {"--tokenizer", "--start", "--indenter", "--walks", "--max-tokens", "--seed", "--threads",
      "--lark-grammars", "--max-memory", "--plot", "-o"},
     {"--json", "--corpus"},
     1,
     SIZE_MAX},
};

// Every command's synopsis, then the notes.
std::string FullUsage() {
  std::string u;
  for (const CommandSpec& c : kCommands) {
    u += (u.empty() ? "usage: cfgmask " : "       cfgmask ") + std::string(c.synopsis) + "\n";
  }
  return u + kUsageNotes;
}

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

int Error(const std::string& message) {
  std::fprintf(stderr, "cfgmask: %s\n", MessageLine(message).c_str());
  return kExitUsage;
}

int UsageError(const CommandSpec* spec, const std::string& message) {
  std::fprintf(stderr, "cfgmask: %s\n", MessageLine(message).c_str());
  if (spec) std::fprintf(stderr, "%s\n", spec->Usage().c_str());
  else std::fputs(FullUsage().c_str(), stderr);
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
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    *error = path + ": is not a regular file (a FIFO, socket or device)";
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

void PrintSummary(const CompiledStore& s, const std::string& path) {
  std::fputs(StoreReportText(MakeStoreReport(s, path, FileSize(path))).c_str(), stdout);
}

int Compile(const CommandSpec& spec, const Args& args) {
  if (!args.values.count("--tokenizer")) return UsageError(&spec, "missing --tokenizer TOK");
  if (!args.values.count("-o")) return UsageError(&spec, "missing -o OUT.cfgm");
  const bool quiet = args.Has("--quiet");
  const std::string grammar = args.positional[0], out = args.Get("-o");
  // The store, made by the compile; read here only after the compile's own
  // objects (options, details) are gone.
  std::unique_ptr<CompiledStore> store;
  std::vector<std::string> warnings;
  size_t classes = 0, class_terminals = 0;  // interchangeable terminals
  {
    CompileOptions options;
    options.start = args.Get("--start");
    options.indenter = args.Get("--indenter", options.indenter);
    if (!IsIndenterChoice(options.indenter)) {
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
    if (args.values.count("--max-seconds") &&
        !ParseDouble(args.Get("--max-seconds"), 0, 1e9, &options.max_seconds)) {
      return UsageError(&spec,
                        "option --max-seconds: expected seconds in [0, 1e9] (0: none), got '" +
                            args.Get("--max-seconds") + "'");
    }
    int64_t threads = 0;  // 0: all cores; the store is the same for any count
    if (!IntFlag(spec, args, "--threads", 0, 0, 1024, &threads)) return kExitUsage;
    options.num_threads = static_cast<int32_t>(threads);
    const bool streamline = !args.Has("--no-streamline");
    options.prune_pairs = !args.Has("--no-pair-pruning");
    options.lexer_modes = !args.Has("--no-lexer-modes");
    // Lark's grammars folder, for `%import python.X` and the like (common.lark is built in).
    const char* lark_env = std::getenv("CFGMASK_LARK_GRAMMARS");
    options.lark_grammars_dir = args.Get("--lark-grammars", lark_env != nullptr ? lark_env : "");

    // Never write the store over an input: a typo in -o must not destroy the grammar.
    for (const std::string& input : {grammar, args.Get("--tokenizer")}) {
      std::error_code ec;
      if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(out, input, ec) && !ec) {
        return Error(out + ": -o names the input file " + input + "; refusing to overwrite it");
      }
    }
    // -o writes regular files only: a device node, FIFO or socket is never
    // replaced (checked again when the store is written).
    if (struct stat info; stat(out.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
      return Error(out + ": -o names " +
                   (S_ISDIR(info.st_mode) ? "a directory" : "a device, FIFO or socket") +
                   ", not a regular file; refusing to replace it");
    }
    Progress progress(!quiet && isatty(STDERR_FILENO));
    options.progress = [&](const CompileProgress& p) { progress.Update(p.phase, p.walk_fraction); };
    options.warnings = &warnings;
    Status st;
    {
      CompileDetails details;  // gone before the store is written
      st = CompileGrammar(grammar, args.Get("--tokenizer"), options, streamline, &store,
                          args.Get("--eos"), &details);
      classes = details.interchangeable.size();
      for (const auto& c : details.interchangeable) class_terminals += c.size();
    }
    if (st.ok()) {
      progress.Update("write", 1);
      st = WriteCompiledStore(*store, out);
    }
    progress.Clear();
    if (!st.ok()) return Error(st.message());
  }
  for (const std::string& w : warnings) std::fprintf(stderr, "cfgmask: %s\n", MessageLine(w).c_str());
  const std::string summary =
      quiet ? "" : StoreReportText(MakeStoreReport(*store, out, FileSize(out)));
  if (store->eos_ids.empty()) {
    std::fprintf(stderr,
                 "cfgmask: warning: %s: the tokenizer names no end-of-sequence token, so "
                 "generation under this store can never end; name one with --eos TOKEN\n",
                 OneLine(args.Get("--tokenizer")).c_str());
  }
  if (!quiet) {
    std::fputs(summary.c_str(), stdout);
    if (classes > 0) {
      std::printf("  interchangeable  %zu classes of %zu terminals (reported, not applied)\n",
                  classes, class_terminals);
    }
  }
  return kExitOk;
}

// ---------------------------------------------------------------- stats

int Stats(const CommandSpec& spec, const Args& args) {
  const std::string path = args.positional[0];
  CompiledStore s;
  // --verify: the whole payload's checksum too (opening checks the header,
  // the index part's checksum and every index; see store_file.cc).
  Status st = ReadStoreFile(path, &s, {.verify = args.Has("--verify")});
  if (!st.ok()) return Error(st.message());
  // The figures follow every row: a damaged row is an error, never a read
  // out of bounds (the rows are otherwise checked per root on first use).
  if (!s.AllRowsOk()) return Error(path + ": " + DamagedRowsMessage());
  if (!args.Has("--json")) {
    PrintSummary(s, path);
    // The stack-viability analysis (parser/stack_viability.h), made again
    // for its figures: the store's own copy is null when nothing is checked.
    StackViabilityStats vs;
    StackViability::Build(s.lr(), s.start_state, StackViabilityLimits{}, &vs);
    std::printf("  stack viability  %s: %lld LR states the lower bound leaves open, "
                "%lld P-automaton transitions, %lld goal rules, depth %d, %lld stack summaries walked, %.3f s\n",
                vs.over_limits ? "over its limits, not checked"
                : s.viability  ? "checked"
                               : "nothing to check",
                static_cast<long long>(vs.unsure_states), static_cast<long long>(vs.transitions),
                static_cast<long long>(vs.goal_rules), vs.max_depth,
                static_cast<long long>(vs.walked), vs.seconds);
    return kExitOk;
  }
  std::fputs(StoreReportJson(MakeStoreReport(s, path, FileSize(path))).c_str(), stdout);
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
    const TeacherForceResult r = TeacherForce(store, &session, file, text, steps, verify);
    for (const std::string& note : r.notes) std::printf("%s\n", note.c_str());
    const std::string& failure = r.failure;
    const int64_t raw_bytes = r.raw_bytes;
    const size_t n = steps.size();
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

// A sample file: written as a store file is (the store writer's WriteFileAtomically:
// regular files only, a temporary name of its own).
bool WriteSampleFile(const std::string& path, const std::string& data, std::string* error) {
  const Status st = WriteFileAtomically(path, "", data);
  if (!st.ok()) *error = st.message();
  return st.ok();
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
    SampleOptions options;
    options.max_tokens = max_tokens;
    options.eos_bias = eos_bias;
    options.ascii_only = args.Has("--ascii");
    const SampleResult r = SampleText(store, segmenter, &completer, &session, &rng, options);
    const bool complete = r.complete;
    const int64_t tokens = r.tokens;
    const std::string& ending = r.ending;
    if (!complete) ++incomplete;
    const std::string path = (std::filesystem::path(dir) / ("sample_" + std::to_string(k) + ".txt")).string();
    std::string error;
    if (!WriteSampleFile(path, session.text(), &error)) return Error(error);
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
  BenchInput input;
  input.files = t.files;
  input.texts = t.texts;
  input.steps = [&](size_t f) { return t.Steps(segmenter, f, &rng); };
  input.memo_mb = memo_mb;
  input.prefault = args.Has("--prefault");
  BenchReport report;
  std::vector<std::string> errors;
  RunBench(store, input, &report, &errors);
  for (const std::string& e : errors) std::fprintf(stderr, "cfgmask: %s\n", e.c_str());
  report.segment = args.Get("--segment", "greedy");
  report.store_load_seconds = load_seconds;
  const std::string text = args.Has("--json") ? BenchReportJson(report) : BenchReportText(report);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

// ---------------------------------------------------------------- reduction

int Reduction(const CommandSpec& spec, const Args& args) {
  if (!args.values.count("--tokenizer")) return UsageError(&spec, "missing --tokenizer TOK");
  ReductionOptions o;
  const bool corpus = args.Has("--corpus");
  if (corpus && args.values.count("--walks")) {
    return UsageError(&spec, "give either --corpus FILE... or --walks N, not both");
  }
  if (!corpus && args.positional.size() > 1) {
    return UsageError(&spec, "unexpected argument '" + args.positional[1] +
                                 "' (corpus files follow --corpus)");
  }
  if (corpus && args.positional.size() < 2) return UsageError(&spec, "--corpus needs files");
  for (size_t i = 1; i < args.positional.size(); ++i) o.corpus.push_back(args.positional[i]);
  int64_t seed = 0, threads = 0;
  if (!IntFlag(spec, args, "--walks", 100, 1, 1000000, &o.walks) ||
      !IntFlag(spec, args, "--max-tokens", 64, 1, 100000, &o.max_tokens) ||
      !IntFlag(spec, args, "--seed", 0, 0, INT64_MAX, &seed) ||
      !IntFlag(spec, args, "--threads", 0, 0, 1024, &threads) ||
      !BytesFlag(spec, args, "--max-memory", &o.compile.max_memory)) {
    return kExitUsage;
  }
  o.seed = static_cast<uint64_t>(seed);
  o.compile.num_threads = static_cast<int32_t>(threads);
  o.compile.start = args.Get("--start");
  o.compile.indenter = args.Get("--indenter", o.compile.indenter);
  if (!IsIndenterChoice(o.compile.indenter)) {
    return UsageError(&spec, "option --indenter: expected auto, python or none, got '" +
                                 o.compile.indenter + "'");
  }
  const char* lark_env = std::getenv("CFGMASK_LARK_GRAMMARS");
  o.compile.lark_grammars_dir = args.Get("--lark-grammars", lark_env != nullptr ? lark_env : "");
  const std::string plot = args.Get("--plot");
  if (args.values.count("--plot")) {
    const std::string ext = std::filesystem::path(plot).extension().string();
    if (ext != ".svg" && ext != ".png" && ext != ".pdf") {
      return UsageError(&spec, "option --plot: expected a .svg, .png or .pdf file, got '" + plot + "'");
    }
  }
  ReductionReport report;
  CompiledStore store;
  Status st = RunReduction(args.positional[0], args.Get("--tokenizer"), o, &report, &store);
  if (st.ok() && args.values.count("-o")) st = WriteStoreFile(store, args.Get("-o"));
  if (!st.ok()) return Error(st.message());
  const std::string json = ReductionReportJson(report);
  std::fputs(args.Has("--json") ? json.c_str() : ReductionReportText(report).c_str(), stdout);
  std::fflush(stdout);
  if (!plot.empty()) {
    const char* env = std::getenv("CFGMASK_PYTHON");
    st = DrawReductionPlot(json, plot, env && *env ? env : "python3");
    if (!st.ok()) return Error(st.message());
  }
  // A mask that differs between the two stores is a bug in the pass.
  return report.mask_mismatches ? kExitFailed : kExitOk;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(FullUsage().c_str(), stderr);
    return kExitUsage;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(FullUsage().c_str(), stdout);
    return kExitOk;
  }
  const CommandSpec* spec = nullptr;
  for (const CommandSpec& c : kCommands) {
    if (command == c.name) spec = &c;
  }
  if (!spec) return UsageError(nullptr, "unknown command '" + command + "'");
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("%s\n", spec->Usage().c_str());
      return kExitOk;
    }
  }
  Args args;
  std::string error;
  if (!ParseArgs(*spec, argc, argv, 2, &args, &error)) return UsageError(spec, error);
  // Out of memory outside the compile's own guard (reading a store or a
  // tokenizer, a tiny --max-memory's aftermath): one line, exit 2.
  try {
    if (command == "compile") return Compile(*spec, args);
    if (command == "stats") return Stats(*spec, args);
    if (command == "check") return Check(*spec, args);
    if (command == "sample") return Sample(*spec, args);
    if (command == "reduction") return Reduction(*spec, args);
    return Bench(*spec, args);
  } catch (const std::bad_alloc&) {
    std::fputs("cfgmask: out of memory (a --max-memory limit or the machine's)\n", stderr);
    return kExitUsage;
  }
}

}  // namespace
}  // namespace cfgmask

int main(int argc, char** argv) { return cfgmask::Main(argc, argv); }
