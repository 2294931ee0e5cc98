// EBNF -> BNF with Lark's exact choices (lark/load_grammar.py EBNF_to_BNF and
// SimplifyRule_Visitor): `x?` and `[x]` become alternatives, `x+` and `x*`
// become left-recursive helper rules named `__<rule>_plus_<n>` /
// `__<rule>_star_<n>` (one counter for the whole grammar, one helper per
// distinct operand tree), `x~n..m` is unrolled below 50 and split into
// `_repeat_a<a>_b<b>` helpers above, and every expansion is finally
// multiplied out into a flat list of alternatives with duplicates removed.
// Also the tree walk that all of Lark's in-place transformers share; its
// visiting order decides the helper numbering and anonymous terminal names.
// Tested by lark_reader_test.cc (differential test against Lark).
#ifndef CFGMASK_GRAMMAR_EBNF_TO_BNF_H_
#define CFGMASK_GRAMMAR_EBNF_TO_BNF_H_

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/lark_tree.h"
#include "grammar/base/status.h"

namespace cfgmask::lark {

// Transformer_InPlace.transform: `fn` is called on every subtree, its
// children already transformed, in the order of Tree.iter_subtrees() (a
// reversed breadth-first walk), children of one parent left to right, the
// root last.  `fn` returns the node that replaces its argument.
using TreeFn = std::function<Status(const NodePtr& tree, NodePtr* out)>;
Status TransformInPlace(const NodePtr& root, const TreeFn& fn, NodePtr* out);

// The count of `x ~ n` or `x ~ n..m` (rules and terminals alike): decimal
// digits, at most kMaxRepeatCount, else a positioned error.  Lark's counts
// are Python integers of any size; helper rules grow with their logarithm and
// regex repetitions are bounded further by the regex compiler, so the bound
// only keeps the arithmetic in range.
constexpr int64_t kMaxRepeatCount = (int64_t{1} << 31) - 1;
Status RepeatCount(const NodePtr& node, int64_t* out);

struct HelperRule {
  std::string name;
  NodePtr tree;                  // an `expansions` tree
  bool keep_all_tokens = false;  // options of the rule that created it
};

class EbnfToBnf {
 public:
  // Set before each rule: the prefix of helper names and the `!` modifier.
  void SetRule(const std::string& prefix, bool keep_all_tokens) {
    prefix_ = prefix;
    keep_all_tokens_ = keep_all_tokens;
  }
  Status Transform(const NodePtr& tree, NodePtr* out);
  const std::vector<HelperRule>& new_rules() const { return new_rules_; }

 private:
  Status Expr(const NodePtr& tree, NodePtr* out);
  Status Maybe(const NodePtr& tree, NodePtr* out);
  NodePtr AddRecurseRule(const std::string& type, const NodePtr& expr);
  NodePtr AddRepeatRule(int64_t a, int64_t b, const NodePtr& target, const NodePtr& atom);
  NodePtr AddRepeatOptRule(int64_t a, int64_t b, const NodePtr& target,
                           const NodePtr& target_opt, const NodePtr& atom);
  NodePtr GenerateRepeats(const NodePtr& rule, int64_t mn, int64_t mx);
  NodePtr AddRule(const std::string& key, const std::string& name, NodePtr tree);
  std::string NameRule(const std::string& inner);

  std::string prefix_ = "anon";
  bool keep_all_tokens_ = false;
  int i_ = 0;
  std::unordered_map<std::string, NodePtr> cache_;
  std::vector<HelperRule> new_rules_;
};

// One alternative of a rule after simplification: symbols (Terminal,
// NonTerminal or the kEmpty placeholder) and the `-> alias`, if any.
struct Alternative {
  std::vector<NodePtr> symbols;
  bool has_alias = false;
  std::string alias;
};

// SimplifyRule_Visitor + RuleTreeToText on a rule's `expansions` tree.
// At most `max_alternatives` alternatives (LarkReaderOptions); more is a
// kResourceLimit error at the rule's position.
Status SimplifyRule(const NodePtr& tree, int64_t max_alternatives, std::vector<Alternative>* out);

}  // namespace cfgmask::lark

#endif  // CFGMASK_GRAMMAR_EBNF_TO_BNF_H_
