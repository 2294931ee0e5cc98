// CPython 3.11's checks on the patterns of a match statement's case blocks
// beyond its grammar (Python/compile.c, compiler_pattern_*, and the AST
// validator), for the scope layer (runtime/scope_layer.h), which feeds one
// case pattern's lexemes to a PatternReader.  The grammar
// (grammar/lark/python.lark) has already checked the syntax: the reader only
// keeps what the checks need, per open bracket (a Level) and per pattern
// position in it (a Slot: an or-pattern, perhaps with `as NAME`):
//   - a name bound twice in the pattern ("multiple assignments to name");
//   - alternatives of an or-pattern that bind different names;
//   - an irrefutable alternative (a capture, `_`, a group of one, an
//     as-pattern of one) that is not the last of its or-pattern;
//   - `_` after `as` or `**`, and `__debug__` as a capture;
//   - two starred names in one sequence pattern;
//   - a keyword repeated in a class pattern;
//   - literal mapping keys of equal value (`1`, `1.0`, `True`; `'a' 'b'`
//     and `'ab'`; compared by value as CPython's set of constants does);
//   - a complex literal must be a real number `+`/`-` an imaginary one.
// Whether the whole case pattern is irrefutable (so that no case may follow
// it) is End's answer.  A name's role (a capture, the start of a dotted
// value or class name, a keyword) is known at the lexeme after it, or at the
// first byte of a word after it (CommitName): its checks are made then.
#ifndef CFGMASK_RUNTIME_MATCH_PATTERNS_H_
#define CFGMASK_RUNTIME_MATCH_PATTERNS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace cfgmask {

// A literal mapping key's value in a canonical spelling: equal strings for
// equal Python values ("n<integer>", "f<hex float>", "c<re>,<im>", "s<utf-8>",
// "b<bytes>", "N"); "" for a dotted name (not a literal: not compared); a
// leading '?' where the value is not worked out (a \N{...} name that the
// grammar's names do not hold), which is then taken as equal to every key of
// its kind (stricter than CPython).
std::string CanonicalPatternKey(const std::string& text);

class PatternReader {
 public:
  enum class Kind { kName, kKeyword, kNumber, kString, kOp };
  PatternReader();
  // One lexeme of the pattern (after `case`, up to but not including the
  // guard's `if` or the case's `:` at depth 0).  False: refused (why()).
  bool Lexeme(Kind kind, const std::string& text);
  // A name waits for its role; a word beginning after it makes it a
  // capture (only `as` or `if` can follow a name so).
  bool WaitingName() const { return pend_ctx_ == kPlain; }
  bool CommitName();
  // The pattern is complete (guard or not): false if refused; *irrefutable:
  // no guard and the pattern always matches.
  bool End(bool guarded, bool* irrefutable);
  // The raw bytes of the pattern as read (for mapping keys).
  void RawByte(char c) { raw_ += c; }
  int32_t depth() const { return static_cast<int32_t>(levels_.size()) - 1; }
  // The innermost bracket is a mapping pattern (a `*` there becomes `**`).
  bool InMapping() const { return levels_.back().kind == '{'; }
  const std::string& why() const { return why_; }
  // What makes the ended pattern irrefutable ("wildcard", "name capture 'x'").
  const std::string& end_what() const { return end_what_; }
  // Names bound / used (first components of dotted names) since the last
  // call, for the scope's symbol sets.
  std::vector<std::string> TakeBound();
  std::vector<std::string> TakeUsed();

 private:
  enum Ctx { kNone, kPlain, kStar, kDStar, kAs, kAttr };
  struct Slot {
    int32_t alts = 1;                 // alternatives so far (the current is the last)
    std::vector<std::string> first;   // names of the first alternative (alts > 1)
    std::vector<std::string> cur;     // names of the current alternative so far
    int32_t closed = 0;               // closed patterns read in the current alternative
    bool cur_irref = false;           // the current alternative is irrefutable
    std::string irref_what;           // "wildcard" or "name capture 'x'"
    bool after_as = false;            // `as NAME` read: cur holds all its names
    bool as_irref = false;
    bool star = false;                // a star pattern
    bool Empty() const { return closed == 0 && alts == 1 && !star && !after_as && cur.empty(); }
  };
  struct Level {
    char kind = 'T';                  // 'T' the case, '(' group/sequence, '[', '{', 'C' class
    bool comma = false;
    int32_t stars = 0;
    int32_t slots = 0;
    bool last_irref = false;
    std::string last_what;
    std::vector<std::string> names;   // bound by the completed slots
    Slot slot;
    bool key = false;                 // mapping: reading a key
    size_t key_start = 0;
    std::vector<std::string> keys;    // mapping: canonical literal keys
    std::vector<std::string> kws;     // class: keyword names
  };
  bool Fail(std::string why);
  bool Resolve(Kind kind, const std::string& text);
  bool Bind(const std::string& name);
  bool Closed(bool irrefutable, const std::string& what);
  bool EndAlt(Slot& s);
  bool FinishOr(Slot& s, std::vector<std::string>* names, bool* irref, std::string* what);
  bool EndSlot(Level& l);

  std::vector<Level> levels_;
  std::string pend_;
  Ctx pend_ctx_ = kNone;
  bool after_name_ = false;     // the last lexeme ended a (dotted) name
  Kind prev_kind_ = Kind::kOp;
  std::string prev_;
  std::string last_number_;     // the last number of a literal
  bool want_imag_ = false;      // after `<real> +/-`
  std::string raw_;
  std::vector<std::string> bound_, used_;
  std::string why_;
  std::string end_what_;
};

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_MATCH_PATTERNS_H_
