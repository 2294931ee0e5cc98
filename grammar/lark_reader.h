// Reader of .lark grammar files: Flex scanner + Bison parser of Lark's
// meta-grammar (lark_scanner.ll, lark_parser.yy), then imports, templates,
// EBNF -> BNF and terminal joining with Lark's semantics (lark/load_grammar.py).
// Tested by lark_reader_test.cc and the differential test against Lark.
#ifndef CFGMASK_GRAMMAR_LARK_READER_H_
#define CFGMASK_GRAMMAR_LARK_READER_H_

#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/status.h"

namespace cfgmask {

struct LarkReaderOptions {
  // Folders searched for `%import common.X` / `%import unicode.X` etc.:
  // the `grammars/` folder of the installed lark package.  When empty the
  // reader asks $CFGMASK_LARK_GRAMMARS, then `python3 -c "import lark"`.
  std::vector<std::string> import_paths;
  // Start rules; empty means {"start"}.
  std::vector<std::string> start;
  // Alternatives one rule may expand to: `x?` and `[x]` each double them, so
  // 26 optional parts in one rule would be 67 million.  More is refused with
  // a kResourceLimit error at the rule (python.lark's largest rule has 26,
  // sql.lark's 150).
  int64_t max_rule_alternatives = 200000;
  // When set, receives "FILE:LINE:COL: warning: ..." for likely mistakes in
  // the main file that Lark accepts silently: rules the start rules never
  // reach, terminals nothing uses.
  std::vector<std::string>* warnings = nullptr;
};

// Reads `path` (and what it imports).  Errors are "FILE:LINE:COL: message".
Status ReadLarkFile(const std::string& path, const LarkReaderOptions& options, Grammar* out);
// Same for grammar text held in memory; `name` is used in messages and as the
// base for relative imports.
Status ReadLarkString(const std::string& text, const std::string& name,
                      const LarkReaderOptions& options, Grammar* out);

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_LARK_READER_H_
