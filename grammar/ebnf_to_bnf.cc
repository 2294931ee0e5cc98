// EBNF -> BNF, Lark's way (ebnf_to_bnf.h).  The helper rules are keyed by
// the structural identity of their operand (NodeKey), exactly like Lark's
// rules_cache, so `("," x)*` written in two rules yields one helper, named
// after the first rule that needed it.  Simplification is done as a pure
// function (multiply out, then keep first occurrences), which gives the
// same list and order as Lark's in-place visitor: every intermediate dedup
// Lark does only removes alternatives that the final dedup would remove.
// Tested by lark_reader_test.cc (differential test against Lark).
#include "grammar/ebnf_to_bnf.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace cfgmask::lark {
namespace {

constexpr int64_t kRepeatBreakThreshold = 50;  // REPEAT_BREAK_THRESHOLD
constexpr int64_t kSmallFactorThreshold = 5;   // SMALL_FACTOR_THRESHOLD

// lark.utils.small_factors: n = fold(n*a + b) over the returned pairs.
std::vector<std::pair<int64_t, int64_t>> SmallFactors(int64_t n, int64_t max_factor) {
  if (n <= max_factor) return {{n, 0}};
  for (int64_t a = max_factor; a > 1; --a) {
    int64_t r = n / a;
    int64_t b = n % a;
    if (a + b <= max_factor) {
      auto out = SmallFactors(r, max_factor);
      out.push_back({a, b});
      return out;
    }
  }
  return {{n, 0}};  // unreachable for max_factor > 2
}

std::vector<NodePtr> Repeat(const NodePtr& node, int64_t n) {
  return std::vector<NodePtr>(static_cast<size_t>(std::max<int64_t>(n, 0)), node);
}

std::vector<NodePtr> Concat(std::vector<NodePtr> a, const std::vector<NodePtr>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool IsSymbol(const Node& n) {
  return n.kind == NodeKind::kTerminal || n.kind == NodeKind::kNonTerminal ||
         n.kind == NodeKind::kEmpty;
}

// FindRuleSize: how many children a [x] would have produced in the tree.
Status RuleSize(const NodePtr& node, bool keep_all_tokens, int64_t* out) {
  if (node->kind == NodeKind::kNonTerminal) {
    *out = node->text.empty() || node->text[0] != '_' ? 1 : 0;
    return Status::Ok();
  }
  if (node->kind == NodeKind::kTerminal) {
    *out = (keep_all_tokens || !node->filter_out) ? 1 : 0;
    return Status::Ok();
  }
  if (node->kind == NodeKind::kEmpty) {
    *out = 0;
    return Status::Ok();
  }
  if (IsTree(node, "expansion") || IsTree(node, "expansions")) {
    const bool sum = node->data == "expansion";
    int64_t total = 0;
    for (const auto& c : node->children) {
      int64_t v = 0;
      CFGMASK_RETURN_IF_ERROR(RuleSize(c, keep_all_tokens, &v));
      total = sum ? total + v : std::max(total, v);
    }
    *out = total;
    return Status::Ok();
  }
  return ErrorAt(ErrorCode::kGrammarSemantics, node->pos,
                 "unsupported construct inside [...] (an alias is not allowed there)");
}

using Seq = std::vector<NodePtr>;

std::string SeqKey(const Seq& seq) {
  std::string key;
  for (const auto& s : seq) {
    key += NodeKey(*s);
    key.push_back(' ');
  }
  return key;
}

// `max_alts` bounds the alternatives one expansion multiplies out to (each
// optional part doubles them): past it the rule is refused, not expanded.
Status Expand(const NodePtr& node, int64_t max_alts, std::vector<Seq>* out) {
  out->clear();
  if (IsSymbol(*node)) {
    out->push_back({node});
    return Status::Ok();
  }
  if (IsTree(node, "expansion")) {
    std::vector<Seq> result{Seq{}};
    for (const auto& child : node->children) {
      std::vector<Seq> options;
      CFGMASK_RETURN_IF_ERROR(Expand(child, max_alts, &options));
      if (static_cast<double>(result.size()) * static_cast<double>(options.size()) >
          static_cast<double>(max_alts)) {
        return ErrorAt(ErrorCode::kResourceLimit, node->pos,
                       "this rule expands to more than " + std::to_string(max_alts) +
                           " alternatives (its optional parts multiply out; "
                           "max_rule_alternatives)");
      }
      std::vector<Seq> next;
      next.reserve(result.size() * options.size());
      for (const auto& r : result) {
        for (const auto& o : options) next.push_back(Concat(r, o));
      }
      result = std::move(next);
    }
    std::unordered_set<std::string> seen;
    for (auto& r : result) {
      if (seen.insert(SeqKey(r)).second) out->push_back(std::move(r));
    }
    return Status::Ok();
  }
  if (IsTree(node, "expansions")) {
    std::unordered_set<std::string> seen;
    for (const auto& child : node->children) {
      std::vector<Seq> options;
      CFGMASK_RETURN_IF_ERROR(Expand(child, max_alts, &options));
      if (static_cast<int64_t>(out->size() + options.size()) > max_alts) {
        return ErrorAt(ErrorCode::kResourceLimit, node->pos,
                       "this rule expands to more than " + std::to_string(max_alts) +
                           " alternatives (max_rule_alternatives)");
      }
      for (auto& o : options) {
        if (seen.insert(SeqKey(o)).second) out->push_back(std::move(o));
      }
    }
    return Status::Ok();
  }
  if (IsTree(node, "alias")) {
    return ErrorAt(ErrorCode::kGrammarSemantics, node->pos,
                   "an alias (->) is only allowed at the top level of a rule's alternatives");
  }
  return ErrorAt(ErrorCode::kGrammarSemantics, node->pos,
                 "unexpected '" + (node->kind == NodeKind::kTree ? node->data : node->text) +
                     "' in a rule");
}

}  // namespace

Status RepeatCount(const NodePtr& node, int64_t* out) {
  int64_t v = 0;
  for (char ch : node->text) {
    if (ch < '0' || ch > '9') {
      return ErrorAt(ErrorCode::kGrammarSyntax, node->pos,
                     "repetition count '" + node->text + "' is not a number");
    }
    v = v * 10 + (ch - '0');
    if (v > kMaxRepeatCount) {
      return ErrorAt(ErrorCode::kGrammarSemantics, node->pos,
                     "repetition count " + node->text.substr(0, 40) +
                         (node->text.size() > 40 ? "..." : "") + " is too large (at most " +
                         std::to_string(kMaxRepeatCount) + ")");
    }
  }
  if (node->text.empty()) {
    return ErrorAt(ErrorCode::kGrammarSyntax, node->pos, "missing repetition count");
  }
  *out = v;
  return Status::Ok();
}


Status TransformInPlace(const NodePtr& root, const TreeFn& fn, NodePtr* out) {
  // Tree.iter_subtrees(): breadth-first with children reversed, first
  // visit wins, then reversed.
  std::vector<NodePtr> queue{root};
  std::vector<NodePtr> order;
  std::unordered_set<const Node*> seen;
  for (size_t k = 0; k < queue.size(); ++k) {
    NodePtr t = queue[k];
    if (seen.insert(t.get()).second) order.push_back(t);
    for (auto it = t->children.rbegin(); it != t->children.rend(); ++it) {
      if ((*it)->kind == NodeKind::kTree && !seen.count(it->get())) queue.push_back(*it);
    }
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (auto& child : (*it)->children) {
      if (child->kind != NodeKind::kTree) continue;
      NodePtr replaced;
      CFGMASK_RETURN_IF_ERROR(fn(child, &replaced));
      child = replaced;
    }
  }
  return fn(root, out);
}

std::string EbnfToBnf::NameRule(const std::string& inner) {
  return "__" + prefix_ + "_" + inner + "_" + std::to_string(i_++);
}

NodePtr EbnfToBnf::AddRule(const std::string& key, const std::string& name, NodePtr tree) {
  new_rules_.push_back({name, std::move(tree), keep_all_tokens_});
  NodePtr t = MakeNonTerminal(name);
  cache_[key] = t;
  return t;
}

NodePtr EbnfToBnf::AddRecurseRule(const std::string& type, const NodePtr& expr) {
  const std::string key = "recurse:" + NodeKey(*expr);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::string name = NameRule(type);
  NodePtr t = MakeNonTerminal(name);
  NodePtr tree = MakeTree("expansions", {MakeTree("expansion", {expr}),
                                         MakeTree("expansion", {t, expr})});
  return AddRule(key, name, tree);
}

NodePtr EbnfToBnf::AddRepeatRule(int64_t a, int64_t b, const NodePtr& target,
                                 const NodePtr& atom) {
  const std::string key = "repeat:" + std::to_string(a) + "," + std::to_string(b) + "," +
                          NodeKey(*target) + "," + NodeKey(*atom);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::string name = NameRule("repeat_a" + std::to_string(a) + "_b" + std::to_string(b));
  NodePtr tree = MakeTree(
      "expansions", {MakeTree("expansion", Concat(Repeat(target, a), Repeat(atom, b)))});
  return AddRule(key, name, tree);
}

NodePtr EbnfToBnf::AddRepeatOptRule(int64_t a, int64_t b, const NodePtr& target,
                                    const NodePtr& target_opt, const NodePtr& atom) {
  // Lark's cache key leaves target_opt out; so does ours.
  const std::string key = "repeat_opt:" + std::to_string(a) + "," + std::to_string(b) + "," +
                          NodeKey(*target) + "," + NodeKey(*atom);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::string name = NameRule("repeat_a" + std::to_string(a) + "_b" + std::to_string(b) + "_opt");
  std::vector<NodePtr> alternatives;
  for (int64_t i = 0; i < a; ++i) {
    alternatives.push_back(MakeTree("expansion", Concat(Repeat(target, i), {target_opt})));
  }
  for (int64_t i = 0; i < b; ++i) {
    alternatives.push_back(MakeTree("expansion", Concat(Repeat(target, a), Repeat(atom, i))));
  }
  return AddRule(key, name, MakeTree("expansions", std::move(alternatives)));
}

NodePtr EbnfToBnf::GenerateRepeats(const NodePtr& rule, int64_t mn, int64_t mx) {
  if (mx < kRepeatBreakThreshold) {
    std::vector<NodePtr> alternatives;
    for (int64_t n = mn; n <= mx; ++n) alternatives.push_back(MakeTree("expansion", Repeat(rule, n)));
    return MakeTree("expansions", std::move(alternatives));
  }
  NodePtr mn_target = rule;
  for (auto [a, b] : SmallFactors(mn, kSmallFactorThreshold)) {
    mn_target = AddRepeatRule(a, b, mn_target, rule);
  }
  if (mx == mn) return mn_target;
  auto factors = SmallFactors(mx - mn + 1, kSmallFactorThreshold);
  NodePtr diff_target = rule;
  NodePtr diff_opt_target = MakeTree("expansion", {});
  for (size_t k = 0; k + 1 < factors.size(); ++k) {
    auto [a, b] = factors[k];
    diff_opt_target = AddRepeatOptRule(a, b, diff_target, diff_opt_target, rule);
    diff_target = AddRepeatRule(a, b, diff_target, rule);
  }
  auto [a, b] = factors.back();
  diff_opt_target = AddRepeatOptRule(a, b, diff_target, diff_opt_target, rule);
  return MakeTree("expansions", {MakeTree("expansion", {mn_target, diff_opt_target})});
}

Status EbnfToBnf::Expr(const NodePtr& tree, NodePtr* out) {
  const NodePtr& rule = tree->children[0];
  const std::string& op = tree->children[1]->text;
  if (op == "?") {
    *out = MakeTree("expansions", {rule, MakeTree("expansion", {})});
  } else if (op == "+") {
    *out = AddRecurseRule("plus", rule);
  } else if (op == "*") {
    *out = MakeTree("expansions", {AddRecurseRule("star", rule), MakeTree("expansion", {})});
  } else {
    int64_t mn = 0, mx = 0;
    CFGMASK_RETURN_IF_ERROR(RepeatCount(tree->children[2], &mn));
    mx = mn;
    if (tree->children.size() > 3) {
      CFGMASK_RETURN_IF_ERROR(RepeatCount(tree->children[3], &mx));
      if (mx < mn || mn < 0) {
        return ErrorAt(ErrorCode::kGrammarSemantics, tree->children[2]->pos,
                       "bad range for repetition (" + std::to_string(mn) + ".." +
                           std::to_string(mx) + " isn't allowed)");
      }
    }
    *out = GenerateRepeats(rule, mn, mx);
  }
  return Status::Ok();
}

Status EbnfToBnf::Maybe(const NodePtr& tree, NodePtr* out) {
  const NodePtr& rule = tree->children[0];
  int64_t size = 0;
  CFGMASK_RETURN_IF_ERROR(RuleSize(rule, keep_all_tokens_, &size));
  *out = MakeTree("expansions", {rule, MakeTree("expansion", Repeat(MakeEmpty(), size))});
  return Status::Ok();
}

Status EbnfToBnf::Transform(const NodePtr& tree, NodePtr* out) {
  return TransformInPlace(
      tree,
      [this](const NodePtr& t, NodePtr* r) -> Status {
        if (t->data == "expr") return Expr(t, r);
        if (t->data == "maybe") return Maybe(t, r);
        *r = t;
        return Status::Ok();
      },
      out);
}

namespace {

// The top level of a rule body: nested `expansions` (from %extend) are
// flattened, and an alias applies to every alternative of its expansion.
Status TopLevel(const NodePtr& node, int64_t max_alts, std::unordered_set<std::string>* seen,
                std::vector<Alternative>* out) {
  if (IsTree(node, "expansions")) {
    for (const auto& child : node->children) {
      CFGMASK_RETURN_IF_ERROR(TopLevel(child, max_alts, seen, out));
    }
    return Status::Ok();
  }
  std::vector<Seq> options;
  bool has_alias = false;
  std::string alias;
  if (IsTree(node, "alias")) {
    has_alias = true;
    alias = node->children[1]->text;
    CFGMASK_RETURN_IF_ERROR(Expand(node->children[0], max_alts, &options));
  } else {
    CFGMASK_RETURN_IF_ERROR(Expand(node, max_alts, &options));
  }
  for (auto& o : options) {
    std::string key = SeqKey(o) + (has_alias ? "|alias:" + alias : "|");
    if (!seen->insert(key).second) continue;
    Alternative alt;
    alt.symbols = std::move(o);
    alt.has_alias = has_alias;
    alt.alias = alias;
    out->push_back(std::move(alt));
  }
  return Status::Ok();
}

}  // namespace

Status SimplifyRule(const NodePtr& tree, int64_t max_alternatives, std::vector<Alternative>* out) {
  out->clear();
  if (!IsTree(tree, "expansions")) {
    return ErrorAt(ErrorCode::kGrammarSemantics, tree->pos, "malformed rule body");
  }
  std::unordered_set<std::string> seen;
  return TopLevel(tree, max_alternatives, &seen, out);
}

}  // namespace cfgmask::lark
