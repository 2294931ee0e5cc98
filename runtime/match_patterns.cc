// CPython 3.11's checks on case patterns beyond the grammar: see
// match_patterns.h.
#include "runtime/match_patterns.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "grammar/base/unicode_names.h"

namespace cfgmask {

namespace {

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool IsIdentByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         (static_cast<unsigned char>(c) >= 0x80);
}

bool EndsImaginary(const std::string& t) {
  return !t.empty() && (t.back() == 'j' || t.back() == 'J');
}

// A number literal's value: an integer as a decimal string ("-" for
// negative, "0" for zero), or a double.
struct Num {
  bool is_int = true;
  std::string dec = "0";
  double f = 0.0;
  double AsDouble() const { return is_int ? std::strtod(dec.c_str(), nullptr) : f; }
  void Negate() {
    if (is_int) {
      if (dec != "0") dec = dec[0] == '-' ? dec.substr(1) : "-" + dec;
    } else {
      f = -f;
    }
  }
};

// Digits of `body` (no underscores) in `base` as a decimal string.
std::string ToDecimal(const std::string& body, int base) {
  std::vector<int> dec{0};  // little-endian decimal digits
  for (char c : body) {
    int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    int carry = d;
    for (int& x : dec) {
      const int v = x * base + carry;
      x = v % 10;
      carry = v / 10;
    }
    while (carry) {
      dec.push_back(carry % 10);
      carry /= 10;
    }
  }
  while (dec.size() > 1 && dec.back() == 0) dec.pop_back();
  std::string s;
  for (auto it = dec.rbegin(); it != dec.rend(); ++it) s += static_cast<char>('0' + *it);
  return s;
}

// A real (non-imaginary) number literal.
Num ParseReal(std::string t) {
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  Num n;
  const bool prefixed = t.size() > 1 && t[0] == '0' && std::string("xXoObB").find(t[1]) != std::string::npos;
  if (prefixed) {
    const char p = static_cast<char>(t[1] | 0x20);
    n.dec = ToDecimal(t.substr(2), p == 'x' ? 16 : p == 'o' ? 8 : 2);
  } else if (t.find_first_of(".eE") != std::string::npos) {
    n.is_int = false;
    n.f = std::strtod(t.c_str(), nullptr);
  } else {
    n.dec = ToDecimal(t, 10);
  }
  return n;
}

std::string RealKey(const Num& n) {
  if (n.is_int) return "n" + n.dec;
  if (std::isinf(n.f)) return n.f > 0 ? "finf" : "f-inf";
  if (n.f == std::floor(n.f)) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.0f", n.f);
    std::string s = buf;
    if (s == "-0") s = "0";
    return "n" + s;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", n.f);
  return std::string("f") + buf;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The value of a string literal's body; false where it is not worked out.
bool DecodeBody(const std::string& body, bool raw, bool bytes, std::string* out) {
  if (raw) {
    *out += body;
    return true;
  }
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      *out += body[i];
      continue;
    }
    const char e = body[++i];
    auto hex = [&](size_t n) {
      uint32_t v = 0;
      for (size_t k = 0; k < n && i + 1 < body.size(); ++k) {
        const char h = body[++i];
        v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      return v;
    };
    switch (e) {
      case '\n': break;
      case '\r': if (i + 1 < body.size() && body[i + 1] == '\n') ++i; break;
      case '\\': *out += '\\'; break;
      case '\'': *out += '\''; break;
      case '"': *out += '"'; break;
      case 'a': *out += '\a'; break;
      case 'b': *out += '\b'; break;
      case 'f': *out += '\f'; break;
      case 'n': *out += '\n'; break;
      case 'r': *out += '\r'; break;
      case 't': *out += '\t'; break;
      case 'v': *out += '\v'; break;
      case 'x': {
        const uint32_t v = hex(2);
        if (bytes) *out += static_cast<char>(v); else AppendUtf8(out, v);
        break;
      }
      case 'u': case 'U':
        if (bytes) {  // no escape in bytes: the backslash stays
          *out += '\\';
          *out += e;
          break;
        }
        AppendUtf8(out, hex(e == 'u' ? 4 : 8));
        break;
      case 'N': {
        const size_t close = body.find('}', i);
        if (bytes || i + 1 >= body.size() || body[i + 1] != '{' || close == std::string::npos) {
          *out += '\\';  // in bytes \N is no escape
          *out += e;
          break;
        }
        const int32_t cp = UnicodeNameCode(std::string_view(body).substr(i + 2, close - i - 2));
        if (cp < 0) return false;  // a spelling the grammar's names refuse
        AppendUtf8(out, static_cast<uint32_t>(cp));
        i = close;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          if (bytes) *out += static_cast<char>(v & 0xFF); else AppendUtf8(out, v);
          break;
        }
        // An unknown escape keeps its backslash (CPython warns, and takes it).
        *out += '\\';
        *out += e;
        break;
    }
  }
  return true;
}

// A number's text without underscores and without its `j`.
std::string ParseRealText(std::string t) {
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  if (EndsImaginary(t)) t.pop_back();
  return t;
}

}  // namespace

