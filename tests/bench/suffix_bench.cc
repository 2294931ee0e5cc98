// Completion in the middle of a file: what an exact suffix costs
// (runtime/suffix_quotient.h).  For a text the store's grammar accepts: the
// suffix is its last N bytes (N = each of --sizes), the middle the
// `--middle` bytes before them, the prefix the rest (teacher-forced).  Per
// size: the set-up (SetSuffix: the quotient's build) and the per-step mask
// (FillMask) while the middle is teacher-forced by greedy tokens, with the
// suffix and, on the same steps, without it.
// First the per-store prediction (SuffixQuotient::Fits); a store past the
// limit ends there.
// --no-indenter (a probe for grammars with the Python indenter, which the
// quotient does not cover yet): the store's newline is taken as a plain
// terminal and only the quotient's build is timed, per size and for the
// empty suffix (with --terminals: the terminal-level middle), with the
// P-automaton's transitions by the kind of state that holds them.
// Not a test: build/tests/suffix_bench STORE.cfgm TEXT [--middle BYTES]
//   [--sizes 100,2048,51200] [--runs N] [--no-indenter [--limit N]] [--terminals]
// --terminals: the terminal-level middle instead of the byte-level one;
// --auto: the session's default (SuffixMiddle::kAuto).
// --shared-memo: every run's session shares one row memo, as a server's
// sessions of one store do (and with it the lexing classes the filter
// checks: SuffixLexings); the last two columns are then the runs after the
// first alone.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/row_memo.h"
#include "runtime/segment.h"
#include "runtime/session.h"
#include "runtime/suffix_quotient.h"

