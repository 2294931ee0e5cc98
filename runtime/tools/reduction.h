// `cfgmask reduction`: the seed's figure 6 for any grammar, as a research
// instrument.  One compile from every lexing (no pair pruning), then the
// streamlining pass step by step (streamline/streamline.h), each step's rows
// and row bytes both as cfgmask keys its rows (lexer state x item sequence)
// and as the seed keys them (lexer state x terminal sequence); where the
// remaining rows come from (per class of lexer state, per first terminal);
// and, on teacher-forced files or random masked walks, what a decoding step
// costs with and without streamlining: incremental-parser checks and ORed
// rows per step (runtime/session.h StepCounters), at terminal boundaries and
// overall.  The two stores are walked in lockstep and their masks compared at
// every step, so the figures also check the pass's exactness.
// Rendered as text and JSON (report.cc style); the plot is drawn from the
// JSON by the Python package (`python -m cfgmask plot-reduction`).
// Tested by tests/py/test_reduction.py.
#ifndef CFGMASK_RUNTIME_TOOLS_REDUCTION_H_
#define CFGMASK_RUNTIME_TOOLS_REDUCTION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "runtime/compile/compile.h"
#include "streamline/streamline.h"

namespace cfgmask {

struct ReductionOptions {
  CompileOptions compile;               // prune_pairs is forced off (every lexing)
  std::vector<std::string> corpus;      // files to teacher-force (greedy segmentation)
  int64_t walks = 100;                  // random masked walks when `corpus` is empty
  int64_t max_tokens = 64;              // tokens per walk
  uint64_t seed = 0;
};

// Per-step cost of one store over the same steps.
struct StepCost {
  int64_t steps = 0, boundary_steps = 0;
  // Per step: parser checks and ORed rows (sorted, for percentiles).
  std::vector<double> checks, ored, checks_boundary, ored_boundary;
  int64_t rows_visited = 0;
};

struct ReductionReport {
  std::string grammar, start, tokenizer;
  int32_t vocab_size = 0, terminals = 0, lalr_states = 0, lexer_states = 0, roots = 0;
  std::vector<StreamlineStep> steps;
  std::vector<std::vector<std::string>> interchangeable;
  // Rows equal in sequence and tokens counted once over all groups.
  int64_t distinct_rows = 0;
  // Rows per group once interchangeable terminals' Emits are keyed by their
  // class (other item fields kept): an estimate of what applying them gives.
  int64_t rows_interchangeable_bound = 0;
  // Where the final rows come from: (label, rows), largest first.
  std::vector<std::pair<std::string, int64_t>> rows_by_state_class, rows_by_first_terminal;
  double compile_seconds = 0;
  int64_t peak_rss_bytes = 0;
  // Cost per decoding step.
  std::string workload;   // "12 files" / "100 random walks of up to 64 tokens"
  int64_t texts = 0, texts_not_finished = 0;
  StepCost plain, streamlined;
  int64_t mask_mismatches = 0;  // steps whose two masks differ (must be 0)
  std::string first_mismatch;
};

// Compiles and measures.  Errors on input are the compile's (one line with
// the position) or a corpus file's.
// With `streamlined`, also the streamlined store (for `-o`).
Status RunReduction(const std::string& grammar_path, const std::string& tokenizer_path,
                    const ReductionOptions& options, ReductionReport* out,
                    CompiledStore* streamlined = nullptr);

std::string ReductionReportText(const ReductionReport& r);
std::string ReductionReportJson(const ReductionReport& r);

// Draws the figure from the report's JSON into `out` (.svg, .png or .pdf)
// with the Python package (`python -m cfgmask plot-reduction`), run by the
// interpreter `python` (the command passes $CFGMASK_PYTHON or python3).
Status DrawReductionPlot(const std::string& json, const std::string& out,
                         const std::string& python);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_TOOLS_REDUCTION_H_
