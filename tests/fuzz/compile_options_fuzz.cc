// Fuzz target: the options the Python package passes through to the compile
// unchecked (compile_grammar's max_lexer_states, max_roots, num_threads,
// max_memory, indenter, start, eos; GrammarMatcher's max_live_states), read
// from the input, on a small grammar and the fuzz tokenizer.  Every outcome
// must be a store or one error of the expected kind on one line; never a
// crash, an abort or an error of another kind.
//
// Input: 4 + 4 + 1 + 1 + 2 bytes of numbers, then NUL-separated strings:
// indenter, start rule, eos.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/compile/compile.h"
#include "runtime/session.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

const char kGrammar[] =
    "start: \"[\" [item (\",\" item)*] \"]\"\n"
    "item: WORD | NUMBER | start\n"
    "other: WORD\n"
    "WORD: /[a-z]+/\n"
    "NUMBER: /[0-9]+/\n"
    "%declare _INDENT\n"
    "%ignore \" \"\n";

const std::string& GrammarPath() {
  static const std::string path = [] {
    const std::string& p = cfgmask::FuzzScratchPath(".lark");
    cfgmask::FuzzWriteFile(p, reinterpret_cast<const uint8_t*>(kGrammar), sizeof(kGrammar) - 1);
    return p;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  GrammarPath();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  if (size < 12 || size > 200) return 0;
  int32_t a, b;
  std::memcpy(&a, data, 4);
  std::memcpy(&b, data + 4, 4);
  CompileOptions o;
  // Small values most of the time, so that compiles finish; any value the
  // bytes give otherwise (negative, zero, huge).
  o.max_lexer_states = (data[8] & 1) ? a : a % 4096;
  o.max_roots = (data[8] & 2) ? b : b % 512;
  o.num_threads = static_cast<int8_t>(data[9]) % 8;
  const int16_t mem = static_cast<int16_t>(data[10] | (data[11] << 8));
  o.max_memory = mem < 0 ? mem : (mem % 64 == 0 ? 0 : int64_t{256 + mem % 1024} << 20);
  std::vector<std::string> strings(3);
  size_t k = 0;
  for (size_t i = 12; i < size && k < 3; ++i) {
    if (data[i] == 0) ++k;
    else strings[k] += static_cast<char>(data[i]);
  }
  o.indenter = strings[0].empty() ? "auto" : strings[0];
  o.start = strings[1];
  std::vector<std::string> warnings;
  o.warnings = &warnings;
  CompiledStore store;
  const Status st =
      CompileGrammar(GrammarPath(), FuzzEnv("CFGMASK_FUZZ_TOKENIZER"), o, true, &store, strings[2]);
  for (const std::string& w : warnings) CFGMASK_FUZZ_CHECK(w.find('\n') == std::string::npos);
  if (!st.ok()) {
    const ErrorCode c = st.code();
    CFGMASK_FUZZ_CHECK(c == ErrorCode::kInvalidArgument || c == ErrorCode::kResourceLimit ||
                       c == ErrorCode::kGrammarSemantics);
    CFGMASK_FUZZ_CHECK(!st.message().empty());
    return 0;
  }
  // The options the compile accepted are those in range.
  CFGMASK_FUZZ_CHECK(o.max_lexer_states >= 1 && o.max_roots >= 1 && o.num_threads >= 0);
  CFGMASK_FUZZ_CHECK(o.max_memory >= 0);
  CFGMASK_FUZZ_CHECK(o.indenter == "auto" || o.indenter == "python" || o.indenter == "none");
  SessionLimits limits;
  limits.max_live_states = 1 + data[9] % 16;
  Session s(&store, limits);
  std::vector<uint32_t> mask = s.Mask();
  CFGMASK_FUZZ_CHECK(static_cast<int32_t>(mask.size()) == store.mask_words());
  return 0;
}