namespace {

double Micros(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cfgmask;
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: suffix_bench STORE.cfgm TEXT [--middle BYTES] "
                 "[--sizes 100,2048,51200] [--runs N]\n");
    return 2;
  }
  size_t middle = 64;
  int runs = 3;
  std::vector<size_t> sizes = {100, 2048, 51200};
  bool no_indenter = false;
  int64_t limit = 0;  // --limit N: the quotient's limits (rules, transitions) in the probe
  SuffixMiddle kind = SuffixMiddle::kBytes;
  bool shared_memo = false;
  for (int i = 3; i < argc; ++i) {
    if (std::string(argv[i]) == "--no-indenter") no_indenter = true;
    if (std::string(argv[i]) == "--terminals") kind = SuffixMiddle::kTerminals;
    if (std::string(argv[i]) == "--auto") kind = SuffixMiddle::kAuto;
    if (std::string(argv[i]) == "--shared-memo") shared_memo = true;
  }
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--no-indenter" || a == "--terminals" || a == "--auto" || a == "--shared-memo") {
      --i;
      continue;
    }
    if (a == "--middle") middle = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--limit") limit = std::strtoll(argv[i + 1], nullptr, 10);
    if (a == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--sizes") {
      sizes.clear();
      std::stringstream ss(argv[i + 1]);
      std::string x;
      while (std::getline(ss, x, ',')) sizes.push_back(std::strtoull(x.c_str(), nullptr, 10));
    }
  }
  CompiledStore store;
  if (Status st = ReadStoreFile(argv[1], &store); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  std::ifstream f(argv[2], std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (no_indenter) {
    store.indenter_nl = -1;
    SuffixQuotientLimits fit_limits;
    if (limit > 0 && kind == SuffixMiddle::kBytes) {
      fit_limits.max_rules = fit_limits.max_transitions = limit;
    }
    SuffixQuotientStats fit;
    const Status fst = SuffixQuotient::Fits(&store, fit_limits, &fit);
    std::printf("byte-level middle fits: %s (%lld controls, %lld rules counted, %.1f ms)\n",
                fst.ok() ? "yes" : "no", static_cast<long long>(fit.controls),
                static_cast<long long>(fit.rules), fit.seconds * 1000);
    std::printf("%-9s %9s %10s %10s %12s %12s %8s\n", "suffix", "bytes", "setup ms", "controls",
                "rules", "transitions", "middle");
    std::vector<size_t> all = sizes;
    all.insert(all.begin(), 0);
    for (size_t want : all) {
      if (want >= text.size()) continue;
      const std::string suffix = text.substr(text.size() - want);
      std::vector<double> setup;
      SuffixQuotientStats st;
      std::string verdict = "ok";
      for (int r = 0; r < runs; ++r) {
        std::shared_ptr<SuffixQuotient> q;
        const auto t0 = std::chrono::steady_clock::now();
        SuffixQuotientLimits limits;
        limits.middle = kind;
        if (limit > 0) limits.max_rules = limits.max_transitions = limit;
        const Status b = SuffixQuotient::Build(&store, suffix, limits, &q, &st);
        setup.push_back(Micros(t0, std::chrono::steady_clock::now()) / 1000);
        if (!b.ok()) {
          verdict = b.message();
          break;
        }
      }
      std::printf("%-9zu %9zu %10.1f %10lld %12lld %12lld %8s %s\n", want, suffix.size(),
                  Pct(setup, 0.5), static_cast<long long>(st.controls),
                  static_cast<long long>(st.rules), static_cast<long long>(st.transitions),
                  st.terminal_middle ? "terms" : "bytes", verdict.c_str());
      {  // where the transitions sit (SuffixQuotientStats::Holder), largest first
        std::vector<std::pair<int64_t, int32_t>> by;
        for (int32_t h = 0; h < SuffixQuotientStats::kNumHolders; ++h) {
          if (st.transitions_by_holder[h] > 0) by.emplace_back(-st.transitions_by_holder[h], h);
        }
        std::sort(by.begin(), by.end());
        std::printf("  transitions by holder:");
        for (const auto& [n, h] : by) {
          std::printf(" %s %lld;", SuffixQuotientStats::HolderName(h), static_cast<long long>(-n));
        }
        std::printf("\n");
      }
      if (!st.byte_path_emits.empty()) {  // the terminal-level middle's Boundary Emits
        std::vector<std::pair<int64_t, size_t>> by;
        for (size_t t = 0; t < st.byte_path_emits.size(); ++t) {
          if (st.byte_path_emits[t] > 0) by.emplace_back(-st.byte_path_emits[t], t);
        }
        std::sort(by.begin(), by.end());
        std::printf("  Emits that no blank ends (per terminal):");
        for (size_t i = 0; i < by.size() && i < 12; ++i) {
          const size_t t = by[i].second;
          std::printf(" %s %lld", t < store.terminal_names.size() ? store.terminal_names[t].c_str() : "?",
                      static_cast<long long>(-by[i].first));
        }
        std::printf("\n");
      }
    }
    return 0;
  }
  if (!SuffixQuotient::Supported(store)) {
    std::fprintf(stderr, "%s: the grammar has an indenter: no exact suffix masks\n", argv[1]);
    return 2;
  }
  {
    // The per-store prediction Build starts with (SuffixQuotient::Fits).
    SuffixQuotientStats fit;
    const Status st = SuffixQuotient::Fits(&store, SuffixQuotientLimits{}, &fit);
    std::printf("fits: %s (middle layer: %lld controls, %lld rules counted, %.1f ms)\n",
                st.ok() ? "yes" : "no, prefix masks", static_cast<long long>(fit.controls),
                static_cast<long long>(fit.rules), fit.seconds * 1000);
    if (!st.ok() && kind == SuffixMiddle::kBytes) return 0;
  }
  std::shared_ptr<RowMemo> memo =
      shared_memo ? std::make_shared<RowMemo>(&store, SessionLimits{}.memo_bytes) : nullptr;
  Segmenter seg(store);
  std::vector<uint32_t> mask(store.mask_words());
  std::printf("%-9s %9s %9s %10s %10s %12s %6s %9s %9s %9s %9s %9s\n", "suffix", "bytes",
              "setup ms", "controls", "rules", "transitions", "steps", "mask p50", "mask p99",
              "plain p50", "plain p99", shared_memo ? "later p50 / p99" : "mask max");
  for (size_t want : sizes) {
    if (want + middle >= text.size()) {
      std::fprintf(stderr, "%s: shorter than %zu + --middle bytes\n", argv[2], want);
      return 2;
    }
    const std::string suffix = text.substr(text.size() - want);
    const std::string mid = text.substr(text.size() - want - middle, middle);
    const std::string prefix = text.substr(0, text.size() - want - middle);
    const std::vector<Segment> steps = seg.Cut(mid, SegmentMode::kGreedy, nullptr);
    std::vector<double> setup, with, without, later;
    int64_t controls = 0, transitions = 0, rules = 0;
    bool exact = true, s_terminal = false;
    for (int r = 0; r < runs; ++r) {
      Session s(&store, SessionLimits{}, memo), plain(&store);
      if (!s.AdvanceBytes(prefix).ok() || !plain.AdvanceBytes(prefix).ok()) {
        std::fprintf(stderr, "the prefix is refused\n");
        return 1;
      }
      const auto t0 = std::chrono::steady_clock::now();
      s.SetSuffix(suffix, kind);
      setup.push_back(Micros(t0, std::chrono::steady_clock::now()) / 1000);
      exact = s.suffix_exact();
      if (exact) {
        s_terminal = s.suffix_quotient()->stats().terminal_middle;
        controls = s.suffix_quotient()->stats().controls;
        transitions = s.suffix_quotient()->stats().transitions;
        rules = s.suffix_quotient()->stats().rules;
      }
      for (const Segment& g : steps) {
        auto a = std::chrono::steady_clock::now();
        s.FillMask(mask.data());
        auto b = std::chrono::steady_clock::now();
        plain.FillMask(mask.data());
        auto c = std::chrono::steady_clock::now();
        with.push_back(Micros(a, b));
        without.push_back(Micros(b, c));
        if (r > 0) later.push_back(Micros(a, b));
        const Status st = g.token >= 0 ? s.Advance(g.token)
                                       : s.AdvanceBytes(mid.substr(g.offset, g.length));
        if (!st.ok()) {
          std::fprintf(stderr, "the middle is refused: %s\n", st.message().c_str());
          return 1;
        }
        if (g.token >= 0) {
          (void)plain.Advance(g.token);
        } else {
          (void)plain.AdvanceBytes(mid.substr(g.offset, g.length));
        }
      }
      if (!s.CanEnd()) {
        std::fprintf(stderr, "prefix + middle + suffix does not end\n");
        return 1;
      }
    }
    char last[64];
    if (shared_memo) {
      std::snprintf(last, sizeof last, "%.0f / %.0f", Pct(later, 0.5), Pct(later, 0.99));
    } else {
      std::snprintf(last, sizeof last, "%.0f", Pct(with, 1.0));
    }
    std::printf("%-9s %9zu %9.1f %10lld %10lld %12lld %6zu %9.0f %9.0f %9.0f %9.0f %9s%s%s\n",
                std::to_string(want).c_str(), suffix.size(), Pct(setup, 0.5),
                static_cast<long long>(controls), static_cast<long long>(rules),
                static_cast<long long>(transitions),
                steps.size(), Pct(with, 0.5), Pct(with, 0.99), Pct(without, 0.5),
                Pct(without, 0.99), last, exact ? "" : "  (over the limit: prefix masks)",
                exact && s_terminal ? "  (terminal-level)" : "");
  }
  return 0;
}
