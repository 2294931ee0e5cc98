// The parse tree of a terminal regex, shaped like CPython's sre_parse output
// so that width computation and match priorities follow it node for node: a
// kConcat is a SubPattern (a sequence of items), a kAlternate is a BRANCH
// whose children are kConcat sequences, a kRepeat's child is the repeated
// SubPattern.  Character leaves keep their raw sre_parse form (LITERAL,
// NOT_LITERAL, IN, ANY plus the flags in force) until ResolveCharClass turns
// them into the exact set of code points Python's matcher accepts, which is
// where re.IGNORECASE's case folding lives.  Nodes live in one vector and
// refer to each other by dense int32_t ids.
// Produced by regex_parser.cc (the one reader of Python `re` syntax), read
// by regex_width.cc (the one width rule; the .lark reader sorts joined
// terminals by it) and by the lexer's NFA compiler (lexer/regex/).
// Tested by regex_test.cc and regex_width_test.cc.
#ifndef CFGMASK_GRAMMAR_BASE_REGEX_AST_H_
#define CFGMASK_GRAMMAR_BASE_REGEX_AST_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/base/status.h"
#include "grammar/base/unicode.h"

namespace cfgmask {

// sre getwidth() of a pattern or subtree, CPython 3.11.7: both ends capped at
// MAXWIDTH = 2^64 (kRegexMaxWidth), which also stands for "unbounded".  Lark
// sorts joined alternatives and its lexer's terminals by it, so it must agree
// with CPython exactly.
inline constexpr unsigned __int128 kRegexMaxWidth = static_cast<unsigned __int128>(1) << 64;
struct RegexWidth {
  unsigned __int128 lo = 0;
  unsigned __int128 hi = 0;
};

// Python's MAXREPEAT: {m,n} bounds must be below it; it stands for "no bound".
inline constexpr uint64_t kRegexMaxRepeat = 0xFFFFFFFFull;
// Groups nested deeper than this are refused (the parsers recurse per
// level; a pattern of thousands of "(" would exhaust the stack).
inline constexpr int kRegexMaxGroupNesting = 100;

// sre flag bits (the values of re.I, re.S, ...; only these are accepted).
enum RegexFlag : uint32_t {
  kRegexIgnoreCase = 2,   // i
  kRegexMultiline = 8,    // m (affects only anchors, which are unsupported)
  kRegexDotAll = 16,      // s
  kRegexUnicode = 32,     // u (the default for str patterns)
  kRegexVerbose = 64,     // x
  kRegexAscii = 256,      // a
};

struct RegexClassItem {
  enum Kind : uint8_t {
    kLiteral,   // the code point lo
    kRange,     // lo..hi
    kCategory,  // \d \w \s and negations
  };
  Kind kind = kLiteral;
  uint32_t lo = 0, hi = 0;
  CharCategory category = CharCategory::kDigit;
  bool operator==(const RegexClassItem&) const = default;
};

// One character position in sre_parse's terms.
struct RegexCharSpec {
  enum Kind : uint8_t {
    kLiteral,     // LITERAL c
    kNotLiteral,  // NOT_LITERAL c ([^c])
    kIn,          // IN items (optionally negated)
    kAny,         // ANY (.)
  };
  Kind kind = kLiteral;
  uint32_t c = 0;
  bool negate = false;
  std::vector<RegexClassItem> items;
  uint32_t flags = 0;  // flags in force where the leaf was parsed
  // sre_parse compares items with tuple equality, which ignores flags.
  bool SameItem(const RegexCharSpec& o) const {
    return kind == o.kind && c == o.c && negate == o.negate && items == o.items;
  }
};

enum class RegexOp : uint8_t {
  kConcat,         // children in sequence (an sre SubPattern)
  kAlternate,      // BRANCH: children are kConcat alternatives, first preferred
  kCharClass,      // one code point: spec (raw), chars (after resolution)
  kRepeat,         // child{min,max}, greedy or lazy; max == kRegexMaxRepeat: no bound
  kGroup,          // capturing or flag-scoped group (SUBPATTERN)
  kNegLookahead,   // (?!child)
  kLookbehind,     // (?<=c) / (?<!c), chars = the ASCII set of c
  kEndOfText,      // \Z, only inside a negative look-ahead body
};

struct RegexNode {
  RegexOp op = RegexOp::kConcat;
  std::vector<int32_t> children;
  RegexCharSpec spec;
  CodePointSet chars;
  uint64_t min = 0, max = 0;
  bool greedy = true;
  bool negative = false;     // kLookbehind
  bool transparent = false;  // kGroup: (?:...) without flags, spliced away
  int32_t offset = 0;        // code-point offset in the pattern
};

struct RegexAst {
  std::vector<RegexNode> nodes;
  int32_t root = -1;  // a kConcat
};

// Parses `pattern` with global `flags` (RegexFlag bits).  Errors name `what`.
// ast->root is set (>= 0) whenever the text is valid sre_parse syntax, also
// when the result is kRegexUnsupported or one of sre_compile's own errors
// (look-behind of variable width): the tree then still has every node that
// getwidth() reads -- a back-reference is its group's body again, a
// conditional group (?(g)yes|no) a branch of yes and no (or empty) -- so the
// width is re._parser's.
Status ParseRegex(std::string_view pattern, uint32_t flags, std::string_view what,
                  RegexAst* ast);

// sre_parse's getwidth() of the subtree at `node` (see RegexWidth).
RegexWidth RegexNodeWidth(const RegexAst& ast, int32_t node);

// The code points a leaf matches in Python (case folding applied).
CodePointSet ResolveCharClass(const RegexCharSpec& spec);

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_BASE_REGEX_AST_H_
