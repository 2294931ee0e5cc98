// Shortest completions of a session's text, for `cfgmask sample` and the
// Python matcher's steering: when a walk reaches its token budget, Completer
// searches for a shortest byte string that makes the text complete (A* over
// single bytes, each step taken on the session itself and rolled back; the
// estimate of the remaining length is a lower bound on the bytes of the
// terminals the parser still has to shift, from its LALR tables with their
// lookaheads and each terminal's shortest spelling on the store's lexer,
// less what the terminal in progress may have written already; with a
// suffix, less what the suffix's own terminals can cost), and CompleteWithTokens
// cuts the string into tokens, each checked against its mask, rolling the
// walk back further when no completion is found within the budget.
// Tested by tests/py/test_cli.py (sample), viable_prefix_test.cc and
// tests/py/test_package.py.
#ifndef CFGMASK_RUNTIME_COMPLETION_H_
#define CFGMASK_RUNTIME_COMPLETION_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "maskstore/compiled_store.h"
#include "runtime/segment.h"
#include "runtime/session.h"

namespace cfgmask {

// A hash of everything that decides the session's future (lexer state,
// column, open slots, parser stack, indentation) and, with a scope layer,
// of the layer's reading state (ScopeLayer::ReadingHash: the lexeme,
// string, escape and f-string being read) and, where the names decide what
// may follow (ScopeLayer::NamesMatter: a check armed on a name, a pending
// nonlocal, a declaration's name being written), of its names
// (ScopeLayer::NamesHash).  Sessions with equal keys accept the same
// continuations (up to hash collisions), with a layer up to names that
// decide nothing yet; a completion the search returns is always checked on
// the session itself.
uint64_t SessionKey(const Session& session);

enum class CompletionResult { kFound, kNone, kBudget };

// Shortest completions for `sample`.
class Completer {
 public:
  explicit Completer(const CompiledStore& store);

  // Searches for a shortest byte string c such that the session's text + c
  // is a complete program (Session::CanEnd), making at most `max_nodes`
  // search nodes: time and memory are linear in that budget.  kFound sets
  // *completion (possibly empty); kNone means every configuration reachable
  // from here was searched and none can end (a dead end); kBudget, that the
  // budget ran out first.  The session is left as it was.  `nodes_used`
  // receives the nodes made.
  CompletionResult Search(Session* session, int64_t max_nodes, std::string* completion,
                          int64_t* nodes_used = nullptr);
  // Search() == kFound.
  bool Find(Session* session, int64_t max_nodes, std::string* completion,
            int64_t* nodes_used = nullptr);

  // A completion made of whole terminals, for steering where the byte-level
  // search runs out of its budget with a suffix (its bound is near zero
  // there, so it is breadth-first over bytes, and a middle that must open a
  // block the suffix goes on in, `try:` before an `except`, is past any
  // budget).  Breadth-first over edges, each a whole terminal at its
  // shortest spelling on the store's lexer (Spellings; a blank before it
  // where it would otherwise join the word before), or, with the indenter, a
  // line break and the indentation of a level the hypotheses hold, of a line
  // of the suffix or one step deeper (or, at the start of a line, the blanks
  // up to such a column); configurations met before (SessionKey) are not
  // expanded again.  The goal is Session::CanEnd (with the suffix), after an
  // edge or after an edge and a join: the start of a terminal's spelling
  // whose rest begins the suffix (`i` before the suffix `f x:`).  Not a
  // shortest completion: the fewest edges, and only spellings of this kind.
  // kFound sets *completion; kBudget: `max_nodes` nodes made without one;
  // kNone: every configuration these edges reach was expanded (this search
  // proves nothing: other texts may complete).  The session is left as it was.
  CompletionResult SearchSpelled(Session* session, int64_t max_nodes, std::string* completion,
                                 int64_t* nodes_used = nullptr);

  // Search, then, where it runs out of its budget and the session has a
  // suffix, SearchSpelled with the same budget: what steering uses.  kNone
  // only from Search (a proved dead end).
  CompletionResult SearchForSteering(Session* session, int64_t max_nodes, std::string* completion,
                                     int64_t* nodes_used = nullptr);

