// The .lark reader (lark_reader.h): Lark's GrammarBuilder and
// Grammar.compile() (lark/load_grammar.py) on our own parse tree.
//
//  1. ParseLarkText (Flex + Bison) gives the statements of one file.
//  2. Builder::LoadGrammar: imports first (each imported file is loaded by a
//     nested builder whose names are mangled `grammar__NAME`, then trimmed to
//     what the imported names reach), then definitions, %override, %extend,
//     %ignore and %declare in file order; terminals referring to terminals
//     are inlined (resolve_term_references).
//  3. Validate: undefined symbols, template arity, %ignore of unknown names.
//  4. Compile: terminal trees -> one Pattern each; rule trees go through
//     PrepareLiterals, ValidateSymbols, PrepareAnonTerminals (anonymous
//     terminals: reuse a terminal with the identical pattern, else LPAR /
//     IF-style names, else __ANON_n), ApplyTemplates (instances named
//     `tmpl{arg,...}`), EBNF -> BNF, simplification; duplicate rules,
//     unused rules and unused terminals are removed as Lark removes them.
//
// Every step keeps Lark's order, so rule order, helper names and anonymous
// terminal names come out as Lark's.  Tested by lark_reader_test.cc.
#include "grammar/lark_reader.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <deque>
#include <fstream>
#include <sys/stat.h>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "grammar/ebnf_to_bnf.h"
#include "grammar/lark_tree.h"
#include "grammar/terminal_join.h"
#include "grammar/base/utf8.h"

namespace cfgmask {
namespace {

using lark::ErrorAt;
using lark::IsTree;
using lark::MakeNonTerminal;
using lark::MakePattern;
using lark::MakeTerminal;
using lark::MakeTree;
using lark::Node;
using lark::NodeKind;
using lark::NodePtr;
using lark::Pattern;
using lark::SourcePos;
using lark::Statement;

struct RuleOptions {
  bool keep_all_tokens = false;
  bool expand1 = false;
  bool has_priority = false;
  int64_t priority = 0;
};

struct Definition {
  bool is_term = false;
  NodePtr tree;  // null when %declare'd
  std::vector<std::string> params;
  RuleOptions options;        // rules
  int64_t term_priority = 0;  // terminals
  SourcePos pos;
};

// Python dict semantics: insertion order, re-assignment keeps the position.
class Definitions {
 public:
  bool Has(const std::string& name) const { return map_.count(name) != 0; }
  Definition& Get(const std::string& name) { return map_.at(name); }
  const Definition& Get(const std::string& name) const { return map_.at(name); }
  void Set(const std::string& name, Definition def) {
    if (!Has(name)) order_.push_back(name);
    map_[name] = std::move(def);
  }
  const std::vector<std::string>& order() const { return order_; }
  void Keep(const std::unordered_set<std::string>& keep) {
    std::vector<std::string> order;
    for (const auto& n : order_) {
      if (keep.count(n)) {
        order.push_back(n);
      } else {
        map_.erase(n);
      }
    }
    order_ = std::move(order);
  }

 private:
  std::vector<std::string> order_;
  std::unordered_map<std::string, Definition> map_;
};

// _get_mangle(): names of an imported grammar, as the importer sees them.
struct Mangle {
  std::string prefix;
  std::vector<std::pair<std::string, std::string>> aliases;
  const Mangle* base = nullptr;

  std::string Apply(const std::string& s) const {
    std::string out;
    bool aliased = false;
    for (const auto& [from, to] : aliases) {
      if (from == s) {
        out = to;
        aliased = true;
        break;
      }
    }
    if (!aliased) out = s[0] == '_' ? "_" + prefix + "__" + s.substr(1) : prefix + "__" + s;
    return base ? base->Apply(out) : out;
  }
};

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A FIFO or a device blocks or never ends: only regular files are read.
bool IsOtherThanRegular(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  if (IsDirectory(path)) return false;  // a directory opens, and reads as empty
  if (IsOtherThanRegular(path)) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  *out = ss.str();
  return true;
}

// cfgmask's own common.lark (grammar/lark/common.lark), compiled in.
constexpr char kBuiltinCommonLark[] =
#include "grammar/common_lark.inc"
    ;
constexpr char kBuiltinCommonName[] = "<cfgmask>/common.lark";

// Names of files read so far; node positions point into it.
struct Context {
  const LarkReaderOptions* options = nullptr;
  std::deque<std::string> files;
  const std::string* AddFile(const std::string& name) {
    files.push_back(name);
    return &files.back();
  }
};

std::string TypeName(bool is_term) { return is_term ? "terminal" : "rule"; }

// Every Terminal/NonTerminal in the subtrees below `expansion` nodes
// (_find_used_symbols), with where it was used.
void FindUsedSymbols(const NodePtr& node, bool inside, std::vector<const Node*>* out) {
  if (!node || node->kind != NodeKind::kTree) return;
  bool in = inside || node->data == "expansion";
  for (const auto& c : node->children) {
    if (c->kind == NodeKind::kTerminal || c->kind == NodeKind::kNonTerminal) {
      if (in) out->push_back(c.get());
    } else if (c->kind == NodeKind::kTree) {
      FindUsedSymbols(c, in, out);
    }
  }
}

void FindData(const NodePtr& node, const char* data, std::vector<NodePtr>* out) {
  if (!node || node->kind != NodeKind::kTree) return;
  if (node->data == data) out->push_back(node);
  for (const auto& c : node->children) FindData(c, data, out);
}

NodePtr MangleTree(const NodePtr& tree, const Mangle* mangle) {
  if (!mangle || !tree) return tree;
  NodePtr copy = lark::DeepCopy(tree);
  std::vector<Node*> stack{copy.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& c : n->children) {
      if (c->kind == NodeKind::kTerminal || c->kind == NodeKind::kNonTerminal) {
        c->text = mangle->Apply(c->text);
      } else if (c->kind == NodeKind::kTree) {
        stack.push_back(c.get());
      }
    }
  }
  return copy;
}

class Builder {
 public:
  explicit Builder(Context* ctx) : ctx_(ctx) {}

