// IncrementalParser: see incremental_parser.h.
#include "parser/incremental_parser.h"

namespace cfgmask {

bool IncrementalParser::Accepts(int32_t terminal) const {
  LrScratch scratch(stack_.top_node(), nullptr, 0);
  const LrResult r = LrFeed(lr_, terminal, &scratch);
  return r.outcome == (terminal == lr_.end_terminal() ? LrOutcome::kAccept : LrOutcome::kShift);
}

bool IncrementalParser::Consume(int32_t terminal) {
  if (terminal == lr_.end_terminal()) return AcceptsEnd();
  LrScratch scratch(stack_.top_node(), nullptr, 0);
  if (LrFeed(lr_, terminal, &scratch).outcome != LrOutcome::kShift) return false;
  std::vector<int32_t> pushed(scratch.local_size());
  for (int32_t i = 0; i < scratch.local_size(); ++i) pushed[i] = scratch.At(i);
  stack_ = LrStack::Build(scratch.base(), pushed.data(), pushed.size());
  return true;
}

}  // namespace cfgmask
