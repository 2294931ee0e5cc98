// The scope layer of the strict Python grammar: what CPython 3.11's symbol
// table refuses beyond the grammar, checked on the session's committed text.
//
// The grammar (grammar/lark/python.lark) decides the syntax; this layer reads
// the same text a second time with a small Python tokenizer of its own (names,
// operators, strings with their f-string fields, comments, line
// continuations, logical lines and their columns) and keeps, per open scope
// (module, class, function; lambdas and comprehensions only as far as they
// hide names from the enclosing scope), the names that occur, the names bound,
// the parameters and the global / nonlocal declarations.  It refuses, at the
// lexeme that commits to the mistake, what CPython refuses (symtable.c and
// the compiler's forbidden-name checks):
//   - `nonlocal` at module level or where no enclosing function exists (the
//     keyword itself; `__class__` in a method counts), nonlocal of a name
//     that is a parameter, occurs earlier in the scope, or is declared global;
//   - a nonlocal name that no enclosing function binds: the binding may come
//     later in the text, so the end of the text, and the line start that
//     closes the outermost function able to bind it, are refused until then;
//   - `global x` after x occurs in the scope (used, bound, a parameter), of a
//     name declared nonlocal, or of a name that a nested function's nonlocal
//     reaches only through this scope; an annotated name declared global or
//     nonlocal (outside the module);
//   - duplicate parameter names (def and lambda), a repeated keyword argument;
//   - `del` of a starred target (a `*` at an element start of the del
//     statement's parenthesised or bracketed lists, outside calls and
//     subscriptions; stricter than CPython only for `del (*a, b).x`);
//   - `__debug__` as a parameter, keyword, import, def/class name, or target
//     of an assignment, augmented or annotated assignment, walrus, for, with,
//     except, del or comprehension (also as an attribute target);
//   - `await` outside an async function and outside a comprehension (a
//     lambda, class or plain function in between; a list, set or dict
//     comprehension with await or `async for` needs an async function or
//     another comprehension around it, a generator expression does not),
//     `yield` outside a function or lambda or inside a comprehension,
//     `yield from` in an async function, a return value in an async
//     generator (whichever of the two comes second), and await / yield in
//     an annotation under `from __future__ import annotations`.  Where a
//     `(` may still become a generator expression the decision waits for its
//     `for`, `,` or `)`;
//   - an assignment expression in a comprehension's iterable, to one of its
//     iteration variables (either order; any comprehension around it too),
//     or in a comprehension of a class body;
//   - match statements: `match` is a keyword at a statement start when blanks
//     and a subject follow (the grammar's MATCH look-ahead, read the same
//     way from the lexeme after it), `case` at its block's case column; each
//     case pattern goes to a PatternReader (runtime/match_patterns.h: names
//     bound twice, or-pattern alternatives, irrefutable alternatives, `_`
//     targets, starred names, class keywords, mapping keys, complex
//     literals), f-strings in patterns, and a case line after an
//     irrefutable case (refused at its first byte); captures bind names;
//   - a `\N{...}` escape whose name is no character's name
//     (grammar/base/unicode_names.h), at the byte after which none can begin;
//     a `\x` escape without two hex digits, `\u` without four, `\U` without
//     eight or past U+10FFFF (`\u`, `\U` and `\N` are no escapes in bytes;
//     none in raw strings), at the first byte that is no hex digit or that
//     takes the value past U+10FFFF (the grammar takes any character after a
//     backslash: the digit counts cost lexer states, README "Lexer states").
//   - a name's character above ASCII that CPython 3.11 does not take
//     (`str.isidentifier()`: XID_Start or `_` first, then XID_Continue;
//     grammar/base/unicode_idents.h), at the byte that completes it (a
//     token may end inside a character's UTF-8 sequence), and bytes that are
//     no UTF-8 at once.  The grammar's NAME takes any character above ASCII.
//     Names are compared as CPython compares them, after NFKC (`ﬁle` is
//     `file`): every check above sees the normalised name, while keywords
//     and soft keywords are only the ASCII words (`ｉｆ = 1` binds `if`).
// The layer assumes its text is a prefix of the grammar's language (the
// session feeds it only tokens the grammar allows).  Its state is copied per
// step (Fork, the history for Rollback); the per-scope name sets are shared
// between copies and copied only when a new name is added.
//
// Masks: the session filters its grammar mask through Filter, which feeds a
// copy of the layer each allowed token that could fail: every allowed token
// when a check is pending (Armed: inside a parameter list, a call with
// keywords, a global/nonlocal statement, an unresolved nonlocal, ...), else
// only the few tokens that can open and fail a check on their own
// (ScopeTokenIndex).  Tested by tests/scope_layer_test.cc (minimal cases both
// ways), tests/py/test_python_strict.py (generated programs against
// CPython's compile()) and tests/row_check_test.cc (ScopeFilter: Filter
// against every allowed token fed to a copy of the layer).
#ifndef CFGMASK_RUNTIME_SCOPE_LAYER_H_
#define CFGMASK_RUNTIME_SCOPE_LAYER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/match_patterns.h"

