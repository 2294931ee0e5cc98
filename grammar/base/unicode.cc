// Code-point sets and Python re's Unicode tables (see unicode.h).  The tables
// are sorted arrays emitted by gen_unicode_tables.py; lookups are binary
// searches, and preimages under the case mappings are computed from the
// (short) list of code points the mapping changes.
// Tested by regex_test.cc.
#include "grammar/base/unicode.h"

#include <algorithm>
#include <cstddef>

#include "grammar/base/unicode_tables.inc"

namespace cfgmask {

CodePointSet CodePointSet::Between(uint32_t lo, uint32_t hi) {
  CodePointSet s;
  s.AddRange(lo, hi);
  return s;
}

void CodePointSet::AddRange(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, hi);
  dirty_ = true;
}

void CodePointSet::AddSet(const CodePointSet& other) {
  for (const Range& r : other.ranges()) AddRange(r.first, r.second);
}

const std::vector<CodePointSet::Range>& CodePointSet::ranges() const {
  if (!dirty_) return ranges_;
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<Range> merged;
  for (const Range& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
  dirty_ = false;
  return ranges_;
}

CodePointSet CodePointSet::Complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const Range& r : ranges()) {
    if (r.first > next) out.AddRange(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.AddRange(next, kMaxCodePoint);
  return out;
}

CodePointSet CodePointSet::Intersect(const CodePointSet& other) const {
  CodePointSet out;
  const std::vector<Range>& a = ranges();
  const std::vector<Range>& b = other.ranges();
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    uint32_t lo = std::max(a[i].first, b[j].first);
    uint32_t hi = std::min(a[i].second, b[j].second);
    if (lo <= hi) out.AddRange(lo, hi);
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

CodePointSet CodePointSet::Minus(const CodePointSet& other) const {
  return Intersect(other.Complement());
}

bool CodePointSet::Contains(uint32_t c) const {
  const std::vector<Range>& r = ranges();
  auto it = std::upper_bound(r.begin(), r.end(), Range(c, kMaxCodePoint + 1));
  return it != r.begin() && std::prev(it)->second >= c;
}

namespace {

// `s` with its ranges merged: the shared tables below are merged before they
// are published, so that threads reading them at once (the compile builds
// two terminal automata side by side) never merge the same set.
CodePointSet Merged(CodePointSet s) {
  s.ranges();
  return s;
}

template <size_t N>
CodePointSet FromTable(const uint32_t (&table)[N][2]) {
  CodePointSet s;
  for (const auto& r : table) s.AddRange(r[0], r[1]);
  return s;
}

template <size_t N>
std::vector<std::pair<uint32_t, uint32_t>> PairsFromTable(const uint32_t (&table)[N][2]) {
  std::vector<std::pair<uint32_t, uint32_t>> v;
  v.reserve(N);
  for (const auto& p : table) v.emplace_back(p[0], p[1]);
  return v;
}

uint32_t MapThrough(const std::vector<std::pair<uint32_t, uint32_t>>& pairs, uint32_t c) {
  auto it = std::lower_bound(pairs.begin(), pairs.end(), std::make_pair(c, uint32_t{0}));
  return it != pairs.end() && it->first == c ? it->second : c;
}

// {c : f(c) in s}, where `pairs` lists f's non-identity points and
// `changed` holds their first components.
CodePointSet Preimage(const std::vector<std::pair<uint32_t, uint32_t>>& pairs,
                      const CodePointSet& changed, const CodePointSet& s) {
  CodePointSet added;
  for (const auto& [c, m] : pairs) {
    if (s.Contains(m)) added.Add(c);
  }
  CodePointSet out = s.Minus(changed);
  out.AddSet(added);
  return out;
}

}  // namespace

const CodePointSet& CategorySet(CharCategory category, bool ascii) {
  static const CodePointSet* const kSets = [] {
    auto* sets = new CodePointSet[12];
    sets[0] = FromTable(kDigitRanges);
    sets[2] = FromTable(kSpaceRanges);
    sets[4] = FromTable(kWordRanges);
    sets[6] = CodePointSet::Between('0', '9');
    sets[8].AddRange('\t', '\r');
    sets[8].Add(' ');
    sets[10].AddRange('0', '9');
    sets[10].AddRange('A', 'Z');
    sets[10].AddRange('a', 'z');
    sets[10].Add('_');
    for (int i = 0; i < 12; i += 2) sets[i + 1] = sets[i].Complement();
    for (int i = 0; i < 12; ++i) sets[i] = Merged(sets[i]);
    return sets;
  }();
  return kSets[(ascii ? 6 : 0) + static_cast<int>(category)];
}

const std::vector<std::pair<uint32_t, uint32_t>>& LowerPairs() {
  static const auto* const kPairs =
      new std::vector<std::pair<uint32_t, uint32_t>>(PairsFromTable(kToLower));
  return *kPairs;
}

const std::vector<std::pair<uint32_t, uint32_t>>& UpperPairs() {
  static const auto* const kPairs =
      new std::vector<std::pair<uint32_t, uint32_t>>(PairsFromTable(kToUpper));
  return *kPairs;
}

uint32_t UnicodeToLower(uint32_t c) { return MapThrough(LowerPairs(), c); }
uint32_t UnicodeToUpper(uint32_t c) { return MapThrough(UpperPairs(), c); }

const CodePointSet& UnicodeCasedSet() {
  static const CodePointSet* const kCased = new CodePointSet(Merged(FromTable(kCasedRanges)));
  return *kCased;
}

bool UnicodeIsCased(uint32_t c) { return UnicodeCasedSet().Contains(c); }

const std::vector<uint32_t>& UnicodeExtraCaseKeys() {
  static const std::vector<uint32_t>* const kKeys = [] {
    auto* keys = new std::vector<uint32_t>;
    for (const auto& row : kExtraCases) keys->push_back(row[0]);
    return keys;
  }();
  return *kKeys;
}

std::vector<uint32_t> UnicodeExtraCases(uint32_t lower) {
  for (const auto& row : kExtraCases) {
    if (row[0] == lower) return std::vector<uint32_t>(row + 2, row + 2 + row[1]);
  }
  return {};
}

namespace {

CodePointSet Domain(const std::vector<std::pair<uint32_t, uint32_t>>& pairs) {
  CodePointSet s;
  for (const auto& p : pairs) s.Add(p.first);
  return s;
}

}  // namespace

CodePointSet LowerPreimage(const CodePointSet& s) {
  static const CodePointSet* const kChanged = new CodePointSet(Merged(Domain(LowerPairs())));
  return Preimage(LowerPairs(), *kChanged, s);
}

CodePointSet UpperPreimage(const CodePointSet& s) {
  static const CodePointSet* const kChanged = new CodePointSet(Merged(Domain(UpperPairs())));
  return Preimage(UpperPairs(), *kChanged, s);
}

}  // namespace cfgmask
