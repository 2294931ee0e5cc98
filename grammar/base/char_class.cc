// ResolveCharClass (regex_ast.h): the exact set of code points one sre leaf
// (LITERAL, NOT_LITERAL, IN, ANY with the flags in force) matches in Python.
// Under re.IGNORECASE this reproduces sre_compile's treatment of LITERAL / IN
// (_optimize_charset with the _EXTRA_CASES fix-ups) and _sre's "compare
// lower(ch)" matching.  Used by the reader (one-character look-behinds) and
// by the lexer's NFA compiler.
// Tested by regex_test.cc.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/base/regex_ast.h"
#include "grammar/base/unicode.h"

namespace cfgmask {
namespace {

constexpr uint32_t kBmpEnd = 0x10000;

// ---- case folding (sre_compile + _sre for str patterns) -------------------

struct CaseRules {
  bool ascii;
  uint32_t Lower(uint32_t c) const {
    if (!ascii) return UnicodeToLower(c);
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
  }
  bool IsCased(uint32_t c) const {
    if (!ascii) return UnicodeIsCased(c);
    return c < 128 && ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  }
  std::vector<uint32_t> Fixes(uint32_t lower) const {
    return ascii ? std::vector<uint32_t>{} : UnicodeExtraCases(lower);
  }
  // {ch : Lower(ch) in s}
  CodePointSet LowerPreimage(const CodePointSet& s) const {
    if (!ascii) return cfgmask::LowerPreimage(s);
    CodePointSet out = s.Minus(CodePointSet::Between('A', 'Z'));
    for (uint32_t c = 'A'; c <= 'Z'; ++c) {
      if (s.Contains(c + 32)) out.Add(c);
    }
    return out;
  }
  bool AnyCased(uint32_t lo, uint32_t hi) const {
    if (ascii) {
      for (uint32_t c = lo; c <= hi && c < 128; ++c) {
        if (IsCased(c)) return true;
      }
      return false;
    }
    return !UnicodeCasedSet().Intersect(CodePointSet::Between(lo, hi)).Empty();
  }
};

CodePointSet PlainItems(const std::vector<RegexClassItem>& items, bool ascii) {
  CodePointSet s;
  for (const RegexClassItem& it : items) {
    if (it.kind == RegexClassItem::kCategory) {
      s.AddSet(CategorySet(it.category, ascii));
    } else {
      s.AddRange(it.lo, it.hi);
    }
  }
  return s;
}

// sre_compile._optimize_charset with fix-ups, then IN_UNI_IGNORE matching:
// ch is a member iff lower(ch) is in the returned set `q`.  *hascased says
// whether sre uses the case-insensitive opcode at all.
CodePointSet FoldedItems(const std::vector<RegexClassItem>& items, const CaseRules& rules,
                         bool* hascased) {
  CodePointSet q;
  *hascased = false;
  const std::vector<std::pair<uint32_t, uint32_t>>& lower_pairs = LowerPairs();
  for (const RegexClassItem& it : items) {
    if (it.kind == RegexClassItem::kCategory) {
      q.AddSet(CategorySet(it.category, rules.ascii));
      continue;
    }
    if (it.kind == RegexClassItem::kLiteral) {
      uint32_t lo = rules.Lower(it.lo);
      if (lo >= kBmpEnd) {  // charmap IndexError: kept raw, compared to lower(ch)
        q.Add(it.lo);
        *hascased = true;
        continue;
      }
      q.Add(lo);
      for (uint32_t k : rules.Fixes(lo)) q.Add(k);
      if (rules.IsCased(it.lo)) *hascased = true;
      continue;
    }
    uint32_t a = it.lo, b = it.hi;
    uint32_t bmp_hi = std::min(b, kBmpEnd - 1);
    if (a <= bmp_hi) {
      // Adding [a, bmp_hi] itself is harmless: a code point that lower()
      // changes is never the lower() of anything (lower is idempotent).
      CodePointSet lowered = CodePointSet::Between(a, bmp_hi);
      if (rules.ascii) {
        for (uint32_t c = std::max<uint32_t>(a, 'A'); c <= std::min<uint32_t>(bmp_hi, 'Z'); ++c) {
          lowered.Add(c + 32);
        }
      } else {
        for (const auto& [c, l] : lower_pairs) {
          if (c >= a && c <= bmp_hi) lowered.Add(l);
        }
        for (uint32_t k : UnicodeExtraCaseKeys()) {
          if (lowered.Contains(k)) {
            for (uint32_t f : rules.Fixes(k)) q.Add(f);
          }
        }
      }
      q.AddSet(lowered);
    }
    if (b >= kBmpEnd) {  // RANGE_UNI_IGNORE: lower(ch) or upper(lower(ch)) in range
      CodePointSet r = CodePointSet::Between(a, b);
      q.AddSet(r);
      q.AddSet(UpperPreimage(r));
      *hascased = true;
    } else if (rules.AnyCased(a, b)) {
      *hascased = true;
    }
  }
  return q;
}

}  // namespace

CodePointSet ResolveCharClass(const RegexCharSpec& spec) {
  const bool icase = (spec.flags & kRegexIgnoreCase) != 0;
  const CaseRules rules{(spec.flags & kRegexAscii) != 0};
  switch (spec.kind) {
    case RegexCharSpec::kAny: {
      CodePointSet all = CodePointSet::All();
      return (spec.flags & kRegexDotAll) ? all : all.Minus(CodePointSet::Of('\n'));
    }
    case RegexCharSpec::kLiteral:
    case RegexCharSpec::kNotLiteral: {
      CodePointSet s = CodePointSet::Of(spec.c);
      if (icase && rules.IsCased(spec.c)) {
        uint32_t lo = rules.Lower(spec.c);
        CodePointSet q = CodePointSet::Of(lo);
        for (uint32_t k : rules.Fixes(lo)) q.Add(k);
        s = rules.LowerPreimage(q);
      }
      return spec.kind == RegexCharSpec::kLiteral ? s : s.Complement();
    }
    case RegexCharSpec::kIn: {
      CodePointSet s;
      bool hascased = false;
      if (icase) {
        CodePointSet q = FoldedItems(spec.items, rules, &hascased);
        if (hascased) s = rules.LowerPreimage(q);
      }
      if (!hascased) s = PlainItems(spec.items, rules.ascii);
      return spec.negate ? s.Complement() : s;
    }
  }
  return CodePointSet();
}

}  // namespace cfgmask
