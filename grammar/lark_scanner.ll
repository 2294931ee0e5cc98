/* Reentrant Flex scanner of Lark's meta-grammar: the TERMINALS table of
 * lark/load_grammar.py.  Lark lexes a grammar with a "basic" lexer that tries
 * its terminals in a fixed order (first match wins, with lazy quantifiers in
 * STRING and REGEXP); Flex takes the longest match.  The rules below are
 * written so that both agree: lookaheads become trailing context, and the
 * lazy string/regexp patterns become the deterministic "escape consumes the
 * next character" form, which ends at the same quote.  Where Lark's lazy
 * pattern would backtrack (a literal with no closing quote on its line), the
 * action replays Lark's backtracking order on the text itself.
 * Also defines ParseLarkText (lark_tree.h).  Tested by lark_reader_test.cc.
 */

%{
#include <string>
#include <vector>

#include "lark_parser.tab.hh"

namespace cfgmask::lark {

// The scanner's per-file state (yyextra).
struct ScanExtra {
  ParseState* state = nullptr;
  location loc;
};

}  // namespace cfgmask::lark

namespace {

using cfgmask::lark::ScanExtra;
using Parser = cfgmask::lark::LarkParser;

// Moves `loc` over the matched text, counting columns in code points as
// Lark does (it reports positions in Python characters).
void Walk(ScanExtra* extra, const char* text, int length) {
  for (int i = 0; i < length; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      extra->loc.lines(1);
    } else if ((c & 0xC0) != 0x80) {
      extra->loc.columns(1);
    }
  }
}

void Advance(ScanExtra* extra, const char* text, int length) {
  extra->loc.step();
  Walk(extra, text, length);
}

// After yyless(): the token is only the first `length` bytes of `text`.
void Rewind(ScanExtra* extra, const char* text, int length) {
  extra->loc.end = extra->loc.begin;
  Walk(extra, text, length);
}

// Lark's STRING and REGEXP end with greedy flag letters after the quote.
int ExtendFlags(const std::string& text, int length, const char* flags) {
  while (length < static_cast<int>(text.size()) &&
         std::string(flags).find(text[length]) != std::string::npos) {
    ++length;
  }
  return length;
}

// Replays the lazy pattern `Q(\\Q|\\\\|[^Q])*?Q` (with `\n` also excluded
// from the last class for strings) in Python's backtracking order on `text`,
// which starts with the opening quote.  Returns the length of the first
// match Python would find, or 0 when there is none.
int LazyQuotedMatch(const std::string& text, char quote, bool allow_newline) {
  const int n = static_cast<int>(text.size());
  std::vector<char> failed(n + 1, 0);
  // Explicit stack of (position, next alternative to try).
  std::vector<std::pair<int, int>> stack;
  stack.push_back({1, 0});
  while (!stack.empty()) {
    auto& [pos, alt] = stack.back();
    if (alt == 0) {
      if (failed[pos]) {
        stack.pop_back();
        continue;
      }
      if (pos < n && text[pos] == quote) return pos + 1;
      alt = 1;
    }
    if (alt == 1) {
      alt = 2;
      if (pos + 1 < n && text[pos] == '\\' && text[pos + 1] == quote) {
        stack.push_back({pos + 2, 0});
        continue;
      }
    }
    if (alt == 2) {
      alt = 3;
      if (pos + 1 < n && text[pos] == '\\' && text[pos + 1] == '\\') {
        stack.push_back({pos + 2, 0});
        continue;
      }
    }
    if (alt == 3) {
      alt = 4;
      if (pos < n && text[pos] != quote && (allow_newline || text[pos] != '\n')) {
        stack.push_back({pos + 1, 0});
        continue;
      }
    }
    failed[pos] = 1;
    stack.pop_back();
  }
  return 0;
}

}  // namespace

#define YY_DECL Parser::symbol_type cfgmask_lark_yylex(void* yyscanner)
#define YY_USER_ACTION Advance(yyextra, yytext, static_cast<int>(yyleng));
#define LOC (yyextra->loc)

%}

%option reentrant noyywrap nounput noinput batch never-interactive 8bit nodefault
%option prefix="cfgmask_lark_yy"
%option extra-type="cfgmask::lark::ScanExtra*"

