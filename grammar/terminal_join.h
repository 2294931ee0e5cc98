// Literals and terminal definitions as Lark compiles them
// (lark/load_grammar.py: eval_escaping, _literal_to_pattern, PrepareLiterals,
// TerminalTreeToPattern).  A terminal built from several pieces becomes one
// PatternRE whose text joins the pieces' to_regexp(); alternatives are
// sorted by (max width, min width, text length), all descending, inside
// "(?:...|...)".  The exact bytes matter: the lexer sorts terminals by the
// length of this text.
// Tested by grammar_test.cc and lark_reader_test.cc.
#ifndef CFGMASK_GRAMMAR_TERMINAL_JOIN_H_
#define CFGMASK_GRAMMAR_TERMINAL_JOIN_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "grammar/base/regex_ast.h"
#include "grammar/base/status.h"
#include "grammar/lark_tree.h"

namespace cfgmask::lark {

// Number of code points in UTF-8 text (Python's len()).
size_t CodePointLength(const std::string& text);

// Lark's eval_escaping(): the escapes \n \t \r \f \xHH \uHHHH \UHHHHHHHH are
// decoded, `\"` becomes `"`, every other backslash is kept.
Status EvalEscaping(const std::string& text, const SourcePos& pos, std::string* out);

// A STRING or REGEXP token (its full text, quotes and flags included).
Status LiteralToPattern(const Node& token, Pattern* out);
// A `range` tree: "a".."z" becomes PatternRE("[a-z]").
Status RangeToPattern(const Node& range, Pattern* out);

// PrepareLiterals followed by TerminalTreeToPattern on a terminal's tree.
Status TerminalTreeToPattern(const NodePtr& tree, Pattern* out);

// Lark's get_regexp_width(regexp) (lark/utils.py): every `\p{Name}` becomes
// one letter, then re._parser's getwidth() -- the ground floor's reader and
// width rule (grammar/base/regex_ast.h), the same as the lexer's.  Returns
// false where sre_parse rejects the text: Lark then asks the `regex` module
// only whether the empty string matches, which we do not; *width is then
// (0, MAXWIDTH).
bool RegexpWidth(const std::string& regexp, RegexWidth* width);

// UINT64_MAX stands for Python's MAXWIDTH (2**64); no finite width reaches it.
inline constexpr uint64_t kMaxPatternWidth = UINT64_MAX;

// Lark's Pattern.min_width / max_width.
void PatternWidth(const Pattern& pattern, uint64_t* min_width, uint64_t* max_width);

}  // namespace cfgmask::lark

#endif  // CFGMASK_GRAMMAR_TERMINAL_JOIN_H_
