// Teacher-forced mask latency (`cfgmask bench`): files are forced through
// one Session step by step, each step's FillMask timed on its own, in wall
// time and in the thread's CPU time (two clock_gettime calls, about 0.5 µs,
// fall inside the CPU figure), filed as a row-memo hit or miss and as the
// file's first step or not, then the step taken; the session's StepCounters
// give the row walk's parser checks and rows and the filter's time per step,
// and the slowest steps (thread CPU) are kept with their position; the
// figures go into a BenchReport (runtime/tools/report.h renders it as text
// and JSON).
// Tested by tests/py/test_cli.py (bench, text and JSON).
#ifndef CFGMASK_RUNTIME_TOOLS_BENCH_H_
#define CFGMASK_RUNTIME_TOOLS_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/segment.h"
#include "runtime/tools/report.h"

namespace cfgmask {

struct BenchInput {
  std::vector<std::string> files;  // named in messages
  std::vector<std::string> texts;  // their contents
  // The steps of file f (a segmentation of texts[f]), asked for in file order.
  std::function<std::vector<Segment>(size_t f)> steps;
  int64_t memo_mb = 0;  // the session's row memo in MiB (0: off)
  // Check every root's rows before the first step (CompiledStore::AllRowsOk:
  // reads the whole row payload, so no step pays a first touch).
  bool prefault = false;
};

// Fills `report`'s step figures, memo counts and peak memory; a file that
// cannot be forced to its end adds one line "FILE:LINE:COL: why" to
// `errors` and counts in files_not_finished.
void RunBench(const CompiledStore& store, const BenchInput& input, BenchReport* report,
              std::vector<std::string>* errors);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_TOOLS_BENCH_H_