  Status LoadGrammar(const std::string& text, const std::string* file, const Mangle* mangle);
  Status Validate() const;

  Definitions& defs() { return defs_; }
  // Terminals that other terminals' definitions name (joined in since).
  const std::unordered_set<std::string>& term_refs() const { return term_refs_; }
  const std::vector<std::string>& ignore_names() const { return ignore_names_; }

  void RemoveUnused(const std::vector<std::string>& used) {
    std::unordered_set<std::string> reached(used.begin(), used.end());
    std::vector<std::string> queue(used.begin(), used.end());
    for (size_t k = 0; k < queue.size(); ++k) {
      if (!defs_.Has(queue[k])) continue;
      const Definition& d = defs_.Get(queue[k]);
      if (d.is_term || !d.tree) continue;
      std::vector<const Node*> symbols;
      FindUsedSymbols(d.tree, false, &symbols);
      for (const Node* s : symbols) {
        bool is_param = false;
        for (const auto& p : d.params) is_param |= p == s->text;
        if (!is_param && reached.insert(s->text).second) queue.push_back(s->text);
      }
    }
    defs_.Keep(reached);
  }

 private:
  Status Define(const std::string& name, Definition def, bool override_existing);
  Status Extend(const std::string& name, Definition def);
  void Ignore(const NodePtr& expansions, SourcePos pos);
  Status DoImport(const std::vector<std::string>& dotted_path, bool relative,
                  const std::string& base_dir, const std::vector<std::pair<std::string, std::string>>& aliases,
                  const Mangle* base_mangle, SourcePos pos);
  Status UnpackDefinition(const Statement& st, const Mangle* mangle, std::string* name,
                          Definition* def);
  Status ResolveTermReferences();

