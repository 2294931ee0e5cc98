// Fuzz target: the .lark reader (Flex scanner, Bison parser, imports,
// templates, EBNF -> BNF, terminal joining) on arbitrary text, then, for a
// grammar it accepts, the LALR(1) construction under small resource limits.
// Every outcome must be a Status; an error is one line naming a position.
// Seeds: tests/fuzz/make_seeds.py; dictionary: lark.dict.
#include <cstdint>
#include <string>

#include "grammar/lark_reader.h"
#include "parser/lalr.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cfgmask;
  if (size > 16384) return 0;
  static const LarkReaderOptions options = [] {
    LarkReaderOptions o;
    const std::string dir = FuzzEnv("CFGMASK_LARK_GRAMMARS");
    if (!dir.empty()) o.import_paths.push_back(dir);
    // Small enough that a rule of many optional parts is refused within the
    // per-input time limit of the sanitized build.
    o.max_rule_alternatives = 1000;
    return o;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  Grammar g;
  Status st = ReadLarkString(text, "fuzz.lark", options, &g);
  if (!st.ok()) {
    CFGMASK_FUZZ_CHECK(!st.message().empty());
    CFGMASK_FUZZ_CHECK(st.message().find('\n') == std::string::npos);
    return 0;
  }
  LalrLimits limits;
  limits.max_states = 2000;
  limits.max_items = 200000;
  limits.max_seconds = 0.5;
  ParseTables tables;
  st = BuildParseTables(g, &tables, nullptr, limits);
  if (st.ok()) CFGMASK_FUZZ_CHECK(tables.num_states > 0 && tables.num_states <= limits.max_states);
  return 0;
}
