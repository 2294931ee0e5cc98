// is_always_legal on the LR tables: see always_legal.h.
#include "streamline/always_legal.h"

#include <chrono>

#include "grammar/base/check.h"

namespace cfgmask {
LrAlwaysLegalAnalysis::LrAlwaysLegalAnalysis(const Grammar& grammar, const ParseTables& tables,
                                             int start_index, AlwaysLegalOptions options)
    : num_grammar_terminals_(grammar.num_terminals()),
      exploration_(tables, tables.start_state.at(start_index),
                   ExplorationOptions{options.max_stack, options.max_nodes}) {
  CFGMASK_CHECK(tables.num_terminals == grammar.num_terminals() + 1);
}

bool LrAlwaysLegalAnalysis::IsAlwaysLegal(int32_t x, std::span<const int32_t> s) {
  const auto t0 = std::chrono::steady_clock::now();
  ++stats_.queries;
  CFGMASK_CHECK(x >= 0 && x < num_grammar_terminals_);
  const bool proved = exploration_.ProveAfter(x, s.data(), static_cast<int32_t>(s.size()));
  stats_.nodes += exploration_.steps();
  stats_.budget_exceeded += exploration_.exceeded();
  stats_.proved += proved;
  stats_.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return proved;
}

int32_t AlwaysLegalStep::FoldLength(int32_t seq) {
  const int32_t* items = s_.seq_data.data() + s_.seq_offsets[seq];
  int32_t len = s_.seq_offsets[seq + 1] - s_.seq_offsets[seq];
  for (bool again = len >= 2; again;) {
    again = false;
    answers_.SuffixIds(items, len, &suffix_);
    for (int32_t j = 0; j + 1 < len; ++j) {
      if (s_.KindOf(items[j]) != ItemKind::kEmit) continue;
      const bool ok = answers_.Get(suffix_[j], *x_, [&] {
        return x_->ProveAfterEmit(items[j], items + j + 1, len - j - 1);
      });
      if (ok) {
        len = j + 1;
        again = true;
        break;
      }
    }
  }
  return len;
}

}  // namespace cfgmask