  Context* ctx_;
  std::unordered_set<std::string> term_refs_;
  Definitions defs_;
  std::vector<std::string> ignore_names_;
  std::vector<SourcePos> ignore_pos_;
};

Status Builder::Define(const std::string& name, Definition def, bool override_existing) {
  if (defs_.Has(name)) {
    if (!override_existing) {
      return ErrorAt(ErrorCode::kGrammarSemantics, def.pos,
                     TypeName(def.is_term) + " '" + name + "' defined more than once");
    }
  } else if (override_existing) {
    return ErrorAt(ErrorCode::kGrammarSemantics, def.pos,
                   "cannot override a nonexisting " + TypeName(def.is_term) + " " + name);
  }
  if (name.rfind("__", 0) == 0) {
    return ErrorAt(ErrorCode::kGrammarSemantics, def.pos,
                   "names starting with double-underscore are reserved (" + name + ")");
  }
  defs_.Set(name, std::move(def));
  return Status::Ok();
}

Status Builder::Extend(const std::string& name, Definition def) {
  if (!defs_.Has(name)) {
    return ErrorAt(ErrorCode::kGrammarSemantics, def.pos,
                   "can't extend " + TypeName(def.is_term) + " " + name +
                       " as it wasn't defined before");
  }
  Definition& d = defs_.Get(name);
  if (d.is_term != def.is_term) {
    return ErrorAt(ErrorCode::kGrammarSemantics, def.pos,
                   "cannot extend " + TypeName(def.is_term) + " " + name +
                       " - one is a terminal, while the other is not");
  }
  if (d.params != def.params) {
    return ErrorAt(ErrorCode::kGrammarSemantics, def.pos,
                   "cannot extend " + TypeName(def.is_term) + " with different parameters: " + name);
  }
  if (!d.tree) {
    return ErrorAt(ErrorCode::kGrammarSemantics, def.pos,
                   "can't extend " + TypeName(def.is_term) + " " + name + " - it is abstract");
  }
  d.tree->children.insert(d.tree->children.begin(), def.tree);
  return Status::Ok();
}

void Builder::Ignore(const NodePtr& t, SourcePos pos) {
  if (t->children.size() == 1 && IsTree(t->children[0], "expansion") &&
      t->children[0]->children.size() == 1 && IsTree(t->children[0]->children[0], "value")) {
    const NodePtr& item = t->children[0]->children[0]->children[0];
    if (item->kind == NodeKind::kTerminal) {
      ignore_names_.push_back(item->text);
      ignore_pos_.push_back(item->pos);
      return;
    }
  }
  std::string name = "__IGNORE_" + std::to_string(ignore_names_.size());
  ignore_names_.push_back(name);
  ignore_pos_.push_back(pos);
  Definition def;
  def.is_term = true;
  def.tree = t;
  def.pos = pos;
  defs_.Set(name, std::move(def));
}

Status Builder::UnpackDefinition(const Statement& st, const Mangle* mangle, std::string* name,
                                 Definition* def) {
  def->is_term = st.is_term;
  def->pos = st.name_pos;
  *name = st.name;
  if (!st.is_term) {
    bool expand1 = st.modifiers.find('?') != std::string::npos;
    if (expand1 && st.name[0] == '_') {
      return ErrorAt(ErrorCode::kGrammarSemantics, st.name_pos,
                     "inlined rules (_rule) cannot use the ?rule modifier");
    }
    def->options.expand1 = expand1;
    def->options.keep_all_tokens = st.modifiers.find('!') != std::string::npos;
    def->options.has_priority = st.has_priority;
    def->options.priority = st.priority;
    def->params = st.params;
  } else {
    def->term_priority = st.has_priority ? st.priority : 0;
  }
  if (mangle) {
    for (auto& p : def->params) p = mangle->Apply(p);
    *name = mangle->Apply(*name);
  }
  def->tree = MangleTree(st.expansions, mangle);
  return Status::Ok();
}

Status Builder::DoImport(const std::vector<std::string>& dotted_path, bool relative,
                         const std::string& base_dir,
                         const std::vector<std::pair<std::string, std::string>>& aliases,
                         const Mangle* base_mangle, SourcePos pos) {
  Mangle mangle;
  for (size_t i = 0; i < dotted_path.size(); ++i) {
    if (i) mangle.prefix += "__";
    mangle.prefix += dotted_path[i];
  }
  mangle.aliases = aliases;
  mangle.base = base_mangle;
  std::string grammar_path;
  for (size_t i = 0; i < dotted_path.size(); ++i) {
    if (i) grammar_path += "/";
    grammar_path += dotted_path[i];
  }
  grammar_path += ".lark";
  // Lark's order for a library import: the caller's import paths, then its
  // standard library; ours is the built-in common.lark, then Lark's folder
  // when the caller names it.  A relative import reads the grammar's folder.
  const LarkReaderOptions& options = *ctx_->options;
  std::vector<std::string> candidates;
  if (relative) {
    candidates.push_back(JoinPath(base_dir, grammar_path));
  } else {
    for (const auto& dir : options.import_paths) candidates.push_back(JoinPath(dir, grammar_path));
    if (grammar_path == "common.lark") candidates.push_back(kBuiltinCommonName);
    if (!options.lark_grammars_dir.empty()) {
      candidates.push_back(JoinPath(options.lark_grammars_dir, grammar_path));
    }
  }
  for (const auto& path : candidates) {
    std::string text;
    if (path == kBuiltinCommonName) {
      text = kBuiltinCommonLark;
    } else if (!ReadWholeFile(path, &text)) {
      continue;
    }
    const std::string* file = ctx_->AddFile(path);
    Builder gb(ctx_);
    CFGMASK_RETURN_IF_ERROR(gb.LoadGrammar(text, file, &mangle));
    std::vector<std::string> used;
    for (const auto& [from, to] : aliases) used.push_back(mangle.Apply(from));
    gb.RemoveUnused(used);
    for (const auto& name : gb.defs_.order()) {
      if (defs_.Has(name)) {
        return ErrorAt(ErrorCode::kGrammarSemantics, pos,
                       "cannot import '" + name + "' from '" + grammar_path +
                           "': symbol already defined");
      }
    }
    for (const auto& name : gb.defs_.order()) defs_.Set(name, gb.defs_.Get(name));
    return Status::Ok();
  }
  std::string searched;
  for (const auto& c : candidates) searched += (searched.empty() ? "" : ", ") + c;
  std::string message = "cannot find grammar '" + grammar_path + "' to import";
  if (!searched.empty()) message += " (searched: " + searched + ")";
  if (!relative && options.lark_grammars_dir.empty()) {
    message += "; Lark's own grammars are read only from the folder named by "
               "--lark-grammars DIR or $CFGMASK_LARK_GRAMMARS (lark_grammars_dir)";
  }
  return ErrorAt(ErrorCode::kGrammarSemantics, pos, message);
}

// Rule and terminal bodies nested deeper than this (parentheses, brackets,
// operators) are refused: the EBNF transformations recurse per level.
constexpr int kMaxBodyNesting = 200;

// Checks the nesting depth of `root` without recursing.
Status CheckNesting(const NodePtr& root) {
  std::vector<std::pair<const Node*, int>> todo;
  if (root) todo.push_back({root.get(), 1});
  while (!todo.empty()) {
    auto [n, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxBodyNesting) {
      return ErrorAt(ErrorCode::kResourceLimit, n->pos,
                     "the definition nests more than " + std::to_string(kMaxBodyNesting) +
                         " levels deep");
    }
    for (const NodePtr& c : n->children) {
      if (c) todo.push_back({c.get(), depth + 1});
    }
  }
  return Status::Ok();
}

// Lark reads a grammar file as UTF-8 and refuses it whole on a bad byte,
// comments included; so does this reader, at the byte's position.
Status CheckUtf8(const std::string& text, const std::string* file) {
  int32_t line = 1, column = 1;
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    const size_t len = Utf8SequenceLength(text, i);
    const bool ok = len > 0;
    if (!ok) {
      static const char kHex[] = "0123456789abcdef";
      return ErrorAt(ErrorCode::kGrammarSyntax, SourcePos{line, column, file},
                     std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15] +
                         " is not UTF-8 (grammar files are read as UTF-8)");
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += len;
  }
  return Status::Ok();
}