namespace cfgmask {

// Per store: which tokens can fail a check from a state with no check
// pending, and the tokens by their leading identifier run (for a partial
// name that may become `nonlocal`, `global` or `__debug__`).
class ScopeTokenIndex {
 public:
  explicit ScopeTokenIndex(const CompiledStore& store);
  const std::vector<int32_t>& risky() const { return risky_; }
  const std::vector<int32_t>& newline() const { return newline_; }
  const std::vector<int32_t>& colon() const { return colon_; }      // tokens with a ':'
  const std::vector<int32_t>& eq_lead() const { return eq_lead_; }
  const std::vector<int32_t>& star() const { return star_; }        // tokens with a '*'
  // Tokens that can fail inside an f-string: a backslash, `#`, a newline, a
  // quote, or `lambda` (CPython 3.11's limits on a field).
  const std::vector<int32_t>& fstring() const { return fstring_; }
  // fstring() split (ScopeLayer::Filter inside an f-string past its opening
  // quote): fstring_core, tokens that can fail whatever is open (a
  // backslash, `#`, a line end, `lambda`, an `f` in the letters before a
  // quote); of the others, fstring_lead (a quote after letters that start
  // the token: an f-string after a word with an `f`), fstring_sq and
  // fstring_dq (the tokens with a ' and with a ", judged only while a
  // string of that quote is open).
  const std::vector<int32_t>& fstring_core() const { return fstring_core_; }
  const std::vector<int32_t>& fstring_lead() const { return fstring_lead_; }
  const std::vector<int32_t>& fstring_sq() const { return fstring_sq_; }
  const std::vector<int32_t>& fstring_dq() const { return fstring_dq_; }
  // Of fstring_sq (fstring_dq): the tokens whose bytes before their first '
  // (") hold neither `}` nor `:`.  A field of an f-string is left only at a
  // `}` or a `:` (ScopeLayer::FStringInField), so while a single-quoted
  // f-string of that quote is inside a field each of them reaches the quote
  // there, which ends the f-string too soon: refused without a copy.
  const std::vector<int32_t>& fstring_sq_field() const { return fstring_sq_field_; }
  const std::vector<int32_t>& fstring_dq_field() const { return fstring_dq_field_; }
  // What fstring_core's tokens (in its order) do inside an f-string, read
  // from their bytes: kCoreBackslash, a backslash before the first `}` or
  // `:`, refused while an f-string is inside a field; kCoreLineEnd, a line
  // end so, refused while a single-quoted one is; kCoreLineEndFirst, a line
  // end before any quote or backslash, refused while a single-quoted one is
  // open at all (no quote can close it first); kCoreHash, a `#` before any
  // quote, `}`, `:`, `=` or `!`, refused in a field's code; kCoreText, none
  // of a quote, backslash, brace or line end: text in a string's content.
  enum CoreKind : uint8_t {
    kCoreBackslash = 1,     // a backslash before the first `}` or `:`
    kCoreLineEnd = 2,       // a line end before the first `}` or `:`
    kCoreLineEndFirst = 4,  // a line end before any quote or backslash
    kCoreHash = 8,          // a `#` before any quote, `}`, `:`, `=` or `!`
    kCoreText = 16,         // no quote, backslash, brace or line end
  };
  const std::vector<uint8_t>& fstring_core_kind() const { return fstring_core_kind_; }
  // Tokens with a quote and after it a `{`, a line end or a backslash (they
  // may open an f-string and break its limits or open a field), whose own
  // letters before a quote hold an `f`, or with a backslash after the
  // quote; fopen_lead: the others whose letters before a quote start the
  // token (an f-string only after a word with an `f`).  A token with a quote
  // in neither list opens no f-string and holds no escape.
  const std::vector<int32_t>& fopen() const { return fopen_; }
  const std::vector<int32_t>& fopen_lead() const { return fopen_lead_; }
  // Tokens that start with `x`, `u` or `U`: after a string's backslash they
  // begin a hex escape, which fails without its digits.
  const std::vector<int32_t>& hex_lead() const { return hex_lead_; }
  // Inside a hex escape with k digits still to come (1 <= k <= 8), as masks
  // (mask_words words): hex_digits(k), the tokens whose first k bytes (all
  // of them, if fewer) are hex digits, special tokens included; hex_risky(k),
  // those with a backslash, quote, brace or line end after those bytes.
  static constexpr int kMaxHexDigits = 8;
  const std::vector<uint32_t>& hex_digits(int k) const { return hex_digits_[k]; }
  const std::vector<uint32_t>& hex_risky(int k) const { return hex_risky_[k]; }
  // Tokens that end the word being written: they start with a byte that is
  // no name byte (special tokens left out), as a mask (mask_words words).
  const std::vector<uint32_t>& word_enders() const { return word_enders_; }
  // Of those, the ones whose first byte past blanks (space, tab, form feed,
  // carriage return) is ':' or a backslash: the only ones that can annotate
  // a statement's one name just written (a backslash may continue the line
  // before the ':').
  const std::vector<int32_t>& colon_enders() const { return colon_enders_; }
  // Those and the ones whose first byte past blanks and line ends is '=',
  // a backslash or '#': what can fail the checks at a name just read (a
  // keyword repeated, the annotation of a declared name).
  const std::vector<int32_t>& colon_eq_enders() const { return colon_eq_enders_; }
  // Tokens made only of name bytes, as a mask: after a word being written
  // they only make it longer.
  const std::vector<uint32_t>& name_only() const { return name_only_; }
  // Tokens that start with a quote, as a mask (after a word that is a
  // string prefix they open a string instead of ending a name).
  const std::vector<uint32_t>& quote_lead() const { return quote_lead_; }
  // Tokens with a byte above ASCII (special tokens aside): all of them; the
  // "simple" ones (blanks, then only name bytes) as a mask; of those, the
  // ones whose name bytes are a good beginning of a name (na_new: a
  // character CPython takes first, then ones it takes further, a UTF-8
  // sequence left open at the end) or a good continuation (na_cont), and
  // the ones with leading blanks; the others, listed (na_other); the tokens
  // with a byte above ASCII after a `'` (na_after(0)), a `"` (1), a brace
  // (2) or a newline (3): the only ones that can bring such a byte into
  // code from a string or a comment.
  const std::vector<uint32_t>& na_all() const { return na_all_; }
  const std::vector<uint32_t>& na_simple() const { return na_simple_; }
  const std::vector<uint32_t>& na_new() const { return na_new_; }
  const std::vector<uint32_t>& na_cont() const { return na_cont_; }
  const std::vector<uint32_t>& na_blank() const { return na_blank_; }
  // The simple tokens those flags refuse where no word is open (na_bad_new)
  // and where a word that is no number is open (na_bad_cont), as masks.
  const std::vector<uint32_t>& na_bad_new() const { return na_bad_new_; }
  const std::vector<uint32_t>& na_bad_cont() const { return na_bad_cont_; }
  const std::vector<int32_t>& na_bad_words() const { return na_bad_words_; }  // words with such bits
  const std::vector<int32_t>& na_other() const { return na_other_; }
  // How each na_other token (in its order) reads in code, where no word is
  // open (bits 0-1) and where it joins the open word (bits 2-3): a kNa*
  // (the scope layer's NameRunsKind).
  enum NaKind : uint8_t {
    kNaCopy = 0,     // through a copy of the layer
    kNaPlain = 1,    // its words above ASCII compare as their bytes: the lists judge it
    kNaRefused = 2,  // a character of a word that CPython does not take
  };
  const std::vector<uint8_t>& na_other_kind() const { return na_other_kind_; }
  // The simple tokens by the blanks before their name bytes: na_group(t)
  // is 0 for a token that is no simple one (or past 254 kinds of blanks),
  // else 1 + the index of its blanks in na_blanks.
  uint8_t na_group(int32_t t) const { return na_group_[t]; }
  const std::vector<std::string>& na_blanks() const { return na_blanks_; }
  const std::vector<int32_t>& na_after(int k) const { return na_after_[k]; }
  // Tokens whose leading identifier run is `run` and that go on after it.
  const std::vector<int32_t>* Finishing(std::string_view run) const;
  // Tokens that hold `run` as a whole identifier run that ends inside them
  // (something follows it in the token).
  const std::vector<int32_t>* Containing(std::string_view run) const;
  // Tokens after which the word being written is a whole `async` that the
  // token ends with: those that hold it after a non-name byte
  // (ending_async(-1)), and those made only of "async".substr(k), which
  // finish a partial word `async`.substr(0, k) (ending_async(k), k = 0..4).
  const std::vector<int32_t>& ending_async(int k) const { return ending_async_[k + 1]; }
  // Tokens after which the word being written may be a proper prefix of
  // `async` (`a`, `as`, `asy`, `asyn`) right after an operand
  // (ScopeLayer::AsyncPrefixCandidates): async_piece(k), those made only of
  // "async".substr(k, m) with k + m < 5 (they extend a partial word
  // "async".substr(0, k), k = 0..3); async_prefix_blank, blanks and then such
  // a word; async_prefix_dot and async_prefix_quote, a `.` or a quote and
  // then such a word; async_prefix_inner, the others that end with such a
  // word after a byte that may end an operand (not after an operator, an
  // opening bracket, `,`, `:`, `;`, `@`, `#`, a backslash, `$`, `?`, `` ` ``
  // or an attribute's `.`); of those, async_prefix_opening, the ones that may
  // open a bracket or a lambda.
  const std::vector<int32_t>& async_piece(int k) const { return async_piece_[k]; }
  const std::vector<int32_t>& async_prefix_blank() const { return async_prefix_blank_; }
  const std::vector<int32_t>& async_prefix_dot() const { return async_prefix_dot_; }
  const std::vector<int32_t>& async_prefix_quote() const { return async_prefix_quote_; }
  const std::vector<int32_t>& async_prefix_inner() const { return async_prefix_inner_; }
  const std::vector<int32_t>& async_prefix_opening() const { return async_prefix_opening_; }
  // Is the store's grammar the strict Python grammar (or one derived from it)?
  static bool Wanted(const CompiledStore& store);

