// NFKC of names and the XID classes: see unicode_idents.h.  The algorithm is
// Unicode's (UAX #15): full compatibility decomposition (Hangul syllables by
// rule), canonical ordering of the combining marks, then canonical
// composition of the primary composites (Hangul by rule).
#include "grammar/base/unicode_idents.h"

#include <algorithm>
#include <vector>

#include "grammar/base/utf8.h"

namespace cfgmask {
namespace {

#include "grammar/base/unicode_idents.inc"

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

template <size_t N>
bool InRanges(const uint32_t (&r)[N][2], uint32_t cp) {
  const auto* it = std::upper_bound(std::begin(r), std::end(r), cp,
                                    [](uint32_t c, const uint32_t(&row)[2]) { return c < row[0]; });
  return it != std::begin(r) && cp <= (*(it - 1))[1];
}

// Does a range of `r` meet [lo, hi]?  (The ranges are sorted and disjoint.)
template <size_t N>
bool MeetsRanges(const uint32_t (&r)[N][2], uint32_t lo, uint32_t hi) {
  const auto* it = std::lower_bound(std::begin(r), std::end(r), lo,
                                    [](const uint32_t(&row)[2], uint32_t c) { return row[1] < c; });
  return it != std::end(r) && (*it)[0] <= hi;
}

uint32_t Ccc(uint32_t cp) {
  const auto* it = std::upper_bound(std::begin(kCcc), std::end(kCcc), cp,
                                    [](uint32_t c, const uint32_t(&row)[3]) { return c < row[0]; });
  if (it == std::begin(kCcc)) return 0;
  --it;
  return cp <= (*it)[1] ? (*it)[2] : 0;
}

void Decompose(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const auto* it = std::lower_bound(std::begin(kDecompIndex), std::end(kDecompIndex), cp,
                                    [](const uint32_t(&row)[3], uint32_t c) { return row[0] < c; });
  if (it != std::end(kDecompIndex) && (*it)[0] == cp) {
    out->insert(out->end(), kDecompData + (*it)[1], kDecompData + (*it)[1] + (*it)[2]);
    return;
  }
  out->push_back(cp);
}

// The primary composite of (a, b), or 0.
uint32_t Compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const auto* it = std::lower_bound(
      std::begin(kCompose), std::end(kCompose), std::pair<uint32_t, uint32_t>(a, b),
      [](const uint32_t(&row)[3], std::pair<uint32_t, uint32_t> k) {
        return row[0] != k.first ? row[0] < k.first : row[1] < k.second;
      });
  return it != std::end(kCompose) && (*it)[0] == a && (*it)[1] == b ? (*it)[2] : 0;
}

}  // namespace

bool IsXidStart(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return InRanges(kXidStart, cp);
}

bool IsXidContinue(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_';
  return InRanges(kXidContinue, cp);
}

bool AnyXidStartIn(uint32_t lo, uint32_t hi) {
  for (uint32_t c = lo; c <= hi && c < 0x80; ++c) {
    if (IsXidStart(c)) return true;
  }
  return hi >= 0x80 && MeetsRanges(kXidStart, std::max<uint32_t>(lo, 0x80), hi);
}

bool AnyXidContinueIn(uint32_t lo, uint32_t hi) {
  for (uint32_t c = lo; c <= hi && c < 0x80; ++c) {
    if (IsXidContinue(c)) return true;
  }
  return hi >= 0x80 && MeetsRanges(kXidContinue, std::max<uint32_t>(lo, 0x80), hi);
}

std::string NfkcName(std::string_view s) {
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(s);
  std::vector<uint32_t> d;
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return std::string(s);  // not UTF-8: the caller's error
    const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k])); };
    uint32_t cp = n == 1 ? b(0) : n == 2 ? ((b(0) & 0x1F) << 6) | (b(1) & 0x3F)
                 : n == 3 ? ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F)
                          : ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    Decompose(cp, &d);
    i += n;
  }
  // Canonical ordering: a stable sort of each run of combining marks by class.
  for (size_t i = 0; i < d.size();) {
    if (Ccc(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && Ccc(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + static_cast<long>(i), d.begin() + static_cast<long>(j),
                     [](uint32_t a, uint32_t b) { return Ccc(a) < Ccc(b); });
    i = j;
  }
  // Canonical composition.
  std::vector<uint32_t> out;
  size_t starter = SIZE_MAX;
  uint32_t last_ccc = 0;
  for (uint32_t cp : d) {
    const uint32_t ccc = Ccc(cp);
    if (starter != SIZE_MAX) {
      const bool blocked = out.size() - 1 != starter && (last_ccc == 0 || last_ccc >= ccc);
      if (!blocked) {
        if (const uint32_t c = Compose(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) starter = out.size();
    last_ccc = ccc;
    out.push_back(cp);
  }
  std::string r;
  for (uint32_t cp : out) AppendUtf8(cp, &r);
  return r;
}

std::string_view UnicodeIdentsVersion() { return kIdentsVersion; }

}  // namespace cfgmask
