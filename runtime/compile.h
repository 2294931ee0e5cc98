// The whole offline pipeline behind `cfgmask compile` and the Python
// package's compile_grammar: the store build (maskstore/store_builder.h, its
// phases from the grammar to the store), then, unless turned off, the
// streamlining pass (streamline/streamline.h), whose figures go into the
// store's statistics.  Progress goes to options.progress, "streamline" last,
// with seconds counted from the start of the whole compile.
#ifndef CFGMASK_RUNTIME_COMPILE_H_
#define CFGMASK_RUNTIME_COMPILE_H_

#include <string>
#include <vector>

#include "grammar/status.h"
#include "maskstore/compiled_store.h"
#include "maskstore/store_builder.h"
#include "streamline/streamline.h"

namespace cfgmask {

// Both compile the same way: options are checked first (a bad one is
// kInvalidArgument); the compile runs under a heap budget of
// options.max_memory bytes (0: DefaultMaxMemory()), and running out of
// memory anywhere in it, by that budget or by the machine, is one
// kResourceLimit error naming the phase, with `out` left empty.
int64_t DefaultMaxMemory();  // three quarters of the physical memory


// What a compile found beyond the store's own statistics: the streamlining
// pass's named steps (the seed's figure 6) and the interchangeable terminal
// classes it reports (by terminal name).
struct CompileDetails {
  std::vector<StreamlineStep> streamline_steps;
  // When set, receives a copy of the store as built, before streamlining
  // (`cfgmask reduction` walks both).
  CompiledStore* unstreamlined = nullptr;
  std::vector<std::vector<std::string>> interchangeable;
};

// `eos`, when not empty, names the end-of-sequence token (a token id in
// decimal, or the token's exact text) for a tokenizer that names none or
// another one: it becomes the store's only EOS and is never text.
// `details`, when given, receives CompileDetails.
Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos = "", CompileDetails* details = nullptr);
// The same with a tokenizer prepared once (PrepareTokenizer) for many grammars.
Status CompileGrammar(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos = "", CompileDetails* details = nullptr);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_COMPILE_H_
