// The scope layer of the strict Python grammar: see scope_layer.h.
//
// Reading order.  Bytes go through a small tokenizer (Byte, CodeByte,
// FieldByte): identifiers, operators by longest match, strings (prefixes,
// triple quotes, escapes, f-string fields with their names), comments, line
// continuations, logical newlines and the column of each logical line.  A
// lexeme is complete when the byte after it arrives (a name, `=` that could
// be `==`) or at once (`(`, `,`, `+=`): that byte is the one a refusal is
// charged to.  Lexemes drive a flat statement reader (Lexeme): the kind of
// the statement from its first word, a stack of open brackets and lambdas
// (Frame), and the list of names met in the statement (seg_), each marked
// "bare" while it can still be a whole assignment target.  Names reach the
// enclosing scope's symbol sets at the end of each statement or compound
// header, as CPython's symbol table visits statements in order; names of a
// lambda body, of a comprehension (but its first iterable) and, under
// `from __future__ import annotations`, of annotations are dropped there, as
// CPython gives them a scope of their own.
//
// The symbol-table rules follow CPython 3.11's Python/symtable.c
// (symtable_visit_stmt for Global/Nonlocal and AnnAssign, analyze_name for
// the nonlocal binding) and the forbidden-name checks of Python/ast.c /
// compile.c for __debug__.
#include "runtime/scope_layer.h"

#include "grammar/base/unicode_idents.h"
#include "grammar/base/unicode_names.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace cfgmask {

namespace {

// A hex digit's value, or -1.
int HexValue(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Takes digit c of a `kind` escape (x, u, U) with *left digits still wanted
// and *value read so far; false if c is no hex digit or takes a \U escape
// past U+10FFFF.  (ScopeLayer::EscHexByte, and Filter on a token's bytes.)
bool HexDigit(char kind, int8_t* left, uint32_t* value, unsigned char c) {
  const int d = HexValue(c);
  if (d < 0) return false;
  *value = *value * 16 + static_cast<uint32_t>(d);
  --*left;
  return !(kind == 'U' && (static_cast<uint64_t>(*value) << (4 * *left)) > 0x10FFFF);
}

// What can fail in a string's text after a hex escape's digits: a
// backslash, a quote, a brace or a line end.
constexpr char kAfterHexRisky[] = "\\'\"{}\n\r";

bool IsIdent(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c >= 0x80;
}

bool IsKeyword(const std::string& w) {
  static const char* const kWords[] = {
      "False", "None",   "True",     "and",    "as",     "assert", "async",  "await",
      "break", "class",  "continue", "def",    "del",    "elif",   "else",   "except",
      "finally", "for",  "from",     "global", "if",     "import", "in",     "is",
      "lambda", "nonlocal", "not",   "or",     "pass",   "raise",  "return", "try",
      "while", "with",   "yield"};
  for (const char* k : kWords) {
    if (w == k) return true;
  }
  return false;
}

// Does a quote of token `b` follow letters with an `f` (the token opens an
// f-string itself)?  *lead: some quote follows letters that start the
// token (an f-string only if the word before the token has an `f`).
bool FBeforeQuote(std::string_view b, bool* lead) {
  for (size_t k = b.find_first_of("'\""); k != std::string_view::npos;
       k = b.find_first_of("'\"", k + 1)) {
    size_t from = k;
    while (from > 0 && IsIdent(static_cast<unsigned char>(b[from - 1]))) --from;
    if (b.substr(from, k - from).find_first_of("fF") != std::string_view::npos) return true;
    if (from == 0) *lead = true;
  }
  return false;
}

bool IsStringPrefix(const std::string& w) {
  if (w.size() > 2) return false;
  std::string l;
  for (char c : w) l += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return l == "r" || l == "u" || l == "f" || l == "b" || l == "br" || l == "rb" || l == "fr" ||
         l == "rf";
}

const char* const kOps[] = {"+",  "-",  "*",  "/",   "//",  "%",   "@",   "**",  "<<", ">>",
                            "&",  "|",  "^",  "~",   "<",   ">",   "<=",  ">=",  "==", "!=",
                            "=",  "+=", "-=", "*=",  "/=",  "//=", "%=",  "@=",  "&=", "|=",
                            "^=", ">>=", "<<=", "**=", ":=", "->", ":",  "!",   "(",  ")",
                            "[",  "]",  "{",  "}",   ",",   ";",   "."};

bool OpPrefix(const std::string& s, bool proper) {
  for (const char* o : kOps) {
    const size_t n = std::strlen(o);
    if (n >= s.size() + (proper ? 1 : 0) && std::strncmp(o, s.data(), s.size()) == 0) return true;
  }
  return false;
}

bool IsAugOp(const std::string& op) {
  return op.size() >= 2 && op.back() == '=' && op != "==" && op != "!=" && op != "<=" &&
         op != ">=" && op != ":=";
}

constexpr const char* kDebug = "__debug__";

bool HasAboveAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return true;
  }
  return false;
}

// The verdict of NameChars on the name bytes `b` read as a word's start
// (`fresh`: a digit first makes it a number) or as the continuation of a
// name: true if no character of it is refused (a sequence left open at the
// end is not judged yet).
bool NameBytesOk(std::string_view b, bool fresh) {
  NameChars nc;
  std::string why;
  const bool number = fresh && !b.empty() && b[0] >= '0' && b[0] <= '9';
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(b[i]);
    if (c < 0x80) {
      if (nc.need > 0) return false;
      continue;
    }
    if (nc.Byte(c, fresh && i == 0, number, &why) != nullptr) return false;
  }
  return true;
}

// How a token with a byte above ASCII that is no simple token reads in
// code (ScopeTokenIndex::na_other_kind): each run of name bytes is a word,
// the first one joining the word open before the token when `joined`.
// Refused: a character of a word that CPython does not take, or a UTF-8
// sequence a word leaves open inside the token.  Plain: every word above
// ASCII that ends inside the token is unchanged by NFKC (and, joined to
// the open word, begins with an ASCII byte: no composition reaches across),
// so it is compared as its bytes, as an ASCII name is.  Else a copy.  Past
// a quote, `#` or backslash the bytes may be no code: the words before it
// are read so; the bytes above ASCII after it are text when it is a quote
// followed by no quote, backslash, brace or line end (a string open to the
// token's end) or a `#` followed by no line end (a comment); else a copy.
uint8_t NameRunsKind(std::string_view b, bool joined) {
  const size_t special = b.find_first_of("'\"#\\");
  bool copy = false;
  if (special != std::string_view::npos && HasAboveAscii(b.substr(special))) {
    const std::string_view rest = b.substr(special + 1);
    const bool text = (b[special] == '#' && rest.find_first_of("\n\r") == std::string_view::npos) ||
                      ((b[special] == '\'' || b[special] == '"') &&
                       rest.find_first_of("'\"\\{}\n\r") == std::string_view::npos);
    copy = !text;
  }
  const std::string_view code = b.substr(0, special);
  for (size_t i = 0; i < code.size();) {
    if (!IsIdent(static_cast<unsigned char>(code[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < code.size() && IsIdent(static_cast<unsigned char>(code[j]))) ++j;
    const std::string_view run = code.substr(i, j - i);
    const bool join = joined && i == 0;
    if (HasAboveAscii(run)) {
      NameChars nc;
      std::string why;
      const bool number = !join && run[0] >= '0' && run[0] <= '9';
      for (size_t k = 0; k < run.size(); ++k) {
        const unsigned char c = static_cast<unsigned char>(run[k]);
        if (c < 0x80) {
          if (nc.need > 0) return ScopeTokenIndex::kNaRefused;
          continue;
        }
        if (nc.Byte(c, !join && k == 0, number, &why) != nullptr) return ScopeTokenIndex::kNaRefused;
      }
      if (j < b.size()) {  // the word ends inside the token
        if (nc.need > 0) return ScopeTokenIndex::kNaRefused;
        if ((join && static_cast<unsigned char>(run[0]) >= 0x80) || NfkcName(run) != run) copy = true;
      }
    }
    i = j;
  }
  return copy ? ScopeTokenIndex::kNaCopy : ScopeTokenIndex::kNaPlain;
}

}  // namespace

// The character being read, `need` continuation bytes short, must have a
// completion that the name takes: otherwise the text cannot go on (CPython
// refuses every character the sequence can still become), and it is refused
// at this byte rather than left a dead end.
const char* NameChars::Completable(std::string* why) const {
  const int shift = 6 * need;
  uint32_t lo = cp << shift, hi = lo | ((1u << shift) - 1u);
  const int len = got + need + 1;  // bytes of the whole sequence
  lo = std::max<uint32_t>(lo, len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u);
  hi = std::min<uint32_t>(hi, 0x10FFFFu);
  if (!in_number && lo <= hi && (first ? AnyXidStartIn(lo, hi) : AnyXidContinueIn(lo, hi))) return nullptr;
  char buf[96];
  std::snprintf(buf, sizeof buf, "no character U+%04X-U+%04X may stand in %s", static_cast<unsigned>(lo),
                static_cast<unsigned>(hi), in_number ? "a number" : "a name");
  *why = buf;
  return why->c_str();
}

const char* NameChars::Byte(unsigned char c, bool word_start, bool number, std::string* why) {
  in_number = number;
  if (need == 0) {
    if (c < 0xC2 || c > 0xF4) {
      *why = "invalid UTF-8 byte in a name";
      return why->c_str();
    }
    lead = c;
    need = c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    got = 0;
    cp = c & (c < 0xE0 ? 0x1Fu : c < 0xF0 ? 0x0Fu : 0x07u);
    first = word_start;
    return Completable(why);
  }
  unsigned char lo = 0x80, hi = 0xBF;
  if (got == 0) {
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  }
  if (c < lo || c > hi) {
    *why = "invalid UTF-8 byte in a name";
    return why->c_str();
  }
  cp = (cp << 6) | (c & 0x3Fu);
  ++got;
  if (--need > 0) return Completable(why);
  if (number || (first ? !IsXidStart(cp) : !IsXidContinue(cp))) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "invalid character U+%04X in %s", static_cast<unsigned>(cp),
                  number ? "a number" : "a name");
    *why = buf;
    return why->c_str();
  }
  return nullptr;
}

// ------------------------------------------------------------------ tokens

