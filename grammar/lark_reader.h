// Reader of .lark grammar files: Flex scanner + Bison parser of Lark's
// meta-grammar (lark_scanner.ll, lark_parser.yy), then imports, templates,
// EBNF -> BNF and terminal joining with Lark's semantics (lark/load_grammar.py).
// Tested by lark_reader_test.cc and the differential test against Lark.
#ifndef CFGMASK_GRAMMAR_LARK_READER_H_
#define CFGMASK_GRAMMAR_LARK_READER_H_

#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/base/status.h"

namespace cfgmask {

struct LarkReaderOptions {
  // Where `%import NAME.X` (not relative) looks for NAME.lark, in order, as
  // Lark does: these folders first (Lark's `import_paths`), then cfgmask's
  // own common.lark (grammar/lark/common.lark, compiled in: the same
  // terminals as Lark's), then `lark_grammars_dir`.  A relative import
  // (`%import .NAME.X`) reads the importing grammar's folder.  The reader
  // reads no environment variable and starts no process.
  std::vector<std::string> import_paths;
  // The `grammars/` folder of the lark package, for grammars that import
  // Lark's other grammars (`%import python.NAME`, lark.lark's imports).
  // Empty: such an import fails with an error that names the option.  The
  // command fills it from --lark-grammars DIR or $CFGMASK_LARK_GRAMMARS.
  std::string lark_grammars_dir;
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
