// Grammar IR helpers (grammar.h): symbol lookup, Lark's Pattern.to_regexp()
// for a TerminalDef, and the canonical text dump that tests/tools/lark_dump.py
// prints for Lark's own compiled grammar, so that the differential test is a
// string comparison.  Tested by grammar_test.cc and lark_reader_test.cc.
#include "grammar/grammar.h"

#include <algorithm>
#include <cstdio>

#include "grammar/lark_tree.h"

namespace cfgmask {
namespace {

// The quoting of lark_dump.py: single quotes; backslash, quote, \n \r \t
// escaped; other control characters as \xNN; everything else as is (UTF-8).
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  out += "'";
  return out;
}

}  // namespace

std::string TerminalDef::ToRegexp() const {
  lark::Pattern p;
  p.is_regex = kind == PatternKind::kRegex;
  p.value = value;
  p.flags = flags;
  return p.ToRegexp();
}

int32_t Grammar::FindTerminal(const std::string& name) const {
  for (int32_t i = 0; i < num_terminals(); ++i) {
    if (terminals[i].name == name) return i;
  }
  return -1;
}

SymbolId Grammar::FindNonterminal(const std::string& name) const {
  for (size_t k = 0; k < nonterminals.size(); ++k) {
    if (nonterminals[k] == name) return num_terminals() + static_cast<int32_t>(k);
  }
  return -1;
}

std::string Grammar::DebugString() const {
  std::string out = "start:";
  for (const auto& s : start) out += " " + s;
  out += "\n";
  std::vector<const TerminalDef*> sorted;
  std::vector<std::string> declared_names;
  for (const auto& t : terminals) {
    if (t.kind == PatternKind::kDeclared) {
      declared_names.push_back(t.name);
    } else {
      sorted.push_back(&t);
    }
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TerminalDef* a, const TerminalDef* b) { return a->name < b->name; });
  for (const TerminalDef* t : sorted) {
    out += "terminal " + t->name + (t->kind == PatternKind::kRegex ? " re " : " str ") +
           Quote(t->value) + " flags=" + Quote(t->flags) +
           " priority=" + std::to_string(t->priority) + "\n";
  }
  for (const auto& r : rules) {
    out += "rule " + SymbolName(r.lhs) + ":";
    for (SymbolId s : r.rhs) out += " " + SymbolName(s);
    out += " (priority=" + std::to_string(r.priority) + " order=" + std::to_string(r.order) + ")\n";
  }
  out += "ignore:";
  for (int32_t id : ignore) out += " " + terminals[id].name;
  out += "\n";
  std::sort(declared_names.begin(), declared_names.end());
  out += "declared:";
  for (const auto& n : declared_names) out += " " + n;
  out += "\n";
  return out;
}

std::string Grammar::WherePrefix(SymbolId s) const {
  if (s < 0 || s >= num_symbols()) return "";
  const std::string* where = nullptr;
  if (IsTerminal(s)) {
    where = &terminals[s].where;
  } else if (static_cast<size_t>(s - num_terminals()) < nonterminal_where.size()) {
    where = &nonterminal_where[s - num_terminals()];
  }
  return where == nullptr || where->empty() ? "" : *where + ": ";
}

}  // namespace cfgmask