ScopeTokenIndex::ScopeTokenIndex(const CompiledStore& store) {
  // A token can fail a check from a state with none pending only if it holds
  // one of the three words whole, or two identifier runs that can be the same
  // name (equal, or a later one ending with the leading one, which a partial
  // name before the token may complete) together with what makes a repeat
  // an error (a parameter list, a keyword, a declaration).
  std::vector<std::pair<std::string, int32_t>> lead, inner;
  word_enders_.assign(static_cast<size_t>(store.mask_words()), 0u);
  name_only_ = quote_lead_ = na_all_ = na_simple_ = na_new_ = na_cont_ = na_blank_ = word_enders_;
  na_group_.assign(static_cast<size_t>(store.vocab_size), 0);
  // Inside a hex escape's digits: every token (special ones and the bits
  // past the vocabulary too) is a digit run of any length until shown
  // otherwise below, and risky nowhere.
  for (int k = 1; k <= kMaxHexDigits; ++k) {
    hex_digits_[k].assign(static_cast<size_t>(store.mask_words()), ~0u);
    hex_risky_[k].assign(static_cast<size_t>(store.mask_words()), 0u);
  }
  for (int32_t t = 0; t < store.vocab_size; ++t) {
    if (store.token_special[t]) continue;
    const std::string_view b = store.TokenBytes(t);
    {
      size_t run = 0;
      while (run < b.size() && HexValue(static_cast<unsigned char>(b[run])) >= 0) ++run;
      for (int k = 1; k <= kMaxHexDigits; ++k) {
        const size_t need = std::min(b.size(), static_cast<size_t>(k));
        if (run < need) hex_digits_[k][t >> 5] &= ~(1u << (t & 31));
        if (b.find_first_of(kAfterHexRisky, need) != std::string_view::npos) {
          hex_risky_[k][t >> 5] |= 1u << (t & 31);
        }
      }
    }
    if (HasAboveAscii(b)) {
      na_all_[t >> 5] |= 1u << (t & 31);
      size_t i = 0;
      while (i < b.size() && (b[i] == ' ' || b[i] == '\t' || b[i] == '\f')) ++i;
      const std::string_view rest = b.substr(i);
      if (std::all_of(rest.begin(), rest.end(), [](char c) { return IsIdent(static_cast<unsigned char>(c)); })) {
        const uint32_t bit = 1u << (t & 31);
        na_simple_[t >> 5] |= bit;
        if (i > 0) na_blank_[t >> 5] |= bit;
        if (NameBytesOk(rest, true)) na_new_[t >> 5] |= bit;
        if (NameBytesOk(rest, false)) na_cont_[t >> 5] |= bit;
        // Its group: the blanks before its name bytes.
        const std::string_view blanks = b.substr(0, i);
        size_t g = 0;
        while (g < na_blanks_.size() && na_blanks_[g] != blanks) ++g;
        if (g == na_blanks_.size() && g + 1 < 255) na_blanks_.emplace_back(blanks);
        if (g < na_blanks_.size()) na_group_[t] = static_cast<uint8_t>(g + 1);
      } else {
        na_other_.push_back(t);
        na_other_kind_.push_back(static_cast<uint8_t>(NameRunsKind(b, false) | NameRunsKind(b, true) << 2));
      }
      const char* const exits[4] = {"'", "\"", "{}", "\n"};
      size_t last = b.size();
      while (last > 0 && static_cast<unsigned char>(b[last - 1]) < 0x80) --last;  // after the last such byte
      for (int k = 0; k < 4; ++k) {
        const size_t e = b.find_first_of(exits[k]);
        if (e != std::string_view::npos && e + 1 < last) na_after_[k].push_back(t);
      }
    }
    if (!b.empty() && std::all_of(b.begin(), b.end(), [](char c) { return IsIdent(static_cast<unsigned char>(c)); })) {
      name_only_[t >> 5] |= 1u << (t & 31);
    }
    if (!b.empty() && (b[0] == '\'' || b[0] == '"')) quote_lead_[t >> 5] |= 1u << (t & 31);
    if (!b.empty() && !IsIdent(static_cast<unsigned char>(b[0]))) {
      word_enders_[t >> 5] |= 1u << (t & 31);
      // The annotation's `:` is the first thing after the name, the blanks
      // of the line or a backslash continuation aside (the statement is one
      // name, no bracket is open: a newline ends it).
      const size_t first = b.find_first_not_of(" \t\f\r");
      const bool colon = first != std::string_view::npos && (b[first] == ':' || b[first] == '\\');
      if (colon) colon_enders_.push_back(t);
      // A keyword's `=` is the first thing after the name, blanks, line
      // ends (inside the call's brackets), a backslash continuation or a
      // comment aside (a comment that the token does not end cannot bring
      // it).
      const size_t lead = b.find_first_not_of(" \t\f\r\n");
      const bool eq = lead != std::string_view::npos &&
                      (b[lead] == '=' || b[lead] == '\\' ||
                       (b[lead] == '#' && b.find('\n', lead) != std::string_view::npos));
      if (colon || eq) colon_eq_enders_.push_back(t);
    }
    std::vector<std::string> runs;
    bool leading = !b.empty() && IsIdent(static_cast<unsigned char>(b[0]));
    for (size_t i = 0; i < b.size();) {
      if (!IsIdent(static_cast<unsigned char>(b[i]))) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < b.size() && IsIdent(static_cast<unsigned char>(b[j]))) ++j;
      runs.emplace_back(b.substr(i, j - i));
      i = j;
    }
    // `global` fails only with a name after it in the same token.
    // (A backslash and x, u, U or N: an escape that may fail in a string.)
    bool risky = b.find(kDebug) != std::string_view::npos || b.find("\\N") != std::string_view::npos ||
                 b.find("\\x") != std::string_view::npos || b.find("\\u") != std::string_view::npos ||
                 b.find("\\U") != std::string_view::npos ||
                 b.find("nonlocal") != std::string_view::npos ||
                 b.find(":=") != std::string_view::npos;
    // `await`, `yield` (and `from` after it), `async`: only a token in which
    // the keyword is complete (a non-name byte follows it there) can fail
    // on it; one that ends with the keyword leaves it to the next token
    // (the partial-word lists of Filter).
    for (const char* k : {"await", "yield", "async"}) {
      const std::string_view kw(k);
      for (size_t i = b.find(kw); i != std::string_view::npos && !risky; i = b.find(kw, i + 1)) {
        const bool starts = i == 0 || !IsIdent(static_cast<unsigned char>(b[i - 1]));
        const size_t e = i + kw.size();
        risky = starts && e < b.size() && !IsIdent(static_cast<unsigned char>(b[e]));
      }
    }
    for (size_t k = 0; k + 1 < runs.size() && !risky; ++k) risky = runs[k] == "global";
    // `del` and a starred target in the same token.
    for (size_t k = 0; k < runs.size() && !risky; ++k) {
      risky = runs[k] == "del" && b.find('*') != std::string_view::npos;
    }
    if (!risky && runs.size() >= 2) {
      bool same = false;
      for (size_t i = 0; i < runs.size() && !same; ++i) {
        for (size_t j = i + 1; j < runs.size() && !same; ++j) {
          same = runs[i] == runs[j] ||
                 (i == 0 && leading && runs[j].size() > runs[0].size() &&
                  runs[j].compare(runs[j].size() - runs[0].size(), runs[0].size(), runs[0]) == 0);
        }
      }
      // Repeats that fail without an open list: two keywords, or the
      // parameters of a def or lambda that the token opens itself.
      bool context = std::count(b.begin(), b.end(), '=') >= 2 ||
                     b.find(',') != std::string_view::npos;
      for (const std::string& r : runs) context = context || r == "lambda" || r == "def";
      risky = same && context;
    }
    if (risky) risky_.push_back(t);
    // Ends with the whole word `async` (judged by Filter after an operand).
    if (!runs.empty() && runs.back() == "async" && b.size() >= 5 &&
        b.substr(b.size() - 5) == "async") {
      if (runs.size() > 1 || !leading) {
        ending_async_[0].push_back(t);
      }
    }
    if (leading && runs.size() == 1 && runs[0].size() == b.size() && b.size() <= 5 &&
        std::string_view("async").substr(5 - b.size()) == b) {
      ending_async_[1 + (5 - static_cast<int>(b.size()))].push_back(t);
    }
    // Ends with a proper prefix of `async` (`a` .. `asyn`) as a word of its
    // own: after an operand inside a bracket the word may have no completion
    // but a refused `async` (Session::WordLeadsNowhere).  Made only of such
    // letters: a piece that extends a partial word `async`.substr(0, k).
    // Else by what stands before the word in the token: only blanks (the
    // operand is before the token), or a byte that can end an operand there;
    // a token where an operator, an opening bracket, `,`, `:`, `;`, `@`, `#`
    // or an attribute's `.` stands before it leaves no word after an operand.
    {
      const std::string_view async_kw("async");
      if (leading && runs.size() == 1 && runs[0].size() == b.size()) {
        for (size_t k = 0; k < 4; ++k) {
          if (b.size() + k < 5 && async_kw.substr(k, b.size()) == b) async_piece_[k].push_back(t);
        }
      } else if (!runs.empty() && runs.back().size() < 5 && async_kw.substr(0, runs.back().size()) == runs.back() &&
                 b.size() >= runs.back().size() &&
                 b.substr(b.size() - runs.back().size()) == runs.back()) {
        size_t i = b.size() - runs.back().size();
        while (i > 0 && (b[i - 1] == ' ' || b[i - 1] == '\t' || b[i - 1] == '\f')) --i;
        const bool opening =
            b.find_first_of("([{") != std::string_view::npos || b.find("lambda") != std::string_view::npos;
        if (i == 0) {
          async_prefix_blank_.push_back(t);
        } else {
          const char c = b[i - 1];
          const bool attribute = c == '.' && i >= 2 &&
                                 (IsIdent(static_cast<unsigned char>(b[i - 2])) || b[i - 2] == ')' ||
                                  b[i - 2] == ']' || b[i - 2] == '}' || b[i - 2] == '\'' || b[i - 2] == '"') &&
                                 !(b[i - 2] >= '0' && b[i - 2] <= '9');
          // (A backslash in code must be followed by a line end: a word
          // right after one is a string's text; `$`, `?`, `` ` `` are no
          // Python outside strings and comments.)
          if (std::string_view("([{,=+-*/%&|^~<>!:;@#\\$?`").find(c) != std::string_view::npos || attribute) {
            // no word after an operand
          } else if (i == 1 && c == '.') {
            async_prefix_dot_.push_back(t);  // `.a`: an operand only as an ellipsis's third `.`
          } else if (i == 1 && (c == '\'' || c == '"')) {
            async_prefix_quote_.push_back(t);  // `'a`: an operand only where the quote ends a string
          } else {
            async_prefix_inner_.push_back(t);
            if (opening) async_prefix_opening_.push_back(t);
          }
        }
      }
    }
    if (b.find('\n') != std::string_view::npos) newline_.push_back(t);
    if (b.find(':') != std::string_view::npos) colon_.push_back(t);
    if (b.find('*') != std::string_view::npos) star_.push_back(t);
    if (b.find_first_of("\\#\n\r'\"") != std::string_view::npos ||
        b.find("lambda") != std::string_view::npos) {
      fstring_.push_back(t);
      // Split for Filter inside an f-string (fstring_core_ and the rest):
      // what fails there is a backslash, `#`, a line end, `lambda`, a new
      // f-string (letters with an `f` before a quote, or a quote after
      // letters that start the token, after a word with an `f`), and a
      // quote of a string still open.  A token whose only risk is a quote
      // of a kind that no open string uses cannot fail.
      bool core = b.find_first_of("\\#\n\r") != std::string_view::npos ||
                  b.find("lambda") != std::string_view::npos;
      bool lead = false;
      core = core || FBeforeQuote(b, &lead);
      if (core) {
        fstring_core_.push_back(t);
        const size_t cut = b.find_first_of("}:"), hash = b.find('#'), eol = b.find_first_of("\n\r");
        uint8_t kind = 0;
        if (b.find('\\') < cut) kind |= kCoreBackslash;
        if (eol < cut) kind |= kCoreLineEnd;
        if (eol < b.find_first_of("'\"\\")) kind |= kCoreLineEndFirst;
        if (hash != std::string_view::npos && b.find_first_of("'\"}:=!") > hash) kind |= kCoreHash;
        if (b.find_first_of("'\"\\{}\n\r") == std::string_view::npos) kind |= kCoreText;
        fstring_core_kind_.push_back(kind);
      } else {
        if (lead) fstring_lead_.push_back(t);
        // (*_field: no `}` or `:` before the first such quote.)
        const size_t sq = b.find('\''), dq = b.find('"');
        if (sq != std::string_view::npos) {
          fstring_sq_.push_back(t);
          if (b.substr(0, sq).find_first_of("}:") == std::string_view::npos) {
            fstring_sq_field_.push_back(t);
          }
        }
        if (dq != std::string_view::npos) {
          fstring_dq_.push_back(t);
          if (b.substr(0, dq).find_first_of("}:") == std::string_view::npos) {
            fstring_dq_field_.push_back(t);
          }
        }
      }
    }
    // A quote may open an f-string (its prefix in the token or the word
    // before it): what can fail in its text is a field's `{`, a line end
    // (`\n` or `\r`, in a single-quoted one) or an escape (in any string).
    // A token whose quotes all follow letters without an `f` (a plain
    // string's prefix, text of a string the token closes, an operator) and
    // that has no backslash after its first quote cannot fail: left out.
    // Where the letters before a quote start the token, the word before it
    // may hold the `f` (fopen_lead: judged only after such a word).
    const size_t q = b.find_first_of("'\"");
    if (q != std::string_view::npos && b.find_first_of("{\n\r\\", q) != std::string_view::npos) {
      bool lead = false;
      const bool self = b.find('\\', q) != std::string_view::npos || FBeforeQuote(b, &lead);
      if (self) {
        fopen_.push_back(t);
      } else if (lead) {
        fopen_lead_.push_back(t);
      }
    }
    if (!b.empty() && b[0] == '=') eq_lead_.push_back(t);
    if (!b.empty() && (b[0] == 'x' || b[0] == 'u' || b[0] == 'U')) hex_lead_.push_back(t);
    if (leading && runs[0].size() < b.size()) lead.emplace_back(runs[0], t);
    // Runs followed by something in the token (ended there).
    size_t end = 0;
    for (size_t k = 0; k < runs.size(); ++k) {
      end = b.find(runs[k], end) + runs[k].size();
      if (end < b.size() && (k > 0 || !leading)) inner.emplace_back(runs[k], t);
    }
  }
  auto build = [](std::vector<std::pair<std::string, int32_t>>& v, RunIndex* out) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    for (auto& [run, t] : v) {
      if (out->empty() || out->back().first != run) out->push_back({run, {}});
      out->back().second.push_back(t);
    }
  };
  // The simple tokens refused where no word is open (a good beginning of
  // a name is wanted) and where one is (after blanks, a good beginning;
  // else a good continuation).
  na_bad_new_.resize(na_simple_.size());
  na_bad_cont_.resize(na_simple_.size());
  for (size_t w = 0; w < na_simple_.size(); ++w) {
    na_bad_new_[w] = na_simple_[w] & ~na_new_[w];
    na_bad_cont_[w] = na_simple_[w] & ((na_blank_[w] & ~na_new_[w]) | (~na_blank_[w] & ~na_cont_[w]));
    if (na_bad_new_[w] | na_bad_cont_[w]) na_bad_words_.push_back(static_cast<int32_t>(w));
  }
  build(lead, &finishing_);
  build(inner, &containing_);
}

const std::vector<int32_t>* ScopeTokenIndex::Find(const RunIndex& index, std::string_view run) {
  auto it = std::lower_bound(index.begin(), index.end(), run,
                             [](const auto& e, std::string_view r) { return e.first < r; });
  if (it == index.end() || it->first != run) return nullptr;
  return &it->second;
}
const std::vector<int32_t>* ScopeTokenIndex::Finishing(std::string_view run) const {
  return Find(finishing_, run);
}
const std::vector<int32_t>* ScopeTokenIndex::Containing(std::string_view run) const {
  return Find(containing_, run);
}

bool ScopeTokenIndex::Wanted(const CompiledStore& store) {
  // The strict grammar is known by terminals that only it has together (a
  // grammar derived from it keeps them, and its Python tokens): its
  // nonlocal and global statements, the module docstring, the future
  // feature names and the blanks of a first blank line.
  int found = 0;
  for (const std::string& n : store.terminal_names) {
    found += n == "NONLOCAL" || n == "GLOBAL" || n == "DOCSTRING" || n == "FEATURE" ||
             n == "LEADWS";
  }
  return found == 5 && store.indenter_nl >= 0;
}

// ------------------------------------------------------------------ layer

ScopeLayer::ScopeLayer() {
  scopes_.push_back(std::make_shared<Scope>());
}

ScopeLayer::Scope& ScopeLayer::At(size_t i) {
  if (scopes_[i].use_count() > 1) scopes_[i] = std::make_shared<Scope>(*scopes_[i]);
  return *scopes_[i];
}
ScopeLayer::Scope& ScopeLayer::Top() { return At(scopes_.size() - 1); }

void ScopeLayer::Fail(std::string why) {
  if (!dead_) why_ = std::move(why);
  dead_ = true;
}

bool ScopeLayer::NameByte(unsigned char c) {
  std::string why;
  const bool number = !word_.empty() && ((word_[0] >= '0' && word_[0] <= '9') || word_[0] == '.');
  if (nchars_.Byte(c, word_.empty(), number, &why) != nullptr) {
    Fail(why);
    return false;
  }
  return true;
}

bool ScopeLayer::Feed(std::string_view bytes) {
  for (unsigned char c : bytes) {
    if (dead_) return false;
    Byte(c);
  }
  // `async` right after an operand (a name, a literal, a closing bracket):
  // no name can follow an operand and no other keyword starts with `async`,
  // so the word is the keyword; its verdict (an asynchronous comprehension
  // outside an async function) cannot wait for the byte that ends it, which
  // every continuation would meet: a dead end.  Judged here, as if the word
  // had ended.
  if (!dead_ && mode_ == Mode::kCode && word_ == "async" && AfterOperand()) {
    ScopeLayer probe = *this;
    probe.FlushWord();
    if (probe.dead_) Fail(probe.why_);
  }
  // A nonlocal with no enclosing function (a method of a class at module
  // level) can only name the class cell, `__class__`: a word that is no
  // prefix of it can only grow, and never ends as a name the statement
  // takes (`nonlocal a` would be a dead end).  Judged at the byte that
  // leaves the prefix.  A word above ASCII is left to its end (its NFKC
  // may still be `__class__`).
  if (!dead_ && mode_ == Mode::kCode && stmt_ == Stmt::kNonlocal && !word_.empty() &&
      nchars_.need == 0 && !HasAboveAscii(word_) &&
      std::string_view("__class__").substr(0, word_.size()) != word_ && !EnclosingFunction()) {
    Fail("no binding for nonlocal '" + word_ + "' found");
  }
  return !dead_;
}

bool ScopeLayer::EnclosingFunction() const {
  for (size_t i = scopes_.size() - 1; i-- > 0;) {
    if (scopes_[i]->kind == Scope::kModule) break;
    if (scopes_[i]->kind == Scope::kFunction) return true;
  }
  return false;
}

namespace {
// The mixing of ReadingHash and NamesHash: values and strings into one
// 64-bit state.
struct LayerHasher {
  uint64_t h;
  void operator()(uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
  }
  void Str(const std::string& t) {
    (*this)(t.size());
    for (unsigned char c : t) (*this)(c);
  }
};
}  // namespace

uint64_t ScopeLayer::ReadingHash() const {
  LayerHasher mix{0x84222325cbf29ce4ull};
  auto mix_str = [&mix](const std::string& t) { mix.Str(t); };
  mix(static_cast<uint64_t>(mode_));
  mix(comment_in_indent_ | (triple_ << 1) | (raw_ << 2) | (fstr_ << 3) | (bytes_ << 4) |
      (spec_esc_ << 5) | (dead_ << 6) | (in_pattern_ << 7) | (match_word_ << 8) |
      (in_header_ << 9) | (target_ctx_ << 10) | (after_as_ << 11) | (must_trail_ << 12) |
      (last_name_live_ << 13) | (return_pending_ << 14) | (next_async_ << 15));
  mix(static_cast<uint32_t>(col_));
  // A name's own letters are left out, as the scopes' name sets are (they
  // matter only to the checks on names); a number's are kept.
  const bool number = !word_.empty() && word_[0] >= '0' && word_[0] <= '9';
  mix(word_.empty() ? 0 : number ? 1 : 2);
  if (number) mix_str(word_);
  mix(static_cast<uint64_t>(static_cast<uint8_t>(nchars_.need)) |
      static_cast<uint64_t>(static_cast<uint8_t>(nchars_.got)) << 8 |
      static_cast<uint64_t>(nchars_.lead) << 16 | static_cast<uint64_t>(nchars_.first) << 24 |
      static_cast<uint64_t>(nchars_.in_number) << 25 | static_cast<uint64_t>(nchars_.cp) << 32);
  mix_str(op_);
  mix(static_cast<uint8_t>(quote_));
  mix(static_cast<uint32_t>(quote_run_));
  mix_str(uname_);
  // An escape's value so far decides what may follow only for \U at the
  // one value whose largest completion passes U+10FFFF (HexDigit): every
  // other value of the same kind and digits left has the same future, so it
  // is left out (or 22^4 configurations after `\u` would be distinct).
  const uint64_t hex_max = (uint64_t{hex_value_} << (4 * hex_left_)) + (uint64_t{1} << (4 * hex_left_)) - 1;
  const uint32_t hex_class = hex_kind_ == 'U' && hex_max > 0x10FFFF ? hex_value_ + 1 : 0;
  mix(static_cast<uint8_t>(hex_kind_) | static_cast<uint64_t>(static_cast<uint8_t>(hex_left_)) << 8 |
      static_cast<uint64_t>(hex_class) << 32);
  mix(fstack_.size());
  for (const FString& f : fstack_) {
    mix(static_cast<uint8_t>(f.quote) | f.triple << 8 | f.raw << 9 |
        static_cast<uint64_t>(static_cast<uint8_t>(f.part)) << 16 |
        static_cast<uint64_t>(static_cast<uint8_t>(f.level)) << 24 |
        static_cast<uint64_t>(static_cast<uint8_t>(f.pending)) << 32);
    mix(static_cast<uint32_t>(f.base_depth) | static_cast<uint64_t>(static_cast<uint32_t>(f.quote_run)) << 32);
  }
  mix(static_cast<uint32_t>(depth_));
  mix(static_cast<uint64_t>(prev_kind_));
  if (prev_kind_ != Lex::kName) mix_str(prev_);
  mix(dots_);
  mix(static_cast<uint64_t>(stmt_));
  mix(frames_.size());
  mix(seg_.size());
  mix(scopes_.size());
  return mix.h;
}