 private:
  std::vector<int32_t> risky_, newline_, colon_, eq_lead_, star_, colon_enders_, colon_eq_enders_,
      fstring_, fstring_core_, fstring_lead_, fstring_sq_, fstring_dq_, fstring_sq_field_,
      fstring_dq_field_, fopen_, fopen_lead_, hex_lead_;
  std::vector<uint8_t> fstring_core_kind_;
  std::vector<uint32_t> word_enders_, name_only_, quote_lead_;
  std::vector<uint32_t> hex_digits_[kMaxHexDigits + 1], hex_risky_[kMaxHexDigits + 1];
  std::vector<int32_t> ending_async_[6];
  std::vector<int32_t> async_piece_[4], async_prefix_blank_, async_prefix_dot_, async_prefix_quote_,
      async_prefix_inner_, async_prefix_opening_;
  std::vector<int32_t> na_other_, na_after_[4], na_bad_words_;
  std::vector<uint8_t> na_other_kind_, na_group_;
  std::vector<std::string> na_blanks_;
  std::vector<uint32_t> na_all_, na_simple_, na_new_, na_cont_, na_blank_, na_bad_new_, na_bad_cont_;
  using RunIndex = std::vector<std::pair<std::string, std::vector<int32_t>>>;  // sorted by run
  static const std::vector<int32_t>* Find(const RunIndex& index, std::string_view run);
  RunIndex finishing_, containing_;
};

// A name's characters above ASCII, byte by byte (CPython 3.11's tokenizer:
// a name is a run of ASCII letters, digits, `_` and bytes above ASCII, not
// starting with a digit, whose characters are `str.isidentifier()`).
struct NameChars {
  int8_t need = 0;       // continuation bytes still expected
  int8_t got = 0;        // continuation bytes read
  uint8_t lead = 0;
  bool first = false;    // the character begins its word
  bool in_number = false;  // the word is a number
  uint32_t cp = 0;
  // Reads byte `c` (>= 0x80) of a word; `word_start`: nothing of the word
  // before it; `number`: the word so far is a number.  nullptr, or why it
  // is refused (then the state is undefined).
  const char* Byte(unsigned char c, bool word_start, bool number, std::string* why);
  // nullptr if some completion of the open sequence is a character the
  // name (or number) takes; else why not.
  const char* Completable(std::string* why) const;
};

class ScopeLayer {
 public:
  ScopeLayer();
  // Reads more text; false (and the layer is dead) if CPython refuses it.
  bool Feed(std::string_view bytes);
  // Could the text end here?
  bool CanEnd() const;
  // Is a check pending that any next token could fail?  With `at_word`, the
  // checks only a token starting with a non-name byte can fail are left
  // out of the answer and flagged there instead (Filter: with no word being
  // written, those checks are the repeated keyword and the annotation, and
  // only the tokens of ScopeTokenIndex::colon_eq_enders are fed; a new
  // check at the word must extend that list); `colon_only` (with
  // at_word) stays true when every such check is the annotation of a name
  // declared global or nonlocal, which only a token holding `:` (or a
  // backslash that continues the line before one) can fail.
  bool Armed(bool* at_word = nullptr, bool* colon_only = nullptr) const;
  bool dead() const { return dead_; }
  // The identifier being written at the end of the text ("" if none).
  const std::string& partial_word() const { return word_; }
  // Clears, in `mask`, the tokens the layer refuses (only tokens set there
  // are looked at).
  void Filter(const CompiledStore& store, const ScopeTokenIndex& index, uint32_t* mask) const;
  // Is the word being written a proper prefix of `async` (`a` .. `asyn`)
  // right after an operand inside a bracket, in code, where the layer
  // refuses the whole word `async` (an asynchronous comprehension outside
  // an async function, an await in an annotation)?  Then only a completion
  // of the word into another keyword (or a name) can go on: the session
  // asks its lexer and parser (Session::WordLeadsNowhere).  Frames: the
  // layer refuses `async` after an operand only inside one, and not inside
  // parentheses (Keyword: a generator expression may be asynchronous).
  bool RefusesAsyncAhead() const;
  // The tokens set in `mask` after which RefusesAsyncAhead may hold
  // (ScopeTokenIndex::async_piece and async_prefix_*), each to be judged on
  // a copy: a superset, listed from the state without a copy.
  void AsyncPrefixCandidates(const ScopeTokenIndex& index, const uint32_t* mask,
                             std::vector<int32_t>* out) const;
  // A hash of the layer's reading state: the lexeme being read (mode,
  // word, operator, string and escape in progress, open f-strings and their
  // parts, bracket depth, column) and the last lexeme and statement kind.
  // Names are not in it (neither the scopes' name sets nor the letters of
  // the name being read or last read): they matter only to the checks on
  // names.  The completion search keys its
  // configurations with it (runtime/completion.h's SessionKey): without it
  // two texts that differ only inside an escape (`"\u` and `"\uc`) shared a
  // key, and the search pruned the longer one as met before.
  uint64_t ReadingHash() const;
  // Do the names decide what may follow (a check pending on a name: Armed,
  // a nonlocal without its binding, a name being written that its end
  // binds or deletes)?  Where they do not, two layers equal in their
  // reading state accept the same continuations whatever names they hold,
  // up to checks that only a later token can arm.
  bool NamesMatter() const;
  // A hash of the names the layer holds: the word being written, the last
  // name, the statement's targets, the open brackets' names and every
  // scope's name sets.  The completion search adds it to its key where
  // NamesMatter: without it `nonlocal ` (with a binding in an enclosing
  // function) had no completion, every name sharing one key with the first
  // one tried, which has no binding.
  uint64_t NamesHash() const;
  // Human-readable reason of the last refusal (tests).
  const std::string& why() const { return why_; }
  // Counts of refusals by check, for the corpus figures (not copied
  // anywhere but kept through Feed).
  std::string DebugString() const;

