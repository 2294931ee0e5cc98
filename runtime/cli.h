// Helpers of the `cfgmask` command that are not argument handling: cutting a
// text into vocabulary tokens for teacher forcing (`check`, `bench`) and
// drawing a token from a mask (`sample`).  They read only the vocabulary held
// in a CompiledStore, so a store is checked without its tokenizer file.
//
// Segmentation walks a byte trie of the vocabulary (lexer/vocab_trie.h) from
// each position and collects every token whose bytes are a prefix of the rest
// of the text: greedy takes the longest, random picks one of them uniformly
// (a fixed seed makes runs repeatable).  This is not the tokenizer's own
// encoding, and need not be: a mask must allow every token sequence that
// spells a valid text, whichever one a model would have produced.
//
// `check --segment canonical` instead reads the tokenizer's own encoding of
// each file from a companion file of token ids (ReadTokenIds), written by
// tests/tools/canonical_ids.py with the HF `tokenizers` package: the ids'
// bytes must spell the file exactly.
//
// `sample` ends every walk with a complete program: when a walk reaches its
// token budget, Completer searches for a shortest byte string that makes the
// text complete (A* over single bytes, each step taken on the session itself
// and rolled back; the estimate of the remaining length is a lower bound on
// the terminals the parser still has to shift, from its LALR tables), and the
// string is then cut into tokens, each checked against its mask.
// Tested by tests/py/test_cli.py and tests/py/test_cli_corpus.py.
#ifndef CFGMASK_RUNTIME_CLI_H_
#define CFGMASK_RUNTIME_CLI_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lexer/vocab_trie.h"
#include "maskstore/compiled_store.h"
#include "runtime/session.h"

namespace cfgmask {

enum class SegmentMode {
  kGreedy = 0,  // longest vocabulary token at each position
  kRandom = 1,  // uniform among the tokens that match at each position
  kBytes = 2,   // no tokens: one byte at a time (Session::AdvanceBytes)
  kCanonical = 3,  // the tokenizer's own encoding, read from FILE.ids (ReadTokenIds)
};

// One step of a segmented text: a token id, or (kBytes mode, or a byte no
// non-special token starts with) a single raw byte with token == -1.
struct Segment {
  int32_t token = -1;   // -1 = raw byte
  int32_t offset = 0;   // byte offset in the text
  int32_t length = 0;   // bytes covered
};

// The byte trie of a store's vocabulary (special tokens marked as such).
VocabTrie StoreVocabTrie(const CompiledStore& store);

class Segmenter {
 public:
  explicit Segmenter(const CompiledStore& store);

  // Cuts `text` into steps; `rng` is used by kRandom only.
  std::vector<Segment> Cut(std::string_view text, SegmentMode mode, std::mt19937_64* rng) const;

 private:
  // Appends every (token, length) whose bytes are a prefix of `rest`.
  void Matches(std::string_view rest, std::vector<std::pair<int32_t, int32_t>>* out) const;

  VocabTrie trie_;
};

// Reads whitespace-separated decimal token ids (`ids_text`, from file
// `ids_path`) as the segmentation of `text` (from `text_path`): every id must
// be a non-special token of the store's vocabulary and their bytes, in order,
// must spell `text` exactly.  Errors (kInvalidArgument) are one line with the
// position: "IDS:LINE:COL: ..." for a malformed or unknown id,
// "TEXT:LINE:COL: ..." where the ids' bytes and the text part.
Status ReadTokenIds(const CompiledStore& store, std::string_view ids_path,
                    std::string_view ids_text, std::string_view text_path,
                    std::string_view text, std::vector<Segment>* out);

// A hash of everything that decides the session's future (lexer state,
// column, open slots, parser stack, indentation): sessions with equal keys
// accept the same continuations (up to hash collisions).
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

  // A lower bound on the number of terminals the parser must still shift
  // from `stack` to accept (lookaheads relaxed: any action of a state may be
  // taken; the indenter's _INDENT/_DEDENT cost nothing).  INT32_MAX if the
  // parser can never accept from there.
  int32_t StackCost(const std::vector<int32_t>& stack) const;

 private:
  int32_t Estimate(const Session& session);

  const CompiledStore& s_;
  int32_t max_rule_length_ = 0;
  std::vector<int32_t> terminal_cost_;        // per parse terminal
  std::vector<int32_t> nonterminal_cost_;     // [state * N + A]: shifts to derive A from state
  // Per state: shift moves (target, cost), reductions (rule ids), accept.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> moves_;
  std::vector<std::vector<int32_t>> reduces_;
  std::vector<uint8_t> accepts_;
  std::unordered_map<uint64_t, int32_t> stack_cost_memo_;
};

// Draws a token from `mask` (ceil(V/32) words); with `ascii_only`, among the
// allowed tokens made of printable ASCII, tab and newline when there are any.
// With probability
// `eos_bias` an allowed EOS id when one is allowed, otherwise uniformly among
// the allowed non-EOS tokens (an EOS only when nothing else is allowed).
// Returns -1 when the mask is empty.
int32_t DrawToken(const CompiledStore& store, const std::vector<uint32_t>& mask, double eos_bias,
                  std::mt19937_64* rng, bool ascii_only = false);

// "FILE:LINE:COL" for a byte offset into `text` (1-based line and column,
// columns counted in bytes).
std::string TextPosition(std::string_view file, std::string_view text, size_t offset);

// A token's bytes, printable: C-style escapes for control and non-ASCII bytes.
std::string Printable(std::string_view bytes, size_t max_len = 40);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_CLI_H_