Status Builder::LoadGrammar(const std::string& text, const std::string* file,
                            const Mangle* mangle) {
  CFGMASK_RETURN_IF_ERROR(CheckUtf8(text, file));
  std::vector<Statement> statements;
  CFGMASK_RETURN_IF_ERROR(lark::ParseLarkText(text, *file, &statements));
  for (const Statement& st : statements) CFGMASK_RETURN_IF_ERROR(CheckNesting(st.expansions));

  // Imports are grouped by dotted path (first occurrence order) and done first.
  struct ImportGroup {
    std::vector<std::string> dotted_path;
    bool relative = false;
    std::vector<std::pair<std::string, std::string>> aliases;
    SourcePos pos;
  };
  std::vector<ImportGroup> imports;
  for (const auto& st : statements) {
    if (st.kind != Statement::Kind::kImport) continue;
    std::vector<std::string> dotted;
    std::vector<std::pair<std::string, std::string>> aliases;
    if (st.multi) {
      dotted = st.path;
      for (const auto& n : st.names) aliases.push_back({n, n});
    } else {
      dotted.assign(st.path.begin(), st.path.end() - 1);
      if (dotted.empty()) {
        return ErrorAt(ErrorCode::kGrammarSemantics, st.pos,
                       "nothing was imported from grammar `" + st.path[0] + "`");
      }
      const std::string& name = st.path.back();
      aliases.push_back({name, st.alias.empty() ? name : st.alias});
    }
    ImportGroup* group = nullptr;
    for (auto& g : imports) {
      if (g.dotted_path == dotted) group = &g;
    }
    if (!group) {
      imports.push_back({dotted, st.relative, {}, st.pos});
      group = &imports.back();
    } else if (group->relative != st.relative) {
      return ErrorAt(ErrorCode::kGrammarSemantics, st.pos,
                     "inconsistent base path for the import of the same grammar");
    }
    for (const auto& [from, to] : aliases) {
      bool found = false;
      for (auto& a : group->aliases) {
        if (a.first == from) {
          a.second = to;
          found = true;
        }
      }
      if (!found) group->aliases.push_back({from, to});
    }
  }
  for (const auto& g : imports) {
    CFGMASK_RETURN_IF_ERROR(
        DoImport(g.dotted_path, g.relative, Dirname(*file), g.aliases, mangle, g.pos));
  }

  for (const auto& st : statements) {
    switch (st.kind) {
      case Statement::Kind::kDefinition:
      case Statement::Kind::kOverride:
      case Statement::Kind::kExtend: {
        std::string name;
        Definition def;
        CFGMASK_RETURN_IF_ERROR(UnpackDefinition(st, mangle, &name, &def));
        if (st.kind == Statement::Kind::kExtend) {
          CFGMASK_RETURN_IF_ERROR(Extend(name, std::move(def)));
        } else {
          CFGMASK_RETURN_IF_ERROR(
              Define(name, std::move(def), st.kind == Statement::Kind::kOverride));
        }
        break;
      }
      case Statement::Kind::kIgnore:
        if (!mangle) Ignore(st.expansions, st.pos);
        break;
      case Statement::Kind::kDeclare:
        for (const auto& [sym, pos] : st.symbols) {
          Definition def;
          def.is_term = std::isupper(static_cast<unsigned char>(sym[sym[0] == '_' ? 1 : 0])) != 0;
          def.pos = pos;
          CFGMASK_RETURN_IF_ERROR(Define(mangle ? mangle->Apply(sym) : sym, std::move(def), false));
        }
        break;
      case Statement::Kind::kImport:
        break;
    }
  }
  return ResolveTermReferences();
}

Status Builder::ResolveTermReferences() {
  // Checks first, in definition order: rules or unknown names inside
  // terminals, then recursion; then the references are replaced by the
  // referenced terminal's tree.
  auto refs = [](const NodePtr& tree) {
    std::vector<NodePtr> values;
    FindData(tree, "value", &values);
    return values;
  };
  for (const auto& name : defs_.order()) {
    const Definition& d = defs_.Get(name);
    if (!d.is_term || !d.tree) continue;
    for (const auto& v : refs(d.tree)) {
      const NodePtr& item = v->children[0];
      if (item->kind == NodeKind::kNonTerminal) {
        return ErrorAt(ErrorCode::kGrammarSemantics, item->pos,
                       "rules aren't allowed inside terminals (" + item->text + " in " + name + ")");
      }
      if (item->kind == NodeKind::kTerminal) {
        term_refs_.insert(item->text);
        if (!defs_.Has(item->text) || !defs_.Get(item->text).is_term) {
          return ErrorAt(ErrorCode::kGrammarSemantics, item->pos,
                         "terminal used but not defined: " + item->text);
        }
        if (!defs_.Get(item->text).tree) {
          return ErrorAt(ErrorCode::kGrammarSemantics, item->pos,
                         "a %declare'd terminal cannot be used inside a terminal: " + item->text);
        }
      }
    }
  }
  // Direct references between terminals, then a cycle search.
  std::unordered_map<std::string, std::vector<std::string>> edges;
  for (const auto& name : defs_.order()) {
    const Definition& d = defs_.Get(name);
    if (!d.is_term || !d.tree) continue;
    for (const auto& v : refs(d.tree)) {
      if (v->children[0]->kind == NodeKind::kTerminal) edges[name].push_back(v->children[0]->text);
    }
  }
  for (const auto& name : defs_.order()) {
    if (!edges.count(name)) continue;
    std::unordered_set<std::string> seen;
    std::vector<std::string> stack = edges[name];
    while (!stack.empty()) {
      std::string n = stack.back();
      stack.pop_back();
      if (n == name) {
        return ErrorAt(ErrorCode::kGrammarSemantics, defs_.Get(name).pos,
                       "recursion in terminal '" + name +
                           "' (recursion is only allowed in rules, not terminals)");
      }
      if (!seen.insert(n).second) continue;
      auto it = edges.find(n);
      if (it != edges.end()) stack.insert(stack.end(), it->second.begin(), it->second.end());
    }
  }
  for (const auto& name : defs_.order()) {
    const Definition& d = defs_.Get(name);
    if (!d.is_term || !d.tree) continue;
    for (const auto& v : refs(d.tree)) {
      if (v->children[0]->kind == NodeKind::kTerminal) {
        v->children[0] = defs_.Get(v->children[0]->text).tree;
      }
    }
  }
  return Status::Ok();
}

