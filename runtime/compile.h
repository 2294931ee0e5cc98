// The whole offline pipeline behind `cfgmask compile` and the Python
// package's compile_grammar: the store build (maskstore/store_builder.h),
// then, unless turned off, the streamlining merge pass (streamline/row_fold.h),
// whose figures go into the store's statistics.
#ifndef CFGMASK_RUNTIME_COMPILE_H_
#define CFGMASK_RUNTIME_COMPILE_H_

#include <string>

#include "grammar/status.h"
#include "maskstore/compiled_store.h"
#include "maskstore/store_builder.h"

namespace cfgmask {

Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline, CompiledStore* out);
// The same with a tokenizer prepared once (PrepareTokenizer) for many grammars.
Status CompileGrammar(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                      const CompileOptions& options, bool streamline, CompiledStore* out);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_COMPILE_H_
