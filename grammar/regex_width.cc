// Width of a Python regex (regex_width.h): a small recursive-descent reader
// of Python's re syntax that keeps only what SubPattern.getwidth() needs --
// alternation takes the smallest minimum and largest maximum, groups add
// their body, lookarounds and anchors add nothing, a repeat {m,n} multiplies
// (an unbounded one saturates the maximum), a back-reference adds the width
// of its group, and every other atom (literal, class, escape, `.`) is one
// character.  Verbose mode (`x`) skips blanks and `#` comments outside classes.
// Tested by grammar_test.cc.
#include "grammar/regex_width.h"

#include <map>
#include <utility>
#include <vector>

namespace cfgmask::lark {
namespace {

// Deeper group nesting is not read (the widths are then marked unparsed);
// the regex parser refuses it with an error (kRegexMaxGroupNesting,
// lexer/regex/regex_ast.h, the same number).
constexpr int kMaxGroupNesting = 100;

using Wide = unsigned __int128;
constexpr Wide kMaxWide = static_cast<Wide>(1) << 64;  // Python's MAXWIDTH
constexpr uint64_t kMaxRepeat = 4294967295ULL;         // _sre.MAXREPEAT

Wide Cap(Wide w) { return w > kMaxWide ? kMaxWide : w; }

struct Width {
  Wide lo = 0;
  Wide hi = 0;
};

class WidthReader {
 public:
  explicit WidthReader(const std::string& text) : s_(text) {}

  RegexWidth Run() {
    Width w = Alternation();
    if (pos_ < s_.size()) ok_ = false;  // stray ')'
    RegexWidth out;
    out.min = Narrow(w.lo);
    out.max = Narrow(w.hi);
    out.parsed = ok_;
    if (!ok_) {
      // Lark falls back to the `regex` module, which only tells whether the
      // empty string matches; the maximum becomes MAXWIDTH.
      out.max = kMaxWidth;
      out.min = out.min == 0 ? 0 : 1;
    }
    return out;
  }

