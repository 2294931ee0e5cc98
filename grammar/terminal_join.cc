// Literal decoding and terminal joining with Lark's semantics
// (terminal_join.h).  Lark decodes a literal in two steps -- eval_escaping()
// rewrites the backslashes, then Python's literal_eval() reads the result as
// a string literal -- and both steps are reproduced here, so that odd
// escapes (`\d` in a string, `\\` before a quote) come out byte-identical.
// Tested by grammar_test.cc and lark_reader_test.cc.
#include "grammar/terminal_join.h"

#include <algorithm>
#include <vector>

#include "grammar/base/regex_ast.h"
#include "grammar/base/utf8.h"
#include "grammar/ebnf_to_bnf.h"

namespace cfgmask::lark {
namespace {


int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's reading of the body of u'''...''' (the part literal_eval does).
Status EvalPythonString(const std::string& w, const SourcePos& pos, std::string* out) {
  out->clear();
  const size_t n = w.size();
  for (size_t i = 0; i < n; ++i) {
    char c = w[i];
    if (c == '\r') {
      // The tokenizer turns \r\n and lone \r into \n.
      out->push_back('\n');
      if (i + 1 < n && w[i + 1] == '\n') ++i;
      continue;
    }
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (i + 1 >= n) {
      return ErrorAt(ErrorCode::kGrammarSyntax, pos, "literal ends with a lone backslash");
    }
    char e = w[++i];
    switch (e) {
      case '\n': break;
      case '\\': out->push_back('\\'); break;
      case '\'': out->push_back('\''); break;
      case '"': out->push_back('"'); break;
      case 'a': out->push_back('\a'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'v': out->push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int k = 0; k < digits; ++k) {
          int h = i + 1 < n ? HexValue(w[i + 1]) : -1;
          if (h < 0) {
            return ErrorAt(ErrorCode::kGrammarSyntax, pos,
                           std::string("truncated \\") + e + " escape in literal");
          }
          cp = cp * 16 + static_cast<uint32_t>(h);
          ++i;
        }
        if (cp > 0x10FFFF) {
          return ErrorAt(ErrorCode::kGrammarSyntax, pos, "illegal Unicode character in literal");
        }
        AppendUtf8(cp, out);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < n && w[i + 1] >= '0' && w[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<uint32_t>(w[++i] - '0');
          }
          AppendUtf8(cp, out);
        } else {
          out->push_back('\\');
          out->push_back(e);
        }
    }
  }
  return Status::Ok();
}

std::string ReplaceAll(const std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  size_t i = 0;
  while (true) {
    size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out.append(s, i, j - i);
    out.append(to);
    i = j + from.size();
  }
  out.append(s, i, std::string::npos);
  return out;
}

std::string SortedFlags(const std::string& flags) {
  std::string f = flags;
  std::sort(f.begin(), f.end());
  f.erase(std::unique(f.begin(), f.end()), f.end());
  return f;
}

Pattern Joined(std::string regexp) {
  Pattern p;
  p.is_regex = true;
  p.value = std::move(regexp);
  return p;
}

Status Transform(const NodePtr& node, Pattern* out);

Status ExprToPattern(const NodePtr& inner_node, const std::string& op_in,
                     const std::vector<NodePtr>& numbers, const SourcePos& pos, Pattern* out) {
  Pattern inner;
  CFGMASK_RETURN_IF_ERROR(Transform(inner_node, &inner));
  std::string op = op_in;
  if (op == "~") {
    std::vector<int64_t> n;
    for (const auto& t : numbers) {
      int64_t v;
      CFGMASK_RETURN_IF_ERROR(RepeatCount(t, &v));
      n.push_back(v);
    }
    if (n.size() == 1) {
      op = "{" + std::to_string(n[0]) + "}";
    } else {
      if (n[1] < n[0]) {
        return ErrorAt(ErrorCode::kGrammarSemantics, pos,
                       "bad range for repetition (" + std::to_string(n[0]) + ".." +
                           std::to_string(n[1]) + " isn't allowed)");
      }
      op = "{" + std::to_string(n[0]) + "," + std::to_string(n[1]) + "}";
    }
  }
  Pattern p;
  p.is_regex = true;
  p.value = "(?:" + inner.ToRegexp() + ")" + op;
  p.flags = inner.flags;
  *out = std::move(p);
  return Status::Ok();
}

Status Transform(const NodePtr& node, Pattern* out) {
  if (node->kind == NodeKind::kPattern) {
    *out = node->pattern;
    return Status::Ok();
  }
  if (node->kind != NodeKind::kTree) {
    return ErrorAt(ErrorCode::kGrammarSemantics, node->pos,
                   "unexpected symbol '" + node->text + "' inside a terminal");
  }
  const std::string& data = node->data;
  if (data == "literal") return LiteralToPattern(*node->children[0], out);
  if (data == "range") return RangeToPattern(*node, out);
  if (data == "value") return Transform(node->children[0], out);
  if (data == "alias") {
    return ErrorAt(ErrorCode::kGrammarSemantics, node->pos,
                   "aliasing not allowed in terminals (-> used in the wrong place)");
  }
  if (data == "template_usage") {
    return ErrorAt(ErrorCode::kGrammarSemantics, node->pos,
                   "templates cannot be used inside terminals");
  }
  if (data == "maybe") return ExprToPattern(node->children[0], "?", {}, node->pos, out);
  if (data == "expr") {
    std::vector<NodePtr> numbers(node->children.begin() + 2, node->children.end());
    return ExprToPattern(node->children[0], node->children[1]->text, numbers, node->pos, out);
  }
  std::vector<Pattern> items(node->children.size());
  for (size_t i = 0; i < node->children.size(); ++i) {
    CFGMASK_RETURN_IF_ERROR(Transform(node->children[i], &items[i]));
  }
  if (data == "expansion") {
    if (items.empty()) {
      *out = Pattern();
      return Status::Ok();
    }
    if (items.size() == 1) {
      *out = std::move(items[0]);
      return Status::Ok();
    }
    std::string text;
    for (const auto& p : items) text += p.ToRegexp();
    *out = Joined(std::move(text));
    return Status::Ok();
  }
  if (data == "expansions") {
    if (items.size() == 1) {
      *out = std::move(items[0]);
      return Status::Ok();
    }
    struct Keyed {
      uint64_t max_width;
      uint64_t min_width;
      size_t length;
      Pattern pattern;
    };
    std::vector<Keyed> keyed;
    for (auto& p : items) {
      Keyed k;
      PatternWidth(p, &k.min_width, &k.max_width);
      k.length = CodePointLength(p.value);
      k.pattern = std::move(p);
      keyed.push_back(std::move(k));
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
      if (a.max_width != b.max_width) return a.max_width > b.max_width;
      if (a.min_width != b.min_width) return a.min_width > b.min_width;
      return a.length > b.length;
    });
    std::string text = "(?:";
    for (size_t i = 0; i < keyed.size(); ++i) {
      if (i) text += "|";
      text += keyed[i].pattern.ToRegexp();
    }
    text += ")";
    *out = Joined(std::move(text));
    return Status::Ok();
  }
  return ErrorAt(ErrorCode::kGrammarSemantics, node->pos, "unexpected '" + data + "' in terminal");
}

}  // namespace

size_t CodePointLength(const std::string& text) {
  size_t n = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

Status EvalEscaping(const std::string& s, const SourcePos& pos, std::string* out) {
  std::string w;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    w.push_back(c);
    if (c != '\\') continue;
    if (i + 1 >= s.size()) {
      return ErrorAt(ErrorCode::kGrammarSyntax, pos, "literal ended unexpectedly (bad escaping)");
    }
    char c2 = s[++i];
    if (c2 == '\\') {
      w += "\\\\";
    } else if (std::string("Uuxnftr").find(c2) == std::string::npos) {
      w.push_back('\\');
    }
    w.push_back(c2);
  }
  w = ReplaceAll(ReplaceAll(w, "\\\"", "\""), "'", "\\'");
  return EvalPythonString(w, pos, out);
}

// Lark evaluates a literal's text as a Python string (literal_eval), which
// refuses a raw NUL byte ("source code string cannot contain null bytes"):
// so does this reader, for strings, regexps and range bounds alike, at the
// NUL's own position, quoting the whole literal (closing quote and flags
// kept, the NUL written \x00).  An escaped \x00 is a NUL character.
static Status RefuseNul(const Node& token) {
  const std::string& v = token.text;
  const size_t at = v.find('\0');
  if (at == std::string::npos) return Status::Ok();
  SourcePos pos = token.pos;
  for (size_t i = 0; i < at; ++i) {
    if (v[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else if ((static_cast<unsigned char>(v[i]) & 0xC0) != 0x80) {
      ++pos.column;
    }
  }
  std::string quoted;
  for (char c : v) quoted += c == '\0' ? std::string("\\x00") : std::string(1, c);
  return ErrorAt(ErrorCode::kGrammarSyntax, pos,
                 std::string("NUL byte in ") +
                     (token.data == "STRING" ? "string literal " : "regular expression ") +
                     quoted + " (Lark refuses it; write \\x00 for the character)");
}

Status LiteralToPattern(const Node& token, Pattern* out) {
  const std::string& v = token.text;
  const bool is_string = token.data == "STRING";
  size_t a = v.rfind('/');
  size_t b = v.rfind('"');
  size_t last = std::max(a == std::string::npos ? 0 : a, b == std::string::npos ? 0 : b);
  size_t flag_start = last + 1;
  std::string flags = v.substr(flag_start);
  if (is_string && v.find('\n') != std::string::npos) {
    return ErrorAt(ErrorCode::kGrammarSyntax, token.pos,
                   "newlines are not allowed in string literals");
  }
  if (!is_string && v.find('\n') != std::string::npos && flags.find('x') == std::string::npos) {
    return ErrorAt(ErrorCode::kGrammarSyntax, token.pos,
                   "newlines in a regular expression need the `x` (verbose) flag");
  }
  std::string body = v.substr(1, flag_start - 2);
  std::string s;
  CFGMASK_RETURN_IF_ERROR(RefuseNul(token));  // after the newline checks, as Lark
  CFGMASK_RETURN_IF_ERROR(EvalEscaping(body, token.pos, &s));
  if (s.empty()) {
    return ErrorAt(ErrorCode::kGrammarSemantics, token.pos,
                   "empty terminals are not allowed (" + v + ")");
  }
  Pattern p;
  p.is_regex = !is_string;
  p.flags = SortedFlags(flags);
  p.value = is_string ? ReplaceAll(s, "\\\\", "\\") : s;
  *out = std::move(p);
  return Status::Ok();
}

Status RangeToPattern(const Node& range, Pattern* out) {
  const std::string& a = range.children[0]->text;
  const std::string& b = range.children[1]->text;
  CFGMASK_RETURN_IF_ERROR(RefuseNul(*range.children[0]));
  CFGMASK_RETURN_IF_ERROR(RefuseNul(*range.children[1]));
  std::string start = a.substr(1, a.size() - 2);
  std::string end = b.substr(1, b.size() - 2);
  std::string es, ee;
  CFGMASK_RETURN_IF_ERROR(EvalEscaping(start, range.children[0]->pos, &es));
  CFGMASK_RETURN_IF_ERROR(EvalEscaping(end, range.children[1]->pos, &ee));
  if (CodePointLength(es) != 1 || CodePointLength(ee) != 1) {
    return ErrorAt(ErrorCode::kGrammarSemantics, range.pos,
                   "range bounds must be single characters: " + a + ".." + b);
  }
  Pattern p;
  p.is_regex = true;
  p.value = "[" + start + "-" + end + "]";
  *out = std::move(p);
  return Status::Ok();
}

Status TerminalTreeToPattern(const NodePtr& tree, Pattern* out) { return Transform(tree, out); }

bool RegexpWidth(const std::string& regexp, RegexWidth* width) {
  // re.sub(r'\\p{[A-Za-z_]+}', 'A', regexp), scanning left to right.
  std::string text;
  for (size_t i = 0; i < regexp.size();) {
    if (regexp.compare(i, 3, "\\p{") == 0) {
      size_t j = i + 3;
      while (j < regexp.size() &&
             (((regexp[j] | 0x20) >= 'a' && (regexp[j] | 0x20) <= 'z') || regexp[j] == '_')) {
        ++j;
      }
      if (j > i + 3 && j < regexp.size() && regexp[j] == '}') {
        text += 'A';
        i = j + 1;
        continue;
      }
    }
    text += regexp[i++];
  }
  RegexAst ast;
  ParseRegex(text, 0, "", &ast);  // refused but valid syntax still has a root
  if (ast.root < 0) {
    *width = {0, kRegexMaxWidth};
    return false;
  }
  *width = RegexNodeWidth(ast, ast.root);
  return true;
}

void PatternWidth(const Pattern& pattern, uint64_t* min_width, uint64_t* max_width) {
  if (!pattern.is_regex) {
    *min_width = *max_width = CodePointLength(pattern.value);
    return;
  }
  RegexWidth w;
  RegexpWidth(pattern.ToRegexp(), &w);
  auto narrow = [](unsigned __int128 v) {
    return v >= kRegexMaxWidth ? kMaxPatternWidth : static_cast<uint64_t>(v);
  };
  *min_width = narrow(w.lo);
  *max_width = narrow(w.hi);
}

}  // namespace cfgmask::lark