  using NameSet = std::set<std::string>;
  struct Pending {  // a nonlocal name and the scope depths able to bind it
    std::string name;
    int32_t lo = 0;                 // outermost candidate depth (function scopes only)
    int32_t resolved_at = -1;       // depth of the binding scope, -1: none yet
  };
  struct Scope {
    enum Kind { kModule, kClass, kFunction } kind = kModule;
    bool is_async = false;          // an async def
    bool has_yield = false;         // a yield of its own so far
    bool has_return_value = false;  // a `return <value>` so far
    bool coroutine_mark = false;    // an await in a variable annotation (symtable: a coroutine)
    int32_t header_col = -1;  // column of its def/class line; body lines are deeper
    NameSet seen;             // every name occurring (use, binding, parameter, annotation)
    NameSet bound;            // bound here (for nonlocal in nested functions)
    NameSet params, globals, nonlocals;
    std::vector<Pending> pending;  // nonlocals declared here or in closed nested scopes
  };

 private:
  // ---- lexemes
  enum class Lex { kName, kKeyword, kNumber, kString, kOp, kNewline };
  void Byte(unsigned char c);
  void CodeByte(unsigned char c);
  void FlushWord();
  // The lexeme before the word being written is an operand (a name, a
  // literal, a closing bracket): a name cannot come next, only a keyword.
  bool AfterOperand() const;
  // Does the operator `op` end an operand (a closing bracket, an ellipsis's
  // third `.`: `dots` counts the `.` run that `op` ends)?
  static bool ClosesOperand(std::string_view op, int dots);
  void FlushOp();
  // f-strings: the checks CPython 3.11 makes on a field's text (FCheck),
  // a byte of a field's expression (FieldCode), the end of a field.
  void FCheck(unsigned char c, size_t from = 0);
  void AfterByte(unsigned char c);
  void FieldCode(unsigned char c);
  void CloseField();
  bool InFieldTop() const;
  // Is f-string i of fstack_ inside a field (every one but the last is; the
  // last in its field's code or after its `=` / conversion)?
  bool InField(size_t i) const;
  // Is an f-string inside a field: of quote q (0: any quote), single-quoted
  // if `single`?  Only a `}` or a `:` can take it out (CloseField, the
  // format spec); a backslash read there fails, and so do a line end (while
  // a single-quoted one is open) and its own quote if single-quoted (FCheck).
  bool FStringInField(char q, bool single) const;
  // Is a single-quoted f-string open (a line end anywhere in it fails, but
  // after a backslash in the innermost one's text)?
  bool SingleQuotedFString() const;
  void LineStart(int32_t col);
  // `above_ascii`: a name with characters above ASCII, `text` its NFKC
  // (never a soft keyword).
  void Lexeme(Lex kind, const std::string& text, bool above_ascii = false);
  void Fail(std::string why);
  // A byte above ASCII of a word (NameChars); false if refused.
  bool NameByte(unsigned char c);
  // The characters above ASCII of the non-simple tokens and of the strings'
  // and comments' exits (Filter, before its other lists).
  // `others`: also the tokens that are no simple ones (false where Filter
  // feeds every allowed token that can fail to a copy anyway).
  void FilterAboveAscii(const CompiledStore& store, const ScopeTokenIndex& index, uint32_t* mask,
                        bool others) const;