bool ScopeLayer::NamesMatter() const {
  // A pending nonlocal, a check armed (Armed counts the checks at a word's
  // end), a name being written that its end binds or deletes.
  return PendingNonlocal() || Armed() ||
         (!word_.empty() &&
          (stmt_ == Stmt::kImport || stmt_ == Stmt::kFromNames || stmt_ == Stmt::kDel ||
           stmt_ == Stmt::kGlobal || stmt_ == Stmt::kNonlocal));
}

uint64_t ScopeLayer::NamesHash() const {
  LayerHasher mix{0x9ae16a3b2f90404full};
  auto mix_str = [&mix](const std::string& t) { mix.Str(t); };
  auto mix_set = [&](const NameSet& set) {
    mix(set.size());
    for (const std::string& n : set) mix_str(n);
  };
  mix_str(word_);
  mix_str(last_name_);
  mix_str(prev_);
  mix_str(import_pending_);
  mix_str(def_name_);
  mix_set(def_params_);
  for (const Entry& e : seg_) {
    mix_str(e.name);
    mix(e.bare | e.attr << 1 | e.kept << 2);
  }
  for (const Frame& f : frames_) {
    mix_set(f.names);
    mix_set(f.comp_targets);
    mix_set(f.walrus_targets);
  }
  for (const auto& sp : scopes_) {
    const Scope& sc = *sp;
    for (const NameSet* set : {&sc.seen, &sc.bound, &sc.params, &sc.globals, &sc.nonlocals}) {
      mix_set(*set);
    }
    for (const Pending& p : sc.pending) {
      mix_str(p.name);
      mix(static_cast<uint32_t>(p.lo) | static_cast<uint64_t>(static_cast<uint32_t>(p.resolved_at)) << 32);
    }
  }
  return mix.h;
}

bool ScopeLayer::CanEnd() const {
  if (dead_ || nchars_.need > 0) return false;
  // Ending can fail only where a next token could (Armed: a pending
  // nonlocal, a name that its end would complete in a checked place).
  if (!NamesMatter()) return true;
  ScopeLayer end = *this;
  if (end.mode_ == Mode::kStrOpen2) {  // an empty string ends the text
    end.mode_ = Mode::kCode;
    end.Lexeme(Lex::kString, "");
  }
  end.FlushWord();
  end.FlushOp();
  if (end.mode_ == Mode::kCode || end.mode_ == Mode::kComment) end.Lexeme(Lex::kNewline, "");
  end.CloseScopesTo(0);
  return !end.dead_;
}

bool ScopeLayer::Armed(bool* at_word, bool* colon_only) const {
  // at_word: the checks that only a byte ending the current name (or following
  // the name just read) can fail; null: count them as armed.  `annotation`:
  // the check is that a `:` would annotate a declared name.
  auto word_check = [&](bool annotation = false) {
    if (at_word == nullptr) return true;
    *at_word = true;
    if (!annotation && colon_only != nullptr) *colon_only = false;
    return false;
  };
  if (dead_) return true;
  // A character of a name left open (only its continuation bytes go on), or
  // a name above ASCII being written: its NFKC may be any name, so every
  // check on the word's end is pending.
  if (nchars_.need > 0 || HasAboveAscii(word_)) return true;
  // A case pattern (Filter looks only at the tokens that can fail there).
  if (in_pattern_) return true;
  // Inside a \N{...} escape's name, or a hex escape's digits, every byte is
  // checked.
  if (mode_ == Mode::kEscN || mode_ == Mode::kEscName || mode_ == Mode::kEscHex) return true;
  // A name of an open parameter or keyword list being written, or just
  // written (its `=` may follow): any token may finish or commit it.
  if (!frames_.empty() && !frames_.back().names.empty()) {
    const Frame& f = frames_.back();
    const bool params = f.kind == Frame::kParams || (f.kind == Frame::kLambda && !f.lambda_body);
    if (!word_.empty() && f.names.count(word_) && (params ? f.param_stage == 0 : f.after_sep) &&
        word_check()) {
      return true;
    }
    if (!params && prev_kind_ == Lex::kName && f.kw_candidate && f.names.count(prev_) &&
        word_check()) {
      return true;
    }
  }
  if (must_trail_ || import_pending_ == kDebug) return true;
  if (stmt_ == Stmt::kGlobal || stmt_ == Stmt::kNonlocal) {
    // The names a declaration here refuses are listed (DeclForbidden) and
    // looked at in Filter, unless every name but `__class__` is refused, or
    // the partial word is one of them (any byte may finish it).
    NameSet forbidden;
    if (!DeclForbidden(&forbidden)) return true;
    if (!word_.empty() && forbidden.count(word_) && word_check()) return true;
  }
  if (seg_debug_) return true;
  // An await or yield whose verdict waits for a bracket's `for`, `,` or `)`;
  // `from` after a yield of an async function; a return value in an async
  // generator.
  for (const Frame& f : frames_) {
    if (f.await_wait || f.yield_wait) return true;
  }
  if (prev_kind_ == Lex::kKeyword && prev_ == "yield" && yield_owner_async_) return true;
  if (ReturnArmed()) return true;
  // `:` that one `=` turns into an assignment expression inside brackets;
  // walrus targets waiting for a comprehension's `for` in a class body.
  if (scopes_.back()->kind == Scope::kClass) {
    for (const Frame& f : frames_) {
      if (!f.walrus_targets.empty()) return true;
    }
  }
  // A nonlocal still without binding fails at a line start that closes the
  // last function able to bind it: while the text is at a line start, any
  // token; elsewhere only tokens with a newline (Filter).
  if (mode_ == Mode::kIndent && PendingNonlocal()) return true;
  // A statement that so far is one name declared global or nonlocal here:
  // a `:` would annotate it.
  const Scope& cur = *scopes_.back();
  if (cur.kind != Scope::kModule && (!cur.globals.empty() || !cur.nonlocals.empty())) {
    const std::string* n = nullptr;
    if (stmt_lexemes_ == 0 && !word_.empty()) n = &word_;
    if (stmt_lexemes_ == 1 && stmt_ == Stmt::kExpr && prev_kind_ == Lex::kName) n = &prev_;
    if (n && (cur.globals.count(*n) || cur.nonlocals.count(*n)) && word_check(true)) return true;
  }
  // A partial word that one more token turns into `nonlocal` or `__debug__`
  // (or `global`, followed by a name in the same token) is looked at in Filter.
  return false;
}

void ScopeLayer::FilterAboveAscii(const CompiledStore& store, const ScopeTokenIndex& index,
                                  uint32_t* mask, bool others) const {
  auto check = [&](int32_t t) {
    if (!((mask[t >> 5] >> (t & 31)) & 1u)) return;
    ScopeLayer next = *this;
    if (!next.Feed(store.TokenBytes(t))) mask[t >> 5] &= ~(1u << (t & 31));
  };
  auto each_in = [&](const std::vector<uint32_t>& set, auto&& fn) {
    for (int32_t w = 0; w < store.mask_words(); ++w) {
      for (uint32_t bits = mask[w] & set[w]; bits != 0; bits &= bits - 1) fn(w * 32 + __builtin_ctz(bits));
    }
  };
  const bool field_pending = !fstack_.empty() && fstack_.back().part == FString::kField &&
                             fstack_.back().pending != 0;
  const bool brace = fstr_ || !fstack_.empty();
  switch (mode_) {
    case Mode::kCode:
    case Mode::kIndent:
    case Mode::kFBrace: {
      if (field_pending) break;
      // Code: a token of blanks and name bytes begins a name (after blanks,
      // or where no word is open) or goes on the open one; its characters
      // are judged by the index's flags, and what else it does is what a
      // token of ASCII name bytes does (the rest of Filter).  A word that is
      // a number goes through a copy.  Every other token with a byte above
      // ASCII (a name that ends inside it, compared after NFKC) goes
      // through a copy.
      const bool fresh = mode_ != Mode::kCode || word_.empty();
      const bool number = !fresh && ((word_[0] >= '0' && word_[0] <= '9') || word_[0] == '.');
      if (number) {
        const auto& simple = index.na_simple();
        const auto& blank = index.na_blank();
        const auto& good_new = index.na_new();
        for (int32_t w = 0; w < store.mask_words(); ++w) {
          const uint32_t m = mask[w] & simple[w];
          if (m == 0) continue;
          mask[w] &= ~(m & blank[w] & ~good_new[w]);
          for (uint32_t bits = m & ~blank[w]; bits != 0; bits &= bits - 1) check(w * 32 + __builtin_ctz(bits));
        }
      } else {  // one pass over the words (the index's refusals where no word / a word is open)
        const std::vector<uint32_t>& bad = fresh ? index.na_bad_new() : index.na_bad_cont();
        for (int32_t w : index.na_bad_words()) mask[w] &= ~bad[w];
      }
      if (!others) return;
      // In code outside an f-string and a case pattern the other tokens are
      // read by their words (ScopeTokenIndex::na_other_kind): refused,
      // plain (the lists after this judge them as they judge ASCII names),
      // or through a copy; a token that goes on a number, through a copy.
      const std::vector<int32_t>& other = index.na_other();
      if (in_pattern_ || !fstack_.empty() || mode_ == Mode::kFBrace) {
        for (int32_t t : other) check(t);
        return;
      }
      const std::vector<uint8_t>& kinds = index.na_other_kind();
      const int shift = fresh ? 0 : 2;
      for (size_t i = 0; i < other.size(); ++i) {
        const int32_t t = other[i];
        if (!((mask[t >> 5] >> (t & 31)) & 1u)) continue;
        const uint8_t kind = (kinds[i] >> shift) & 3u;
        if (number && IsIdent(static_cast<unsigned char>(store.TokenBytes(t)[0]))) {
          check(t);
        } else if (kind == ScopeTokenIndex::kNaRefused) {
          mask[t >> 5] &= ~(1u << (t & 31));
        } else if (kind == ScopeTokenIndex::kNaCopy) {
          check(t);
        }
      }
      return;
    }
    case Mode::kString:
    case Mode::kStrEsc:
    case Mode::kStrOpen1:
    case Mode::kFClose:
    case Mode::kFieldSpec:
      if (!others) return;
      // In a string only its quote (and a brace of an f-string) can lead
      // out of it.
      for (int32_t t : index.na_after(quote_ == '\'' ? 0 : 1)) check(t);
      if (brace || mode_ == Mode::kFieldSpec) {
        for (int32_t t : index.na_after(2)) check(t);
      }
      return;
    case Mode::kComment:
      if (others) {
        for (int32_t t : index.na_after(3)) check(t);
      }
      return;
    default:
      break;
  }
  if (others) each_in(index.na_all(), check);
}

