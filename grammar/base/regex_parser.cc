// Parser of terminal regexes in Python `re` syntax (CPython 3.11 sre_parse),
// producing the sre-shaped tree of regex_ast.h: the one `re` reader, used by
// the .lark reader (widths of joined alternatives, lark::RegexpWidth) and by
// the lexer (the NFA, terminal order).
//
// Python's regex syntax is context dependent (verbose mode changes what
// whitespace means, flags are scoped, `{` is a literal unless a well-formed
// quantifier follows), so the structure is a recursive descent that mirrors
// sre_parse's _parse_sub/_parse one function each, and the lexical pieces --
// escapes, `{m,n}` quantifiers, group names, inline flag sets -- are Boost.Spirit
// X3 parsers run at the current position.  sre_parse's tree rewrites that
// change meaning are reproduced: a common prefix is hoisted out of a branch,
// a branch of single characters becomes one character set (this matters for
// case-insensitive non-BMP characters), and (?:...) without flags is spliced
// into its parent.
//
// Errors: invalid syntax is kRegexSyntax at the position sre_parse reports; a
// valid but unsupported construct (back-references, anchors, positive
// look-ahead, look-behind other than one ASCII character, ...) is
// kRegexUnsupported, reported only when the whole pattern is otherwise valid;
// the tree is then complete for getwidth() (a back-reference is its group's
// body again, a conditional group a branch of its two arms), since Lark
// reads the width of patterns the lexer refuses.
// Offsets are in code points, as in re.error.pos.
// Tested by regex_test.cc.
#include <boost/spirit/home/x3.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/base/regex_ast.h"

