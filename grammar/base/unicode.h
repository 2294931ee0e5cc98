// Code-point sets and the Unicode data behind Python's `re` for str patterns:
// the \w \d \s categories (str.isalnum() or '_', str.isdecimal(),
// str.isspace()), _sre.unicode_iscased / unicode_tolower, simple upper case,
// and re._casefix's extra case equivalences.  The tables are generated at
// build time by grammar/base/gen_unicode_tables.py from the Python that configures
// the build, so they follow that Python's Unicode version exactly.
// Tested by regex_test.cc.
#ifndef CFGMASK_GRAMMAR_BASE_UNICODE_H_
#define CFGMASK_GRAMMAR_BASE_UNICODE_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace cfgmask {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A set of code points as sorted, disjoint, non-adjacent closed ranges.
class CodePointSet {
 public:
  using Range = std::pair<uint32_t, uint32_t>;

  CodePointSet() = default;
  static CodePointSet Of(uint32_t c) { return Between(c, c); }
  static CodePointSet Between(uint32_t lo, uint32_t hi);
  static CodePointSet All() { return Between(0, kMaxCodePoint); }

  void Add(uint32_t c) { AddRange(c, c); }
  void AddRange(uint32_t lo, uint32_t hi);
  void AddSet(const CodePointSet& other);
  CodePointSet Complement() const;
  CodePointSet Intersect(const CodePointSet& other) const;
  CodePointSet Minus(const CodePointSet& other) const;
  bool Contains(uint32_t c) const;
  bool Empty() const { return ranges().empty(); }
  bool operator==(const CodePointSet& other) const { return ranges() == other.ranges(); }

  // Normalised ranges (merging happens lazily, on first read after an Add).
  const std::vector<Range>& ranges() const;

 private:
  mutable std::vector<Range> ranges_;
  mutable bool dirty_ = false;
};

enum class CharCategory : uint8_t {
  kDigit,     // \d
  kNotDigit,  // \D
  kSpace,     // \s
  kNotSpace,  // \S
  kWord,      // \w
  kNotWord,   // \W
};

// The members of `category`; `ascii` selects re.ASCII's definitions.
const CodePointSet& CategorySet(CharCategory category, bool ascii);

uint32_t UnicodeToLower(uint32_t c);  // _sre.unicode_tolower
uint32_t UnicodeToUpper(uint32_t c);  // simple upper-case mapping
bool UnicodeIsCased(uint32_t c);      // _sre.unicode_iscased
// re._casefix._EXTRA_CASES[lower]: other lower-case code points that match
// `lower` under re.IGNORECASE (empty for most).
std::vector<uint32_t> UnicodeExtraCases(uint32_t lower);
// The keys of _EXTRA_CASES, ascending.
const std::vector<uint32_t>& UnicodeExtraCaseKeys();
// {c : UnicodeIsCased(c)}
const CodePointSet& UnicodeCasedSet();
// Every (c, f(c)) with f(c) != c for f = UnicodeToLower / UnicodeToUpper.
const std::vector<std::pair<uint32_t, uint32_t>>& LowerPairs();
const std::vector<std::pair<uint32_t, uint32_t>>& UpperPairs();

// {c : f(c) in s} for f = UnicodeToLower / UnicodeToUpper.
CodePointSet LowerPreimage(const CodePointSet& s);
CodePointSet UpperPreimage(const CodePointSet& s);

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_BASE_UNICODE_H_
