// Teacher-forced mask latency: see bench.h.
#include "runtime/tools/bench.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#include "runtime/session.h"

namespace cfgmask {
namespace {

// This thread's CPU time in µs.
double ThreadCpuUs() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int64_t PeakRssBytes() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
}

}  // namespace

void RunBench(const CompiledStore& store, const BenchInput& input, BenchReport* report,
              std::vector<std::string>* errors) {
  SessionLimits limits;
  limits.memo_bytes = input.memo_mb << 20;
  if (input.prefault) {
    const auto p0 = std::chrono::steady_clock::now();
    if (!store.AllRowsOk()) errors->push_back(DamagedRowsMessage());
    report->prefault_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  }
  Session session(&store, limits);
  StepCounters counters;
  session.set_counters(&counters);
  std::vector<uint32_t> mask(store.mask_words());
  std::vector<double> mask_us, hit_us, miss_us, first_us, cpu_us;
  std::vector<BenchReport::SlowStep> slow;  // slowest first
  int64_t preempted = 0;
  double advance_seconds = 0;
  int64_t advanced = 0, bad_files = 0;
  size_t max_live = 0;
  using Clock = std::chrono::steady_clock;
  for (size_t f = 0; f < input.files.size(); ++f) {
    const std::string& text = input.texts[f];
    session.Reset();
    bool first = true;
    for (const Segment& seg : input.steps(f)) {
      const int64_t misses = session.memo_misses();
      const StepCounters before = counters;
      const double c0 = ThreadCpuUs();
      auto t0 = Clock::now();
      session.FillMask(mask.data());
      auto t1 = Clock::now();
      const double cpu = ThreadCpuUs() - c0;
      const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
      mask_us.push_back(us);
      cpu_us.push_back(cpu);
      if (us - cpu > 1000) ++preempted;
      const bool miss = session.memo_misses() != misses;
      report->max_step_reductions =
          std::max(report->max_step_reductions, counters.reductions - before.reductions);
      (miss ? miss_us : hit_us).push_back(us);
      if (slow.size() < BenchReport::kSlowestSteps || cpu > slow.back().cpu_us) {
        BenchReport::SlowStep s;
        s.file = f;
        s.offset = seg.offset;
        s.cpu_us = cpu;
        s.wall_us = us;
        s.memo_miss = miss;
        s.filter_us = (counters.filter_ns - before.filter_ns) / 1e3;
        s.parser_checks = counters.parser_checks - before.parser_checks;
        s.rows_visited = counters.rows_visited - before.rows_visited;
        s.reductions = counters.reductions - before.reductions;
        for (uint32_t w : mask) s.allowed += __builtin_popcount(w);
        auto at = std::upper_bound(slow.begin(), slow.end(), s,
                                   [](const auto& a, const auto& b) { return a.cpu_us > b.cpu_us; });
        slow.insert(at, std::move(s));
        if (slow.size() > BenchReport::kSlowestSteps) slow.pop_back();
      }
      if (first) first_us.push_back(us);
      if (first && f == 0) report->first_step_cold_us = us;
      first = false;
      Status st = seg.token >= 0
                      ? session.Advance(seg.token)
                      : session.AdvanceBytes(std::string_view(text).substr(seg.offset, seg.length));
      advance_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
      if (!st.ok()) {
        errors->push_back(TextPosition(input.files[f], text, seg.offset) +
                          ": not teacher-forced to the end: " + OneLine(st.message()));
        ++bad_files;
        break;
      }
      ++advanced;
      max_live = std::max(max_live, session.num_live());
    }
  }
  report->files = static_cast<int64_t>(input.files.size());
  report->files_not_finished = bad_files;
  report->mask_us = std::move(mask_us);
  report->mask_us_hit = std::move(hit_us);
  report->mask_us_miss = std::move(miss_us);
  report->mask_us_first = std::move(first_us);
  report->mask_cpu_us = std::move(cpu_us);
  report->preempted_steps = preempted;
  for (BenchReport::SlowStep& s : slow) s.where = TextPosition(input.files[s.file], input.texts[s.file], s.offset);
  report->slowest = std::move(slow);
  report->filter_seconds = counters.filter_ns / 1e9;
  report->parser_checks = counters.parser_checks;
  report->rows_visited = counters.rows_visited;
  report->reductions = counters.reductions;
  for (auto* v : {&report->mask_us, &report->mask_us_hit, &report->mask_us_miss,
                  &report->mask_us_first, &report->mask_cpu_us}) {
    std::sort(v->begin(), v->end());
  }
  report->advance_tokens_per_s = advance_seconds > 0 ? advanced / advance_seconds : 0;
  report->max_live = static_cast<int64_t>(max_live);
  report->peak_rss_bytes = PeakRssBytes();
  report->memo_mb = input.memo_mb;
  report->prefault = input.prefault;
  report->memo_hits = session.memo_hits();
  report->memo_misses = session.memo_misses();
}

}  // namespace cfgmask