  // ---- statements and scopes
  struct Entry {
    std::string name;
    bool bare = true;    // a whole target element so far (no trailer, not in a call)
    bool attr = false;   // an attribute name (only its __debug__-ness counts)
    bool kept = true;    // counts for the enclosing scope
  };
  struct Frame {
    enum Kind { kDisplay, kCall, kSubscript, kParams, kClassArgs, kLambda } kind = kDisplay;
    char close = 0;
    size_t seg_start = 0;       // entries added since it opened
    int32_t comp = 0;           // 0 none, 1 targets, 2 first iterable, 3 the rest
    bool after_sep = true;      // at an element start (after the opener or a comma)
    bool kw_candidate = false;  // calls: the last name began an argument (a keyword if `=` follows)
    bool first_for = false;     // comprehensions: in the first `for` clause
    size_t comp_target_start = 0;
    int32_t param_stage = 0;    // params: 0 name expected, 1 after the name, 2 annotation, 3 default
    bool lambda_body = false;
    bool comma = false;         // a comma at its own level
    bool not_genexp = false;    // can no longer become a generator expression
    bool await_wait = false;    // an await in it is allowed only if it becomes a genexp
    bool yield_wait = false;    // a yield in it is refused if it becomes a comprehension
    bool in_iter = false;       // comprehensions: in an iterable (after `in`)
    NameSet comp_targets;       // comprehensions: the iteration variables so far
    NameSet walrus_targets;     // assignment expressions in it (or in brackets it holds)
    NameSet names;              // parameters / keyword names of this list
  };
  void Name(const std::string& name);
  void Keyword(const std::string& kw);
  void Op(const std::string& op);
  void EndStatement();
  void CommitSeg(size_t upto);
  void AddEntry(Entry e);
  bool InDiscard() const;
  void BindName(const std::string& name, bool import = false);
  void Occurs(const std::string& name);
  void Declare(const std::string& name);
  // The names the global/nonlocal statement being read refuses (false: all
  // but `__class__`, no list).
  bool DeclForbidden(NameSet* out) const;
  bool PendingNonlocal() const;  // a nonlocal without binding yet
  // Is a function scope around the current one (below the module)?  Without
  // one a nonlocal can only name `__class__` (in a method).
  bool EnclosingFunction() const;
  void CloseScopesTo(int32_t col);
  void PopScope();
  Scope& Top();
  Scope& At(size_t i);
  bool NonlocalAllowedHere() const;
  void CheckDebugTargets(size_t from);
  void ResolveBinding(const std::string& name);
  bool LambdaTerminator(const std::string& lexeme) const;
  // await / async comprehensions: may an await stand here, looking outward
  // from frame `from` (exclusive: frames below it); false: refused now.
  // Marks a `(` that may still become a generator expression (await_wait)
  // and returns true.
  bool AwaitOutward(size_t from, bool mark);
  void CheckAwait(size_t from, const char* what);
  void CheckYield();
  // An assignment expression to `name` inside brackets: CPython's
  // comprehension checks (symtable.c, symtable_extend_namedexpr_scope).
  void CheckWalrus(const std::string& name);
  bool ForbiddenCompTarget(const std::string& name) const;
  bool WalrusInClassComprehension(size_t from) const;
  bool InComprehension() const;
  bool LocalAnnotation() const;  // a variable annotation in a function body  // a comprehension's clauses around, up to a lambda body
  void ReturnValue();
  bool ReturnArmed() const;
  void EndLambdas(const std::string& lexeme);