namespace cfgmask {
namespace {

namespace x3 = boost::spirit::x3;

// X3 grammars of the lexical pieces.
const auto kHex2 = x3::uint_parser<uint32_t, 16, 2, 2>();
const auto kHex4 = x3::uint_parser<uint32_t, 16, 4, 4>();
const auto kHex8 = x3::uint_parser<uint64_t, 16, 8, 8>();
const auto kOctal3 = x3::uint_parser<uint32_t, 8, 1, 3>();
// Character classes spelled as ranges: X3's standard classes (x3::digit,
// x3::alpha...) call the C classification functions, whose argument must be
// an unsigned char value, and assert on the negative chars of UTF-8 bytes.
const auto kDigit = x3::char_('0', '9');
const auto kAsciiAlpha = x3::char_('a', 'z') | x3::char_('A', 'Z');
const auto kAsciiIdentifier =
    (kAsciiAlpha | x3::char_('_')) >> *(kAsciiAlpha | kDigit | x3::char_('_'));
const auto kFlagLetters = *x3::char_("aiLmstux");

constexpr std::string_view kSpecialChars = ".\\[{()*+?^$|";
constexpr uint32_t kTypeFlags = kRegexAscii | kRegexUnicode;

uint32_t FlagBit(char c) {
  switch (c) {
    case 'i': return kRegexIgnoreCase;
    case 'm': return kRegexMultiline;
    case 's': return kRegexDotAll;
    case 'x': return kRegexVerbose;
    case 'a': return kRegexAscii;
    case 'u': return kRegexUnicode;
    default: return 0;
  }
}

bool IsAsciiLetter(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsOctal(uint32_t c) { return c >= '0' && c <= '7'; }

// One token of sre_parse's Tokenizer: a code point, or a backslash and the
// code point after it.
struct Token {
  bool escape = false;
  uint32_t c = 0;    // the character (after the backslash for an escape)
  size_t start = 0;  // byte offsets in the pattern
  size_t end = 0;
  bool Is(char ch) const { return !escape && c == static_cast<unsigned char>(ch); }
};

class RegexParser {
  int neg_lookahead_depth_ = 0;  // > 0 while parsing a (?!...) body

 public:
  RegexParser(std::string_view pattern, std::string_view what, RegexAst* ast)
      : pattern_(pattern), what_(what), ast_(ast) {}

  Status Parse(uint32_t flags) {
    Status utf8 = CheckUtf8();
    if (!utf8.ok()) return utf8;
    global_flags_ = flags;
    int32_t root = -1;
    Status st = ParseSub((flags & kRegexVerbose) != 0, 0, flags, &root);
    if (!st.ok()) return st;
    if (pos_ < pattern_.size()) return Error(pos_, "unbalanced parenthesis");
    for (const auto& [group, at] : condition_refs_) {
      if (group >= groups_closed_.size()) {
        return Error(at, "invalid group reference " + std::to_string(group));
      }
    }
    // Valid sre_parse syntax: the tree is complete for getwidth() even when
    // the pattern is refused below (ParseRegex, regex_ast.h).
    ast_->root = root;
    if (!deferred_.ok()) return deferred_;
    if (!unsupported_.ok()) return unsupported_;
    return Status::Ok();
  }

 private:
  // ---- positions, tokens, errors -------------------------------------------

  Status CheckUtf8() {
    size_t i = 0;
    while (i < pattern_.size()) {
      uint32_t c = 0;
      size_t n = Decode(i, &c);
      if (n == 0) {
        return Status(ErrorCode::kRegexSyntax,
                      Prefix(i) + "pattern is not valid UTF-8");
      }
      i += n;
    }
    return Status::Ok();
  }

  // Decodes the code point at byte i; returns its length, 0 if malformed.
  size_t Decode(size_t i, uint32_t* c) const {
    auto b = [&](size_t k) { return static_cast<unsigned char>(pattern_[k]); };
    unsigned char b0 = b(i);
    if (b0 < 0x80) {
      *c = b0;
      return 1;
    }
    size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 ? 2 : 0;
    if (n == 0 || b0 > 0xF4 || i + n > pattern_.size()) return 0;
    uint32_t v = b0 & (0x3F >> (n - 1));
    for (size_t k = 1; k < n; ++k) {
      if ((b(i + k) & 0xC0) != 0x80) return 0;
      v = (v << 6) | (b(i + k) & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[n] || v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *c = v;
    return n;
  }

  int32_t CodePointOffset(size_t byte_pos) const {
    if (cp_offset_.empty()) {
      cp_offset_.resize(pattern_.size() + 1);
      int32_t n = 0;
      for (size_t i = 0; i <= pattern_.size(); ++i) {
        cp_offset_[i] = n;
        if (i < pattern_.size() && (static_cast<unsigned char>(pattern_[i]) & 0xC0) != 0x80) ++n;
      }
    }
    return cp_offset_[std::min(byte_pos, pattern_.size())];
  }

  std::string Prefix(size_t byte_pos) const {
    return "terminal " + std::string(what_) + ": pattern offset " +
           std::to_string(CodePointOffset(byte_pos)) + ": ";
  }

  Status Error(size_t byte_pos, const std::string& msg) const {
    return Status(ErrorCode::kRegexSyntax, Prefix(byte_pos) + msg);
  }

  void Unsupported(size_t byte_pos, const std::string& msg) {
    if (unsupported_.ok()) {
      unsupported_ = Status(ErrorCode::kRegexUnsupported, Prefix(byte_pos) + msg);
    }
  }

  bool AtEnd() const { return pos_ >= pattern_.size(); }

  // The next token, without consuming it.  A trailing lone backslash is a
  // token whose escape char is missing (reported by Get()).
  std::optional<Token> Peek() const {
    if (AtEnd()) return std::nullopt;
    Token t;
    t.start = pos_;
    uint32_t c = 0;
    size_t n = Decode(pos_, &c);
    if (c == '\\') {
      t.escape = true;
      if (pos_ + 1 >= pattern_.size()) {
        t.end = pos_ + 1;
        t.c = 0xFFFFFFFF;
        return t;
      }
      size_t m = Decode(pos_ + 1, &t.c);
      t.end = pos_ + 1 + m;
      return t;
    }
    t.c = c;
    t.end = pos_ + n;
    return t;
  }

  Status Get(std::optional<Token>* out) {
    *out = Peek();
    if (*out && (*out)->escape && (*out)->c == 0xFFFFFFFF) {
      return Error(pattern_.size() - 1, "bad escape (end of pattern)");
    }
    if (*out) pos_ = (*out)->end;
    return Status::Ok();
  }

  bool Match(char ch) {
    std::optional<Token> t = Peek();
    if (t && t->Is(ch)) {
      pos_ = t->end;
      return true;
    }
    return false;
  }

  bool NextIs(char ch) const {
    std::optional<Token> t = Peek();
    return t && t->Is(ch);
  }

  template <typename Parser, typename Attr>
  bool ParseAt(const Parser& p, Attr& attr) {
    const char* first = pattern_.data() + pos_;
    const char* last = pattern_.data() + pattern_.size();
    if (!x3::parse(first, last, p, attr)) return false;
    pos_ = first - pattern_.data();
    return true;
  }

  // sre_parse's getuntil: the text up to `terminator` (consumed).
  Status GetUntil(char terminator, const std::string& name, std::string* out) {
    size_t begin = pos_;
    while (true) {
      std::optional<Token> t;
      CFGMASK_RETURN_IF_ERROR(Get(&t));
      if (!t) {
        if (pos_ == begin) return Error(pos_, "missing " + name);
        return Error(begin, "missing " + std::string(1, terminator) + ", unterminated name");
      }
      if (t->Is(terminator)) {
        if (t->start == begin) return Error(t->start, "missing " + name);
        *out = std::string(pattern_.substr(begin, t->start - begin));
        return Status::Ok();
      }
    }
  }

  Status CheckGroupName(const std::string& name, size_t at) {
    bool non_ascii = false;
    for (char ch : name) non_ascii |= (static_cast<unsigned char>(ch) >= 0x80);
    if (non_ascii) return Status::Ok();
    auto first = name.begin();
    std::string ignored;
    if (x3::parse(first, name.end(), kAsciiIdentifier, ignored) && first == name.end()) {
      return Status::Ok();
    }
    return Error(at, "bad character in group name '" + name + "'");
  }

  // ---- tree building -----------------------------------------------------

  int32_t NewNode(RegexOp op, size_t byte_pos) {
    RegexNode n;
    n.op = op;
    n.offset = CodePointOffset(byte_pos);
    ast_->nodes.push_back(std::move(n));
    return static_cast<int32_t>(ast_->nodes.size() - 1);
  }

  int32_t NewChar(RegexCharSpec spec, size_t byte_pos) {
    int32_t id = NewNode(RegexOp::kCharClass, byte_pos);
    ast_->nodes[id].spec = std::move(spec);
    return id;
  }

  int32_t NewLiteral(uint32_t c, uint32_t flags, size_t byte_pos) {
    RegexCharSpec s;
    s.kind = RegexCharSpec::kLiteral;
    s.c = c;
    s.flags = flags;
    return NewChar(std::move(s), byte_pos);
  }

  int32_t NewCategory(CharCategory cat, uint32_t flags, size_t byte_pos) {
    RegexCharSpec s;
    s.kind = RegexCharSpec::kIn;
    s.flags = flags;
    RegexClassItem item;
    item.kind = RegexClassItem::kCategory;
    item.category = cat;
    s.items.push_back(item);
    return NewChar(std::move(s), byte_pos);
  }

  int32_t NewSeq(std::vector<int32_t> items, size_t byte_pos) {
    int32_t id = NewNode(RegexOp::kConcat, byte_pos);
    ast_->nodes[id].children = std::move(items);
    return id;
  }

  static std::optional<CharCategory> CategoryOf(uint32_t c) {
    switch (c) {
      case 'd': return CharCategory::kDigit;
      case 'D': return CharCategory::kNotDigit;
      case 's': return CharCategory::kSpace;
      case 'S': return CharCategory::kNotSpace;
      case 'w': return CharCategory::kWord;
      case 'W': return CharCategory::kNotWord;
      default: return std::nullopt;
    }
  }

  static std::optional<uint32_t> SimpleEscape(uint32_t c) {
    switch (c) {
      case 'a': return 0x07;
      case 'f': return 0x0C;
      case 'n': return 0x0A;
      case 'r': return 0x0D;
      case 't': return 0x09;
      case 'v': return 0x0B;
      case '\\': return '\\';
      default: return std::nullopt;
    }
  }

  // \x \u \U: exactly 2, 4, 8 hex digits after the escape token `t`.
  Status HexEscape(const Token& t, uint32_t* value) {
    bool ok = false;
    if (t.c == 'x') {
      ok = ParseAt(kHex2, *value);
    } else if (t.c == 'u') {
      ok = ParseAt(kHex4, *value);
    } else {
      uint64_t v = 0;
      ok = ParseAt(kHex8, v);
      if (ok && v > kMaxCodePoint) return Error(t.start, "bad escape \\U");
      *value = static_cast<uint32_t>(v);
    }
    if (!ok) {
      return Error(t.start, "incomplete escape \\" + std::string(1, static_cast<char>(t.c)));
    }
    return Status::Ok();
  }

  // \N{...}: valid Python, but unicodedata names are not shipped here.
  void NamedEscape(const Token& t) {
    Unsupported(t.start, "named escapes \\N{...} are not supported");
    if (Match('{')) {
      while (!AtEnd() && !Match('}')) ++pos_;
    }
  }

  // A class member after a backslash (sre_parse._class_escape).
  struct ClassCode {
    bool is_literal = true;
    uint32_t c = 0;
    CharCategory category = CharCategory::kDigit;
  };

  Status ClassEscape(const Token& t, ClassCode* out) {
    if (std::optional<uint32_t> e = SimpleEscape(t.c)) {
      out->c = *e;
      return Status::Ok();
    }
    if (t.c == 'b') {
      out->c = 0x08;
      return Status::Ok();
    }
    if (std::optional<CharCategory> cat = CategoryOf(t.c)) {
      out->is_literal = false;
      out->category = *cat;
      return Status::Ok();
    }
    if (t.c == 'x' || t.c == 'u' || t.c == 'U') return HexEscape(t, &out->c);
    if (t.c == 'N') {
      NamedEscape(t);
      out->c = 0;
      return Status::Ok();
    }
    if (IsOctal(t.c)) {
      pos_ = t.start + 1;
      uint32_t v = 0;
      ParseAt(kOctal3, v);
      if (v > 0377) return Error(t.start, "octal escape value outside of range 0-0o377");
      out->c = v;
      return Status::Ok();
    }
    if (IsDigit(t.c) || IsAsciiLetter(t.c)) {
      return Error(t.start, "bad escape \\" + std::string(1, static_cast<char>(t.c)));
    }
    out->c = t.c;
    return Status::Ok();
  }

  // An escape outside a class (sre_parse._escape).  Sets *item (or leaves
  // -1 for an anchor, reported through *is_anchor).
  Status Escape(const Token& t, uint32_t flags, int32_t* item, bool* is_anchor) {
    *item = -1;
    *is_anchor = false;
    if (t.c == 'Z' && neg_lookahead_depth_ > 0) {
      // End of the text, inside a negative look-ahead: the look-ahead body
      // may match at the end of the input ("a keyword followed by a non-word
      // character or by nothing").  Width 0, and like every AT code it
      // cannot be repeated.
      *item = NewNode(RegexOp::kEndOfText, t.start);
      *is_anchor = true;
      return Status::Ok();
    }
    if (t.c == 'A' || t.c == 'Z' || t.c == 'b' || t.c == 'B') {
      Unsupported(t.start, "anchor \\" + std::string(1, static_cast<char>(t.c)) +
                               " is not supported");
      *is_anchor = true;
      return Status::Ok();
    }
    if (std::optional<CharCategory> cat = CategoryOf(t.c)) {
      *item = NewCategory(*cat, flags, t.start);
      return Status::Ok();
    }
    if (std::optional<uint32_t> e = SimpleEscape(t.c)) {
      *item = NewLiteral(*e, flags, t.start);
      return Status::Ok();
    }
    uint32_t value = 0;
    if (t.c == 'x' || t.c == 'u' || t.c == 'U') {
      CFGMASK_RETURN_IF_ERROR(HexEscape(t, &value));
      *item = NewLiteral(value, flags, t.start);
      return Status::Ok();
    }
    if (t.c == 'N') {
      NamedEscape(t);
      *item = NewLiteral(0, flags, t.start);
      return Status::Ok();
    }
    if (t.c == '0') {
      pos_ = t.start + 1;
      ParseAt(kOctal3, value);
      *item = NewLiteral(value, flags, t.start);
      return Status::Ok();
    }
    if (IsDigit(t.c)) {
      // Octal escape (three octal digits) or a group reference (one or two
      // decimal digits).
      uint32_t group = t.c - '0';
      std::optional<Token> n = Peek();
      if (n && !n->escape && IsDigit(n->c)) {
        pos_ = n->end;
        std::optional<Token> n2 = Peek();
        if (IsOctal(t.c) && IsOctal(n->c) && n2 && !n2->escape && IsOctal(n2->c)) {
          pos_ = n2->end;
          value = (t.c - '0') * 64 + (n->c - '0') * 8 + (n2->c - '0');
          if (value > 0377) {
            return Error(t.start, "octal escape value outside of range 0-0o377");
          }
          *item = NewLiteral(value, flags, t.start);
          return Status::Ok();
        }
        group = group * 10 + (n->c - '0');
      }
      if (group < groups_closed_.size()) {
        if (!groups_closed_[group]) return Error(t.start, "cannot refer to an open group");
        Unsupported(t.start, "back-references are not regular");
        *item = BackReference(group, t.start);
        return Status::Ok();
      }
      return Error(t.start + 1, "invalid group reference " + std::to_string(group));
    }
    if (IsAsciiLetter(t.c)) {
      return Error(t.start, "bad escape \\" + std::string(1, static_cast<char>(t.c)));
    }
    *item = NewLiteral(t.c, flags, t.start);
    return Status::Ok();
  }

  Status ParseClass(size_t here, uint32_t flags, int32_t* item) {
    RegexCharSpec spec;
    spec.flags = flags;
    spec.negate = Match('^');
    std::vector<RegexClassItem> items;
    auto push = [&](const ClassCode& code) {
      RegexClassItem it;
      if (code.is_literal) {
        it.kind = RegexClassItem::kLiteral;
        it.lo = it.hi = code.c;
      } else {
        it.kind = RegexClassItem::kCategory;
        it.category = code.category;
      }
      items.push_back(it);
    };
    while (true) {
      std::optional<Token> t;
      CFGMASK_RETURN_IF_ERROR(Get(&t));
      if (!t) return Error(here, "unterminated character set");
      if (t->Is(']') && !items.empty()) break;
      ClassCode code1;
      if (t->escape) {
        CFGMASK_RETURN_IF_ERROR(ClassEscape(*t, &code1));
      } else {
        code1.c = t->c;
      }
      if (Match('-')) {
        std::optional<Token> that;
        CFGMASK_RETURN_IF_ERROR(Get(&that));
        if (!that) return Error(here, "unterminated character set");
        if (that->Is(']')) {
          push(code1);
          ClassCode dash;
          dash.c = '-';
          push(dash);
          break;
        }
        ClassCode code2;
        if (that->escape) {
          CFGMASK_RETURN_IF_ERROR(ClassEscape(*that, &code2));
        } else {
          code2.c = that->c;
        }
        if (!code1.is_literal || !code2.is_literal || code2.c < code1.c) {
          return Error(t->start, "bad character range " +
                                     std::string(pattern_.substr(t->start, pos_ - t->start)));
        }
        RegexClassItem it;
        it.kind = RegexClassItem::kRange;
        it.lo = code1.c;
        it.hi = code2.c;
        items.push_back(it);
      } else {
        push(code1);
      }
    }
    for (const RegexClassItem& it : items) {
      bool seen = false;
      for (const RegexClassItem& u : spec.items) seen |= (u == it);
      if (!seen) spec.items.push_back(it);
    }
    if (spec.items.size() == 1 && spec.items[0].kind == RegexClassItem::kLiteral) {
      spec.kind = spec.negate ? RegexCharSpec::kNotLiteral : RegexCharSpec::kLiteral;
      spec.c = spec.items[0].lo;
      spec.items.clear();
      spec.negate = false;
    } else {
      spec.kind = RegexCharSpec::kIn;
    }
    *item = NewChar(std::move(spec), here);
    return Status::Ok();
  }

  // A quantifier after `this_tok`: fills min/max, or returns false (with
  // the position restored) when `{` is a literal.
  Status Quantifier(const Token& this_tok, bool* is_quantifier, uint64_t* min,
                    uint64_t* max) {
    *is_quantifier = true;
    if (this_tok.c == '?') {
      *min = 0;
      *max = 1;
    } else if (this_tok.c == '*') {
      *min = 0;
      *max = kRegexMaxRepeat;
    } else if (this_tok.c == '+') {
      *min = 1;
      *max = kRegexMaxRepeat;
    } else {
      size_t here = pos_;
      if (NextIs('}')) {
        *is_quantifier = false;
        return Status::Ok();
      }
      // {m}, {m,}, {,n}, {m,n}: digits kept as text, the bounds checked below.
      std::string lo, hi;
      bool comma = false;
      auto on_lo = [&](auto& ctx) { lo.assign(x3::_attr(ctx).begin(), x3::_attr(ctx).end()); };
      auto on_comma = [&](auto&) { comma = true; };
      auto on_hi = [&](auto& ctx) { hi.assign(x3::_attr(ctx).begin(), x3::_attr(ctx).end()); };
      const auto body = x3::raw[*kDigit][on_lo] >>
                        -(x3::lit(',')[on_comma] >> x3::raw[*kDigit][on_hi]) >> x3::lit('}');
      x3::unused_type unused;
      if (!ParseAt(body, unused)) {
        pos_ = here;
        *is_quantifier = false;
        return Status::Ok();
      }
      if (!comma) hi = lo;
      auto number = [](const std::string& s) {
        uint64_t v = 0;
        for (char ch : s) {
          v = v * 10 + (ch - '0');
          if (v >= kRegexMaxRepeat) return kRegexMaxRepeat;
        }
        return v;
      };
      *min = 0;
      *max = kRegexMaxRepeat;
      if (!lo.empty()) {
        *min = number(lo);
        if (*min >= kRegexMaxRepeat) {
          return Error(this_tok.start, "the repetition number is too large");
        }
      }
      if (!hi.empty()) {
        *max = number(hi);
        if (*max >= kRegexMaxRepeat) {
          return Error(this_tok.start, "the repetition number is too large");
        }
        if (*max < *min) return Error(here, "min repeat greater than max repeat");
      }
    }
    return Status::Ok();
  }

  // Inline flags after "(?" (sre_parse._parse_flags).  `first` is the first
  // flag character, already consumed.  *global is set for "(?flags)".
  Status ParseFlags(const Token& first, size_t start, bool* global, uint32_t* add,
                    uint32_t* del) {
    *add = *del = 0;
    *global = false;
    pos_ = first.start;
    std::string on, off;
    ParseAt(kFlagLetters, on);
    for (char ch : on) {
      if (ch == 'L') return Error(pos_, "bad inline flags: cannot use 'L' flag with a str pattern");
      if (ch == 't') Unsupported(start, "the template flag (?t) is not supported");
      *add |= FlagBit(ch);
      if ((FlagBit(ch) & kTypeFlags) && (*add & kTypeFlags) != FlagBit(ch)) {
        return Error(pos_, "bad inline flags: flags 'a', 'u' and 'L' are incompatible");
      }
    }
    std::optional<Token> t;
    CFGMASK_RETURN_IF_ERROR(Get(&t));
    if (!t) return Error(pos_, on.empty() ? "missing flag" : "missing -, : or )");
    if (!on.empty() && t->Is(')')) {
      *global = true;
      return Status::Ok();
    }
    if (!on.empty() && t->Is(':')) return Status::Ok();
    if (!t->Is('-')) {
      bool alpha = !t->escape && IsAsciiLetter(t->c);
      return Error(t->start, alpha ? "unknown flag" : "missing -, : or )");
    }
    ParseAt(kFlagLetters, off);
    if (off.empty()) {
      std::optional<Token> n = Peek();
      bool alpha = n && !n->escape && IsAsciiLetter(n->c);
      return Error(pos_, alpha ? "unknown flag" : "missing flag");
    }
    for (char ch : off) {
      if (FlagBit(ch) & kTypeFlags || ch == 'L') {
        return Error(pos_, "bad inline flags: cannot turn off flags 'a', 'u' and 'L'");
      }
      if (ch == 't') return Error(pos_, "bad inline flags: cannot turn off global flag");
      *del |= FlagBit(ch);
    }
    CFGMASK_RETURN_IF_ERROR(Get(&t));
    if (!t) return Error(pos_, "missing :");
    if (!t->Is(':')) {
      bool alpha = !t->escape && IsAsciiLetter(t->c);
      return Error(t->start, alpha ? "unknown flag" : "missing :");
    }
    if (*add & *del) return Error(pos_ - 1, "bad inline flags: flag turned on and off");
    return Status::Ok();
  }

  static uint32_t CombineFlags(uint32_t flags, uint32_t add, uint32_t del) {
    if (add & kTypeFlags) flags &= ~kTypeFlags;
    return (flags | add) & ~del;
  }

  bool HasLookaround(int32_t node) const {
    const RegexNode& n = ast_->nodes[node];
    if (n.op == RegexOp::kNegLookahead || n.op == RegexOp::kLookbehind) return true;
    for (int32_t c : n.children) {
      if (HasLookaround(c)) return true;
    }
    return false;
  }

  // (?=X) (?!X) (?<=X) (?<!X); the "(?" and the first char are consumed.
  Status Lookaround(size_t start, bool behind, bool negative, bool verbose, int nested,
                    uint32_t flags, int32_t* item) {
    int32_t body = -1;
    const bool neg_ahead = !behind && negative;
    neg_lookahead_depth_ += neg_ahead;
    Status sub = ParseSub(verbose, nested + 1, flags, &body);
    neg_lookahead_depth_ -= neg_ahead;
    CFGMASK_RETURN_IF_ERROR(sub);
    if (!Match(')')) return Error(start, "missing ), unterminated subpattern");
    *item = NewSeq({}, start);
    if (!behind) {
      if (!negative) {
        Unsupported(start, "positive look-ahead (?=...) is not supported");
      } else if (HasLookaround(body)) {
        Unsupported(start, "look-around inside a negative look-ahead is not supported");
      } else {
        *item = NewNode(RegexOp::kNegLookahead, start);
        ast_->nodes[*item].children = {body};
      }
      return Status::Ok();
    }
    RegexWidth w = RegexNodeWidth(*ast_, body);
    if (w.lo != w.hi) {
      if (deferred_.ok()) deferred_ = Error(start, "look-behind requires fixed-width pattern");
      return Status::Ok();
    }
    const RegexNode& b = ast_->nodes[body];
    bool one_char = b.children.size() == 1 &&
                    ast_->nodes[b.children[0]].op == RegexOp::kCharClass;
    if (one_char) {
      CodePointSet chars = ResolveCharClass(ast_->nodes[b.children[0]].spec);
      if (!chars.Empty() && chars.ranges().back().second < 0x80) {
        *item = NewNode(RegexOp::kLookbehind, start);
        ast_->nodes[*item].chars = std::move(chars);
        ast_->nodes[*item].negative = negative;
        return Status::Ok();
      }
    }
    Unsupported(start, "look-behind other than one ASCII character is not supported");
    return Status::Ok();
  }

  // A back-reference to a closed group: for getwidth() only (the pattern is
  // refused as unsupported), the group's body again.
  int32_t BackReference(size_t group, size_t start) {
    int32_t ref = NewNode(RegexOp::kGroup, start);
    ast_->nodes[ref].children = {group_bodies_[group]};
    return ref;
  }

  // (?(group)yes|no); "(?(" consumed, `start` at the '('.  Refused as
  // unsupported; the tree keeps it as a branch of yes and no (or nothing),
  // which is what getwidth() reads of GROUPREF_EXISTS.
  Status Conditional(size_t start, bool verbose, int nested, uint32_t flags, int32_t* item) {
    size_t name_at = pos_;
    std::string name;
    CFGMASK_RETURN_IF_ERROR(GetUntil(')', "group name", &name));
    auto first = name.begin();
    std::string ignored;
    bool identifier = x3::parse(first, name.end(), kAsciiIdentifier, ignored) && first == name.end();
    if (identifier) {
      if (!group_names_.count(name)) return Error(name_at, "unknown group name '" + name + "'");
    } else {
      bool digits = !name.empty() && name.size() < 10;
      for (char ch : name) digits &= IsDigit(static_cast<unsigned char>(ch));
      if (!digits) return Error(name_at, "bad character in group name '" + name + "'");
      size_t group = std::stoul(name);
      if (group == 0) return Error(name_at, "bad group number");
      condition_refs_.emplace_back(group, name_at);
    }
    int32_t yes = -1;
    CFGMASK_RETURN_IF_ERROR(ParseSeq(verbose, nested + 1, false, flags, &yes));
    int32_t no = -1;
    if (Match('|')) {
      CFGMASK_RETURN_IF_ERROR(ParseSeq(verbose, nested + 1, false, flags, &no));
      if (NextIs('|')) return Error(pos_, "conditional backref with more than two branches");
    } else {
      no = NewSeq({}, pos_);
    }
    if (!Match(')')) return Error(start, "missing ), unterminated subpattern");
    Unsupported(start, "conditional groups (?(...)...) are not regular");
    *item = NewNode(RegexOp::kAlternate, start);
    ast_->nodes[*item].children = {yes, no};
    return Status::Ok();
  }

  // '(' already consumed at `start`.  Sets *item (-1 for a comment or global
  // flags), may turn on global flags.
  Status Group(size_t start, bool first, bool seq_empty, bool* verbose, int nested,
               uint32_t* flags, int32_t* item) {
    *item = -1;
    bool capture = true;
    std::string name;
    uint32_t add = 0, del = 0;
    if (Match('?')) {
      std::optional<Token> ch;
      CFGMASK_RETURN_IF_ERROR(Get(&ch));
      if (!ch) return Error(pos_, "unexpected end of pattern");
      if (ch->Is('P')) {
        if (Match('<')) {
          size_t name_at = pos_;
          CFGMASK_RETURN_IF_ERROR(GetUntil('>', "group name", &name));
          CFGMASK_RETURN_IF_ERROR(CheckGroupName(name, name_at));
        } else if (Match('=')) {
          size_t name_at = pos_;
          CFGMASK_RETURN_IF_ERROR(GetUntil(')', "group name", &name));
          CFGMASK_RETURN_IF_ERROR(CheckGroupName(name, name_at));
          auto it = group_names_.find(name);
          if (it == group_names_.end()) return Error(name_at, "unknown group name '" + name + "'");
          if (!groups_closed_[it->second]) return Error(name_at, "cannot refer to an open group");
          Unsupported(start, "back-references are not regular");
          *item = BackReference(it->second, start);
          return Status::Ok();
        } else {
          std::optional<Token> c2;
          CFGMASK_RETURN_IF_ERROR(Get(&c2));
          if (!c2) return Error(pos_, "unexpected end of pattern");
          return Error(c2->start - 2, "unknown extension ?P");
        }
      } else if (ch->Is(':')) {
        capture = false;
      } else if (ch->Is('#')) {
        while (true) {
          std::optional<Token> c2;
          CFGMASK_RETURN_IF_ERROR(Get(&c2));
          if (!c2) return Error(start, "missing ), unterminated comment");
          if (c2->Is(')')) return Status::Ok();
        }
      } else if (ch->Is('=') || ch->Is('!')) {
        return Lookaround(start, false, ch->Is('!'), *verbose, nested, *flags, item);
      } else if (ch->Is('<')) {
        std::optional<Token> c2;
        CFGMASK_RETURN_IF_ERROR(Get(&c2));
        if (!c2) return Error(pos_, "unexpected end of pattern");
        if (!c2->Is('=') && !c2->Is('!')) return Error(c2->start - 2, "unknown extension ?<");
        return Lookaround(start, true, c2->Is('!'), *verbose, nested, *flags, item);
      } else if (ch->Is('(')) {
        return Conditional(start, *verbose, nested, *flags, item);
      } else if (ch->Is('>')) {
        capture = false;
        Unsupported(start, "atomic groups (?>...) are not supported");
      } else if (!ch->escape && (ch->c == '-' || (ch->c < 128 && std::string_view("aiLmstux")
                                                                  .find(static_cast<char>(ch->c)) !=
                                                              std::string_view::npos))) {
        bool global = false;
        CFGMASK_RETURN_IF_ERROR(ParseFlags(*ch, start, &global, &add, &del));
        if (global) {
          if (!first || !seq_empty) {
            return Error(start, "global flags not at the start of the expression");
          }
          global_flags_ |= add;
          *flags |= add;
          *verbose = (global_flags_ & kRegexVerbose) != 0;
          return Status::Ok();
        }
        capture = false;
      } else {
        return Error(ch->start - 1, "unknown extension ?" + std::string(pattern_.substr(
                                                               ch->start, ch->end - ch->start)));
      }
    }
    int32_t group_id = -1;
    if (capture) {
      group_id = static_cast<int32_t>(groups_closed_.size());
      groups_closed_.push_back(false);
      group_bodies_.push_back(-1);
      if (!name.empty()) {
        if (group_names_.count(name)) {
          return Error(start + 4, "redefinition of group name '" + name + "'");
        }
        group_names_[name] = group_id;
      }
    }
    bool sub_verbose = (*verbose || (add & kRegexVerbose)) && !(del & kRegexVerbose);
    int32_t body = -1;
    CFGMASK_RETURN_IF_ERROR(ParseSub(sub_verbose, nested + 1, CombineFlags(*flags, add, del), &body));
    if (!Match(')')) return Error(start, "missing ), unterminated subpattern");
    if (capture) {
      groups_closed_[group_id] = true;
      group_bodies_[group_id] = body;
    }
    *item = NewNode(RegexOp::kGroup, start);
    ast_->nodes[*item].children = {body};
    ast_->nodes[*item].transparent = !capture && add == 0 && del == 0;
    return Status::Ok();
  }

  // sre_parse._parse: one alternative, a sequence of items.
  Status ParseSeq(bool verbose, int nested, bool first, uint32_t flags, int32_t* out) {
    size_t seq_start = pos_;
    std::vector<int32_t> items;
    std::vector<bool> anchor;  // items that are AT codes (cannot be repeated)
    std::vector<bool> repeat;  // items that are repeats (cannot be repeated again)
    while (true) {
      std::optional<Token> t = Peek();
      if (!t || t->Is('|') || t->Is(')')) break;
      CFGMASK_RETURN_IF_ERROR(Get(&t));
      if (verbose && !t->escape) {
        if (t->c == ' ' || (t->c >= '\t' && t->c <= '\r')) continue;
        if (t->c == '#') {
          while (!AtEnd()) {
            std::optional<Token> c;
            CFGMASK_RETURN_IF_ERROR(Get(&c));
            if (c->Is('\n')) break;
          }
          continue;
        }
      }
      int32_t item = -1;
      bool is_anchor = false;
      if (t->escape) {
        CFGMASK_RETURN_IF_ERROR(Escape(*t, flags, &item, &is_anchor));
      } else if (t->c >= 128 || kSpecialChars.find(static_cast<char>(t->c)) ==
                                    std::string_view::npos) {
        item = NewLiteral(t->c, flags, t->start);
      } else if (t->c == '[') {
        CFGMASK_RETURN_IF_ERROR(ParseClass(t->start, flags, &item));
      } else if (t->c == '*' || t->c == '+' || t->c == '?' || t->c == '{') {
        bool is_quantifier = false;
        uint64_t min = 0, max = 0;
        CFGMASK_RETURN_IF_ERROR(Quantifier(*t, &is_quantifier, &min, &max));
        if (!is_quantifier) {
          items.push_back(NewLiteral('{', flags, t->start));
          anchor.push_back(false);
          repeat.push_back(false);
          continue;
        }
        if (items.empty() || anchor.back()) return Error(t->start, "nothing to repeat");
        if (repeat.back()) return Error(t->start, "multiple repeat");
        int32_t target = items.back();
        int32_t body;
        if (ast_->nodes[target].op == RegexOp::kGroup && ast_->nodes[target].transparent) {
          body = ast_->nodes[target].children[0];
        } else {
          body = NewSeq({target}, ast_->nodes[target].offset);
          ast_->nodes[body].offset = ast_->nodes[target].offset;
        }
        int32_t rep = NewNode(RegexOp::kRepeat, t->start);
        ast_->nodes[rep].children = {body};
        ast_->nodes[rep].min = min;
        ast_->nodes[rep].max = max;
        if (Match('?')) {
          ast_->nodes[rep].greedy = false;
        } else if (Match('+')) {
          Unsupported(t->start, "possessive quantifiers are not supported");
        }
        items.back() = rep;
        repeat.back() = true;
        continue;
      } else if (t->c == '.') {
        RegexCharSpec s;
        s.kind = RegexCharSpec::kAny;
        s.flags = flags;
        item = NewChar(std::move(s), t->start);
      } else if (t->c == '(') {
        CFGMASK_RETURN_IF_ERROR(
            Group(t->start, first, items.empty(), &verbose, nested, &flags, &item));
        if (item < 0) continue;
      } else {  // ^ $
        Unsupported(t->start, std::string("anchor ") + static_cast<char>(t->c) +
                                  " is not supported");
        is_anchor = true;
      }
      if (is_anchor && item < 0) item = NewSeq({}, t->start);
      items.push_back(item);
      anchor.push_back(is_anchor);
      repeat.push_back(false);
    }
    std::vector<int32_t> spliced;
    for (int32_t it : items) {
      const RegexNode& n = ast_->nodes[it];
      if (n.op == RegexOp::kGroup && n.transparent) {
        const std::vector<int32_t>& inner = ast_->nodes[n.children[0]].children;
        spliced.insert(spliced.end(), inner.begin(), inner.end());
      } else {
        spliced.push_back(it);
      }
    }
    *out = NewSeq(std::move(spliced), seq_start);
    return Status::Ok();
  }

  bool SameItem(int32_t a, int32_t b) const {
    const RegexNode& x = ast_->nodes[a];
    const RegexNode& y = ast_->nodes[b];
    return x.op == RegexOp::kCharClass && y.op == RegexOp::kCharClass && x.spec.SameItem(y.spec);
  }

  // sre_parse._parse_sub: alternatives separated by '|'.
  Status ParseSub(bool verbose, int nested, uint32_t flags, int32_t* out) {
    size_t start = pos_;
    if (nested > 2 * kRegexMaxGroupNesting) {  // two levels per group: ParseSub, ParseSeq
      return Status(ErrorCode::kResourceLimit,
                    Prefix(start) + "groups nested more than " +
                        std::to_string(kRegexMaxGroupNesting) + " deep");
    }
    std::vector<int32_t> alts;
    while (true) {
      int32_t seq = -1;
      uint32_t f = nested == 0 ? global_flags_ : flags;
      CFGMASK_RETURN_IF_ERROR(ParseSeq(verbose, nested + 1, nested == 0 && alts.empty(), f, &seq));
      alts.push_back(seq);
      if (!Match('|')) break;
      if (nested == 0) verbose = (global_flags_ & kRegexVerbose) != 0;
    }
    if (alts.size() == 1) {
      *out = alts[0];
      return Status::Ok();
    }
    std::vector<int32_t> items;
    // Hoist a common prefix out of the branch.
    while (true) {
      bool common = true;
      for (int32_t a : alts) {
        const std::vector<int32_t>& ch = ast_->nodes[a].children;
        if (ch.empty() || !SameItem(ch[0], ast_->nodes[alts[0]].children[0])) {
          common = false;
          break;
        }
      }
      if (!common) break;
      items.push_back(ast_->nodes[alts[0]].children[0]);
      for (int32_t a : alts) {
        std::vector<int32_t>& ch = ast_->nodes[a].children;
        ch.erase(ch.begin());
      }
    }
    // A branch of single characters becomes one character set.
    bool all_chars = true;
    for (int32_t a : alts) {
      const std::vector<int32_t>& ch = ast_->nodes[a].children;
      if (ch.size() != 1 || ast_->nodes[ch[0]].op != RegexOp::kCharClass) {
        all_chars = false;
        break;
      }
      const RegexCharSpec& s = ast_->nodes[ch[0]].spec;
      if (!(s.kind == RegexCharSpec::kLiteral || (s.kind == RegexCharSpec::kIn && !s.negate))) {
        all_chars = false;
        break;
      }
    }
    if (all_chars) {
      RegexCharSpec set;
      set.kind = RegexCharSpec::kIn;
      set.flags = ast_->nodes[ast_->nodes[alts[0]].children[0]].spec.flags;
      for (int32_t a : alts) {
        const RegexCharSpec& s = ast_->nodes[ast_->nodes[a].children[0]].spec;
        std::vector<RegexClassItem> add = s.items;
        if (s.kind == RegexCharSpec::kLiteral) {
          RegexClassItem it;
          it.lo = it.hi = s.c;
          add = {it};
        }
        for (const RegexClassItem& it : add) {
          bool seen = false;
          for (const RegexClassItem& u : set.items) seen |= (u == it);
          if (!seen) set.items.push_back(it);
        }
      }
      items.push_back(NewChar(std::move(set), start));
    } else {
      int32_t branch = NewNode(RegexOp::kAlternate, start);
      ast_->nodes[branch].children = alts;
      items.push_back(branch);
    }
    *out = NewSeq(std::move(items), start);
    return Status::Ok();
  }

  std::string_view pattern_;
  std::string_view what_;
  RegexAst* ast_;
  size_t pos_ = 0;
  uint32_t global_flags_ = 0;
  std::vector<bool> groups_closed_ = {true};  // group 0 is the whole match
  std::vector<int32_t> group_bodies_ = {-1};  // node of each closed group's body
  std::vector<std::pair<size_t, size_t>> condition_refs_;  // (?(N)...): N, byte offset
  std::map<std::string, int32_t> group_names_;
  mutable std::vector<int32_t> cp_offset_;  // byte offset -> code-point offset
  Status deferred_;     // first compile-time error (sre_compile's checks)
  Status unsupported_;  // first valid-but-unsupported construct
};

}  // namespace

Status ParseRegex(std::string_view pattern, uint32_t flags, std::string_view what,
                  RegexAst* ast) {
  *ast = RegexAst();
  RegexParser parser(pattern, what, ast);
  return parser.Parse(flags);
}

}  // namespace cfgmask
