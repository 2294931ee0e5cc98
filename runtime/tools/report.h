// The figures `cfgmask` reports, each gathered once into a plain struct and
// rendered twice: as the text block a person reads and as JSON (through
// nlohmann-json) that scripts, tests and notebooks read.
//
//  - StoreReport: a compiled store's statistics (seed, figure 6: rows after
//    each streamlining step) and the seconds of each compile phase, as
//    `cfgmask compile` prints them after a compile and `cfgmask stats
//    [--json]` prints them for a store file; the Python Store.stats() reads
//    the same struct.
//  - BenchReport: per-step mask latencies of `cfgmask bench [--json]`.
//
// Tested by tests/py/test_cli.py (stats and bench, text and JSON) and
// tests/py/test_package.py (Store.stats).
#ifndef CFGMASK_RUNTIME_TOOLS_REPORT_H_
#define CFGMASK_RUNTIME_TOOLS_REPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "maskstore/compiled_store.h"

namespace cfgmask {

// printf into a string (up to 1 KiB), for the reports' text.
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// v rounded to 1/scale: JSON numbers keep the precision the text prints.
double Round(double v, double scale);

struct StoreReport {
  std::string file;  // the store file ("" for a store only in memory)
  int64_t file_bytes = 0;
  std::string grammar, start;
  std::string tokenizer_name;
  int32_t vocab_size = 0;
  std::vector<int32_t> eos_ids;
  uint64_t tokenizer_identity = 0;

  int32_t terminals = 0, nonterminals = 0, lalr_states = 0, lexer_states = 0, roots = 0;
  // Terminals whose match can swallow what the grammar lets follow them (a
  // comment before a required operand): a token ending inside one is checked
  // against what can come next (CompiledStore::terminal_next_*).
  std::vector<std::string> followers_checked;
  int64_t rules = 0, items = 0, sequences = 0;
  int64_t nfa_transition_entries = 0;
  int64_t rows = 0;
  int64_t terminal_sequence_keys = 0;
  int64_t simulated_pairs = 0;
  int64_t rows_list = 0, rows_complement = 0, rows_bitset = 0;  // by RowKind
  int64_t row_token_entries = 0, row_bitset_words = 0;
  int64_t memory_bytes = 0;

  // Streamlining (CompiledStore::Stats).
  bool streamlined = false;
  int64_t rows_before_streamlining = 0, row_bytes_before = 0;
  int64_t rows_deleted = 0, never_queries = 0;
  int64_t rows_after_fold = 0, row_bytes_after = 0, fold_queries = 0, rows_folded = 0;

  // Seconds of each compile phase, in pipeline order: grammar, lalr,
  // automaton (the automaton, the tokenizer and the vocabulary walk),
  // tokenizer (within automaton), store, streamline.
  std::vector<std::pair<std::string, double>> seconds;
  double TotalSeconds() const;  // every phase but "tokenizer" (counted in "automaton")
};

// A message as the command and the Python package print it: one line of
// valid UTF-8 under 1,000 bytes.  Newlines become spaces; NUL, other
// control bytes and bytes that are not UTF-8 become \xNN; past 900 bytes
// the middle is cut ("... [N bytes cut] ..."), so that both the position at
// the start and the end of the message remain.
std::string MessageLine(const std::string& message);

// `file_bytes`: the size of `file` on disk (0 when there is none).
StoreReport MakeStoreReport(const CompiledStore& store, const std::string& file,
                            int64_t file_bytes);
// The summary block of `cfgmask compile` and `cfgmask stats`.
std::string StoreReportText(const StoreReport& r);
// `cfgmask stats --json`: one JSON object, newline-terminated.
std::string StoreReportJson(const StoreReport& r);

struct BenchReport {
  int64_t files = 0, files_not_finished = 0;
  std::string segment;
  std::vector<double> mask_us;           // every step's FillMask, sorted
  std::vector<double> mask_us_hit;       // steps answered from the row memo alone, sorted
  std::vector<double> mask_us_miss;      // steps with a memo miss, sorted
  std::vector<double> mask_us_first;     // each file's first step (a fresh session), sorted
  // The run's very first step: the store just opened, none of its pages
  // touched yet (the first file's first step, also in mask_us_first).
  double first_step_cold_us = 0;
  bool prefault = false;                 // rows checked before the first step (--prefault)
  double prefault_seconds = 0;           // what that took
  // Every step's FillMask in this thread's CPU time, sorted: on a loaded
  // machine the wall-clock tail is mostly time the thread was not running.
  std::vector<double> mask_cpu_us;
  int64_t preempted_steps = 0;           // steps whose wall time exceeds CPU time by > 1 ms
  double advance_tokens_per_s = 0;
  int64_t max_live = 0;
  double store_load_seconds = 0;
  int64_t peak_rss_bytes = 0;
  int64_t memo_mb = 0, memo_hits = 0, memo_misses = 0;
  // The steps with the most thread CPU time, slowest first (at most
  // kSlowestSteps): where the tail comes from.
  struct SlowStep {
    std::string where;      // FILE:LINE:COL of the step's token
    size_t file = 0, offset = 0;  // the same, as the input's file index and byte offset
    double cpu_us = 0, wall_us = 0;
    bool memo_miss = false;
    int64_t allowed = 0;    // tokens the mask allowed
    double filter_us = 0;   // of it, the filter after the rows (the scope layer's), wall time
    int64_t parser_checks = 0, rows_visited = 0;  // the row walk's (StepCounters)
    int64_t reductions = 0;  // the parser reductions its checks made (StepCounters)
  };
  static constexpr size_t kSlowestSteps = 5;
  // Over all steps: wall time in the filter after the rows, and the row
  // walk's counts (StepCounters).
  double filter_seconds = 0;
  int64_t parser_checks = 0, rows_visited = 0, reductions = 0;
  // The most reductions one step's checks made: what grows if a check's
  // cost grows with the stack (a long list); ChainMemo keeps it bounded.
  int64_t max_step_reductions = 0;
  std::vector<SlowStep> slowest;
};

// The value at quantile p in [0,1] of a sorted sample (nearest rank; 0 when empty).
double Percentile(const std::vector<double>& sorted, double p);
std::string BenchReportText(const BenchReport& r);
std::string BenchReportJson(const BenchReport& r);

// "12.3 KiB": a byte count for people.
std::string HumanBytes(int64_t n);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_TOOLS_REPORT_H_