  // ---- match statements
  struct MatchBlock {
    int32_t match_col = 0;    // column of the match line
    int32_t case_col = -1;    // column of its case lines (-1: none read yet)
    std::string unreachable;  // an irrefutable case was read: why a further case is refused
  };
  // Is the lexeme after a statement's first word `match` (with match_gap_)
  // the start of a subject (the grammar's MATCH look-ahead)?
  bool MatchSubject(Lex kind, const std::string& text) const;
  bool CaseLine() const;  // the logical line is at the open match block's case column
  void PatternLexeme(Lex kind, const std::string& text);
  void DrainPattern();
  bool Unreachable() const;  // a match block where no case may follow
  std::vector<MatchBlock> matches_;
  bool match_word_ = false;   // the statement so far is the name `match`: its role waits
  int8_t match_gap_ = 0;      // bytes after it: 0 none, 1 blanks only, 2 something else
  bool in_pattern_ = false;   // reading a case pattern (up to its guard or `:`)
  std::optional<PatternReader> pattern_;  // while in_pattern_ (none: copies stay cheap)

  std::vector<std::shared_ptr<Scope>> scopes_;
  std::vector<Frame> frames_;
  std::vector<Entry> seg_;
  size_t assign_start_ = 0;     // first entry of the current assignment target list
  // The statement being read.
  enum class Stmt { kNone, kExpr, kGlobal, kNonlocal, kImport, kFrom, kFromNames, kDel, kFor,
                    kWith, kExcept, kDef, kClass, kCompound, kDecorator };
  Stmt stmt_ = Stmt::kNone;
  int32_t stmt_col_ = 0;        // column of the logical line
  int32_t stmt_lexemes_ = 0;    // lexemes of the statement so far
  bool in_header_ = false;      // a compound header before its ':'
  bool target_ctx_ = false;     // for/with-as/except-as/del: reading a target
  bool after_as_ = false;
  bool import_first_ = false;   // import: the next name is a binding (first dotted component)
  bool from_future_ = false;    // from-import of __future__
  bool must_trail_ = false;
  bool seg_debug_ = false;      // seg_ holds a __debug__ entry     // a whole __debug__ target element: only a trailer may follow
  bool last_entry_live_ = false;  // the previous lexeme is the last entry's name
  int64_t last_closed_start_ = -1;  // entries of the last closed bracket start here
  NameSet def_params_;          // parameters of the def being read
  std::string import_pending_;  // import: the name that binds unless `as` follows
  std::string def_name_;
  bool def_pending_ = false;    // def/class name read, its scope not yet open
  Scope::Kind def_kind_ = Scope::kFunction;
  bool future_annotations_ = false;
  bool next_async_ = false;     // `async` read at a statement start
  bool def_async_ = false;      // the def being read is async
  bool return_pending_ = false; // `return` read, its value not yet begun
  int8_t yield_owner_async_ = 0;  // the last yield's function is async (1) or not (0)
  bool in_annotation_ = false;  // an annotation (not a use under future annotations)
  int32_t ann_depth_ = -1;
  // Lexeme context.
  std::string prev_;            // previous lexeme text
  Lex prev_kind_ = Lex::kNewline;
  // Consecutive `.` lexemes up to the last one (the layer reads `...` as
  // three): an ellipsis is an operand (AfterOperand), an attribute's `.` not.
  uint8_t dots_ = 0;
  std::string last_name_;       // the last lexeme, if a name not yet placed
  bool last_name_live_ = false;
  // Tokenizer.
  enum class Mode { kIndent, kCode, kComment, kBackslash, kStrOpen1, kStrOpen2, kString,
                    kStrEsc, kFBrace, kFClose, kFieldAfter, kFieldSpec,
                    kEscN, kEscName, kEscHex };
  Mode mode_ = Mode::kIndent;
  bool comment_in_indent_ = false;
  int32_t col_ = 0;
  std::string word_;
  NameChars nchars_;            // the UTF-8 sequence being read in word_
  std::string op_;
  char quote_ = 0;              // the string being read (the innermost)
  bool triple_ = false, raw_ = false, fstr_ = false;
  bool bytes_ = false;  // a bytes literal: \N is no escape there
  int32_t quote_run_ = 0;
  std::string uname_;           // the name of a \N{...} escape being read
  bool spec_esc_ = false;       // the escape being read is in a format spec
  // A \x, \u or \U escape being read: its letter, the digits still wanted
  // and the value so far.
  char hex_kind_ = 0;
  int8_t hex_left_ = 0;
  uint32_t hex_value_ = 0;
  bool EscHexByte(unsigned char c);  // false: c is no digit it can take
  void SpecByte(unsigned char c);    // a byte of a format spec's text
  // The open f-strings, outermost first.  A field's expression is read as
  // code (kCode, its brackets counted from base_depth); a nested string
  // opens only there, so every f-string but the last is inside a field.
  struct FString {
    enum Part : int8_t { kLiteral, kField, kAfter, kSpec };
    char quote = 0;
    bool triple = false, raw = false;
    Part part = kLiteral;
    int8_t level = 0;           // 1: a field nested in a format spec
    char pending = 0;           // '=' or '!' at the field's top, not yet decided; 'c': a conversion letter
    int32_t base_depth = 0;
    int32_t quote_run = 0;      // this string's quote, repeated, inside its field
  };
  std::vector<FString> fstack_;
  int32_t depth_ = 0;           // open brackets
  bool dead_ = false;
  std::string why_;
};

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_SCOPE_LAYER_H_
