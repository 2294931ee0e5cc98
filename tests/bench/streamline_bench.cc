// Per-step mask latency with and without streamlining, in one run on the same
// teacher-forced files: loads an unstreamlined store (cfgmask compile
// --no-streamline), streamlines a copy in memory, checks that both give the
// same mask at every step, and times Session::FillMask on each, interleaved
// step by step so that both see the same machine load.  Both sessions run
// without the row memo, so the figures are the stores' own.
//
//   streamline_bench STORE.cfgm FILE... [--random-segments]
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/tools/sample.h"
#include "runtime/session.h"
#include "streamline/streamline.h"

using namespace cfgmask;

namespace {

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

void Report(const char* name, const std::vector<double>& us) {
  double sum = 0;
  for (double x : us) sum += x;
  std::printf("%-12s p50 %8.2f  p90 %8.2f  p99 %8.2f  max %9.2f  mean %8.2f  (µs)\n", name,
              Pct(us, 0.5), Pct(us, 0.9), Pct(us, 0.99), Pct(us, 1.0), sum / us.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: streamline_bench STORE.cfgm FILE... [--random-segments]\n");
    return 2;
  }
  CompiledStore plain;
  Status st = ReadStoreFile(argv[1], &plain);
  if (!st.ok()) {
    std::fprintf(stderr, "streamline_bench: %s\n", st.message().c_str());
    return 2;
  }
  if (plain.stats.streamlined) {
    std::fprintf(stderr, "streamline_bench: %s is already streamlined (compile it with --no-streamline)\n",
                 argv[1]);
    return 2;
  }
  SegmentMode mode = SegmentMode::kGreedy;
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--random-segments") mode = SegmentMode::kRandom;
    else files.push_back(argv[i]);
  }
  CompiledStore fast = plain;
  StreamlineStats sl;
  st = StreamlineStore(&fast, StreamlineOptions{}, &sl);
  if (!st.ok()) {
    std::fprintf(stderr, "streamline_bench: %s\n", st.message().c_str());
    return 2;
  }
  std::printf("rows %" PRId64 " -> %" PRId64 " (%.2fx), row bytes %" PRId64 " -> %" PRId64
              ", %" PRId64 " rows folded, %" PRId64 " proofs, %.2f s\n",
              sl.rows_before, sl.rows_after, static_cast<double>(sl.rows_before) / sl.rows_after,
              sl.bytes_before, sl.bytes_after, sl.proved, sl.queries, sl.seconds);
  Segmenter seg(plain);
  std::mt19937_64 rng(1);
  std::vector<double> t_plain, t_fast;
  // The same times by where the step starts (the plain session's lexer
  // state): one live state with 1-9 rows (inside a name, number, string or
  // comment), one with 10 or more (at a terminal boundary), or several.
  constexpr int kClasses = 3;
  const char* const class_name[kClasses] = {"1-9 rows", "10+ rows", "several states"};
  std::vector<double> c_plain[kClasses], c_fast[kClasses];
  std::vector<uint32_t> ma(plain.mask_words()), mb(plain.mask_words());
  int64_t differ = 0;
  using Clock = std::chrono::steady_clock;
  for (const std::string& path : files) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    // The row memo off: it would answer repeated contexts in both stores
    // alike and hide what the store's size costs per step.
    SessionLimits no_memo;
    no_memo.memo_bytes = 0;
    Session a(&plain, no_memo), b(&fast, no_memo);
    for (const Segment& s : seg.Cut(text, mode, &rng)) {
      int cls = 2;
      if (a.num_live() == 1) {
        const int32_t root = plain.root_index[a.live()[0].q];
        const int32_t rows =
            root < 0 ? 0 : plain.root_row_offsets[root + 1] - plain.root_row_offsets[root];
        cls = rows < 10 ? 0 : 1;
      }
      const auto t0 = Clock::now();
      a.FillMask(ma.data());
      const auto t1 = Clock::now();
      b.FillMask(mb.data());
      const auto t2 = Clock::now();
      t_plain.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      t_fast.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      c_plain[cls].push_back(t_plain.back());
      c_fast[cls].push_back(t_fast.back());
      differ += ma != mb;
      const std::string_view bytes = std::string_view(text).substr(s.offset, s.length);
      const bool ok = s.token >= 0 ? a.Advance(s.token).ok() && b.Advance(s.token).ok()
                                   : a.AdvanceBytes(bytes).ok() && b.AdvanceBytes(bytes).ok();
      if (!ok) {
        std::fprintf(stderr, "streamline_bench: %s leaves the language at byte %d\n", path.c_str(),
                     s.offset);
        break;
      }
    }
  }
  std::printf("%zu files, %zu steps, masks differing: %" PRId64 "\n", files.size(), t_plain.size(),
              differ);
  Report("plain", t_plain);
  Report("streamlined", t_fast);
  for (int c = 0; c < kClasses; ++c) {
    if (c_plain[c].empty()) continue;
    std::printf("steps starting with %-14s %6zu: p50 %.2f -> %.2f µs, p90 %.2f -> %.2f µs\n",
                class_name[c], c_plain[c].size(), Pct(c_plain[c], 0.5), Pct(c_fast[c], 0.5),
                Pct(c_plain[c], 0.9), Pct(c_fast[c], 0.9));
  }
  return differ == 0 ? 0 : 1;
}
