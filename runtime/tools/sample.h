// Token drawing and the random walks of `cfgmask sample` and the tests; and, for
// the files that include it, the segmentation (runtime/segment.h) and the
// completion search (runtime/completion.h).
// Tested by tests/py/test_cli.py and row_memo_test.cc.
#ifndef CFGMASK_RUNTIME_TOOLS_SAMPLE_H_
#define CFGMASK_RUNTIME_TOOLS_SAMPLE_H_

#include <cstdint>
#include <random>
#include <string>
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

struct SampleOptions {
  int64_t max_tokens = 256;  // tokens drawn before the walk is steered to an end
  double eos_bias = 0.05;    // DrawToken's
  bool ascii_only = false;   // DrawToken's
};

struct SampleResult {
  bool complete = false;  // the text ended with EOS
  int64_t tokens = 0;     // tokens taken
  std::string ending;     // how the walk ended, for people
};

// One random walk for `cfgmask sample`: resets `session`, draws tokens from
// its masks (DrawToken) until EOS or options.max_tokens, then steers the
// text to a shortest completion (CompleteWithTokens).  The text is
// session->text().
SampleResult SampleText(const CompiledStore& store, const Segmenter& segmenter,
                        Completer* completer, Session* session, std::mt19937_64* rng,
                        const SampleOptions& options);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_TOOLS_SAMPLE_H_