void ScopeLayer::Filter(const CompiledStore& store, const ScopeTokenIndex& index,
                        uint32_t* mask) const {
  // Names above ASCII: a character's UTF-8 sequence left open (only its
  // continuation bytes go on), every allowed token through a copy; else the
  // tokens with bytes above ASCII that can reach code, before the lists
  // below (which read every byte above ASCII as a name byte).
  if (nchars_.need > 0) {
    for (int32_t w = 0; w < store.mask_words(); ++w) {
      for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        const int32_t t = w * 32 + __builtin_ctz(bits);
        if (t >= store.vocab_size || store.token_special[t]) continue;
        ScopeLayer next = *this;
        if (!next.Feed(store.TokenBytes(t))) mask[w] &= ~(1u << (t & 31));
      }
    }
    return;
  }
  {
    // Where the paths below judge every allowed token that can fail (a
    // hex escape's digits by the index's bitsets, an armed layer by copies),
    // FilterAboveAscii only judges the simple tokens' characters in code.
    bool at, colon = true;
    const bool pending = !fstack_.empty() && fstack_.back().part == FString::kField && fstack_.back().pending != 0;
    const bool every = mode_ == Mode::kEscHex || (!pending && Armed(&at, &colon));
    FilterAboveAscii(store, index, mask, !every);
  }
  // Tokens whose verdict is already final (judged by a copy of the layer
  // as a group, enders_by_copy): the lists below skip them.
  std::vector<uint32_t> decided;
  auto check = [&](int32_t t) {
    if (!((mask[t >> 5] >> (t & 31)) & 1u)) return;
    if (!decided.empty() && ((decided[t >> 5] >> (t & 31)) & 1u)) return;
    ScopeLayer next = *this;
    if (!next.Feed(store.TokenBytes(t))) mask[t >> 5] &= ~(1u << (t & 31));
  };
  // fn(t) for each token the mask allows (special tokens aside); fn may
  // clear bits of the mask.
  auto each_allowed = [&](auto&& fn) {
    for (int32_t w = 0; w < store.mask_words(); ++w) {
      for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        const int32_t t = w * 32 + __builtin_ctz(bits);
        if (t < store.vocab_size && !store.token_special[t]) fn(t);
      }
    }
  };
  // fn(t) for each allowed token that ends the word being written (the
  // index's word_enders in the mask); fn may clear bits of the mask.
  const std::vector<uint32_t>& enders = index.word_enders();
  auto each_ender = [&](auto&& fn) {
    for (int32_t w = 0; w < store.mask_words(); ++w) {
      for (uint32_t bits = mask[w] & enders[w]; bits != 0; bits &= bits - 1) {
        fn(w * 32 + __builtin_ctz(bits));
      }
    }
  };
  auto clear_enders = [&] {
    for (int32_t w = 0; w < store.mask_words(); ++w) mask[w] &= ~enders[w];
  };
  // The tokens that end the word being written (enders, quotes aside when
  // the word is a string prefix) read the same from a copy that has read
  // the word: that copy's own filter judges them, with its lists, instead
  // of each through a copy of the layer (0.3-1.3 ms a step at 152k-262k
  // after a parameter or keyword name written again).  The copy is dead:
  // every one of them is refused.
  auto enders_by_copy = [&] {
    ScopeLayer probe = *this;
    probe.FlushWord();
    const bool prefix = IsStringPrefix(word_);
    if (prefix) {  // a quote may open a string instead: those one by one
      for (int32_t w = 0; w < store.mask_words(); ++w) {
        for (uint32_t bits = mask[w] & enders[w] & index.quote_lead()[w]; bits != 0; bits &= bits - 1) {
          check(w * 32 + __builtin_ctz(bits));
        }
      }
    }
    std::vector<uint32_t> keep(static_cast<size_t>(store.mask_words()));
    for (int32_t w = 0; w < store.mask_words(); ++w) {
      keep[w] = enders[w] & (prefix ? ~index.quote_lead()[w] : ~0u);
    }
    if (probe.dead_) {
      for (int32_t w = 0; w < store.mask_words(); ++w) mask[w] &= ~keep[w];
      return;
    }
    std::vector<uint32_t> sub(static_cast<size_t>(store.mask_words()));
    for (int32_t w = 0; w < store.mask_words(); ++w) sub[w] = mask[w] & keep[w];
    probe.Filter(store, index, sub.data());
    for (int32_t w = 0; w < store.mask_words(); ++w) mask[w] = (mask[w] & ~keep[w]) | sub[w];
    decided = std::move(keep);
  };
  bool at_word = false, colon_only = true;
  // In a case pattern (code, not a string) a token of identifier bytes,
  // after blanks only when no word is open, cannot fail: it extends or
  // begins a name whose role the next byte decides; unless a name waits for
  // its role, which a new word commits.  Every other token goes through a
  // copy of the layer.
  // The tokens that end an open word of a case line (its `case`, a name, a
  // keyword of the pattern): what the word's end does is the same for all of
  // them, so a copy with the word read judges them with its own filter (the
  // bytes after which a number, a string prefix goes on are not such ends).
  auto by_word_end = [&]() {
    const bool number = (word_[0] >= '0' && word_[0] <= '9') || word_[0] == '.';
    const bool prefix = IsStringPrefix(word_);
    auto plain_end = [&](std::string_view b) {
      const unsigned char c = static_cast<unsigned char>(b[0]);
      if (IsIdent(c)) return false;
      if (number && (c == '.' || c == '+' || c == '-')) return false;
      return !(prefix && (c == '\'' || c == '"'));
    };
    ScopeLayer probe = *this;
    probe.FlushWord();
    std::vector<uint32_t> sub(static_cast<size_t>(store.mask_words()), 0u);
    each_allowed([&](int32_t t) {
      const std::string_view b = store.TokenBytes(t);
      if (!b.empty() && plain_end(b)) sub[t >> 5] |= 1u << (t & 31);
    });
    if (probe.dead_) {
      std::fill(sub.begin(), sub.end(), 0u);
    } else {
      probe.Filter(store, index, sub.data());
    }
    each_allowed([&](int32_t t) {
      const std::string_view b = store.TokenBytes(t);
      if (b.empty()) return;
      if (plain_end(b)) {
        if (!((sub[t >> 5] >> (t & 31)) & 1u)) mask[t >> 5] &= ~(1u << (t & 31));
        return;
      }
      for (char c : b) {  // name bytes only: the word goes on
        if (!IsIdent(static_cast<unsigned char>(c))) {
          check(t);
          return;
        }
      }
    });
  };
  if (mode_ == Mode::kCode && !word_.empty() &&
      ((in_pattern_ && pattern_) || (stmt_lexemes_ == 0 && prev_kind_ == Lex::kNewline && CaseLine()))) {
    by_word_end();
    return;
  }
  if (in_pattern_ && pattern_ && mode_ == Mode::kCode) {
    const bool word_open = !word_.empty();
    const bool waiting = pattern_->WaitingName();
    each_allowed([&](int32_t t) {
      const std::string_view b = store.TokenBytes(t);
      size_t i = 0;
      while (i < b.size() && (b[i] == ' ' || b[i] == '\t')) ++i;
      bool safe = i == b.size() ? !word_open : !(i > 0 && word_open);
      for (size_t k = i; safe && k < b.size(); ++k) safe = IsIdent(static_cast<unsigned char>(b[k]));
      if (safe && i < b.size() && waiting && (i > 0 || !word_open)) safe = false;
      if (!safe) check(t);
    });
    return;
  }
  // Inside a string of a pattern only its end (or an escape) can fail.
  if (in_pattern_ && pattern_ && (mode_ == Mode::kString || mode_ == Mode::kStrOpen1)) {
    each_allowed([&](int32_t t) {
      const std::string_view b = store.TokenBytes(t);
      if (b.find(quote_) != std::string_view::npos || b.find('\\') != std::string_view::npos) check(t);
    });
    return;
  }
  // A token whose bytes from `from` on go into a hex escape (`kind`, `left`
  // digits still wanted, `value` so far): refused at a byte the escape cannot
  // take (read as EscHexByte does); standing if it ends inside the escape;
  // else through a copy of the layer when the rest can fail (a backslash, a
  // quote, a brace or a line end: in a string's text nothing else is
  // checked), standing otherwise.
  auto hex_token = [&](int32_t t, char kind, int8_t left, uint32_t value, size_t from) {
    const std::string_view b = store.TokenBytes(t);
    size_t i = from;
    for (; i < b.size() && left > 0; ++i) {
      if (!HexDigit(kind, &left, &value, static_cast<unsigned char>(b[i]))) {
        mask[t >> 5] &= ~(1u << (t & 31));
        return;
      }
    }
    if (b.find_first_of(kAfterHexRisky, i) != std::string_view::npos) check(t);
  };
  if (mode_ == Mode::kEscHex && !dead_) {
    if (hex_kind_ == 'U' || hex_left_ < 1 || hex_left_ > ScopeTokenIndex::kMaxHexDigits) {
      // \U: the digits so far bound the value (U+10FFFF).
      each_allowed([&](int32_t t) { hex_token(t, hex_kind_, hex_left_, hex_value_, 0); });
      return;
    }
    // \x, \u: a token whose first `left` bytes (or all, if fewer) are hex
    // digits stays, and goes through a copy only if a byte after them can
    // fail (hex_token's verdict, read from the index's bitsets).
    const std::vector<uint32_t>& digits = index.hex_digits(hex_left_);
    const std::vector<uint32_t>& risky = index.hex_risky(hex_left_);
    for (int32_t w = 0; w < store.mask_words(); ++w) {
      mask[w] &= digits[w];
      for (uint32_t bits = mask[w] & risky[w]; bits != 0; bits &= bits - 1) check(w * 32 + __builtin_ctz(bits));
    }
    return;
  }
  if (Armed(&at_word, &colon_only)) {
    if (dead_ || mode_ != Mode::kCode || word_.empty()) {
      // A simple token above ASCII (blanks, then name bytes whose
      // characters FilterAboveAscii judged) begins a name that it does not
      // end: the name is not compared in it, and what the token does is
      // what its blanks and an ASCII letter do (in a string or comment, what
      // text does).  So one copy per group of equal blanks
      // (ScopeTokenIndex::na_group) judges them all.
      const bool grouped = !dead_ && !in_pattern_ &&
                           (mode_ == Mode::kCode || mode_ == Mode::kIndent ||
                            mode_ == Mode::kString || mode_ == Mode::kComment) &&
                           !(!fstack_.empty() && fstack_.back().part == FString::kField &&
                             fstack_.back().pending != 0);
      std::vector<int8_t> verdict(index.na_blanks().size() + 1, -1);
      each_allowed([&](int32_t t) {
        const uint8_t g = grouped ? index.na_group(t) : 0;
        if (g == 0) {
          check(t);
          return;
        }
        if (verdict[g] < 0) {
          ScopeLayer next = *this;
          verdict[g] = next.Feed(index.na_blanks()[g - 1] + "a") ? 1 : 0;
        }
        if (verdict[g] == 0) mask[t >> 5] &= ~(1u << (t & 31));
      });
      return;
    }
    // A word being written: the enders through a copy that has read it;
    // a token of name bytes only makes the word longer, which fails only
    // where the word becomes a whole `async` after an operand (Feed); the
    // other tokens one by one.
    enders_by_copy();
    if (word_.size() < 5 && std::string_view("async").substr(0, word_.size()) == word_) {
      for (int32_t t : index.ending_async(static_cast<int>(word_.size()))) check(t);
    }
    const std::vector<uint32_t>& names = index.name_only();
    for (int32_t w = 0; w < store.mask_words(); ++w) {
      for (uint32_t bits = mask[w] & ~enders[w] & ~names[w]; bits != 0; bits &= bits - 1) {
        const int32_t t = w * 32 + __builtin_ctz(bits);
        if (t < store.vocab_size && !store.token_special[t]) check(t);
      }
    }
    return;
  }
  for (int32_t t : index.risky()) check(t);
  // After a string's backslash: tokens that open a \N{...} name or a hex
  // escape.
  if (mode_ == Mode::kStrEsc && (spec_esc_ || !raw_)) {
    if (const auto* ts = index.Finishing("N")) {
      for (int32_t t : *ts) check(t);
    }
    // A token that opens a hex escape: its digits read from its bytes.
    const bool bytes = !spec_esc_ && bytes_;
    for (int32_t t : index.hex_lead()) {
      if (!((mask[t >> 5] >> (t & 31)) & 1u)) continue;
      const char kind = store.TokenBytes(t)[0];
      if (bytes && kind != 'x') {
        check(t);  // \u, \U: no escape in bytes
      } else {
        hex_token(t, kind, kind == 'x' ? 2 : kind == 'u' ? 4 : 8, 0, 1);
      }
    }
  }
  // A del statement (or a word that may become `del`): a `*` may start a
  // starred target.
  if (stmt_ == Stmt::kDel ||
      (stmt_lexemes_ == 0 && !word_.empty() && word_.size() <= 3 && std::string_view("del").substr(0, word_.size()) == word_)) {
    for (int32_t t : index.star()) check(t);
  }
  // Inside an f-string (or at its opening quote), the tokens that can break
  // a field's limits; elsewhere the tokens that open an f-string's field.
  const bool fstring_open = !fstack_.empty() ||
                            (fstr_ && (mode_ == Mode::kStrOpen1 || mode_ == Mode::kStrOpen2));
  const bool at_open_quote = mode_ == Mode::kStrOpen1 || mode_ == Mode::kStrOpen2;
  // A word with an `f` before the token: a quote at the token's start may
  // open an f-string (the lists' *_lead parts).
  const bool f_word = word_.find_first_of("fF") != std::string::npos;
  if (fstring_open && !at_open_quote) {
    // The quotes of the strings still open (every f-string's, and the
    // innermost string's): only those can end one too soon.
    bool sq = quote_ == '\'', dq = quote_ == '"';
    for (const FString& f : fstack_) {
      sq = sq || f.quote == '\'';
      dq = dq || f.quote == '"';
    }
    // The core tokens whose bytes the f-strings open here refuse (an
    // f-string inside a field is left only at a `}` or `:`, a single-quoted
    // one only at a quote; FCheck) are refused without a copy; text in a
    // string's content cannot fail; the others one by one.  Likewise a
    // token that reaches the quote of a single-quoted f-string inside a
    // field before any `}` or `:`.
    uint8_t refused = 0;
    if (FStringInField(0, false)) refused |= ScopeTokenIndex::kCoreBackslash;
    if (FStringInField(0, true)) refused |= ScopeTokenIndex::kCoreLineEnd;
    if (mode_ != Mode::kStrEsc && SingleQuotedFString()) refused |= ScopeTokenIndex::kCoreLineEndFirst;
    if (mode_ == Mode::kCode && fstack_.back().part == FString::kField && fstack_.back().pending == 0) {
      refused |= ScopeTokenIndex::kCoreHash;
    }
    const uint8_t text = mode_ == Mode::kString ? ScopeTokenIndex::kCoreText : 0;
    const std::vector<int32_t>& core = index.fstring_core();
    const std::vector<uint8_t>& kind = index.fstring_core_kind();
    for (size_t i = 0; i < core.size(); ++i) {
      const int32_t t = core[i];
      if (kind[i] & refused) {
        mask[t >> 5] &= ~(1u << (t & 31));
      } else if (!(kind[i] & text)) {
        check(t);
      }
    }
    auto refuse = [&](const std::vector<int32_t>& ts) {
      for (int32_t t : ts) mask[t >> 5] &= ~(1u << (t & 31));
    };
    if (sq && FStringInField('\'', true)) refuse(index.fstring_sq_field());
    if (dq && FStringInField('"', true)) refuse(index.fstring_dq_field());
    if (f_word) {
      for (int32_t t : index.fstring_lead()) check(t);
    }
    if (sq) {
      for (int32_t t : index.fstring_sq()) check(t);
    }
    if (dq) {
      for (int32_t t : index.fstring_dq()) check(t);
    }
  } else {
    for (int32_t t : fstring_open ? index.fstring() : index.fopen()) check(t);
  }
  if (!fstring_open && f_word) {
    for (int32_t t : index.fopen_lead()) check(t);
  }
  if (PendingNonlocal() || Unreachable()) {
    for (int32_t t : index.newline()) check(t);
  }
  // Match blocks: at a line start after an irrefutable case, the tokens that
  // reach a case column (or hold a newline); on a case line's first word,
  // the tokens that go on past it (not only name bytes).
  if (!matches_.empty() && mode_ == Mode::kIndent && Unreachable()) {
    each_allowed([&](int32_t t) {
      const std::string_view b = store.TokenBytes(t);
      size_t i = 0;
      while (i < b.size() && b[i] == ' ') ++i;
      if (i == b.size()) return;
      bool hit = b.find('\n') != std::string_view::npos;
      for (const MatchBlock& mb : matches_) {
        hit = hit || (!mb.unreachable.empty() && mb.case_col == col_ + static_cast<int32_t>(i));
      }
      if (hit) check(t);
    });
  }
  // A token that holds a case line's `case` and what follows it: at a line
  // start, or after a newline in the token.
  if (const auto* ts = index.Containing("case")) {
    const bool line_start = mode_ == Mode::kIndent || (stmt_lexemes_ == 0 && word_.empty());
    for (int32_t t : *ts) {
      if (line_start || store.TokenBytes(t).find('\n') != std::string_view::npos) check(t);
    }
  }
  if (at_word) {  // the tokens that end the name here (or go on after it)
    if (colon_only) {
      // Only the annotation check is at the word: a token whose first byte
      // past the line's blanks is not `:` (or a backslash, which may
      // continue the line before one) cannot annotate the name, and what it
      // leaves armed the next step's filter meets.  Those tokens are listed
      // per vocabulary (scanning the mask's allowed tokens for any `:` cost
      // 0.3-1.6 ms a step at 152k-262k; feeding every token that ends the
      // word to a copy, 10-22 ms).
      for (int32_t t : index.colon_enders()) check(t);
    } else if (mode_ == Mode::kCode && !word_.empty()) {
      enders_by_copy();
    } else if (word_.empty()) {
      // The name just read is a keyword of the call already (its `=` would
      // repeat it), or a declared name (a `:` would annotate it): only the
      // tokens of colon_eq_enders can fail them (Armed).
      for (int32_t t : index.colon_eq_enders()) check(t);
    } else {
      each_ender([&](int32_t t) { check(t); });
    }
  }
  // The open lists' names and the names declared global or nonlocal in a
  // function or class (an annotation of one is refused): tokens that end one
  // of them inside, or finish the partial word as one.
  auto names = [&](const NameSet& set) {
    for (const std::string& n : set) {
      if (const auto* ts = index.Containing(n)) {
        for (int32_t t : *ts) check(t);
      }
      if (mode_ == Mode::kCode && n.size() > word_.size() && n.compare(0, word_.size(), word_) == 0) {
        if (const auto* ts = index.Finishing(std::string_view(n).substr(word_.size()))) {
          for (int32_t t : *ts) check(t);
        }
      }
    }
  };
  for (const Frame& f : frames_) names(f.names);
  // Assignment expressions: iteration variables they bind (refused as
  // targets), and inside a comprehension's clauses any `:` or `:=`.
  for (const Frame& f : frames_) names(f.walrus_targets);
  if (InComprehension()) {
    for (int32_t t : index.colon()) check(t);
    if (op_ == ":") {
      for (int32_t t : index.eq_lead()) check(t);
    }
  }
  if (stmt_ == Stmt::kGlobal || stmt_ == Stmt::kNonlocal) {
    NameSet forbidden;
    DeclForbidden(&forbidden);
    names(forbidden);
  }
  for (const auto& sc : scopes_) {
    if (sc->kind == Scope::kModule) continue;
    names(sc->globals);
    names(sc->nonlocals);
  }
  // A statement start in an async generator: `return` with a value.
  const Scope& cur = *scopes_.back();
  const bool async_gen = stmt_lexemes_ == 0 && cur.kind == Scope::kFunction &&
                         (cur.is_async || cur.coroutine_mark) && cur.has_yield;
  if (async_gen && word_.empty()) {
    if (const auto* ts = index.Containing("return")) {
      for (int32_t t : *ts) check(t);
    }
    if (const auto* ts = index.Finishing("return")) {
      for (int32_t t : *ts) check(t);
    }
  }
  if (!word_.empty() && mode_ == Mode::kCode) {
    for (const char* k : {"nonlocal", "global", kDebug, "await", "yield", "async", "return",
                          "lambda"}) {
      if (k[0] == 'r' && !async_gen) continue;
      if (k[0] == 'l' && !InFieldTop()) continue;
      const std::string_view kw(k);
      if (kw.size() > word_.size() && kw.substr(0, word_.size()) == word_) {
        if (const auto* ts = index.Finishing(kw.substr(word_.size()))) {
          for (int32_t t : *ts) check(t);
        }
      }
      if (kw == word_ && k[0] != 'n' && k[0] != 'g' && k[0] != '_') {
        // await / yield / async / return: whether the keyword stands here
        // does not depend on the token that ends it.  If it fails, every
        // token that ends it fails; if it stands and nothing is armed after
        // it, what follows it in a token meets the lists looked at above.
        ScopeLayer probe = *this;
        probe.FlushWord();
        if (probe.dead_) {
          clear_enders();
          continue;
        }
        if (!probe.Armed()) continue;
      }
      if (kw == word_ && (k[0] == 'g' || k[0] == 'n')) {
        // `global` / `nonlocal` whole: a token that ends the word reads the
        // same from a copy with the word already read, so that copy's own
        // filter judges those tokens (the declared names it refuses, the
        // keyword itself), instead of every such token through a copy of
        // the layer (9.5 ms a step at 152k).
        // (The tokens that end the word are a mask per vocabulary: three
        // scans of the allowed tokens' bytes cost 0.9-1.6 ms at 152k-262k.)
        ScopeLayer probe = *this;
        probe.FlushWord();
        if (probe.dead_) {
          clear_enders();
          continue;
        }
        std::vector<uint32_t> sub(static_cast<size_t>(store.mask_words()));
        for (int32_t w = 0; w < store.mask_words(); ++w) sub[w] = mask[w] & enders[w];
        probe.Filter(store, index, sub.data());
        // The enders keep what the copy's filter kept; the rest is as it was.
        for (int32_t w = 0; w < store.mask_words(); ++w) mask[w] = (mask[w] & ~enders[w]) | sub[w];
        continue;
      }
      if (kw == word_) each_ender([&](int32_t t) { check(t); });  // the word is whole: any token that ends it
    }
  }
  // Tokens that end with the whole word `async` (Feed judges the keyword at
  // the end of a token after an operand).
  for (int32_t t : index.ending_async(-1)) check(t);
  if (mode_ == Mode::kCode && word_.size() < 5 &&
      std::string_view("async").substr(0, word_.size()) == word_) {
    for (int32_t t : index.ending_async(static_cast<int>(word_.size()))) check(t);
  }
}