Status Builder::Validate() const {
  for (const auto& name : defs_.order()) {
    const Definition& d = defs_.Get(name);
    for (size_t i = 0; i < d.params.size(); ++i) {
      if (defs_.Has(d.params[i])) {
        return ErrorAt(ErrorCode::kGrammarSemantics, d.pos,
                       "template parameter conflicts with rule " + d.params[i] +
                           " (in template " + name + ")");
      }
      for (size_t j = 0; j < i; ++j) {
        if (d.params[j] == d.params[i]) {
          return ErrorAt(ErrorCode::kGrammarSemantics, d.pos,
                         "duplicate template parameter " + d.params[i] + " (in template " +
                             name + ")");
        }
      }
    }
    if (!d.tree) continue;
    auto is_param = [&](const std::string& s) {
      for (const auto& p : d.params) {
        if (p == s) return true;
      }
      return false;
    };
    std::vector<NodePtr> usages;
    FindData(d.tree, "template_usage", &usages);
    for (const auto& u : usages) {
      const Node& sym = *u->children[0];
      size_t args = u->children.size() - 1;
      if (is_param(sym.text)) continue;
      if (!defs_.Has(sym.text)) {
        return ErrorAt(ErrorCode::kGrammarSemantics, sym.pos,
                       "template '" + sym.text + "' used but not defined (in " +
                           TypeName(d.is_term) + " " + name + ")");
      }
      size_t expected = defs_.Get(sym.text).params.size();
      if (args != expected) {
        return ErrorAt(ErrorCode::kGrammarSemantics, sym.pos,
                       "wrong number of template arguments used for " + sym.text + " (expected " +
                           std::to_string(expected) + ", got " + std::to_string(args) + ") (in " +
                           TypeName(d.is_term) + " " + name + ")");
      }
    }
    std::vector<const Node*> symbols;
    FindUsedSymbols(d.tree, false, &symbols);
    for (const Node* s : symbols) {
      if (!defs_.Has(s->text) && !is_param(s->text)) {
        return ErrorAt(ErrorCode::kGrammarSemantics, s->pos,
                       TypeName(s->kind == NodeKind::kTerminal) + " '" + s->text +
                           "' used but not defined (in " + TypeName(d.is_term) + " " + name + ")");
      }
    }
  }
  for (size_t i = 0; i < ignore_names_.size(); ++i) {
    if (!defs_.Has(ignore_names_[i])) {
      return ErrorAt(ErrorCode::kGrammarSemantics, ignore_pos_[i],
                     "terminal " + ignore_names_[i] + " was marked to ignore but was not defined");
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Grammar.compile()

const char* AnonName(const std::string& value) {
  static const std::map<std::string, const char*> kNames = {
      {".", "DOT"}, {",", "COMMA"}, {":", "COLON"}, {";", "SEMICOLON"}, {"+", "PLUS"},
      {"-", "MINUS"}, {"*", "STAR"}, {"/", "SLASH"}, {"\\", "BACKSLASH"}, {"|", "VBAR"},
      {"?", "QMARK"}, {"!", "BANG"}, {"@", "AT"}, {"#", "HASH"}, {"$", "DOLLAR"},
      {"%", "PERCENT"}, {"^", "CIRCUMFLEX"}, {"&", "AMPERSAND"}, {"_", "UNDERSCORE"},
      {"<", "LESSTHAN"}, {">", "MORETHAN"}, {"=", "EQUAL"}, {"\"", "DBLQUOTE"},
      {"'", "QUOTE"}, {"`", "BACKQUOTE"}, {"~", "TILDE"}, {"(", "LPAR"}, {")", "RPAR"},
      {"{", "LBRACE"}, {"}", "RBRACE"}, {"[", "LSQB"}, {"]", "RSQB"}, {"\n", "NEWLINE"},
      {"\r\n", "CRLF"}, {"\t", "TAB"}, {" ", "SPACE"},
  };
  auto it = kNames.find(value);
  return it == kNames.end() ? nullptr : it->second;
}

// Python's str.isidentifier-style tests (is_id_start / is_id_continue),
// for ASCII text; other text never names a terminal here.
bool IsIdentifierLike(const std::string& v) {
  if (v.empty()) return false;
  for (unsigned char c : v) {
    if (c >= 0x80 || !(std::isalnum(c) || c == '_')) return false;
  }
  return std::isalpha(static_cast<unsigned char>(v[0])) || v[0] == '_';
}

struct CompiledTerminal {
  std::string name;
  Pattern pattern;
  int64_t priority = 0;
};

struct CompiledRule {
  std::string origin;
  std::vector<NodePtr> expansion;  // Terminal / NonTerminal nodes
  int32_t order = 0;
  int64_t priority = 0;
};

struct RuleDef {
  std::string name;
  std::vector<std::string> params;
  NodePtr tree;
  RuleOptions options;
  SourcePos pos;
};

int CountExpansions(const NodePtr& node, bool* empty) {
  if (!node || node->kind != NodeKind::kTree) return 0;
  int n = 0;
  if (node->data == "expansion") {
    ++n;
    *empty = node->children.empty();
  }
  for (const auto& c : node->children) n += CountExpansions(c, empty);
  return n;
}

class Compiler {
 public:
  Compiler(Builder* builder, const std::vector<std::string>& start, const std::string* main_file,
           int64_t max_rule_alternatives, std::vector<std::string>* warnings)
      : builder_(builder),
        start_(start),
        main_file_(main_file),
        max_rule_alternatives_(max_rule_alternatives),
        warnings_(warnings) {}

  Status Run(Grammar* out);

 private:
  Status CompileTerminals();
  Status CompileRuleTree(RuleDef* def, NodePtr* out);
  Status PrepareAnon(const NodePtr& tree, bool keep_all_tokens, NodePtr* out);
  Status ApplyTemplate(const NodePtr& tree, NodePtr* out);

  Builder* builder_;
  std::vector<std::string> start_;
  const std::string* main_file_;
  int64_t max_rule_alternatives_;
  std::vector<std::string>* warnings_;
  std::vector<CompiledTerminal> terminals_;
  std::unordered_set<std::string> term_set_;
  std::unordered_map<std::string, size_t> term_reverse_;
  int anon_counter_ = 0;
  std::vector<RuleDef> rule_defs_;
  std::unordered_set<std::string> created_templates_;
};

Status Compiler::CompileTerminals() {
  Definitions& defs = builder_->defs();
  for (const auto& name : defs.order()) {
    const Definition& d = defs.Get(name);
    if (!d.is_term || !d.tree) continue;
    bool empty = false;
    if (CountExpansions(d.tree, &empty) == 1 && empty) {
      return ErrorAt(ErrorCode::kGrammarSemantics, d.pos, "terminals cannot be empty (" + name + ")");
    }
  }
  for (const auto& name : defs.order()) {
    const Definition& d = defs.Get(name);
    if (!d.is_term || !d.tree) continue;
    CompiledTerminal t;
    t.name = name;
    t.priority = d.term_priority;
    CFGMASK_RETURN_IF_ERROR(lark::TerminalTreeToPattern(d.tree, &t.pattern));
    terminals_.push_back(std::move(t));
  }
  for (size_t i = 0; i < terminals_.size(); ++i) {
    term_set_.insert(terminals_[i].name);
    term_reverse_[terminals_[i].pattern.Key()] = i;
  }
  return Status::Ok();
}

Status Compiler::PrepareAnon(const NodePtr& tree, bool keep_all_tokens, NodePtr* out) {
  if (tree->data != "pattern") {
    *out = tree;
    return Status::Ok();
  }
  const Pattern& p = tree->children[0]->pattern;
  const std::string key = p.Key();
  auto found = term_reverse_.find(key);
  std::string term_name;
  if (found != term_reverse_.end()) {
    term_name = terminals_[found->second].name;
  } else if (!p.is_regex) {
    if (const char* n = AnonName(p.value)) {
      term_name = n;
    } else if (IsIdentifierLike(p.value)) {
      std::string upper = p.value;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (!term_set_.count(upper)) term_name = upper;
    }
    if (term_set_.count(term_name)) term_name.clear();
  }
  if (term_name.empty()) term_name = "__ANON_" + std::to_string(anon_counter_++);
  if (!term_set_.count(term_name)) {
    term_set_.insert(term_name);
    terminals_.push_back({term_name, p, 0});
    term_reverse_[key] = terminals_.size() - 1;
  }
  *out = MakeTerminal(term_name, tree->pos);
  (*out)->filter_out = keep_all_tokens ? false : !p.is_regex;
  return Status::Ok();
}

Status Compiler::ApplyTemplate(const NodePtr& tree, NodePtr* out) {
  if (tree->data != "template_usage") {
    *out = tree;
    return Status::Ok();
  }
  const std::string& name = tree->children[0]->text;
  std::string result_name = name + "{";
  for (size_t i = 1; i < tree->children.size(); ++i) {
    const Node& arg = *tree->children[i];
    if (arg.kind != NodeKind::kTerminal && arg.kind != NodeKind::kNonTerminal) {
      return ErrorAt(ErrorCode::kGrammarSemantics, tree->pos,
                     "template arguments must be single symbols or literals");
    }
    if (i > 1) result_name += ",";
    result_name += arg.text;
  }
  result_name += "}";
  if (created_templates_.insert(result_name).second) {
    const RuleDef* tmpl = nullptr;
    for (const auto& r : rule_defs_) {
      if (r.name == name) tmpl = &r;
    }
    if (!tmpl || tmpl->params.size() + 1 != tree->children.size()) {
      return ErrorAt(ErrorCode::kGrammarSemantics, tree->pos,
                     "wrong use of template " + name);
    }
    std::unordered_map<std::string, NodePtr> names;
    for (size_t i = 0; i < tmpl->params.size(); ++i) names[tmpl->params[i]] = tree->children[i + 1];
    NodePtr body = lark::DeepCopy(tmpl->tree);
    NodePtr replaced;
    CFGMASK_RETURN_IF_ERROR(lark::TransformInPlace(
        body,
        [&names](const NodePtr& t, NodePtr* r) -> Status {
          *r = t;
          if (t->data == "value" && t->children.size() == 1 &&
              (t->children[0]->kind == NodeKind::kTerminal ||
               t->children[0]->kind == NodeKind::kNonTerminal)) {
            auto it = names.find(t->children[0]->text);
            if (it != names.end()) *r = it->second;
          } else if (t->data == "template_usage") {
            auto it = names.find(t->children[0]->text);
            if (it != names.end()) t->children[0] = it->second;
          }
          return Status::Ok();
        },
        &replaced));
    RuleDef instance;
    instance.name = result_name;
    instance.tree = replaced;
    instance.options = tmpl->options;
    instance.pos = tmpl->pos;
    rule_defs_.push_back(std::move(instance));
  }
  *out = MakeNonTerminal(result_name, tree->pos);
  return Status::Ok();
}

Status Compiler::CompileRuleTree(RuleDef* def, NodePtr* out) {
  const bool keep = def->options.keep_all_tokens;
  NodePtr tree = def->tree;
  CFGMASK_RETURN_IF_ERROR(lark::TransformInPlace(
      tree,
      [](const NodePtr& t, NodePtr* r) -> Status {
        *r = t;
        if (t->data == "literal" || t->data == "range") {
          Pattern p;
          if (t->data == "literal") {
            CFGMASK_RETURN_IF_ERROR(lark::LiteralToPattern(*t->children[0], &p));
          } else {
            CFGMASK_RETURN_IF_ERROR(lark::RangeToPattern(*t, &p));
          }
          *r = MakeTree("pattern", {MakePattern(std::move(p), t->pos)}, t->pos);
        }
        return Status::Ok();
      },
      &tree));
  CFGMASK_RETURN_IF_ERROR(lark::TransformInPlace(
      tree,
      [](const NodePtr& t, NodePtr* r) -> Status {
        *r = (t->data == "value") ? t->children[0] : t;
        return Status::Ok();
      },
      &tree));
  CFGMASK_RETURN_IF_ERROR(lark::TransformInPlace(
      tree, [this, keep](const NodePtr& t, NodePtr* r) { return PrepareAnon(t, keep, r); },
      &tree));
  CFGMASK_RETURN_IF_ERROR(lark::TransformInPlace(
      tree, [this](const NodePtr& t, NodePtr* r) { return ApplyTemplate(t, r); }, &tree));
  *out = tree;
  return Status::Ok();
}

Status Compiler::Run(Grammar* out) {
  Definitions& defs = builder_->defs();
  const std::unordered_set<std::string>& in_terminals = builder_->term_refs();
  CFGMASK_RETURN_IF_ERROR(CompileTerminals());

  for (const auto& name : defs.order()) {
    const Definition& d = defs.Get(name);
    if (d.is_term) continue;
    if (!d.tree) {
      return ErrorAt(ErrorCode::kGrammarSemantics, d.pos,
                     "%declare of a rule (" + name + ") is not supported");
    }
    rule_defs_.push_back({name, d.params, lark::DeepCopy(d.tree), d.options, d.pos});
  }

  struct PendingRule {
    std::string name;
    NodePtr tree;
    RuleOptions options;
    SourcePos pos;
  };
  std::vector<PendingRule> rules;
  lark::EbnfToBnf ebnf;
  for (size_t i = 0; i < rule_defs_.size(); ++i) {
    if (!rule_defs_[i].params.empty()) continue;
    RuleDef def = rule_defs_[i];
    ebnf.SetRule(def.name, def.options.keep_all_tokens);
    NodePtr tree;
    CFGMASK_RETURN_IF_ERROR(CompileRuleTree(&def, &tree));
    NodePtr bnf;
    CFGMASK_RETURN_IF_ERROR(ebnf.Transform(tree, &bnf));
    rules.push_back({def.name, bnf, def.options, def.pos});
  }
  for (const auto& h : ebnf.new_rules()) {
    RuleOptions o;
    o.keep_all_tokens = h.keep_all_tokens;
    rules.push_back({h.name, h.tree, o, SourcePos{}});
  }
  {
    std::unordered_set<std::string> names;
    for (const auto& r : rules) {
      if (!names.insert(r.name).second) {
        return ErrorAt(ErrorCode::kGrammarSemantics, r.pos, "rule name collision: " + r.name);
      }
    }
  }

  std::vector<CompiledRule> compiled;
  for (const auto& r : rules) {
    std::vector<lark::Alternative> alts;
    CFGMASK_RETURN_IF_ERROR(lark::SimplifyRule(r.tree, max_rule_alternatives_, &alts));
    for (size_t i = 0; i < alts.size(); ++i) {
      if (alts[i].has_alias && r.name[0] == '_') {
        return ErrorAt(ErrorCode::kGrammarSemantics, r.pos,
                       "rule " + r.name +
                           " is marked for expansion (it starts with an underscore) and isn't "
                           "allowed to have aliases (alias=" + alts[i].alias + ")");
      }
      CompiledRule c;
      c.origin = r.name;
      for (const auto& s : alts[i].symbols) {
        if (s->kind != NodeKind::kEmpty) c.expansion.push_back(s);
      }
      c.order = static_cast<int32_t>(i);
      c.priority = r.options.has_priority ? r.options.priority : 0;
      compiled.push_back(std::move(c));
    }
  }

  // Duplicates: empty ones are dropped, others are an error.
  {
    std::unordered_map<std::string, size_t> first;
    std::vector<CompiledRule> unique;
    for (auto& c : compiled) {
      std::string key = c.origin + " :";
      for (const auto& s : c.expansion) key += " " + lark::NodeKey(*s);
      auto [it, inserted] = first.insert({key, unique.size()});
      if (!inserted) {
        if (!c.expansion.empty()) {
          std::string text = c.origin + " :";
          for (const auto& s : c.expansion) text += " " + s->text;
          SourcePos pos;
          for (const auto& r : rules) {
            if (r.name == c.origin) pos = r.pos;
          }
          return ErrorAt(ErrorCode::kGrammarSemantics, pos,
                         "rules defined twice: <" + text +
                             "> (might happen due to colliding expansion of optionals: [] or ?)");
        }
        continue;
      }
      unique.push_back(std::move(c));
    }
    compiled = std::move(unique);
  }

  // Unused rules, removed until a fixed point.
  while (true) {
    size_t before = compiled.size();
    std::unordered_set<std::string> used(start_.begin(), start_.end());
    for (const auto& c : compiled) {
      for (const auto& s : c.expansion) {
        if (s->kind == NodeKind::kNonTerminal && s->text != c.origin) used.insert(s->text);
      }
    }
    std::vector<CompiledRule> kept;
    for (auto& c : compiled) {
      if (used.count(c.origin)) kept.push_back(std::move(c));
    }
    compiled = std::move(kept);
    if (compiled.size() == before) break;
  }

  for (const auto& s : start_) {
    bool found = false;
    for (const auto& c : compiled) found |= c.origin == s;
    if (!found) {
      return ErrorAt(ErrorCode::kGrammarSemantics, SourcePos{1, 1, main_file_},
                     "start rule '" + s + "' is not defined");
    }
  }

  // Unused terminals.
  const auto& ignore = builder_->ignore_names();
  std::unordered_set<std::string> used_terms(ignore.begin(), ignore.end());
  for (const auto& c : compiled) {
    for (const auto& s : c.expansion) {
      if (s->kind == NodeKind::kTerminal) used_terms.insert(s->text);
    }
  }

  // Likely mistakes in the main file: rules the start rules never reach, and
  // terminals neither a reached rule, %ignore nor another terminal uses.
  if (warnings_ != nullptr) {
    auto warn = [&](const SourcePos& pos, const std::string& what) {
      warnings_->push_back(ErrorAt(ErrorCode::kGrammarSemantics, pos, "warning: " + what).message());
    };
    std::unordered_set<std::string> reached;
    for (const auto& c : compiled) reached.insert(c.origin);
    for (const auto& r : rule_defs_) {
      if (!r.params.empty() || r.pos.file != main_file_ || reached.count(r.name)) continue;
      warn(r.pos, "rule '" + r.name + "' is unreachable from the start rule");
    }
    for (const auto& name : defs.order()) {
      const Definition& d = defs.Get(name);
      if (!d.is_term || d.pos.file != main_file_ || name.rfind("__", 0) == 0) continue;
      if (used_terms.count(name) || in_terminals.count(name)) continue;
      warn(d.pos, std::string(d.tree ? "terminal " : "%declare'd terminal ") + name +
                      " is never used");
    }
  }

  Grammar g;
  std::unordered_map<std::string, int32_t> term_id;
  for (const auto& t : terminals_) {
    if (!used_terms.count(t.name)) continue;
    TerminalDef def;
    def.name = t.name;
    def.kind = t.pattern.is_regex ? PatternKind::kRegex : PatternKind::kString;
    def.value = t.pattern.value;
    def.flags = t.pattern.flags;
    def.priority = static_cast<int32_t>(t.priority);
    if (defs.Has(t.name)) def.where = lark::WhereString(defs.Get(t.name).pos);
    term_id[t.name] = g.num_terminals();
    g.terminals.push_back(std::move(def));
  }
  for (const auto& name : defs.order()) {
    const Definition& d = defs.Get(name);
    if (!d.is_term || d.tree || !used_terms.count(name) || term_id.count(name)) continue;
    TerminalDef def;
    def.name = name;
    def.kind = PatternKind::kDeclared;
    def.where = lark::WhereString(d.pos);
    term_id[name] = g.num_terminals();
    g.declared.push_back(g.num_terminals());
    g.terminals.push_back(std::move(def));
  }
  for (const auto& name : ignore) {
    auto it = term_id.find(name);
    if (it != term_id.end()) g.ignore.push_back(it->second);
  }
  std::unordered_map<std::string, int32_t> nonterm_index;
  std::unordered_map<std::string, std::string> rule_where;
  for (const auto& r : rule_defs_) rule_where.emplace(r.name, lark::WhereString(r.pos));
  for (const auto& c : compiled) {
    if (!nonterm_index.count(c.origin)) {
      nonterm_index[c.origin] = static_cast<int32_t>(g.nonterminals.size());
      g.nonterminals.push_back(c.origin);
      auto it = rule_where.find(c.origin);
      g.nonterminal_where.push_back(it == rule_where.end() ? "" : it->second);
    }
  }
  const int32_t t_count = g.num_terminals();
  for (const auto& c : compiled) {
    Rule rule;
    rule.lhs = t_count + nonterm_index.at(c.origin);
    for (const auto& s : c.expansion) {
      if (s->kind == NodeKind::kTerminal) {
        rule.rhs.push_back(term_id.at(s->text));
      } else {
        auto it = nonterm_index.find(s->text);
        if (it == nonterm_index.end()) {
          return ErrorAt(ErrorCode::kGrammarSemantics, s->pos,
                         "rule '" + s->text + "' is used but has no alternatives");
        }
        rule.rhs.push_back(t_count + it->second);
      }
    }
    rule.priority = static_cast<int32_t>(c.priority);
    rule.order = c.order;
    g.rules.push_back(std::move(rule));
  }
  // A start rule no derivation of which ends (`start: start "a"`) has an
  // empty language: every mask would be empty.  Lark builds its tables all
  // the same; here it is refused at the rule's definition.
  {
    std::vector<char> productive(g.nonterminals.size(), 0);
    for (bool grew = true; grew;) {
      grew = false;
      for (const Rule& r : g.rules) {
        const int32_t k = r.lhs - t_count;
        if (productive[k]) continue;
        bool all = true;
        for (SymbolId x : r.rhs) all = all && (x < t_count || productive[x - t_count]);
        if (all) productive[k] = grew = true;
      }
    }
    for (const auto& s : start_) {
      auto it = nonterm_index.find(s);
      if (it == nonterm_index.end() || productive[it->second]) continue;
      const SourcePos pos = defs.Has(s) ? defs.Get(s).pos : SourcePos{1, 1, main_file_};
      return ErrorAt(ErrorCode::kGrammarSemantics, pos,
                     "the language of start rule '" + s +
                         "' is empty: every derivation of it needs itself again (no "
                         "alternative ends in terminals)");
    }
  }
  g.start = start_;
  *out = std::move(g);
  return Status::Ok();
}

}  // namespace

Status ReadLarkString(const std::string& text, const std::string& name,
                      const LarkReaderOptions& options, Grammar* out) {
  Context ctx;
  ctx.options = &options;
  const std::string* file = ctx.AddFile(name);
  Builder builder(&ctx);
  CFGMASK_RETURN_IF_ERROR(builder.LoadGrammar(text, file, nullptr));
  CFGMASK_RETURN_IF_ERROR(builder.Validate());
  std::vector<std::string> start = options.start;
  if (start.empty()) start.push_back("start");
  Compiler compiler(&builder, start, file, std::max<int64_t>(1, options.max_rule_alternatives),
                    options.warnings);
  return compiler.Run(out);
}

Status ReadLarkFile(const std::string& path, const LarkReaderOptions& options, Grammar* out) {
  std::string text;
  if (IsDirectory(path)) return Status(ErrorCode::kIo, path + ": is a directory, not a grammar file");
  if (IsOtherThanRegular(path)) {
    return Status(ErrorCode::kIo, path + ": is not a regular file (a FIFO, socket or device)");
  }
  if (!ReadWholeFile(path, &text)) {
    return Status(ErrorCode::kIo, path + ": cannot read grammar file");
  }
  return ReadLarkString(text, path, options, out);
}

}  // namespace cfgmask
