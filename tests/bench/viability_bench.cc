// The stack-viability analysis (parser/stack_viability.h) on a store's LR
// tables: its time per phase, its sizes and the process's peak memory,
// with the load-time limits or without them.  Not a test:
//   build/tests/viability_bench STORE.cfgm [--unbounded] [--max-walk N]
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "maskstore/compiled_store.h"
#include "parser/stack_viability.h"

int main(int argc, char** argv) {
  std::string path;
  cfgmask::StackViabilityLimits limits;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--unbounded") {
      limits.max_lr_states = 1 << 30;
      limits.max_transitions = int64_t{1} << 40;
    } else if (a == "--max-walk" && i + 1 < argc) {
      limits.max_walk = std::atoll(argv[++i]);
    } else {
      path = a;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: viability_bench STORE.cfgm [--unbounded] [--max-walk N]\n");
    return 2;
  }
  cfgmask::CompiledStore s;
  const cfgmask::Status st = cfgmask::ReadStoreFile(path, &s, {});
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  cfgmask::StackViabilityStats vs;
  const auto v = cfgmask::StackViability::Build(s.lr(), s.start_state, limits, &vs);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%s: %d LR states, %d terminals; %s; controls %lld, transitions %lld, goal rules %lld, "
              "depth %d, unsure %lld, walked %lld; %.3f s (saturation %.3f, walk %.3f); peak RSS %.1f MiB\n",
              path.c_str(), s.lr().num_states, s.lr().num_terminals,
              vs.over_limits ? "over the limits" : v ? "checked" : "nothing to check",
              static_cast<long long>(vs.controls), static_cast<long long>(vs.transitions),
              static_cast<long long>(vs.goal_rules), vs.max_depth,
              static_cast<long long>(vs.unsure_states), static_cast<long long>(vs.walked), vs.seconds,
              vs.saturation_seconds, vs.walk_seconds, ru.ru_maxrss / 1024.0);
  return 0;
}