bool ScopeLayer::RefusesAsyncAhead() const {
  const std::string_view kw("async");
  // (Inside parentheses `async` may start a generator expression: Keyword
  // refuses it only in a display, subscript or lambda.)
  if (dead_ || mode_ != Mode::kCode || frames_.empty() || frames_.back().close == ')' || word_.empty() ||
      word_.size() >= kw.size() || kw.substr(0, word_.size()) != word_ || !AfterOperand()) {
    return false;
  }
  ScopeLayer probe = *this;
  return !probe.Feed(kw.substr(word_.size()));
}

void ScopeLayer::AsyncPrefixCandidates(const ScopeTokenIndex& index, const uint32_t* mask,
                                       std::vector<int32_t>* out) const {
  out->clear();
  if (dead_) return;
  auto take = [&](const std::vector<int32_t>& ts) {
    for (int32_t t : ts) {
      if ((mask[t >> 5] >> (t & 31)) & 1u) out->push_back(t);
    }
  };
  // A token that ends the word after an operand of its own: inside a
  // bracket open before it, or one it opens.
  take(frames_.empty() ? index.async_prefix_opening() : index.async_prefix_inner());
  // The others open no bracket: one other than `(` must be open, and the
  // operand is the text's own (before the blanks, before the token's first
  // byte, or before the word being written), read from the state without
  // a copy: the last lexeme, or the word or operator that a byte would end.
  if (frames_.empty() || frames_.back().close == ')') return;
  // A quote that ends a string (not one that opens a string, in code).
  if (mode_ != Mode::kCode) take(index.async_prefix_quote());
  if (mode_ != Mode::kCode) return;
  // What a blank or a new word would follow: the open operator (its end),
  // else the last lexeme.  A partial character: unsure, so taken.
  const bool ends_operand =
      nchars_.need > 0 || (op_.empty() ? AfterOperand() : ClosesOperand(op_, dots_ + 1));
  if (word_.empty()) {
    if (ends_operand) take(index.async_prefix_blank());
    if (ends_operand) take(index.async_piece(0));
    // A third `.` of an ellipsis (`..` read) before the word.
    if (op_.empty() ? prev_kind_ == Lex::kOp && prev_ == "." && dots_ == 2 : op_ == "." && dots_ == 1) {
      take(index.async_prefix_dot());
    }
    return;
  }
  // A word being written: a blank ends it as an operand if it is a name or
  // a number (a keyword but None, True, False is none); `.` goes on a
  // number.
  const bool number = (word_[0] >= '0' && word_[0] <= '9') || word_[0] == '.';
  if (nchars_.need > 0 || number || !IsKeyword(word_) || word_ == "None" || word_ == "True" ||
      word_ == "False") {
    take(index.async_prefix_blank());
  }
  if (nchars_.need > 0 || number) take(index.async_prefix_dot());
  const std::string_view kw("async");
  if (word_.size() < 4 && kw.substr(0, word_.size()) == word_ && AfterOperand()) {
    take(index.async_piece(static_cast<int>(word_.size())));
  }
}

bool ScopeLayer::ClosesOperand(std::string_view op, int dots) {
  // (`...` is read as three `.`: `dots`, the run of `.` ending with `op`,
  // tells an ellipsis from an attribute.)
  return op == ")" || op == "]" || op == "}" || (op == "." && dots == 3);
}

bool ScopeLayer::AfterOperand() const {
  switch (prev_kind_) {
    case Lex::kName:
    case Lex::kNumber:
    case Lex::kString:
      return true;
    case Lex::kKeyword:
      return prev_ == "None" || prev_ == "True" || prev_ == "False";
    case Lex::kOp:
      return ClosesOperand(prev_, dots_);
    default:
      return false;
  }
}

std::string ScopeLayer::DebugString() const {
  std::string out = dead_ ? "dead: " + why_ + "\n" : "";
  for (size_t i = 0; i < scopes_.size(); ++i) {
    const Scope& s = *scopes_[i];
    out += "scope " + std::to_string(i) + " kind " + std::to_string(s.kind) + " col " +
           std::to_string(s.header_col) + " seen";
    for (const auto& n : s.seen) out += " " + n;
    out += " | bound";
    for (const auto& n : s.bound) out += " " + n;
    out += " | pending";
    for (const auto& p : s.pending) {
      out += " " + p.name + "@" + std::to_string(p.lo) + "/" + std::to_string(p.resolved_at);
    }
    out += "\n";
  }
  return out;
}

// ------------------------------------------------------------------ tokenizer

void ScopeLayer::Byte(unsigned char c) {
  // A character of a name left open: only its continuation bytes.
  if (nchars_.need > 0 && (c < 0x80 || c > 0xBF)) {
    Fail("invalid UTF-8 in a name");
    return;
  }
  if (in_pattern_) pattern_->RawByte(static_cast<char>(c));
  if (!fstack_.empty()) {
    FCheck(c);
    if (dead_) return;
    if (mode_ == Mode::kCode && fstack_.back().part == FString::kField) {
      FieldCode(c);
      return;
    }
  }
  switch (mode_) {
    case Mode::kIndent:
      if (c == ' ') {
        ++col_;
      } else if (c == '\n') {
        col_ = 0;
      } else if (c == '\r' || c == '\t' || c == '\f') {
      } else if (c == '#') {
        mode_ = Mode::kComment;
        comment_in_indent_ = true;
      } else if (c == '\\') {  // a continuation before the first token: column as is
        mode_ = Mode::kBackslash;
        LineStart(col_);
      } else {
        mode_ = Mode::kCode;
        LineStart(col_);
        if (!dead_) CodeByte(c);
      }
      return;
    case Mode::kComment:
      if (c != '\n') return;
      if (comment_in_indent_) {
        comment_in_indent_ = false;
        mode_ = Mode::kIndent;
        col_ = 0;
      } else {
        mode_ = Mode::kCode;
        CodeByte(c);
      }
      return;
    case Mode::kBackslash:
      if (c == '\n') mode_ = Mode::kCode;
      return;
    case Mode::kCode:
      CodeByte(c);
      return;
    case Mode::kStrOpen1:
      if (c == static_cast<unsigned char>(quote_)) {
        mode_ = Mode::kStrOpen2;
        return;
      }
      mode_ = Mode::kString;
      triple_ = false;
      if (fstr_) fstack_.push_back({quote_, false, raw_});
      break;  // c is content
    case Mode::kStrOpen2:
      if (c == static_cast<unsigned char>(quote_)) {
        mode_ = Mode::kString;
        triple_ = true;
        quote_run_ = 0;
        if (fstr_) fstack_.push_back({quote_, true, raw_});
        return;
      }
      mode_ = Mode::kCode;  // an empty string
      Lexeme(Lex::kString, "");
      if (dead_) return;
      if (!fstack_.empty() && fstack_.back().part == FString::kField) {
        FieldCode(c);
      } else {
        CodeByte(c);
      }
      return;
    case Mode::kStrEsc: {
      // (spec_esc_: an escape in an f-string's format spec, which goes back
      // to the spec; a spec is neither raw nor bytes.)
      const bool spec = spec_esc_;
      const bool raw = !spec && raw_, bytes = !spec && bytes_;
      mode_ = spec ? Mode::kFieldSpec : Mode::kString;
      if ((spec || fstr_) && (c == '{' || c == '}')) {
        // In an f-string a backslash before a brace is text, and the brace
        // opens or closes a field (or is half of `{{` / `}}`): f"\{6}".
        spec_esc_ = false;
        if (!spec) break;
        SpecByte(c);
        return;
      }
      if (!raw && !bytes && c == 'N') {
        mode_ = Mode::kEscN;  // \N{name}
        return;
      }
      if (!raw && (c == 'x' || (!bytes && (c == 'u' || c == 'U')))) {
        mode_ = Mode::kEscHex;  // its digits follow (spec_esc_ kept)
        hex_kind_ = static_cast<char>(c);
        hex_left_ = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        hex_value_ = 0;
        return;
      }
      spec_esc_ = false;
      return;
    }
    case Mode::kEscHex:
      if (!EscHexByte(c)) return;
      if (hex_left_ == 0) {
        mode_ = spec_esc_ ? Mode::kFieldSpec : Mode::kString;
        spec_esc_ = false;
      }
      return;
    case Mode::kEscN:  // the grammar has a `{` here
      mode_ = c == '{' ? Mode::kEscName : spec_esc_ ? Mode::kFieldSpec : Mode::kString;
      if (c != '{') spec_esc_ = false;
      uname_.clear();
      return;
    case Mode::kEscName:
      // The name must be a character's name (grammar/base/unicode_names.h):
      // refused at the byte after which no name can begin so, or at a `}`
      // that ends it short of one.
      if (c == '}') {
        if (!IsUnicodeName(uname_)) Fail("unknown Unicode character name");
        mode_ = spec_esc_ ? Mode::kFieldSpec : Mode::kString;
        spec_esc_ = false;
        uname_.clear();
        return;
      }
      uname_ += static_cast<char>(c);
      if (!IsUnicodeNamePrefix(uname_)) Fail("unknown Unicode character name");
      return;
    case Mode::kFBrace: {
      if (c == '{') {
        mode_ = Mode::kString;
        return;
      }
      // A field opens: its expression is read as code (so every check of
      // the layer sees it), c is its first byte.
      FString& f = fstack_.back();
      f.part = FString::kField;
      f.level = 0;
      f.pending = 0;
      f.base_depth = depth_;
      f.quote_run = 0;
      mode_ = Mode::kCode;
      prev_kind_ = Lex::kOp;  // what follows reads as after an opening bracket
      prev_ = "{";
      FCheck(c, fstack_.size() - 1);  // c as the field's (the outer ones saw it)
      if (!dead_) FieldCode(c);
      return;
    }
    case Mode::kFClose:
      mode_ = Mode::kString;  // the second brace of "}}"
      return;
    case Mode::kFieldAfter:
      AfterByte(c);
      return;
    case Mode::kFieldSpec:
      SpecByte(c);
      return;
    case Mode::kString:
      break;
  }
  // String content.
  if (c == '\\') {
    quote_run_ = 0;
    mode_ = Mode::kStrEsc;
    return;
  }
  if (c == static_cast<unsigned char>(quote_)) {
    if (!triple_ || ++quote_run_ == 3) {
      mode_ = Mode::kCode;
      if (fstr_) {
        fstack_.pop_back();
        fstr_ = false;
      }
      Lexeme(Lex::kString, "");
    }
    return;
  }
  quote_run_ = 0;
  if (fstr_ && c == '{') mode_ = Mode::kFBrace;
  if (fstr_ && c == '}') mode_ = Mode::kFClose;
}

// Format spec text: `{` opens a nested field, `}` ends the field.
void ScopeLayer::SpecByte(unsigned char c) {
  FString& f = fstack_.back();
  if (c == '\\' && !f.raw) {  // an escape, as in the literal text
    mode_ = Mode::kStrEsc;
    spec_esc_ = true;
    return;
  }
  if (c == '{' && f.level == 0) {
    f.part = FString::kField;
    f.level = 1;
    f.pending = 0;
    f.base_depth = depth_;
    mode_ = Mode::kCode;
    prev_kind_ = Lex::kOp;
    prev_ = "{";
  } else if (c == '}') {
    CloseField();
  }
}

// One digit of a \x, \u or \U escape (CPython's unicode_escape and
// bytes decoders): a hex digit, and for \U a value that can still end at
// most U+10FFFF.
bool ScopeLayer::EscHexByte(unsigned char c) {
  if (HexDigit(hex_kind_, &hex_left_, &hex_value_, c)) return true;
  Fail(HexValue(c) >= 0    ? "illegal Unicode character"
       : hex_kind_ == 'x' ? "truncated \\xXX escape"
       : hex_kind_ == 'u' ? "truncated \\uXXXX escape"
                          : "truncated \\UXXXXXXXX escape");
  return false;
}

// CPython 3.11 reads an f-string as one string token first (it ends at its
// own quote) and then compiles each field's text as `(text)`, refusing a
// backslash anywhere in it and a `#`.  So, inside the field of an open
// f-string (its code, a nested string, a nested f-string): no backslash,
// no quote of that f-string (three in a row for a triple-quoted one), no
// newline if it is single-quoted; in the field's own code no `#`.
void ScopeLayer::FCheck(unsigned char c, size_t from) {
  const size_t n = fstack_.size();
  for (size_t i = from; i < n; ++i) {
    FString& f = fstack_[i];
    const bool in_field = InField(i);
    // (In the literal text too: the grammar's text has no newline there, but
    // inside brackets the indenter drops the newline token.)
    if (!f.triple && (c == '\n' || c == '\r') && !(i + 1 == n && mode_ == Mode::kStrEsc)) {
      Fail("f-string: newline in a single-quoted f-string");
      return;
    }
    if (!in_field) continue;
    if (c == '\\') {
      Fail("f-string expression part cannot include a backslash");
      return;
    }
    if (!f.triple && (c == '\n' || c == '\r') && !(i + 1 == n && mode_ == Mode::kStrEsc)) {
      Fail("f-string: newline in a single-quoted f-string");
      return;
    }
    if (c == static_cast<unsigned char>(f.quote)) {
      if (!f.triple || ++f.quote_run == 3) {
        Fail("f-string: its own quote inside a field");
        return;
      }
    } else {
      f.quote_run = 0;
    }
  }
  if (c == '#' && mode_ == Mode::kCode && fstack_.back().part == FString::kField) {
    Fail("f-string expression part cannot include '#'");
  }
}

bool ScopeLayer::InField(size_t i) const {
  // (The format spec is literal text, the grammar's.)
  const FString::Part part = fstack_[i].part;
  return i + 1 < fstack_.size() || part == FString::kField || part == FString::kAfter;
}

// A byte takes f-string i out of its field only where it is the last one:
// FieldCode's `}` and `:` at the field's top, AfterByte's `:` and `}`,
// SpecByte's and CloseField's `}`; popping an inner f-string (its closing
// quote) leaves i the last one in the field that held it.  So from here to
// the next `}` or `:` a byte is read inside i's field.
bool ScopeLayer::FStringInField(char q, bool single) const {
  for (size_t i = 0; i < fstack_.size(); ++i) {
    const FString& f = fstack_[i];
    if ((q == 0 || f.quote == q) && !(single && f.triple) && InField(i)) return true;
  }
  return false;
}

bool ScopeLayer::SingleQuotedFString() const {
  for (const FString& f : fstack_) {
    if (!f.triple) return true;
  }
  return false;
}

// Is the text at the top of a field's expression (no bracket open in it),
// where CPython ends the expression at `:`, `!`, `=` or `}`?
bool ScopeLayer::InFieldTop() const {
  return !fstack_.empty() && mode_ == Mode::kCode && fstack_.back().part == FString::kField &&
         depth_ == fstack_.back().base_depth;
}

void ScopeLayer::FieldCode(unsigned char c) {
  FString& f = fstack_.back();
  if (c == '\n' || c == '\r') c = ' ';  // (a triple-quoted f-string's field)
  if (depth_ != f.base_depth) {
    CodeByte(c);
    return;
  }
  if (f.pending != 0) {
    const char p = f.pending;
    f.pending = 0;
    if (c == '=') {  // `==` or `!=`
      CodeByte(static_cast<unsigned char>(p));
      if (!dead_) CodeByte(c);
      return;
    }
    FlushWord();
    if (!dead_) FlushOp();
    if (dead_) return;
    f.part = FString::kAfter;
    mode_ = Mode::kFieldAfter;
    if (p == '=') AfterByte(c);  // else c is the conversion letter
    return;
  }
  switch (c) {
    case '}':
    case ':':
      FlushWord();
      if (!dead_) FlushOp();
      if (dead_) return;
      if (c == '}') {
        CloseField();
      } else {
        f.part = FString::kSpec;
        mode_ = Mode::kFieldSpec;
      }
      return;
    case '=':
      if (op_ == "<" || op_ == ">") break;  // `<=`, `>=`
      f.pending = '=';
      return;
    case '!':
      f.pending = '!';
      return;
    default:
      break;
  }
  CodeByte(c);
}