std::string CanonicalPatternKey(const std::string& text) {
  // Lexemes: words (names, keywords, numbers), strings, single signs.
  struct Tok { char kind; std::string text; };  // 'w' word/number, 's' string, 'o' op
  std::vector<Tok> toks;
  size_t i = 0;
  const size_t n = text.size();
  // A string literal whose quote is at text[i], after `prefix`: one token
  // 's' of the prefix, \x01 and the body (escapes kept as written).
  auto read_string = [&](const std::string& prefix) {
    const char q = text[i];
    const bool triple = i + 2 < n && text[i + 1] == q && text[i + 2] == q;
    const size_t open = triple ? 3 : 1;
    size_t k = i + open;
    while (k < n) {
      if (text[k] == '\\') { k += 2; continue; }
      if (text[k] == q && (!triple || (k + 2 < n && text[k + 1] == q && text[k + 2] == q))) break;
      ++k;
    }
    toks.push_back({'s', prefix + "\x01" + text.substr(i + open, k - i - open)});
    i = std::min(n, k + open);
  };
  while (i < n) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n') { ++i; continue; }
    if (c == '\\') { ++i; continue; }  // a line continuation
    if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (IsIdentByte(c) || (c == '.' && i + 1 < n && text[i + 1] >= '0' && text[i + 1] <= '9')) {
      size_t j = i;
      const bool number = (c >= '0' && c <= '9') || c == '.';
      while (j < n && (IsIdentByte(text[j]) || (number && (text[j] == '.' ||
             ((text[j] == '+' || text[j] == '-') && (text[j - 1] == 'e' || text[j - 1] == 'E') &&
              !(text[i] == '0' && i + 1 < n && (text[i + 1] | 0x20) == 'x'))))))
        ++j;
      if (j < n && (text[j] == '\'' || text[j] == '"') && !number) {  // a string prefix
        // fall through to the string reader with the prefix
      } else {
        toks.push_back({'w', text.substr(i, j - i)});
        i = j;
        continue;
      }
      // string with prefix text[i, j)
      const std::string prefix = text.substr(i, j - i);
      i = j;
      read_string(prefix);
      continue;
    }
    if (c == '\'' || c == '"') {
      read_string("");
      continue;
    }
    toks.push_back({'o', std::string(1, c)});
    ++i;
  }
  if (toks.empty()) return "";
  if (toks[0].kind == 's') {
    bool bytes = false, known = true;
    std::string value;
    for (const Tok& t : toks) {
      if (t.kind != 's') return "";
      const size_t sep = t.text.find('\x01');
      std::string prefix = t.text.substr(0, sep);
      for (char& ch : prefix) ch = static_cast<char>(ch | 0x20);
      bytes = prefix.find('b') != std::string::npos;
      const bool raw = prefix.find('r') != std::string::npos;
      if (!DecodeBody(t.text.substr(sep + 1), raw, bytes, &value)) known = false;
    }
    const std::string kind = bytes ? "b" : "s";
    return known ? kind + value : "?" + kind;
  }
  if (toks.size() == 1 && toks[0].kind == 'w') {
    const std::string& w = toks[0].text;
    if (w == "None") return "N";
    if (w == "True") return "n1";
    if (w == "False") return "n0";
  }
  // [-] number [(+|-) imaginary]
  size_t p = 0;
  bool neg = false;
  if (toks[p].kind == 'o' && toks[p].text == "-") { neg = true; ++p; }
  if (p >= toks.size() || toks[p].kind != 'w' || !((toks[p].text[0] >= '0' && toks[p].text[0] <= '9') || toks[p].text[0] == '.')) {
    return "";  // a dotted name
  }
  const std::string first = toks[p++].text;
  if (EndsImaginary(first) && p == toks.size()) {
    double im = std::strtod(ParseRealText(first).c_str(), nullptr);
    if (neg) im = -im;
    if (im == 0) return "n0";
    char buf[96];
    std::snprintf(buf, sizeof buf, "c%a,%a", 0.0, im);
    return buf;
  }
  Num re = ParseReal(first);
  if (neg) re.Negate();
  if (p == toks.size()) return RealKey(re);
  const bool minus = toks[p].text == "-";
  ++p;
  if (p >= toks.size()) return "";
  double im = std::strtod(ParseRealText(toks[p].text).c_str(), nullptr);
  if (minus) im = -im;
  if (im == 0) return RealKey(re);
  double r = re.AsDouble();
  if (r == 0) r = 0.0;
  char buf[96];
  std::snprintf(buf, sizeof buf, "c%a,%a", r, im);
  return buf;
}

