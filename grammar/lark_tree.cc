// Tree nodes and patterns of the .lark reader (lark_tree.h): construction,
// Lark-style structural equality (as a key string) and Pattern.to_regexp().
// Tested by lark_reader_test.cc.
#include "grammar/lark_tree.h"

#include <utility>

namespace cfgmask::lark {
namespace {

// Python's re.escape() escapes exactly these characters (3.7 and later).
bool IsReSpecial(char c) {
  switch (c) {
    case '(': case ')': case '[': case ']': case '{': case '}': case '?':
    case '*': case '+': case '-': case '|': case '^': case '$': case '\\':
    case '.': case '&': case '~': case '#': case ' ': case '\t': case '\n':
    case '\r': case '\v': case '\f':
      return true;
    default:
      return false;
  }
}

void AppendSized(std::string* out, const std::string& s) {
  out->append(std::to_string(s.size()));
  out->push_back(':');
  out->append(s);
}

}  // namespace

std::string WhereString(const SourcePos& pos) {
  if (pos.file == nullptr) return "";
  std::string where = *pos.file;
  if (pos.line > 0) {
    where += ':';
    where += std::to_string(pos.line);
    where += ':';
    where += std::to_string(pos.column);
  }
  return where;
}

Status ErrorAt(ErrorCode code, const SourcePos& pos, const std::string& message) {
  std::string where = pos.file ? *pos.file : std::string("<grammar>");
  if (pos.line > 0) where += ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
  // One line: grammar text quoted in a message (a pattern may span lines)
  // has its control characters escaped.
  std::string text = where + ": ";
  for (char c : message) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') {
      text += "\\n";
    } else if (c == '\r') {
      text += "\\r";
    } else if (u < 0x20 && c != '\t') {
      static const char kHex[] = "0123456789abcdef";
      text += "\\x";
      text += kHex[u >> 4];
      text += kHex[u & 15];
    } else {
      text += c;
    }
  }
  return Status(code, text);
}

std::string Pattern::ToRegexp() const {
  std::string text;
  if (is_regex) {
    text = value;
  } else {
    text.reserve(value.size() * 2);
    for (char c : value) {
      if (IsReSpecial(c)) text.push_back('\\');
      text.push_back(c);
    }
  }
  for (char f : flags) text = std::string("(?") + f + ":" + text + ")";
  return text;
}

std::string Pattern::Key() const {
  std::string key = is_regex ? "re:" : "str:";
  AppendSized(&key, flags);
  AppendSized(&key, value);
  return key;
}

NodePtr MakeTree(std::string data, std::vector<NodePtr> children, SourcePos pos) {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kTree;
  node->data = std::move(data);
  node->children = std::move(children);
  node->pos = pos;
  return node;
}

NodePtr MakeTerminal(std::string name, SourcePos pos) {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kTerminal;
  node->text = std::move(name);
  node->pos = pos;
  return node;
}

NodePtr MakeNonTerminal(std::string name, SourcePos pos) {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kNonTerminal;
  node->text = std::move(name);
  node->pos = pos;
  return node;
}

NodePtr MakeToken(std::string type, std::string text, SourcePos pos) {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kToken;
  node->data = std::move(type);
  node->text = std::move(text);
  node->pos = pos;
  return node;
}

NodePtr MakePattern(Pattern pattern, SourcePos pos) {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kPattern;
  node->pattern = std::move(pattern);
  node->pos = pos;
  return node;
}

NodePtr MakeEmpty() {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kEmpty;
  return node;
}

std::string NodeKey(const Node& node) {
  std::string key;
  switch (node.kind) {
    case NodeKind::kTree:
      key = "T";
      AppendSized(&key, node.data);
      key.push_back('(');
      for (const auto& child : node.children) {
        key.append(NodeKey(*child));
        key.push_back(',');
      }
      key.push_back(')');
      break;
    case NodeKind::kTerminal:
      key = "t";
      AppendSized(&key, node.text);
      break;
    case NodeKind::kNonTerminal:
      key = "n";
      AppendSized(&key, node.text);
      break;
    case NodeKind::kToken:
      key = "k";
      AppendSized(&key, node.text);
      break;
    case NodeKind::kPattern:
      key = "p" + node.pattern.Key();
      break;
    case NodeKind::kEmpty:
      key = "E";
      break;
  }
  return key;
}

NodePtr DeepCopy(const NodePtr& node) {
  if (!node) return node;
  auto copy = std::make_shared<Node>(*node);
  for (auto& child : copy->children) child = DeepCopy(child);
  return copy;
}

bool IsTree(const NodePtr& node, const char* data) {
  return node && node->kind == NodeKind::kTree && node->data == data;
}

}  // namespace cfgmask::lark