// After a field's `=` or conversion: blanks, `!` and its letter, `:`, `}`.
void ScopeLayer::AfterByte(unsigned char c) {
  FString& f = fstack_.back();
  if (f.pending == 'c') {
    f.pending = 0;
  } else if (c == '!') {
    f.pending = 'c';
  } else if (c == ':') {
    f.part = FString::kSpec;
    mode_ = Mode::kFieldSpec;
  } else if (c == '}') {
    CloseField();
  }
}

void ScopeLayer::CloseField() {
  FString& f = fstack_.back();
  f.pending = 0;
  if (f.level == 1) {  // back to the format spec around it
    f.level = 0;
    f.part = FString::kSpec;
    mode_ = Mode::kFieldSpec;
    return;
  }
  f.part = FString::kLiteral;
  mode_ = Mode::kString;
  quote_ = f.quote;
  triple_ = f.triple;
  raw_ = f.raw;
  fstr_ = true;
  bytes_ = false;
  quote_run_ = 0;
}

// Does byte c, read in code where no word or operator is open, begin a
// value (of a `return`)?
static bool BeginsValue(unsigned char c) {
  return !(c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n' || c == '#' ||
           c == '\\' || c == ';');
}

void ScopeLayer::CodeByte(unsigned char c) {
  if (return_pending_ && word_.empty() && op_.empty() && BeginsValue(c)) {
    ReturnValue();
    if (dead_) return;
  }
  if (in_pattern_) {
    // In a pattern a number is read whole (`1.5`, `1e-5j`, `.5`): its value
    // and kind matter (complex literals, mapping keys).
    const bool number = !word_.empty() && ((word_[0] >= '0' && word_[0] <= '9') || word_[0] == '.');
    const bool hex = word_.size() > 1 && word_[0] == '0' && std::strchr("xXoObB", word_[1]) != nullptr;
    if (number && (c == '.' || ((c == '+' || c == '-') && !hex && (word_.back() == 'e' || word_.back() == 'E')))) {
      word_ += static_cast<char>(c);
      return;
    }
    if (op_ == "." && word_.empty() && c >= '0' && c <= '9') {
      op_.clear();
      word_ = ".";
    }
  }
  if (IsIdent(c)) {
    if (!op_.empty()) FlushOp();
    if (dead_) return;
    // A word after a name of a pattern (`as`, `if`) makes it a capture.
    if (in_pattern_ && word_.empty() && pattern_->WaitingName()) {
      if (!pattern_->CommitName()) {
        Fail(pattern_->why());
        return;
      }
      DrainPattern();
      if (dead_) return;
    }
    if (must_trail_ && word_.empty() && prev_ != ".") {
      Fail("cannot assign to __debug__");
      return;
    }
    if (c >= 0x80 && !NameByte(c)) return;
    word_ += static_cast<char>(c);
    return;
  }
  if ((c == '\'' || c == '"') && !word_.empty() && IsStringPrefix(word_)) {
    std::string l;
    for (char x : word_) l += static_cast<char>(x >= 'A' && x <= 'Z' ? x - 'A' + 'a' : x);
    raw_ = l.find('r') != std::string::npos;
    fstr_ = l.find('f') != std::string::npos;
    bytes_ = l.find('b') != std::string::npos;
    word_.clear();
    if (in_pattern_ && fstr_) {
      Fail("patterns may only match literals and attribute lookups");
      return;
    }
  } else {
    if (c == '\'' || c == '"') raw_ = fstr_ = bytes_ = false;
    FlushWord();
    if (dead_) return;
    if (return_pending_ && op_.empty() && BeginsValue(c)) {  // `return(`, `return"`
      ReturnValue();
      if (dead_) return;
    }
  }
  // After a whole __debug__ target element only a trailer (or a group's
  // close, blanks, a continuation) may come.
  if (must_trail_ && c != ' ' && c != '\t' && c != '\f' && c != '.' && c != '[' && c != '(' &&
      c != ')' && c != ']' && c != '\\' && !(c == '#' && depth_ > 0) &&
      !(c == '\n' && depth_ > 0) && c != '\r') {
    Fail("cannot assign to __debug__");
    return;
  }
  if (c == '\'' || c == '"') {
    FlushOp();
    if (dead_) return;
    quote_ = static_cast<char>(c);
    quote_run_ = 0;
    mode_ = Mode::kStrOpen1;
    return;
  }
  switch (c) {
    case ' ':
    case '\t':
    case '\f':
    case '\r':
      FlushOp();
      if (match_word_ && match_gap_ == 0) match_gap_ = c == '\r' ? 2 : 1;
      return;
    case '#':
      FlushOp();
      if (!dead_ && depth_ == 0 && import_pending_ == kDebug) Fail("cannot assign to __debug__");
      mode_ = Mode::kComment;
      comment_in_indent_ = false;
      return;
    case '\\':
      FlushOp();
      if (match_word_) match_gap_ = 2;
      mode_ = Mode::kBackslash;
      return;
    case '\n':
      FlushOp();
      if (!dead_ && depth_ == 0) {
        Lexeme(Lex::kNewline, "");
        mode_ = Mode::kIndent;
        col_ = 0;
      }
      return;
    default:
      break;
  }
  const std::string more = op_ + static_cast<char>(c);
  if (!op_.empty() && OpPrefix(more, false)) {
    op_ = more;
  } else {
    FlushOp();
    if (dead_) return;
    op_ = std::string(1, static_cast<char>(c));
  }
  // Complete at once when nothing longer can follow, and in the places
  // where the grammar leaves no longer reading (so that the refusal comes at
  // this byte, not after it): `=` of a keyword after earlier keywords, `:`
  // ending an annotated name at statement level.
  bool now = !OpPrefix(op_, true);
  if (!now && op_ == "=" && !frames_.empty() && prev_kind_ == Lex::kName) {
    const Frame& f = frames_.back();
    now = (f.kind == Frame::kCall || f.kind == Frame::kClassArgs) && f.kw_candidate &&
          !f.names.empty();
  }
  if (!now && op_ == ":" && frames_.empty() && stmt_ == Stmt::kExpr) now = true;
  // In a pattern no operator goes on but `*` to `**` in a mapping (and `.`
  // to a number `.5`).
  if (!now && in_pattern_ && op_ != "." && !(op_ == "*" && pattern_->InMapping())) now = true;
  // `(__debug__ :` can only go on as a walrus.
  if (op_ == ":" && prev_kind_ == Lex::kName && prev_ == kDebug && !frames_.empty() &&
      frames_.back().kind == Frame::kDisplay && frames_.back().close == ')' && !LocalAnnotation()) {
    Fail("cannot assign to __debug__");
    return;
  }
  // After a name in parentheses, a list display or a call's arguments, a
  // `:` can only go on as an assignment expression: its checks come here.
  if (op_ == ":" && prev_kind_ == Lex::kName && !frames_.empty() &&
      ((frames_.back().kind == Frame::kDisplay && frames_.back().close != '}') ||
       frames_.back().kind == Frame::kCall)) {
    ScopeLayer probe = *this;
    probe.op_.clear();
    probe.CheckWalrus(prev_);
    if (probe.dead_) {
      Fail(probe.why_);
      return;
    }
  }
  if (now) FlushOp();
}

void ScopeLayer::FlushWord() {
  if (word_.empty()) return;
  // CPython ends a field's expression at a `:` outside brackets, so a
  // lambda there never gets its body.
  if (word_ == "lambda" && InFieldTop()) {
    Fail("f-string: lambda outside brackets");
    return;
  }
  const std::string w = std::move(word_);
  word_.clear();
  if ((w[0] >= '0' && w[0] <= '9') || w[0] == '.') {
    Lexeme(Lex::kNumber, w);
  } else if (HasAboveAscii(w)) {
    // CPython compares names after NFKC; a keyword is only its ASCII word.
    Lexeme(Lex::kName, NfkcName(w), true);
  } else if (IsKeyword(w)) {
    Lexeme(Lex::kKeyword, w);
  } else {
    Lexeme(Lex::kName, w);
  }
}

void ScopeLayer::FlushOp() {
  if (op_.empty()) return;
  const std::string o = std::move(op_);
  op_.clear();
  Lexeme(Lex::kOp, o);
}

// ------------------------------------------------------------------ statements

void ScopeLayer::LineStart(int32_t col) {
  stmt_col_ = col;
  CloseScopesTo(col);
  if (dead_) return;
  // Match blocks: a line at or left of the match line closes it; the first
  // line inside gives the case column; a case line after an irrefutable
  // case is refused at its first byte.
  while (!matches_.empty() && col <= matches_.back().match_col) matches_.pop_back();
  if (!matches_.empty()) {
    MatchBlock& b = matches_.back();
    if (b.case_col < 0) {
      b.case_col = col;
    } else if (col == b.case_col && !b.unreachable.empty()) {
      Fail(b.unreachable);
    }
  }
}

void ScopeLayer::CloseScopesTo(int32_t col) {
  while (!dead_ && scopes_.size() > 1 && scopes_.back()->header_col >= col) PopScope();
}

void ScopeLayer::PopScope() {
  const size_t d = scopes_.size() - 1;
  std::vector<Pending> up;
  for (const Pending& p : scopes_.back()->pending) {
    if (p.resolved_at >= static_cast<int32_t>(d)) continue;
    if (p.resolved_at < 0 && p.lo >= static_cast<int32_t>(d)) {
      Fail("no binding for nonlocal '" + p.name + "' found");
      return;
    }
    up.push_back(p);
  }
  scopes_.pop_back();
  if (!up.empty()) {
    Scope& parent = Top();
    parent.pending.insert(parent.pending.end(), up.begin(), up.end());
  }
}

bool ScopeLayer::InDiscard() const {
  for (size_t i = frames_.size(); i-- > 0;) {
    const Frame& f = frames_[i];
    if (f.kind == Frame::kLambda) {
      if (f.lambda_body) return true;
      if (f.param_stage == 3) continue;
      return true;
    }
    if (f.comp == 1 || f.comp == 3) return true;
    if (f.kind == Frame::kParams && f.param_stage == 2 && future_annotations_) return true;
  }
  return in_annotation_ && future_annotations_;
}

void ScopeLayer::AddEntry(Entry e) {
  if (InDiscard()) e.kept = false;
  // Bare: every bracket around it, up to the statement or a comprehension's
  // target list, is a display; in a pure target context (for, del, with-as,
  // a comprehension's targets) a bare __debug__ can only go on as a trailer.
  bool pure = target_ctx_;
  for (size_t i = frames_.size(); i-- > 0;) {
    const Frame& f = frames_[i];
    if (f.kind == Frame::kDisplay && f.comp == 0) continue;
    if (f.comp == 1) {
      pure = true;
    } else {
      e.bare = false;
      pure = false;
    }
    break;
  }
  if (e.name == kDebug) {
    seg_debug_ = true;
    if (e.bare && pure) must_trail_ = true;
  }
  // An iteration variable that an assignment expression of the
  // comprehension binds: only a trailer may follow it.
  if (e.bare && pure && !frames_.empty() &&
      ForbiddenCompTarget(e.name)) {
    must_trail_ = true;
  }
  seg_.push_back(std::move(e));
}

void ScopeLayer::Occurs(const std::string& name) {
  if (!scopes_.back()->seen.count(name)) Top().seen.insert(name);
}

void ScopeLayer::BindName(const std::string& name, bool import) {
  // An import binds (DEF_IMPORT) without the flags that make a later global
  // or nonlocal declaration an error (symtable.c checks DEF_PARAM, DEF_LOCAL,
  // USE and DEF_ANNOT only).
  if (!import) Occurs(name);
  const Scope& cur = *scopes_.back();
  if (cur.globals.count(name) || cur.nonlocals.count(name)) return;
  if (!cur.bound.count(name)) Top().bound.insert(name);
  ResolveBinding(name);
}

void ScopeLayer::ResolveBinding(const std::string& name) {
  if (scopes_.back()->kind != Scope::kFunction) return;
  const auto& pend = scopes_.back()->pending;
  bool any = false;
  for (const Pending& p : pend) any = any || p.name == name;
  if (!any) return;
  auto& v = Top().pending;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const Pending& p) { return p.name == name; }),
          v.end());
}

bool ScopeLayer::NonlocalAllowedHere() const {
  const Scope& cur = *scopes_.back();
  if (cur.kind == Scope::kModule) return false;
  bool klass = false;
  for (size_t i = scopes_.size() - 1; i-- > 0;) {
    if (scopes_[i]->kind == Scope::kFunction) return true;
    if (scopes_[i]->kind == Scope::kClass) klass = true;
  }
  return klass && !cur.seen.count("__class__") && !cur.globals.count("__class__");
}

bool ScopeLayer::PendingNonlocal() const {
  for (const auto& s : scopes_) {
    for (const Pending& p : s->pending) {
      if (p.resolved_at < 0) return true;
    }
  }
  return false;
}

bool ScopeLayer::DeclForbidden(NameSet* out) const {
  const Scope& cur = *scopes_.back();
  out->insert(cur.seen.begin(), cur.seen.end());
  if (stmt_ == Stmt::kGlobal) {
    out->insert(cur.nonlocals.begin(), cur.nonlocals.end());
    for (const Pending& p : cur.pending) out->insert(p.name);
    return true;
  }
  out->insert(cur.globals.begin(), cur.globals.end());
  out->insert(kDebug);
  // A name the walk of Declare stops at before any candidate function: one
  // declared global in an enclosing function nearer than every function
  // that does not declare it so.  Without any enclosing function, every
  // name but `__class__` is refused: not a list.
  bool function = false;
  for (size_t i = scopes_.size() - 1; i-- > 0;) {
    const Scope& a = *scopes_[i];
    if (a.kind == Scope::kModule) break;
    if (a.kind != Scope::kFunction) continue;
    function = true;
    for (const std::string& g : a.globals) {
      ScopeLayer probe = *this;
      probe.Declare(g);
      if (probe.dead_) out->insert(g);
    }
  }
  return function;
}

void ScopeLayer::Declare(const std::string& name) {
  const size_t d = scopes_.size() - 1;
  const Scope& cur = *scopes_.back();
  if (stmt_ == Stmt::kGlobal) {
    if (cur.seen.count(name)) {
      Fail("name '" + name + "' is used or bound prior to global declaration");
      return;
    }
    if (cur.nonlocals.count(name)) {
      Fail("name '" + name + "' is nonlocal and global");
      return;
    }
    for (const Pending& p : cur.pending) {
      if (p.name == name) {
        Fail("nonlocal '" + name + "' of a nested function has no binding past global");
        return;
      }
    }
    if (!cur.globals.count(name)) Top().globals.insert(name);
    return;
  }
  // nonlocal
  if (cur.seen.count(name)) {
    Fail("name '" + name + "' is used or bound prior to nonlocal declaration");
    return;
  }
  if (cur.globals.count(name)) {
    Fail("name '" + name + "' is nonlocal and global");
    return;
  }
  if (cur.nonlocals.count(name)) return;
  Pending p;
  p.name = name;
  p.lo = -1;
  if (name != kDebug) {
    for (size_t i = d; i-- > 0;) {
      const Scope& a = *scopes_[i];
      if (a.kind == Scope::kModule) break;
      if (a.kind == Scope::kClass) {
        if (name == "__class__") {
          p.resolved_at = static_cast<int32_t>(i);
          break;
        }
        continue;
      }
      if (a.globals.count(name)) break;
      if (a.bound.count(name) || a.nonlocals.count(name)) {
        p.resolved_at = static_cast<int32_t>(i);
        break;
      }
      p.lo = static_cast<int32_t>(i);
    }
  }
  if (p.resolved_at < 0 && p.lo < 0) {
    Fail("no binding for nonlocal '" + name + "' found");
    return;
  }
  Scope& top = Top();
  top.nonlocals.insert(name);
  if (top.kind == Scope::kFunction) {  // nested nonlocals of the name now go through this one
    top.pending.erase(std::remove_if(top.pending.begin(), top.pending.end(),
                                     [&](const Pending& q) { return q.name == name; }),
                      top.pending.end());
  }
  top.pending.push_back(p);
}

void ScopeLayer::CheckDebugTargets(size_t from) {
  for (size_t i = from; i < seg_.size(); ++i) {
    if (seg_[i].bare && seg_[i].name == kDebug) {
      Fail("cannot assign to __debug__");
      return;
    }
  }
}

void ScopeLayer::CommitSeg(size_t upto) {
  for (size_t i = 0; i < upto && i < seg_.size(); ++i) {
    if (seg_[i].kept && !seg_[i].attr) Occurs(seg_[i].name);
  }
}