SPACE       [ \t\n\r\f\v\x1c-\x1f]
NAME_TAIL   [_a-z0-9]*
STR_ITEM    ([^"\\\n]|\\[^\n])
RE_ITEM     ([^/\\]|\\(.|\n))

%%

[ \t]+                              { /* WS, ignored */ }
\\[ ]*\n                            { /* BACKSLASH line continuation, ignored */ }
{SPACE}*("//"|"#")[^\n]*            { /* COMMENT, ignored */ }
(\r?\n)+{SPACE}*"|"                 { return Parser::make_NL_OR(LOC); }
(\r?\n)+{SPACE}*                    { return Parser::make_NL(LOC); }

"%ignore"                           { return Parser::make_IGNORE(LOC); }
"%override"                         { return Parser::make_OVERRIDE(LOC); }
"%declare"                          { return Parser::make_DECLARE(LOC); }
"%extend"                           { return Parser::make_EXTEND(LOC); }
"%import"                           { return Parser::make_IMPORT(LOC); }

("!"|"!?"|"?"|"?!")/[_a-z]          { return Parser::make_RULE_MODIFIERS(yytext, LOC); }
[+*?]                               { return Parser::make_OP(yytext, LOC); }
"~"                                 { return Parser::make_TILDE(yytext, LOC); }
"->"                                { return Parser::make_TO(LOC); }
[+-]?[0-9]+                         { return Parser::make_NUMBER(yytext, LOC); }

_?[a-z]{NAME_TAIL}                  { return Parser::make_RULE(yytext, LOC); }
_?[A-Z][_A-Z0-9]*                   { return Parser::make_TERMINAL(yytext, LOC); }

\"{STR_ITEM}*\"i?                   { return Parser::make_STRING(std::string(yytext, yyleng), LOC); }
\"{STR_ITEM}*                       {
    std::string text(yytext, yyleng);
    int length = LazyQuotedMatch(text, '"', false);
    if (length == 0) {
      yyextra->state->error_code = cfgmask::ErrorCode::kGrammarSyntax;
      yyextra->state->error = *yyextra->state->file + ":" + std::to_string(LOC.begin.line) +
                              ":" + std::to_string(LOC.begin.column) +
                              ": unterminated string literal";
      return Parser::make_YYerror(LOC);
    }
    if (length < static_cast<int>(text.size()) && text[length] == 'i') ++length;
    yyless(length);
    Rewind(yyextra, yytext, length);
    return Parser::make_STRING(text.substr(0, length), LOC);
  }
\/{RE_ITEM}{RE_ITEM}*\/[imslux]*    { return Parser::make_REGEXP(std::string(yytext, yyleng), LOC); }
\/{RE_ITEM}{RE_ITEM}*               {
    std::string text(yytext, yyleng);
    int length = LazyQuotedMatch(text, '/', true);
    if (length <= 2) {
      yyextra->state->error_code = cfgmask::ErrorCode::kGrammarSyntax;
      yyextra->state->error = *yyextra->state->file + ":" + std::to_string(LOC.begin.line) +
                              ":" + std::to_string(LOC.begin.column) +
                              ": unterminated regular expression (missing closing '/')";
      return Parser::make_YYerror(LOC);
    }
    length = ExtendFlags(text, length, "imslux");
    yyless(length);
    Rewind(yyextra, yytext, length);
    return Parser::make_REGEXP(text.substr(0, length), LOC);
  }

"("                                 { return Parser::make_LPAR(LOC); }
")"                                 { return Parser::make_RPAR(LOC); }
"["                                 { return Parser::make_LBRA(LOC); }
"]"                                 { return Parser::make_RBRA(LOC); }
"{"                                 { return Parser::make_LBRACE(LOC); }
"}"                                 { return Parser::make_RBRACE(LOC); }
":"                                 { return Parser::make_COLON(LOC); }
","                                 { return Parser::make_COMMA(LOC); }
"|"                                 { return Parser::make_OR(LOC); }
".."                                { return Parser::make_DOTDOT(LOC); }
"."                                 { return Parser::make_DOT(LOC); }

.|\n                                {
    yyextra->state->error_code = cfgmask::ErrorCode::kGrammarSyntax;
    std::string shown = (yytext[0] == '\n') ? std::string("\\n") : std::string(yytext, yyleng);
    yyextra->state->error = *yyextra->state->file + ":" + std::to_string(LOC.begin.line) + ":" +
                            std::to_string(LOC.begin.column) + ": unexpected input '" + shown +
                            "'";
    return Parser::make_YYerror(LOC);
  }

<<EOF>>                             { return Parser::make_END(LOC); }

%%

namespace cfgmask::lark {

Status ParseLarkText(const std::string& text, const std::string& file,
                     std::vector<Statement>* out) {
  ParseState state;
  state.file = &file;
  state.statements = out;
  ScanExtra extra;
  extra.state = &state;
  extra.loc.initialize(&file, 1, 1);
  yyscan_t scanner = nullptr;
  cfgmask_lark_yylex_init_extra(&extra, &scanner);
  // Lark parses `text + "\n"`, so a last line without a newline still ends.
  std::string padded = text + "\n";
  YY_BUFFER_STATE buffer =
      cfgmask_lark_yy_scan_bytes(padded.data(), static_cast<int>(padded.size()), scanner);
  LarkParser parser(scanner, &state);
  int rc = parser.parse();
  cfgmask_lark_yy_delete_buffer(buffer, scanner);
  cfgmask_lark_yylex_destroy(scanner);
  if (!state.error.empty()) {
    return Status(state.error_code == ErrorCode::kOk ? ErrorCode::kGrammarSyntax
                                                     : state.error_code,
                  state.error);
  }
  if (rc != 0) {
    return Status(ErrorCode::kGrammarSyntax, file + ": syntax error");
  }
  return Status::Ok();
}

}  // namespace cfgmask::lark