 private:
  static uint64_t Narrow(Wide w) {
    return w >= kMaxWide ? kMaxWidth : static_cast<uint64_t>(w);
  }

  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  void SkipVerbose() {
    if (!verbose_) return;
    while (!AtEnd()) {
      char c = Peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // One UTF-8 encoded code point.
  void SkipCodePoint() {
    ++pos_;
    while (!AtEnd() && (static_cast<unsigned char>(Peek()) & 0xC0) == 0x80) ++pos_;
  }

  Width Alternation() {
    Width first = Sequence();
    if (Peek() != '|') return first;
    Wide lo = kMaxWide;
    Wide hi = 0;
    auto merge = [&](const Width& w) {
      lo = std::min(lo, w.lo);
      hi = std::max(hi, w.hi);
    };
    merge(first);
    while (Peek() == '|') {
      ++pos_;
      merge(Sequence());
    }
    return {Cap(lo), Cap(hi)};
  }

  Width Sequence() {
    Width total;
    while (true) {
      SkipVerbose();
      if (AtEnd() || Peek() == '|' || Peek() == ')') break;
      bool repeatable = true;
      Width item = Atom(&repeatable);
      if (!ok_) return total;
      while (true) {
        SkipVerbose();
        uint64_t min = 0;
        uint64_t max = 0;
        if (!Quantifier(&min, &max)) break;
        if (Peek() == '?' || Peek() == '+') ++pos_;  // lazy / possessive
        Wide lo = Cap(item.lo * min);
        Wide hi = (max == kMaxRepeat && item.hi != 0) ? kMaxWide : Cap(item.hi * max);
        item = {lo, hi};
      }
      total.lo = Cap(total.lo + item.lo);
      total.hi = Cap(total.hi + item.hi);
    }
    return total;
  }

  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  bool ReadNumber(uint64_t* value) {
    if (!IsDigit(Peek())) return false;
    uint64_t v = 0;
    while (IsDigit(Peek())) {
      v = v * 10 + static_cast<uint64_t>(Peek() - '0');
      if (v > kMaxRepeat) v = kMaxRepeat;
      ++pos_;
    }
    *value = v;
    return true;
  }

  bool Quantifier(uint64_t* min, uint64_t* max) {
    char c = Peek();
    if (c == '*') { ++pos_; *min = 0; *max = kMaxRepeat; return true; }
    if (c == '+') { ++pos_; *min = 1; *max = kMaxRepeat; return true; }
    if (c == '?') { ++pos_; *min = 0; *max = 1; return true; }
    if (c != '{') return false;
    size_t save = pos_;
    ++pos_;
    uint64_t lo = 0;
    uint64_t hi = kMaxRepeat;
    bool has_lo = ReadNumber(&lo);
    if (Peek() == ',') {
      ++pos_;
      uint64_t v = 0;
      if (ReadNumber(&v)) hi = v;
    } else {
      if (!has_lo) { pos_ = save; return false; }
      hi = lo;
    }
    if (Peek() != '}') { pos_ = save; return false; }
    ++pos_;
    *min = lo;
    *max = hi;
    return true;
  }

  Width Unit() { return {1, 1}; }

  Width Atom(bool* repeatable) {
    char c = Peek();
    switch (c) {
      case '(':
        return Group(repeatable);
      case '[':
        Class();
        return Unit();
      case '.':
        ++pos_;
        return Unit();
      case '^':
      case '$':
        ++pos_;
        return {0, 0};
      case '\\':
        return Escape();
      case '*':
      case '+':
      case '?':
        ok_ = false;  // nothing to repeat
        ++pos_;
        return {0, 0};
      default:
        SkipCodePoint();
        return Unit();
    }
  }

  void Class() {
    ++pos_;  // '['
    if (Peek() == '^') ++pos_;
    bool first = true;
    while (!AtEnd()) {
      char c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        return;
      }
      first = false;
      if (c == '\\') {
        ++pos_;
        if (AtEnd()) break;
        SkipCodePoint();
      } else {
        SkipCodePoint();
      }
    }
    ok_ = false;  // unterminated character set
  }

  static bool IsOctal(char c) { return c >= '0' && c <= '7'; }

  Width Escape() {
    ++pos_;  // '\\'
    if (AtEnd()) {
      ok_ = false;
      return {0, 0};
    }
    char c = Peek();
    if (c == 'b' || c == 'B' || c == 'A' || c == 'Z') {
      ++pos_;
      return {0, 0};
    }
    if (c == '0') {
      ++pos_;
      for (int k = 0; k < 2 && IsOctal(Peek()); ++k) ++pos_;
      return Unit();
    }
    if (IsDigit(c)) {
      if (IsOctal(c) && IsOctal(Peek(1)) && IsOctal(Peek(2))) {
        pos_ += 3;
        return Unit();
      }
      int group = c - '0';
      ++pos_;
      if (IsDigit(Peek())) {
        group = group * 10 + (Peek() - '0');
        ++pos_;
      }
      if (group < static_cast<int>(group_widths_.size()) && closed_[group]) {
        return group_widths_[group];
      }
      ok_ = false;  // reference to an unknown or open group
      return {0, 0};
    }
    if (c == 'p' && Peek(1) == '{') {
      size_t close = s_.find('}', pos_);
      if (close == std::string::npos) {
        ok_ = false;
        return {0, 0};
      }
      pos_ = close + 1;
      return Unit();
    }
    if (c == 'N' && Peek(1) == '{') {
      size_t close = s_.find('}', pos_);
      if (close == std::string::npos) {
        ok_ = false;
        return {0, 0};
      }
      pos_ = close + 1;
      return Unit();
    }
    int hex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    ++pos_;
    if (hex) pos_ += static_cast<size_t>(hex);
    if (!hex && (static_cast<unsigned char>(c) & 0x80)) {
      while (!AtEnd() && (static_cast<unsigned char>(Peek()) & 0xC0) == 0x80) ++pos_;
    }
    if (pos_ > s_.size()) {
      ok_ = false;
      pos_ = s_.size();
    }
    return Unit();
  }

  bool Expect(char c) {
    if (Peek() != c) {
      ok_ = false;
      return false;
    }
    ++pos_;
    return true;
  }

  // A group body with `verbose` in force, restored afterwards.
  Width Body(bool verbose) {
    bool saved = verbose_;
    verbose_ = verbose;
    Width w = Alternation();
    verbose_ = saved;
    Expect(')');
    return w;
  }

  Width Capture(bool verbose, const std::string& name) {
    int index = static_cast<int>(group_widths_.size());
    group_widths_.push_back({0, 0});
    closed_.push_back(false);
    if (!name.empty()) names_[name] = index;
    Width w = Body(verbose);
    group_widths_[index] = w;
    closed_[index] = true;
    return w;
  }

  Width Group(bool* repeatable) {
    ++pos_;  // '('
    if (++depth_ > kMaxGroupNesting) {
      ok_ = false;
      pos_ = s_.size();
      return {};
    }
    struct Leave {
      int* d;
      ~Leave() { --*d; }
    } leave{&depth_};
    if (Peek() != '?') return Capture(verbose_, "");
    ++pos_;  // '?'
    char c = Peek();
    if (c == ':') {
      ++pos_;
      return Body(verbose_);
    }
    if (c == '>') {
      ++pos_;
      return Body(verbose_);
    }
    if (c == '=' || c == '!') {
      ++pos_;
      Body(verbose_);
      return {0, 0};
    }
    if (c == '<' && (Peek(1) == '=' || Peek(1) == '!')) {
      pos_ += 2;
      Body(verbose_);
      return {0, 0};
    }
    if (c == '#') {
      while (!AtEnd() && Peek() != ')') ++pos_;
      Expect(')');
      *repeatable = false;
      return {0, 0};
    }
    if (c == 'P' && Peek(1) == '<') {
      pos_ += 2;
      size_t close = s_.find('>', pos_);
      if (close == std::string::npos) {
        ok_ = false;
        return {0, 0};
      }
      std::string name = s_.substr(pos_, close - pos_);
      pos_ = close + 1;
      return Capture(verbose_, name);
    }
    if (c == 'P' && Peek(1) == '=') {
      pos_ += 2;
      size_t close = s_.find(')', pos_);
      if (close == std::string::npos) {
        ok_ = false;
        return {0, 0};
      }
      std::string name = s_.substr(pos_, close - pos_);
      pos_ = close + 1;
      auto it = names_.find(name);
      if (it == names_.end() || !closed_[it->second]) {
        ok_ = false;
        return {0, 0};
      }
      return group_widths_[it->second];
    }
    if (c == '(') {
      // (?(group)yes|no): the condition, then at most two branches.
      size_t close = s_.find(')', pos_);
      if (close == std::string::npos) {
        ok_ = false;
        return {0, 0};
      }
      pos_ = close + 1;
      Width yes = Sequence();
      Width result{0, yes.hi};
      if (Peek() == '|') {
        ++pos_;
        Width no = Sequence();
        result = {std::min(yes.lo, no.lo), std::max(yes.hi, no.hi)};
      }
      Expect(')');
      return result;
    }
    // Inline flags: (?aiLmsux) global, or (?flags-flags:...) scoped.
    bool verbose = verbose_;
    bool negative = false;
    while (!AtEnd()) {
      char f = Peek();
      if (f == '-') {
        negative = true;
      } else if (f == 'x') {
        verbose = !negative;
      } else if (f == ':' || f == ')') {
        break;
      } else if (std::string("aiLmsu").find(f) == std::string::npos) {
        ok_ = false;
        return {0, 0};
      }
      ++pos_;
    }
    if (Peek() == ')') {
      ++pos_;
      verbose_ = verbose;  // a global flag group applies to the whole pattern
      *repeatable = false;
      return {0, 0};
    }
    if (!Expect(':')) return {0, 0};
    return Body(verbose);
  }

  const std::string& s_;
  size_t pos_ = 0;
  bool ok_ = true;
  int depth_ = 0;  // groups open
  bool verbose_ = false;
  std::vector<Width> group_widths_{Width{}};  // group 0 is the whole pattern
  std::vector<bool> closed_{false};
  std::map<std::string, int> names_;
};

}  // namespace

RegexWidth ComputeRegexWidth(const std::string& regex) {
  WidthReader reader(regex);
  return reader.Run();
}

}  // namespace cfgmask::lark