void ScopeLayer::EndStatement() {
  if (import_pending_.size()) {
    if (import_pending_ == kDebug) {
      Fail("cannot assign to __debug__");
      return;
    }
    BindName(import_pending_, true);
    import_pending_.clear();
  }
  if (stmt_ == Stmt::kDel) {
    for (size_t i = assign_start_; i < seg_.size(); ++i) {
      if (seg_[i].bare && !seg_[i].attr) BindName(seg_[i].name);
    }
  }
  CommitSeg(seg_.size());
  seg_.clear();
  seg_debug_ = false;
  assign_start_ = 0;
  frames_.clear();
  stmt_ = Stmt::kNone;
  stmt_lexemes_ = 0;
  in_header_ = false;
  target_ctx_ = false;
  after_as_ = false;
  in_annotation_ = false;
  must_trail_ = false;
  import_first_ = false;
  return_pending_ = false;
  in_pattern_ = false;
  pattern_.reset();
  match_word_ = false;
}

bool ScopeLayer::LambdaTerminator(const std::string& x) const {
  return x == "," || x == ")" || x == "]" || x == "}" || x == ":" || x == ";" || x == "=" ||
         x == "\n" || x == "for" || x == "from" || x == "as" || x == "async";
}

void ScopeLayer::Lexeme(Lex kind, const std::string& text, bool above_ascii) {
  if (dead_) return;
  dots_ = kind == Lex::kOp && text == "." ? static_cast<uint8_t>(std::min(dots_ + 1, 4)) : 0;
  // match statements: the role of a first word `match` is known now.
  if (match_word_) {
    match_word_ = false;
    if (MatchSubject(kind, text)) {
      stmt_ = Stmt::kCompound;
      in_header_ = true;
      MatchBlock b;
      b.match_col = stmt_col_;
      matches_.push_back(b);
    } else {
      Name("match");
      if (dead_) return;
    }
  }
  if (in_pattern_) {
    const bool end = pattern_->depth() == 0 && ((kind == Lex::kOp && text == ":") ||
                                                (kind == Lex::kKeyword && text == "if"));
    if (!end && kind != Lex::kNewline) {
      PatternLexeme(kind, text);
      return;
    }
    // The pattern ends at the case's `:` or its guard's `if` (which then
    // read on as in any compound header).
    in_pattern_ = false;
    bool irrefutable = false;
    if (kind != Lex::kNewline && !pattern_->End(kind == Lex::kKeyword, &irrefutable)) {
      Fail(pattern_->why());
      return;
    }
    DrainPattern();
    if (dead_) return;
    if (irrefutable && !matches_.empty()) {
      matches_.back().unreachable = pattern_->end_what() + " makes remaining patterns unreachable";
    }
    pattern_.reset();
  }
  if (kind == Lex::kName && stmt_lexemes_ == 0 && prev_kind_ == Lex::kNewline && !next_async_ &&
      !above_ascii) {
    if (text == "match") {  // a name or the keyword: the next lexeme says
      match_word_ = true;
      match_gap_ = 0;
      ++stmt_lexemes_;
      stmt_ = Stmt::kExpr;
      last_entry_live_ = false;
      prev_ = text;
      prev_kind_ = kind;
      return;
    }
    if (text == "case" && CaseLine()) {
      ++stmt_lexemes_;
      stmt_ = Stmt::kCompound;
      in_header_ = true;
      in_pattern_ = true;
      pattern_.emplace();
      prev_ = text;
      prev_kind_ = kind;
      return;
    }
  }
  // A lambda body ends at the first terminator at its own level.
  const std::string key = kind == Lex::kNewline ? std::string("\n") : text;
  while (!frames_.empty() && frames_.back().kind == Frame::kLambda && frames_.back().lambda_body &&
         (kind == Lex::kOp || kind == Lex::kKeyword || kind == Lex::kNewline) &&
         LambdaTerminator(key)) {
    frames_.pop_back();
  }
  // A trailer after a name or a closed group: not a whole target.
  if (kind == Lex::kOp && (text == "." || text == "(" || text == "[")) {
    if (prev_kind_ == Lex::kName && !seg_.empty() && last_entry_live_) {
      seg_.back().bare = false;
    } else if (prev_kind_ == Lex::kOp && (prev_ == ")" || prev_ == "]") &&
               last_closed_start_ >= 0) {
      for (size_t i = static_cast<size_t>(last_closed_start_); i < seg_.size(); ++i) {
        seg_[i].bare = false;
      }
    }
    must_trail_ = false;
  }
  const bool first = stmt_lexemes_ == 0;
  ++stmt_lexemes_;
  switch (kind) {
    case Lex::kNewline:
      EndStatement();
      break;
    case Lex::kName:
      Name(text);
      break;
    case Lex::kKeyword:
      if (first && text == "async") {
        stmt_lexemes_ = 0;  // `async def/for/with`: the next word decides
        next_async_ = true;
        break;
      }
      Keyword(text);
      break;
    case Lex::kOp:
      if (first && text == "@") {
        stmt_ = Stmt::kDecorator;
        break;
      }
      if (first) stmt_ = Stmt::kExpr;
      Op(text);
      break;
    case Lex::kNumber:
    case Lex::kString:
      if (first) stmt_ = Stmt::kExpr;
      break;
  }
  if (!frames_.empty() && !(kind == Lex::kOp && (text == "(" || text == "[" || text == "{"))) {
    Frame& f = frames_.back();
    if (kind != Lex::kName) f.kw_candidate = false;
    f.after_sep = kind == Lex::kOp && text == ",";
  }
  if (kind != Lex::kName) last_entry_live_ = false;
  prev_ = text;
  prev_kind_ = kind;
}

void ScopeLayer::Name(const std::string& name) {
  if (stmt_lexemes_ == 1 && stmt_ == Stmt::kNone) stmt_ = Stmt::kExpr;
  last_entry_live_ = false;
  const bool attr = prev_kind_ == Lex::kOp && prev_ == ".";
  switch (stmt_) {
    case Stmt::kGlobal:
    case Stmt::kNonlocal:
      Declare(name);
      return;
    case Stmt::kImport:
      if (attr) return;
      if (after_as_) {
        after_as_ = false;
        if (name == kDebug) {
          Fail("cannot assign to __debug__");
          return;
        }
        BindName(name, true);
        return;
      }
      if (import_first_) {
        import_pending_ = name;
        import_first_ = false;
      }
      return;
    case Stmt::kFrom:
      if (name == "__future__") from_future_ = true;
      return;
    case Stmt::kFromNames:
      if (after_as_) {
        after_as_ = false;
        if (name == kDebug) {
          Fail("cannot assign to __debug__");
          return;
        }
        BindName(name, true);
        return;
      }
      if (from_future_ && name == "annotations") future_annotations_ = true;
      import_pending_ = name;
      return;
    case Stmt::kDef:
    case Stmt::kClass:
      if (!def_pending_ && frames_.empty() && !in_annotation_) {
        if (name == kDebug) {
          Fail("cannot assign to __debug__");
          return;
        }
        BindName(name);
        def_pending_ = true;
        return;
      }
      break;
    case Stmt::kExcept:
      if (after_as_ && frames_.empty()) {
        after_as_ = false;
        if (name == kDebug) {
          Fail("cannot assign to __debug__");
          return;
        }
        BindName(name);
        return;
      }
      break;
    default:
      break;
  }
  if (!frames_.empty()) {
    Frame& f = frames_.back();
    if ((f.kind == Frame::kParams || f.kind == Frame::kLambda) && !f.lambda_body &&
        f.param_stage == 0) {
      if (name == kDebug) {
        Fail("cannot assign to __debug__");
        return;
      }
      if (f.names.count(name)) {
        Fail("duplicate argument '" + name + "' in function definition");
        return;
      }
      f.names.insert(name);
      f.param_stage = 1;
      return;
    }
    if (f.kind == Frame::kCall || f.kind == Frame::kClassArgs) f.kw_candidate = f.after_sep;
  }
  Entry e;
  e.name = name;
  e.attr = attr;
  AddEntry(std::move(e));
  last_entry_live_ = true;
}

void ScopeLayer::Keyword(const std::string& kw) {
  const bool first = stmt_lexemes_ == 1;
  if (kw == "await") {
    CheckAwait(frames_.size(), "'await' outside async function");
    if (dead_) return;
  } else if (kw == "yield") {
    CheckYield();
    if (dead_) return;
  } else if (kw == "from" && prev_kind_ == Lex::kKeyword && prev_ == "yield" &&
             yield_owner_async_) {
    Fail("'yield from' inside async function");
    return;
  } else if (kw == "async" && !first && !frames_.empty()) {
    // `async for` in a comprehension: a generator expression may be
    // asynchronous anywhere; a list, set or dict comprehension needs an
    // async function (or a comprehension) around it.
    if (frames_.back().close != ')') {
      CheckAwait(frames_.size() - 1, "asynchronous comprehension outside of an asynchronous function");
      if (dead_) return;
    }
  }
  const bool was_async = next_async_;
  if (first) next_async_ = false;
  if (first && kw == "return") return_pending_ = true;
  if (first) {
    if (kw == "global") {
      stmt_ = Stmt::kGlobal;
      return;
    }
    if (kw == "nonlocal") {
      if (!NonlocalAllowedHere()) {
        Fail(scopes_.size() == 1 ? "nonlocal declaration not allowed at module level"
                                 : "nonlocal with no enclosing function");
        return;
      }
      stmt_ = Stmt::kNonlocal;
      return;
    }
    if (kw == "import") {
      stmt_ = Stmt::kImport;
      import_first_ = true;
      return;
    }
    if (kw == "from") {
      stmt_ = Stmt::kFrom;
      from_future_ = false;
      return;
    }
    if (kw == "del") {
      stmt_ = Stmt::kDel;
      target_ctx_ = true;
      return;
    }
    if (kw == "def" || kw == "class") {
      stmt_ = kw == "def" ? Stmt::kDef : Stmt::kClass;
      def_async_ = kw == "def" && was_async;
      def_pending_ = false;
      in_header_ = true;
      return;
    }
    if (kw == "for") {
      stmt_ = Stmt::kFor;
      target_ctx_ = true;
      in_header_ = true;
      return;
    }
    if (kw == "with") {
      stmt_ = Stmt::kWith;
      in_header_ = true;
      return;
    }
    if (kw == "except") {
      stmt_ = Stmt::kExcept;
      in_header_ = true;
      return;
    }
    if (kw == "if" || kw == "elif" || kw == "while" || kw == "else" || kw == "try" ||
        kw == "finally") {
      stmt_ = Stmt::kCompound;
      in_header_ = true;
      return;
    }
    stmt_ = Stmt::kExpr;
  }
  if (kw == "import" && stmt_ == Stmt::kFrom) {
    stmt_ = Stmt::kFromNames;
    return;
  }
  if (kw == "as" && (stmt_ == Stmt::kImport || stmt_ == Stmt::kFromNames)) {
    import_pending_.clear();
    after_as_ = true;
    return;
  }
  if (kw == "as" && frames_.empty()) {
    if (stmt_ == Stmt::kImport || stmt_ == Stmt::kFromNames) {
      import_pending_.clear();
      after_as_ = true;
      return;
    }
    if (stmt_ == Stmt::kExcept) {
      after_as_ = true;
      return;
    }
    if (stmt_ == Stmt::kWith) {
      target_ctx_ = true;
      assign_start_ = seg_.size();
      return;
    }
  }
  if (kw == "in" && stmt_ == Stmt::kFor && frames_.empty() && target_ctx_) {
    CheckDebugTargets(assign_start_);
    if (dead_) return;
    for (size_t i = assign_start_; i < seg_.size(); ++i) {
      if (seg_[i].bare && !seg_[i].attr) BindName(seg_[i].name);
    }
    target_ctx_ = false;
    must_trail_ = false;
    return;
  }
  if (kw == "lambda") {
    Frame f;
    f.kind = Frame::kLambda;
    f.seg_start = seg_.size();
    frames_.push_back(std::move(f));
    return;
  }
  if (!frames_.empty()) {
    Frame& f = frames_.back();
    if (kw == "for" && (f.kind == Frame::kDisplay || f.kind == Frame::kCall)) {
      if (f.comp == 0 && f.yield_wait) {
        Fail("'yield' inside comprehension");
        return;
      }
      f.await_wait = false;  // a generator expression (or a comprehension: checked at the await)
      f.yield_wait = false;
      f.in_iter = false;
      if (f.comp == 0 && !f.walrus_targets.empty() && WalrusInClassComprehension(frames_.size())) {
        Fail("assignment expression within a comprehension cannot be used in a class body");
        return;
      }
      if (f.comp == 0) {
        for (size_t i = f.seg_start; i < seg_.size(); ++i) seg_[i].kept = false;
        f.first_for = true;
      } else {
        f.first_for = false;
      }
      f.comp = 1;
      f.comp_target_start = seg_.size();
      return;
    }
    if (kw == "in" && f.comp == 1) {
      CheckDebugTargets(f.comp_target_start);
      for (size_t i = f.comp_target_start; i < seg_.size() && !dead_; ++i) {
        if (!seg_[i].bare || seg_[i].attr) continue;
        if (ForbiddenCompTarget(seg_[i].name)) {
          Fail("comprehension inner loop cannot rebind assignment expression target");
        }
        f.comp_targets.insert(seg_[i].name);
      }
      if (dead_) return;
      f.in_iter = true;
      must_trail_ = false;
      f.comp = f.first_for ? 2 : 3;
      return;
    }
    if (kw == "if" && f.comp != 0) {
      f.comp = 3;
      f.in_iter = false;
      return;
    }
  }
}