PatternReader::PatternReader() { levels_.emplace_back(); }

bool PatternReader::Fail(std::string why) {
  why_ = std::move(why);
  return false;
}

std::vector<std::string> PatternReader::TakeBound() {
  std::vector<std::string> out;
  out.swap(bound_);
  return out;
}

std::vector<std::string> PatternReader::TakeUsed() {
  std::vector<std::string> out;
  out.swap(used_);
  return out;
}

bool PatternReader::Bind(const std::string& name) {
  if (name == "__debug__") return Fail("cannot assign to __debug__");
  for (const Level& l : levels_) {
    if (Has(l.names, name) || Has(l.slot.cur, name)) {
      return Fail("multiple assignments to name '" + name + "' in pattern");
    }
  }
  for (const Level& l : levels_) {
    if (l.slot.alts > 1 && !Has(l.slot.first, name)) {
      return Fail("alternative patterns bind different names");
    }
  }
  levels_.back().slot.cur.push_back(name);
  bound_.push_back(name);
  return true;
}

bool PatternReader::Closed(bool irrefutable, const std::string& what) {
  Slot& s = levels_.back().slot;
  ++s.closed;
  s.cur_irref = irrefutable;
  s.irref_what = what;
  // A closed pattern is a whole alternative: a later one binds its names now.
  if (s.alts > 1 && !s.after_as && s.cur.size() != s.first.size()) {
    return Fail("alternative patterns bind different names");
  }
  return true;
}

bool PatternReader::EndAlt(Slot& s) {
  if (s.cur_irref) return Fail(s.irref_what + " makes remaining patterns unreachable");
  if (s.alts == 1) {
    s.first = s.cur;
  } else if (s.cur.size() != s.first.size()) {
    return Fail("alternative patterns bind different names");
  }
  ++s.alts;
  s.cur.clear();
  s.closed = 0;
  s.cur_irref = false;
  return true;
}

bool PatternReader::FinishOr(Slot& s, std::vector<std::string>* names, bool* irref,
                             std::string* what) {
  *what = s.irref_what;
  if (s.after_as) {
    *names = s.cur;
    *irref = s.as_irref;
    return true;
  }
  if (s.alts > 1 && s.cur.size() != s.first.size()) {
    return Fail("alternative patterns bind different names");
  }
  *names = s.cur;
  *irref = s.cur_irref;
  return true;
}

bool PatternReader::EndSlot(Level& l) {
  if (l.slot.Empty()) {
    l.slot = Slot();
    return true;
  }
  std::vector<std::string> names;
  bool irref = false;
  std::string what;
  if (!FinishOr(l.slot, &names, &irref, &what)) return false;
  l.names.insert(l.names.end(), names.begin(), names.end());
  ++l.slots;
  l.last_irref = irref && !l.slot.star;
  l.last_what = what;
  l.slot = Slot();
  return true;
}

bool PatternReader::Resolve(Kind kind, const std::string& text) {
  const Ctx ctx = pend_ctx_;
  const std::string name = std::move(pend_);
  pend_.clear();
  pend_ctx_ = kNone;
  Level& l = levels_.back();
  const bool op = kind == Kind::kOp;
  if (op && (text == "." || text == "(")) {
    if (ctx == kPlain) used_.push_back(name);
    return true;
  }
  if (op && text == "=" && ctx == kPlain && l.kind == 'C') {
    if (Has(l.kws, name)) return Fail("attribute name repeated in class pattern: " + name);
    l.kws.push_back(name);
    return true;
  }
  const bool key = l.kind == '{' && l.key;
  if (ctx == kAttr) {
    return key || Closed(false, "");
  }
  if (name == "_") return Closed(true, "wildcard");
  if (!Bind(name)) return false;
  return Closed(true, "name capture '" + name + "'");
}

bool PatternReader::CommitName() {
  if (pend_ctx_ != kPlain) return true;
  return Resolve(Kind::kKeyword, "as");
}

