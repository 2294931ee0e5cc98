// The compiled store the runtime fuzz targets drive: a grammar compiled with
// a small tokenizer once per process, cached as a store file so that later
// runs only load it.  Paths come from the environment that run_fuzz.sh sets:
//   CFGMASK_FUZZ_GRAMMAR    the .lark file (default: Lark's python.lark)
//   CFGMASK_FUZZ_START      its start rule (default: file_input)
//   CFGMASK_FUZZ_TOKENIZER  a small tokenizer (make_seeds.py writes one)
//   CFGMASK_FUZZ_STORE      the cache file
#ifndef CFGMASK_TESTS_FUZZ_FUZZ_STORE_H_
#define CFGMASK_TESTS_FUZZ_FUZZ_STORE_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "maskstore/compiled_store.h"
#include "runtime/compile/compile.h"
#include "runtime/compile/store_writer.h"
#include "tests/fuzz/fuzz_util.h"

namespace cfgmask {

inline const CompiledStore& FuzzStore() {
  static const CompiledStore* store = [] {
    auto* s = new CompiledStore;
    const std::string cache = FuzzEnv("CFGMASK_FUZZ_STORE");
    if (!cache.empty() && ReadStoreFile(cache, s).ok()) return s;
    std::string grammar = FuzzEnv("CFGMASK_FUZZ_GRAMMAR");
    std::string start = FuzzEnv("CFGMASK_FUZZ_START");
    if (grammar.empty()) {
      grammar = FuzzEnv("CFGMASK_LARK_GRAMMARS") + "/python.lark";
      if (start.empty()) start = "file_input";
    }
    const std::string tokenizer = FuzzEnv("CFGMASK_FUZZ_TOKENIZER");
    CompileOptions options;
    options.start = start;
    Status st = CompileStore(grammar, tokenizer, options, s);
    if (!st.ok()) {
      std::fprintf(stderr, "fuzz store: %s (set CFGMASK_FUZZ_TOKENIZER; see run_fuzz.sh)\n",
                   st.ToString().c_str());
      std::exit(1);
    }
    if (!cache.empty()) WriteStoreFile(*s, cache);
    return s;
  }();
  return *store;
}

}  // namespace cfgmask

#endif  // CFGMASK_TESTS_FUZZ_FUZZ_STORE_H_