void ScopeLayer::Op(const std::string& op) {
  // `del` of a starred target: a `*` at an element start of a parenthesised
  // or bracketed list of the del statement (not inside a call or a
  // subscription).  The grammar takes starred targets there as it does in
  // assignments.  (Stricter than CPython only for a starred element of a
  // tuple or list whose attribute or item is deleted, `del (*a, b).x`.)
  if (op == "*" && stmt_ == Stmt::kDel && !frames_.empty() && prev_kind_ == Lex::kOp &&
      (prev_ == "(" || prev_ == "[" || prev_ == ",")) {
    bool lists = true;
    for (const Frame& f : frames_) lists = lists && f.kind == Frame::kDisplay;
    if (lists) {
      Fail("cannot delete starred");
      return;
    }
  }
  // Brackets.
  if (op == "(" || op == "[" || op == "{") {
    Frame f;
    f.close = op == "(" ? ')' : op == "[" ? ']' : '}';
    f.seg_start = seg_.size();
    const bool after_value = prev_kind_ == Lex::kName || prev_kind_ == Lex::kString ||
                             prev_kind_ == Lex::kNumber ||
                             (prev_kind_ == Lex::kOp && (prev_ == ")" || prev_ == "]" ||
                                                         prev_ == "}"));
    if (op == "(" && (stmt_ == Stmt::kDef || stmt_ == Stmt::kClass) && def_pending_ &&
        frames_.empty() && prev_kind_ == Lex::kName) {
      f.kind = stmt_ == Stmt::kDef ? Frame::kParams : Frame::kClassArgs;
    } else if (op != "{" && after_value) {
      f.kind = op == "(" ? Frame::kCall : Frame::kSubscript;
    }
    ++depth_;
    frames_.push_back(std::move(f));
    return;
  }
  if (op == ")" || op == "]" || op == "}") {
    if (stmt_ == Stmt::kFromNames && import_pending_ == kDebug) {  // `from m import (__debug__)`
      Fail("cannot assign to __debug__");
      return;
    }
    --depth_;
    if (!frames_.empty()) {
      const Frame f = std::move(frames_.back());
      frames_.pop_back();
      last_closed_start_ = static_cast<int64_t>(f.seg_start);
      if (f.kind == Frame::kParams) def_params_ = f.names;
      // Not a generator expression after all: the await in it is judged
      // from the frames around it.
      if (f.await_wait && !AwaitOutward(frames_.size(), true)) {
        Fail("'await' outside async function");
        return;
      }
      if (f.yield_wait && !frames_.empty() && frames_.back().comp == 0 &&
          (frames_.back().kind == Frame::kDisplay || frames_.back().kind == Frame::kCall)) {
        frames_.back().yield_wait = true;
      }
    }
    return;
  }
  if (op == ",") {
    if (target_ctx_ && frames_.empty() && must_trail_) {
      Fail("cannot assign to __debug__");
      return;
    }
    if (stmt_ == Stmt::kImport || stmt_ == Stmt::kFromNames) {  // also inside `(...)`
      if (import_pending_ == kDebug) {
        Fail("cannot assign to __debug__");
        return;
      }
      if (!import_pending_.empty()) BindName(import_pending_, true);
      import_pending_.clear();
      import_first_ = stmt_ == Stmt::kImport;
      after_as_ = false;
      return;
    }
    if (!frames_.empty()) {
      Frame& f = frames_.back();
      f.comma = true;
      if (f.await_wait && f.comp == 0) {  // a tuple or an argument list, not a generator expression
        f.await_wait = false;
        if (!AwaitOutward(frames_.size() - 1, true)) {
          Fail("'await' outside async function");
          return;
        }
      }
      if (f.kind == Frame::kParams || (f.kind == Frame::kLambda && !f.lambda_body)) {
        f.param_stage = 0;
      }
      if (f.comp == 1) CheckDebugTargets(f.comp_target_start);
    } else if (stmt_ == Stmt::kImport || stmt_ == Stmt::kFromNames) {
      if (import_pending_ == kDebug) {
        Fail("cannot assign to __debug__");
        return;
      }
      if (!import_pending_.empty()) BindName(import_pending_, true);
      import_pending_.clear();
      import_first_ = stmt_ == Stmt::kImport;
      return;
    } else if (stmt_ == Stmt::kWith && target_ctx_) {
      CheckDebugTargets(assign_start_);
      if (dead_) return;
      for (size_t i = assign_start_; i < seg_.size(); ++i) {
        if (seg_[i].bare && !seg_[i].attr) BindName(seg_[i].name);
      }
      target_ctx_ = false;
      return;
    } else if (stmt_ == Stmt::kDel || stmt_ == Stmt::kFor) {
      CheckDebugTargets(seg_.empty() ? 0 : seg_.size() - 1);
      return;
    }
    if (target_ctx_ && !seg_.empty() && seg_.back().bare && seg_.back().name == kDebug) {
      Fail("cannot assign to __debug__");
    }
    return;
  }
  if (op == "*" || op == "**" || op == "/") {
    if (!frames_.empty() && frames_.back().after_sep) frames_.back().not_genexp = true;
    return;
  }
  if (op == ";") {
    EndStatement();
    return;
  }
  // Inside a bracket or lambda: parameter stages, keywords.
  if (!frames_.empty()) {
    Frame& f = frames_.back();
    const bool params = f.kind == Frame::kParams || (f.kind == Frame::kLambda && !f.lambda_body);
    if (params && op == "=") {
      f.param_stage = 3;
      return;
    }
    if (f.kind == Frame::kParams && op == ":") {
      f.param_stage = 2;
      return;
    }
    if (f.kind == Frame::kLambda && !f.lambda_body && op == ":") {
      f.lambda_body = true;
      return;
    }
    if ((f.kind == Frame::kCall || f.kind == Frame::kClassArgs) && op == "=" &&
        prev_kind_ == Lex::kName && f.kw_candidate && !seg_.empty()) {
      const std::string kw = seg_.back().name;
      seg_.pop_back();
      f.not_genexp = true;
      if (kw == kDebug) {
        Fail("cannot assign to __debug__");
        return;
      }
      if (f.names.count(kw)) {
        Fail("keyword argument repeated: " + kw);
        return;
      }
      f.names.insert(kw);
      return;
    }
    if (op == ":=" && !seg_.empty() && prev_kind_ == Lex::kName) {
      if (seg_.back().name == kDebug && !LocalAnnotation()) {  // (an annotation there is not compiled)
        Fail("cannot assign to __debug__");
        return;
      }
      CheckWalrus(seg_.back().name);
      if (dead_) return;
      seg_.back().bare = false;
      BindName(seg_.back().name);
      return;
    }
    return;
  }
  // Statement level.
  if (op == ":=") {
    if (!seg_.empty() && prev_kind_ == Lex::kName) {
      if (seg_.back().name == kDebug) {
        Fail("cannot assign to __debug__");
        return;
      }
      seg_.back().bare = false;
      BindName(seg_.back().name);
    }
    return;
  }
  if (op == "->") {
    in_annotation_ = true;
    return;
  }
  if (op == ":") {
    if (in_header_) {
      if (stmt_ == Stmt::kWith && target_ctx_) {
        CheckDebugTargets(assign_start_);
        if (dead_) return;
        for (size_t i = assign_start_; i < seg_.size(); ++i) {
          if (seg_[i].bare && !seg_[i].attr) BindName(seg_[i].name);
        }
      }
      const bool open = (stmt_ == Stmt::kDef || stmt_ == Stmt::kClass) && def_pending_;
      const Scope::Kind kind = stmt_ == Stmt::kDef ? Scope::kFunction : Scope::kClass;
      const int32_t col = stmt_col_;
      in_annotation_ = false;
      CommitSeg(seg_.size());
      seg_.clear();
      seg_debug_ = false;
      assign_start_ = 0;
      frames_.clear();
      stmt_ = Stmt::kNone;
      stmt_lexemes_ = 0;
      in_header_ = false;
      target_ctx_ = false;
      after_as_ = false;
      must_trail_ = false;
      if (open) {
        auto s = std::make_shared<Scope>();
        s->kind = kind;
        s->header_col = col;
        if (kind == Scope::kFunction) {
          s->is_async = def_async_;
          s->params = def_params_;
          s->seen = def_params_;
          s->bound = def_params_;
        }
        scopes_.push_back(std::move(s));
        def_params_.clear();
        def_pending_ = false;
        def_async_ = false;
      }
      return;
    }
    if (stmt_ == Stmt::kExpr) {  // an annotated assignment
      CheckDebugTargets(0);
      if (dead_) return;
      const bool simple = seg_.size() == 1 && seg_[0].bare && !seg_[0].attr && prev_ != ")";
      if (simple) {
        const std::string& n = seg_[0].name;
        const Scope& cur = *scopes_.back();
        if (cur.kind != Scope::kModule && (cur.globals.count(n) || cur.nonlocals.count(n))) {
          Fail("annotated name '" + n + "' can't be global or nonlocal");
          return;
        }
        BindName(n);
      }
      CommitSeg(seg_.size());
      seg_.clear();
      assign_start_ = 0;
      in_annotation_ = true;
    }
    return;
  }
  if (op == "=") {
    if (stmt_ == Stmt::kExpr) {
      CheckDebugTargets(assign_start_);
      if (dead_) return;
      if (in_annotation_) {
        in_annotation_ = false;
        CommitSeg(seg_.size());
        seg_.clear();
        assign_start_ = 0;
        return;
      }
      for (size_t i = assign_start_; i < seg_.size(); ++i) {
        if (seg_[i].bare && !seg_[i].attr) BindName(seg_[i].name);
      }
      assign_start_ = seg_.size();
    }
    return;
  }
  if (IsAugOp(op) && stmt_ == Stmt::kExpr) {
    CheckDebugTargets(assign_start_);
    if (dead_) return;
    for (size_t i = assign_start_; i < seg_.size(); ++i) {
      if (seg_[i].bare && !seg_[i].attr) BindName(seg_[i].name);
    }
    assign_start_ = seg_.size();
  }
}

// ------------------------------------------------------------------ await and yield

bool ScopeLayer::AwaitOutward(size_t from, bool mark) {
  for (size_t i = from; i-- > 0;) {
    Frame& f = frames_[i];
    if (f.kind == Frame::kLambda) {
      if (f.lambda_body || f.param_stage != 3) return false;  // a lambda is a plain function
      continue;                                              // a default: the scope around
    }
    if (f.comp == 2) continue;  // a comprehension's first iterable: the scope around
    if (f.comp == 1 || f.comp == 3) {
      if (f.close == ')') return true;  // a generator expression may be asynchronous
      continue;  // a list, set or dict comprehension becomes asynchronous: it needs the same
    }
    if (f.kind == Frame::kParams) continue;  // defaults and annotations: the scope around
    const bool candidate = f.close == ')' && (f.kind == Frame::kDisplay || f.kind == Frame::kCall) &&
                           !f.comma && !f.not_genexp;
    if (candidate && mark) {
      // Allowed if it becomes a generator expression; else judged at its `,` or `)`.
      if (AwaitOutward(i, false)) return true;
      f.await_wait = true;
      return true;
    }
  }
  const Scope& s = *scopes_.back();
  return s.kind == Scope::kFunction && s.is_async;
}

// Under `from __future__ import annotations` an annotation may hold neither
// await nor yield.
static bool InFutureAnnotation(bool future, bool in_annotation, bool param_annotation) {
  return future && (in_annotation || param_annotation);
}

void ScopeLayer::CheckAwait(size_t from, const char* what) {
  bool param_ann = false;
  for (const Frame& f : frames_) param_ann = param_ann || (f.kind == Frame::kParams && f.param_stage == 2);
  if (InFutureAnnotation(future_annotations_, in_annotation_, param_ann)) {
    Fail("'await expression' can not be used within an annotation");
    return;
  }
  // A variable annotation in a function body is never compiled (the
  // compiler's await checks do not reach it), but the symbol table marks the
  // function a coroutine (then a yield and a return value conflict as in an
  // async generator).  The mark is set for any await in the annotation, also
  // one inside a lambda or generator expression there, which CPython does
  // not mark: stricter, never looser.
  if (LocalAnnotation()) {
    if (!scopes_.back()->coroutine_mark) {
      const Scope& cur = *scopes_.back();
      if (cur.has_yield && cur.has_return_value) {
        Fail("'return' with value in async generator");
        return;
      }
      Top().coroutine_mark = true;
    }
    return;
  }
  if (!AwaitOutward(from, true)) Fail(what);
}

void ScopeLayer::CheckYield() {
  bool param_ann = false;
  for (const Frame& f : frames_) param_ann = param_ann || (f.kind == Frame::kParams && f.param_stage == 2);
  if (InFutureAnnotation(future_annotations_, in_annotation_, param_ann)) {
    Fail("'yield expression' can not be used within an annotation");
    return;
  }
  if (!frames_.empty()) frames_.back().not_genexp = true;  // `(yield ...)`
  std::vector<size_t> wait;
  for (size_t i = frames_.size(); i-- > 0;) {
    const Frame& f = frames_[i];
    if (f.kind == Frame::kLambda) {
      if (f.lambda_body) {  // the lambda's own yield
        for (size_t w : wait) frames_[w].yield_wait = true;
        yield_owner_async_ = 0;
        return;
      }
      continue;
    }
    if (f.comp == 2) continue;
    if (f.comp == 1 || f.comp == 3) {
      Fail("'yield' inside comprehension");
      return;
    }
    if (f.kind == Frame::kDisplay || f.kind == Frame::kCall) wait.push_back(i);
  }
  const Scope& cur = *scopes_.back();
  if (cur.kind != Scope::kFunction) {
    Fail("'yield' outside function");
    return;
  }
  // In a variable annotation of a function body the yield still makes the
  // function a generator (symbol table), but `yield from` is not checked
  // against an async function (compiler).
  const bool local_ann = LocalAnnotation();
  if ((cur.is_async || cur.coroutine_mark) && cur.has_return_value) {
    Fail("'return' with value in async generator");
    return;
  }
  for (size_t w : wait) frames_[w].yield_wait = true;
  const bool is_async = cur.is_async;
  if (!cur.has_yield) Top().has_yield = true;
  yield_owner_async_ = is_async && !local_ann ? 1 : 0;
}

void ScopeLayer::ReturnValue() {
  return_pending_ = false;
  const Scope& cur = *scopes_.back();
  if (cur.kind != Scope::kFunction) return;
  if ((cur.is_async || cur.coroutine_mark) && cur.has_yield) {
    Fail("'return' with value in async generator");
    return;
  }
  if (!cur.has_return_value) Top().has_return_value = true;
}

void ScopeLayer::CheckWalrus(const std::string& name) {
  bool param_ann = false;
  for (const Frame& f : frames_) param_ann = param_ann || (f.kind == Frame::kParams && f.param_stage == 2);
  if (InFutureAnnotation(future_annotations_, in_annotation_, param_ann)) {
    Fail("'named expression' can not be used within an annotation");
    return;
  }
  bool comprehension = false;
  for (size_t i = frames_.size(); i-- > 0;) {
    Frame& f = frames_[i];
    if (f.kind == Frame::kLambda) {
      if (f.lambda_body) return;  // binds in the lambda
      continue;
    }
    if (f.comp == 2 || (f.comp == 3 && f.in_iter)) {
      Fail("assignment expression cannot be used in a comprehension iterable expression");
      return;
    }
    if (f.comp != 0) {
      if (f.comp_targets.count(name)) {
        Fail("assignment expression cannot rebind comprehension iteration variable '" + name + "'");
        return;
      }
      comprehension = true;
    }
    if (f.kind == Frame::kDisplay || f.kind == Frame::kCall || f.comp != 0) f.walrus_targets.insert(name);
  }
  if (comprehension && scopes_.back()->kind == Scope::kClass) {
    Fail("assignment expression within a comprehension cannot be used in a class body");
  }
}

bool ScopeLayer::LocalAnnotation() const {
  return in_annotation_ && stmt_ == Stmt::kExpr && scopes_.back()->kind == Scope::kFunction;
}

bool ScopeLayer::InComprehension() const {
  for (size_t i = frames_.size(); i-- > 0;) {
    const Frame& f = frames_[i];
    if (f.kind == Frame::kLambda && f.lambda_body) return false;
    if (f.comp != 0) return true;
  }
  return false;
}

bool ScopeLayer::ForbiddenCompTarget(const std::string& name) const {
  // The comprehension whose target list is being read: an assignment
  // expression inside it (its element or clauses, at any depth short of a
  // lambda) binds `name`.  (Its walrus_targets hold exactly those: CheckWalrus
  // records a target on every frame between the expression and the nearest
  // lambda body.)
  for (size_t i = frames_.size(); i-- > 0;) {
    const Frame& f = frames_[i];
    if (f.comp == 1) return f.walrus_targets.count(name) > 0;
  }
  return false;
}

bool ScopeLayer::WalrusInClassComprehension(size_t from) const {
  for (size_t i = from; i-- > 0;) {
    const Frame& f = frames_[i];
    if (f.kind == Frame::kLambda && f.lambda_body) return false;
  }
  return scopes_.back()->kind == Scope::kClass;
}

bool ScopeLayer::ReturnArmed() const {
  const Scope& cur = *scopes_.back();
  // A return whose value has not begun, in an async generator (at a
  // statement start Filter looks at the tokens that hold or finish `return`).
  return return_pending_ && cur.kind == Scope::kFunction && (cur.is_async || cur.coroutine_mark) &&
         cur.has_yield;
}

// ------------------------------------------------------------------ match statements

bool ScopeLayer::MatchSubject(Lex kind, const std::string& text) const {
  // MATCH (grammar/lark/python.lark): `match`, blanks, then a character that
  // begins a subject, not `**`, `*=`, `+=`, `-=` nor in/is/and/or/if/not.
  if (match_gap_ != 1) return false;
  switch (kind) {
    case Lex::kName:
    case Lex::kString:
      return true;
    case Lex::kNumber:
      return text[0] != '.';
    case Lex::kKeyword:
      return text != "in" && text != "is" && text != "and" && text != "or" && text != "if" &&
             text != "not";
    case Lex::kOp:
      return text == "(" || text == "[" || text == "{" || text == "~" || text == "*" ||
             text == "-" || text == "+";
    case Lex::kNewline:
      return false;
  }
  return false;
}

bool ScopeLayer::CaseLine() const {
  return !matches_.empty() && matches_.back().case_col == stmt_col_;
}

bool ScopeLayer::Unreachable() const {
  for (const MatchBlock& b : matches_) {
    if (!b.unreachable.empty()) return true;
  }
  return false;
}

void ScopeLayer::PatternLexeme(Lex kind, const std::string& text) {
  if (kind == Lex::kOp && (text == "(" || text == "[" || text == "{")) ++depth_;
  if (kind == Lex::kOp && (text == ")" || text == "]" || text == "}")) --depth_;
  ++stmt_lexemes_;
  PatternReader::Kind k = PatternReader::Kind::kOp;
  switch (kind) {
    case Lex::kName: k = PatternReader::Kind::kName; break;
    case Lex::kKeyword: k = PatternReader::Kind::kKeyword; break;
    case Lex::kNumber: k = PatternReader::Kind::kNumber; break;
    case Lex::kString: k = PatternReader::Kind::kString; break;
    default: break;
  }
  if (!pattern_->Lexeme(k, text)) {
    Fail(pattern_->why());
    return;
  }
  DrainPattern();
  prev_ = text;
  prev_kind_ = kind;
}

void ScopeLayer::DrainPattern() {
  if (!pattern_) return;
  for (const std::string& n : pattern_->TakeBound()) BindName(n);
  for (const std::string& n : pattern_->TakeUsed()) Occurs(n);
}

}  // namespace cfgmask