bool PatternReader::Lexeme(Kind kind, const std::string& text) {
  if (pend_ctx_ != kNone && !Resolve(kind, text)) return false;
  Level& l = levels_.back();
  const bool key = l.kind == '{' && l.key;
  switch (kind) {
    case Kind::kName:
      if (prev_kind_ == Kind::kOp && prev_ == ".") {
        pend_ctx_ = kAttr;
        pend_ = text;
      } else if (prev_kind_ == Kind::kOp && prev_ == "*") {
        l.slot.star = true;
        if (text != "_" && !Bind(text)) return false;
      } else if (prev_kind_ == Kind::kOp && prev_ == "**") {
        if (text == "_") return Fail("invalid syntax ('**_' in a mapping pattern)");
        if (!Bind(text)) return false;
      } else if (prev_kind_ == Kind::kKeyword && prev_ == "as") {
        if (text == "_") return Fail("cannot use '_' as a target");
        if (!Bind(text)) return false;
      } else {
        pend_ctx_ = kPlain;
        pend_ = text;
      }
      break;
    case Kind::kNumber:
      if (want_imag_) {
        want_imag_ = false;
        if (!EndsImaginary(text)) return Fail("imaginary number required in complex literal");
      } else if (!key && !Closed(false, "")) {
        return false;
      }
      last_number_ = text;
      break;
    case Kind::kString:
      if (prev_kind_ != Kind::kString && !key && !Closed(false, "")) return false;
      break;
    case Kind::kKeyword:
      if (text == "as") {
        std::vector<std::string> names;
        bool irref = false;
        std::string what;
        if (!FinishOr(l.slot, &names, &irref, &what)) return false;
        l.slot.cur = names;
        l.slot.alts = 1;
        l.slot.first.clear();
        l.slot.after_as = true;
        l.slot.as_irref = irref;
        l.slot.irref_what = what;
      } else if (!key && !Closed(false, "")) {  // None, True, False
        return false;
      }
      break;
    case Kind::kOp:
      if (text == "-" || text == "+") {
        if (prev_kind_ == Kind::kNumber) {
          if (EndsImaginary(last_number_)) return Fail("real number required in complex literal");
          want_imag_ = true;
        }
      } else if (text == "(" || text == "[" || text == "{") {
        Level n;
        n.kind = text == "(" ? (prev_kind_ == Kind::kName ? 'C' : '(') : text[0];
        if (n.kind == '{') {
          n.key = true;
          n.key_start = raw_.size();
        }
        levels_.push_back(std::move(n));
      } else if (text == ")" || text == "]" || text == "}") {
        if (!EndSlot(l)) return false;
        if (levels_.size() < 2) return Fail("unbalanced pattern");
        Level done = std::move(levels_.back());
        levels_.pop_back();
        const bool irref = done.kind == '(' && !done.comma && done.slots == 1 && done.last_irref;
        Slot& s = levels_.back().slot;
        s.cur.insert(s.cur.end(), done.names.begin(), done.names.end());
        if (!Closed(irref, done.last_what)) return false;
      } else if (text == ",") {
        if (!EndSlot(l)) return false;
        l.comma = true;
        if (l.kind == '{') {
          l.key = true;
          l.key_start = raw_.size();
        }
      } else if (text == "|") {
        if (!EndAlt(l.slot)) return false;
      } else if (text == "*") {
        if (++l.stars > 1) return Fail("multiple starred names in sequence pattern");
      } else if (text == ":" && key) {
        const size_t end = raw_.size() > l.key_start ? raw_.size() - 1 : l.key_start;
        const std::string k = CanonicalPatternKey(raw_.substr(l.key_start, end - l.key_start));
        if (!k.empty()) {
          for (const std::string& o : l.keys) {
            const bool same = o == k || (k[0] == '?' && o.size() > 0 && (o[0] == k[1] || o[0] == '?')) ||
                              (o[0] == '?' && o[1] == k[0]);
            if (same) return Fail("mapping pattern checks duplicate key");
          }
          l.keys.push_back(k);
        }
        l.key = false;
      }
      break;
  }
  prev_kind_ = kind;
  prev_ = text;
  return true;
}

bool PatternReader::End(bool guarded, bool* irrefutable) {
  *irrefutable = false;
  if (pend_ctx_ != kNone && !Resolve(Kind::kOp, ":")) return false;
  if (levels_.size() != 1) return Fail("unbalanced pattern");
  Level& t = levels_[0];
  if (!EndSlot(t)) return false;
  *irrefutable = !guarded && !t.comma && t.slots == 1 && t.last_irref;
  end_what_ = t.last_what;
  return true;
}

}  // namespace cfgmask
