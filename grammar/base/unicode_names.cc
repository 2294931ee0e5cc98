#include "grammar/base/unicode_names.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

namespace cfgmask {
namespace {

#include "grammar/base/unicode_names.inc"

constexpr std::string_view kCjk = "CJK UNIFIED IDEOGRAPH-";

// The names, sorted (the blob is written sorted, one per line).
const std::vector<std::string_view>& Names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    const std::string_view blob(kUnicodeNames, sizeof(kUnicodeNames) - 1);
    for (size_t i = 0; i < blob.size();) {
      const size_t e = blob.find('\n', i);
      v.push_back(blob.substr(i, e - i));
      i = e + 1;
    }
    return v;
  }();
  return names;
}

// Does some CJK unified ideograph in [lo, hi] exist?
bool CjkIn(uint32_t lo, uint32_t hi) {
  for (const auto& r : kCjkRanges) {
    if (r[0] <= hi && lo <= r[1]) return true;
  }
  return false;
}

// The hex part of a CJK unified ideograph's name: whole (exactly its four
// or five digits) or a prefix of it.  Upper-case digits only.
bool CjkHex(std::string_view h, bool whole) {
  if (h.size() > 5) return false;
  uint32_t v = 0;
  for (char c : h) {
    if (c >= '0' && c <= '9') {
      v = v * 16 + static_cast<uint32_t>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      v = v * 16 + static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
  }
  // Four digits name U+1000..U+FFFF, five U+10000.. (as unicodedata.name
  // writes them: "%04X").
  for (const int digits : {4, 5}) {
    if (static_cast<int>(h.size()) > digits || (whole && static_cast<int>(h.size()) != digits)) {
      continue;
    }
    const uint32_t span = 1u << (4 * (digits - static_cast<int>(h.size())));
    uint32_t lo = v * span, hi = lo + span - 1;
    const uint32_t min = digits == 4 ? 0x1000 : 0x10000, max = digits == 4 ? 0xFFFF : 0xFFFFF;
    lo = std::max(lo, min);
    hi = std::min(hi, max);
    if (lo <= hi && CjkIn(lo, hi)) return true;
  }
  return false;
}

}  // namespace

bool IsUnicodeName(std::string_view name) {
  if (name.size() > kCjk.size() && name.substr(0, kCjk.size()) == kCjk) {
    return CjkHex(name.substr(kCjk.size()), true);
  }
  const auto& v = Names();
  return std::binary_search(v.begin(), v.end(), name);
}

int32_t UnicodeNameCode(std::string_view name) {
  if (name.size() > kCjk.size() && name.substr(0, kCjk.size()) == kCjk) {
    const std::string_view h = name.substr(kCjk.size());
    if (!CjkHex(h, true)) return -1;
    uint32_t v = 0;
    for (char c : h) v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'A' + 10);
    return static_cast<int32_t>(v);
  }
  static_assert(sizeof(kUnicodeNameCodes) / sizeof(kUnicodeNameCodes[0]) > 0);
  const auto& v = Names();
  const auto it = std::lower_bound(v.begin(), v.end(), name);
  if (it == v.end() || *it != name) return -1;
  return static_cast<int32_t>(kUnicodeNameCodes[it - v.begin()]);
}

bool IsUnicodeNamePrefix(std::string_view prefix) {
  if (prefix.size() <= kCjk.size()) {
    if (kCjk.substr(0, prefix.size()) == prefix) return true;
  } else if (prefix.substr(0, kCjk.size()) == kCjk) {
    return CjkHex(prefix.substr(kCjk.size()), false);
  }
  const auto& v = Names();
  const auto it = std::lower_bound(v.begin(), v.end(), prefix);
  return it != v.end() && it->size() >= prefix.size() && it->substr(0, prefix.size()) == prefix;
}

std::string_view UnicodeNamesVersion() { return kUnicodeNamesVersion; }

}  // namespace cfgmask