  // Per lexer terminal, a shortest text the store's lexer ends as it ("" if
  // never met; the search of LexedMinBytes, keeping the bytes), made once.
  const std::vector<std::string>& Spellings();

  // The search's estimate for the session as it is: a lower bound on the
  // bytes of any completion (with a suffix: of any middle m such that the
  // text + m + the suffix is complete); INT32_MAX if no hypothesis can
  // complete.  For tests, which compare it with a breadth-first search.
  int32_t Bound(const Session& session) { return Estimate(session); }

  // A lower bound on the bytes of the terminals the parser must still shift
  // from `stack` to accept, each at its shortest spelling (the indenter's
  // _INDENT one byte, its _DEDENT nothing).  Reductions respect the
  // lookaheads: between two shifts every reduction is the tables' action on
  // the one terminal shifted next, and the last ones on $END; a derivation
  // of a nonterminal pushed over the stack counts its fewest shifts
  // (lookaheads relaxed inside).  The proof is at its definition.  INT32_MAX
  // if the parser can never accept from there.
  int32_t StackCost(const std::vector<int32_t>& stack) const;

 private:
  int32_t Estimate(const Session& session);
  // With suffix S: at least the costs (credit_cost_) of the terminals that
  // end inside S in any completion text + m + S, whatever the middle m
  // (at most |S|; memoised for the last suffix asked).
  int64_t SuffixCredit(const std::string& suffix);
  std::string credit_suffix_;
  int64_t credit_suffix_value_ = 0;
  // Per lexer terminal, the fewest bytes of a text the store's lexer ends as
  // it (a breadth-first search over its steps; 0 if never met).
  std::vector<int32_t> LexedMinBytes() const;
  // The search of both: per lexer terminal its fewest bytes and (with
  // `spellings`) a text of that many, either may be null.
  void LexerSearch(std::vector<int32_t>* bytes, std::vector<std::string>* spellings) const;
  std::vector<std::string> spellings_;
  bool spelled_ = false;
  // What the terminal in progress at lexer state q may already have
  // written of the bytes StackCost counts for it: the most, over the
  // terminals that can still end from q, of the terminal's cost less the
  // fewest bytes that end it from q (a breadth-first search over the
  // lexer's steps, memoised per state).
  int32_t Credit(int32_t q);

  const CompiledStore& s_;
  int32_t max_rule_length_ = 0;
  int32_t max_terminal_cost_ = 1;
  std::vector<int32_t> terminal_cost_;        // per parse terminal
  std::vector<int32_t> nonterminal_cost_;     // [state * N + A]: shifts to derive A from state
  // Per state: shift moves (target, cost), reductions (rule ids), accept.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> moves_;
  std::vector<std::vector<int32_t>> reduces_;
  // Per state: its reductions with their lookaheads, and how many of
  // moves_[state] are shifts (the rest: nonterminal moves).
  std::vector<std::vector<std::pair<int32_t, int32_t>>> reduce_on_;
  std::vector<int32_t> num_shifts_;
  // Per lexer terminal: what it may have written of StackCost's count when
  // in progress (its cost; for the indenter's newline, an _INDENT's too).
  std::vector<int32_t> credit_cost_;
  bool keyed_ = true;  // StackCost's keys hold the tables' sizes
  std::vector<uint8_t> accepts_;
  std::unordered_map<uint64_t, int32_t> stack_cost_memo_;
  std::unordered_map<int32_t, int32_t> credit_memo_;
  std::vector<int32_t> visit_stamp_;  // per lexer state: the Credit search that reached it
  int32_t stamp_ = 0;
};

// Ends the session's text with a shortest completion made of tokens: the
// completion Completer finds (at most 20,000 search nodes a try), cut
// greedily into tokens, each checked against its mask and taken, then EOS
// must be allowed.  When no completion is found within the budget it rolls
// back 8, 16, 32, ... tokens and tries again.  On success *tokens grows by
// the tokens taken (less those rolled back) and *why says what was done; on
// failure the session and *tokens are as they were and *why says why.
bool CompleteWithTokens(const CompiledStore& store, const Segmenter& segmenter,
                        Completer* completer, Session* session, int64_t* tokens,
                        std::string* why);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_COMPLETION_H_
