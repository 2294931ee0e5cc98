// The one width rule: CPython 3.11.7 re._parser SubPattern.getwidth() over
// the sre-shaped tree of regex_ast.h, used by the .lark reader (Lark sorts
// the alternatives of a joined terminal by it, lark.utils.get_regexp_width)
// and by the lexer (Lark orders its terminals by priority, then by -max
// width).  Lookarounds and anchors count 0, a group or a back-reference its
// body, a branch the smallest minimum and largest maximum of its
// alternatives, a repeat {m,n} multiplies (an unbounded repeat of a body of
// non-zero maximum has hi = MAXWIDTH = 2^64), every character leaf 1; both
// ends are capped at MAXWIDTH (capping after every step gives the same result
// because every operation is monotone).
// Tested by regex_test.cc and regex_width_test.cc (every terminal of every
// grammar against Lark's get_regexp_width).
#include <algorithm>
#include <cstdint>

#include "grammar/base/regex_ast.h"

namespace cfgmask {
namespace {

using U128 = unsigned __int128;

U128 Cap(U128 v) { return v < kRegexMaxWidth ? v : kRegexMaxWidth; }

}  // namespace

RegexWidth RegexNodeWidth(const RegexAst& ast, int32_t node) {
  const RegexNode& n = ast.nodes[node];
  RegexWidth w;
  switch (n.op) {
    case RegexOp::kCharClass:
      w.lo = w.hi = 1;
      break;
    case RegexOp::kConcat:
    case RegexOp::kGroup:
      for (int32_t c : n.children) {
        RegexWidth cw = RegexNodeWidth(ast, c);
        w.lo = Cap(w.lo + cw.lo);
        w.hi = Cap(w.hi + cw.hi);
      }
      break;
    case RegexOp::kAlternate: {
      w.lo = kRegexMaxWidth;
      for (int32_t c : n.children) {
        RegexWidth cw = RegexNodeWidth(ast, c);
        w.lo = std::min(w.lo, cw.lo);
        w.hi = std::max(w.hi, cw.hi);
      }
      break;
    }
    case RegexOp::kRepeat: {
      RegexWidth cw = RegexNodeWidth(ast, n.children[0]);
      w.lo = Cap(cw.lo * n.min);
      w.hi = (n.max == kRegexMaxRepeat && cw.hi != 0) ? kRegexMaxWidth : Cap(cw.hi * n.max);
      break;
    }
    case RegexOp::kNegLookahead:
    case RegexOp::kLookbehind:
    case RegexOp::kEndOfText:
      break;
  }
  return w;
}

}  // namespace cfgmask
