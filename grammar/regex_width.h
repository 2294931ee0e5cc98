// Minimum and maximum match length, in code points, of a Python `re`
// pattern, computed the way CPython's re._parser SubPattern.getwidth() does
// (3.11: unbounded repeats saturate at MAXWIDTH = 2**64).  Lark sorts the
// alternatives of a joined terminal by these widths, so the pattern text it
// builds (and therefore our Grammar) depends on them.  `\p{...}` counts as one
// character, as Lark replaces it before asking re.
// Tested by grammar_test.cc.
#ifndef CFGMASK_GRAMMAR_REGEX_WIDTH_H_
#define CFGMASK_GRAMMAR_REGEX_WIDTH_H_

#include <cstdint>
#include <string>

namespace cfgmask::lark {

// UINT64_MAX stands for Python's MAXWIDTH (2**64); no finite width reaches it.
inline constexpr uint64_t kMaxWidth = UINT64_MAX;

struct RegexWidth {
  uint64_t min = 0;
  uint64_t max = 0;
  bool parsed = true;  // false: the text is not valid re syntax (widths are a guess)
};

RegexWidth ComputeRegexWidth(const std::string& regex);

}  // namespace cfgmask::lark

#endif  // CFGMASK_GRAMMAR_REGEX_WIDTH_H_
