// Token drawing for `cfgmask sample` and the tests' random walks; and, for
// the files that include it, the segmentation (runtime/segment.h) and the
// completion search (runtime/completion.h).
// Tested by tests/py/test_cli.py and row_memo_test.cc.
#ifndef CFGMASK_RUNTIME_CLI_H_
#define CFGMASK_RUNTIME_CLI_H_

#include <cstdint>
#include <random>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/completion.h"
#include "runtime/segment.h"

namespace cfgmask {

// Draws a token from `mask` (ceil(V/32) words); with `ascii_only`, among the
// allowed tokens made of printable ASCII, tab and newline when there are any.
// With probability
// `eos_bias` an allowed EOS id when one is allowed, otherwise uniformly among
// the allowed non-EOS tokens (an EOS only when nothing else is allowed).
// Returns -1 when the mask is empty.
int32_t DrawToken(const CompiledStore& store, const std::vector<uint32_t>& mask, double eos_bias,
                  std::mt19937_64* rng, bool ascii_only = false);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_CLI_H_
