// Terminal patterns in Python `re` syntax -> byte-level Thompson NFA with
// Python's (leftmost-first, backtracking-priority) match semantics.
//
// The reader is the ground floor's (grammar/base/regex_parser.cc, shared with
// the .lark reader); the compiler (regex_compile.cc) turns code-point classes into UTF-8 byte sequences, so a
// token that ends inside a multi-byte character is handled exactly.  Split
// instructions are ordered: `out` is the alternative Python's backtracking
// tries first (greedy loop body, first alternation branch, lazy loop exit), so
// a Pike-VM run that keeps threads in priority order and cuts lower ones at
// the first Match reproduces re.match().
// Tested by regex_test.cc (differential against Python's re).
#ifndef CFGMASK_LEXER_REGEX_H_
#define CFGMASK_LEXER_REGEX_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/base/regex_ast.h"
#include "grammar/base/status.h"

namespace cfgmask {

struct NfaInst {
  enum Op : uint8_t {
    kByteRange,      // consume one byte in [lo, hi], go to out
    kSplit,          // epsilon to out (preferred) and out1 (second)
    kNop,            // epsilon to out
    kMatch,          // the pattern matches here
    kNegLookahead,   // (?!X): continue to out only if sub-NFA `sub` matches no
                     // prefix of the remaining text
    kLookbehind,     // (?<=c) / (?<!c) for a set of ASCII chars: continue to
                     // out iff (previous byte in `set`) != negative
    kEndOfText,      // \Z (only in look-ahead bodies): continue to out iff no
                     // byte follows
  };
  Op op = kNop;
  uint8_t lo = 0, hi = 0;  // kByteRange
  bool negative = false;   // kLookbehind
  int32_t out = -1;
  int32_t out1 = -1;       // kSplit
  int32_t sub = -1;        // kNegLookahead: index into Nfa::subs
  uint64_t set[4] = {0, 0, 0, 0};  // kLookbehind: 256-bit byte set
};

struct Nfa {
  std::vector<NfaInst> insts;
  int32_t start = 0;
  std::vector<Nfa> subs;  // lookahead bodies (themselves without lookarounds)
  std::string DebugString() const;
};

// Compiles `pattern` (Python re syntax; the text Lark's to_regexp() yields,
// inline flags included) with the given global flags ("i", "s", "x", "m",
// "u"; usually empty because Lark inlines them).  *width is the pattern's
// sre getwidth() (RegexNodeWidth).  Errors name `what` (the terminal) and the
// 0-based offset in the pattern.  A pattern needing more
// than `max_insts` NFA instructions (large repeat counts) is a kResourceLimit
// error.
inline constexpr size_t kRegexMaxInsts = size_t{1} << 20;
Status CompileRegex(std::string_view pattern, std::string_view flags, std::string_view what,
                    Nfa* nfa, RegexWidth* width, size_t max_insts = kRegexMaxInsts);

// Python's re.match(pattern, text) run by a slow backtracking-order Pike VM
// over `nfa`: the length of the match, or -1.  `prev_byte` is the byte before
// text (-1 at the start of input), for lookbehinds.  Used by tests and by
// Lark's "unless" analysis (a keyword string matched in full by a regexp).
int64_t MatchPrefix(const Nfa& nfa, std::string_view text, int prev_byte = -1);

}  // namespace cfgmask

#endif  // CFGMASK_LEXER_REGEX_H_
