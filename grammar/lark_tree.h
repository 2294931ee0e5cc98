// The parse tree of a .lark file, shaped exactly like the tree that Lark's
// own meta-grammar parser builds (lark/load_grammar.py, after PrepareGrammar):
// `expansions`, `expansion`, `alias`, `expr`, `maybe`, `value`, `literal`,
// `range`, `template_usage` and later `pattern` nodes, with Terminal /
// NonTerminal symbols and raw tokens as leaves.  Keeping Lark's shapes is what
// makes the later phases exact: EBNF helper rules are cached by tree equality,
// duplicate alternatives are removed by tree equality, and both must agree
// with Lark's choices for the output rule list to be identical.
//
// The scanner (lark_scanner.ll) and the parser (lark_parser.yy) produce a
// list of Statements; lark_reader.cc turns them into a Grammar.
// Tested by lark_reader_test.cc.
#ifndef CFGMASK_GRAMMAR_LARK_TREE_H_
#define CFGMASK_GRAMMAR_LARK_TREE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grammar/base/status.h"

namespace cfgmask::lark {

struct SourcePos {
  int32_t line = 0;                  // 1-based; 0 when unknown
  int32_t column = 0;                // 1-based
  const std::string* file = nullptr; // owned by the reader; outlives the tree
};

// "FILE:LINE:COL: message" (or "FILE: message" when the position is unknown).
Status ErrorAt(ErrorCode code, const SourcePos& pos, const std::string& message);
// "FILE:LINE:COL" (or "FILE"); empty when there is no file.
std::string WhereString(const SourcePos& pos);

// Lark's PatternStr / PatternRE.  `flags` is a sorted set of letters.
struct Pattern {
  bool is_regex = false;  // PatternRE when true, PatternStr otherwise
  std::string value;      // UTF-8
  std::string flags;

  // Pattern.to_regexp(), with the flag groups in sorted order.
  std::string ToRegexp() const;
  // Identity as Lark's Pattern.__eq__ sees it (type, value, flags).
  std::string Key() const;
};

enum class NodeKind : uint8_t {
  kTree,         // Tree(data, children)
  kTerminal,     // grammar.Terminal
  kNonTerminal,  // grammar.NonTerminal
  kToken,        // a lexer Token kept in the tree (OP, TILDE, NUMBER, STRING, REGEXP)
  kPattern,      // a Pattern object (after PrepareLiterals)
  kEmpty,        // load_grammar._EMPTY, the placeholder left by [x]
};

struct Node;
using NodePtr = std::shared_ptr<Node>;

struct Node {
  NodeKind kind = NodeKind::kTree;
  std::string data;         // tree: meta-grammar rule name; token: token type
  std::string text;         // symbol name or token text
  Pattern pattern;          // kPattern only
  bool filter_out = false;  // kTerminal only (does not take part in equality)
  std::vector<NodePtr> children;
  SourcePos pos;            // where the node starts (not part of equality)
};

NodePtr MakeTree(std::string data, std::vector<NodePtr> children, SourcePos pos = {});
NodePtr MakeTerminal(std::string name, SourcePos pos = {});
NodePtr MakeNonTerminal(std::string name, SourcePos pos = {});
NodePtr MakeToken(std::string type, std::string text, SourcePos pos = {});
NodePtr MakePattern(Pattern pattern, SourcePos pos = {});
NodePtr MakeEmpty();

// A string that is equal for two nodes exactly when Lark's __eq__ says they
// are equal (trees by data and children, symbols by kind and name, tokens by
// text, patterns by type/value/flags).
std::string NodeKey(const Node& node);
NodePtr DeepCopy(const NodePtr& node);
bool IsTree(const NodePtr& node, const char* data);

// One top-level statement of a .lark file.
struct Statement {
  enum class Kind : uint8_t {
    kDefinition,  // `rule: ...` or `TERM: ...`
    kOverride,    // %override
    kExtend,      // %extend
    kIgnore,      // %ignore expansions
    kImport,      // %import
    kDeclare,     // %declare
  };
  Kind kind = Kind::kDefinition;
  SourcePos pos;

  // Definitions (also for %override / %extend).
  bool is_term = false;
  std::string name;
  SourcePos name_pos;
  std::string modifiers;                // "", "!", "?", "!?", "?!"
  std::vector<std::string> params;      // template parameters
  bool has_priority = false;
  int64_t priority = 0;
  NodePtr expansions;                   // also the body of %ignore

  // %import.
  bool relative = false;
  std::vector<std::string> path;        // dotted path, names included as parsed
  bool multi = false;                   // %import a.b (X, Y)
  std::vector<std::string> names;       // the (X, Y) list
  std::string alias;                    // %import a.X -> Y

  // %declare.
  std::vector<std::pair<std::string, SourcePos>> symbols;
};

// Parses .lark text.  `file` is used in error messages only.
Status ParseLarkText(const std::string& text, const std::string& file,
                     std::vector<Statement>* out);

}  // namespace cfgmask::lark

#endif  // CFGMASK_GRAMMAR_LARK_TREE_H_
