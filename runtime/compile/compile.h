// The compile driver: the whole offline pipeline behind `cfgmask compile`
// and the Python package's compile_grammar, in one place.  Its phases, in
// layer order, each taking what the earlier ones made and timed into the
// store's statistics:
//
//   grammar    the .lark file read into BNF, the indenter decided (grammar/)
//   lalr       LALR(1) tables (parser/lalr.h)
//   automaton  the terminal automaton and what may follow each terminal
//              (lexer/terminal_automaton.h, lexer/terminal_successors.h)
//   tokenizer  the tokenizer read and prepared, --eos applied
//              (maskstore/prepared_tokenizer.h), and the store's grammar
//              side: terminal and parse tables, each parser state's scanner,
//              table surgery (maskstore/scanner_tables.h)
//   walk       the vocabulary walk: nfa_transition and the mask-store rows
//              (maskstore/vocab_walk.h, with its own WalkOptions)
//   store      the automaton frozen, items and sequences numbered, the
//              successors' tables filled (FillSuccessorTables)
//   streamline the streamlining pass (streamline/streamline.h), unless off
//
// and the store file written (WriteCompiledStore, store_writer.h).  Every
// phase is a function of a lower folder that returns to this driver; no
// phase calls back up.  Each product is released by the phase that uses it
// last: the store phases own the parse tables, successors, automaton and
// tokenizer (maskstore/store_input.h), the streamlining pass the grammar
// (StreamlineCompiledStore), so that the driver enters each folder once, in
// layer order; the store itself is made when the store phases begin.
// With more than one thread (num_threads), what may follow each terminal is
// computed on a thread of its own from the end of the grammar phase, beside
// the LALR tables, the automaton, the tokenizer and the walk (none of which
// reads it), and waited for in the store phase; its error, if any, is the
// compile's where the serial compile (one thread) meets it, after the
// automaton and before any later phase's error.  Same store either way.
// Progress goes to options.progress, phase by phase, with seconds counted
// from the start of the whole compile.  Defaults are maskstore/defaults.h.
// Tested by compile_test.cc, vocab_walk_test.cc and resource_limits_test.cc.
#ifndef CFGMASK_RUNTIME_COMPILE_COMPILE_H_
#define CFGMASK_RUNTIME_COMPILE_COMPILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"
#include "maskstore/defaults.h"
#include "maskstore/prepared_tokenizer.h"
#include "maskstore/vocab_walk.h"
#include "streamline/streamline.h"

namespace cfgmask {

// A progress report of the compile (CompileOptions::progress).
struct CompileProgress {
  // The phase starting or under way, in this order: "grammar", "lalr",
  // "automaton", "tokenizer", "walk", "store", "streamline".
  std::string phase;
  double walk_fraction = 0;  // share of the vocabulary walk done, in [0,1]; never decreases
  double seconds = 0;        // since the compile began
};

struct CompileOptions {
  std::string start;  // start rule; empty = "start"
  // "python", "none", or "auto" (declared _INDENT/_DEDENT)
  std::string indenter = std::string(defaults::kIndenter);
  // Resource limits: exceeding one stops the compile with kResourceLimit and
  // a message naming the limit.
  int32_t max_lexer_states = defaults::kMaxLexerStates;    // terminal-automaton states
  int32_t max_roots = defaults::kMaxRoots;                 // lexer states at token boundaries
  int64_t max_store_entries = defaults::kMaxStoreEntries;  // nfa_transition (root, token, S) entries
  int64_t max_store_rows = defaults::kMaxStoreRows;        // mask-store rows (root, S)
  double max_seconds = defaults::kMaxSeconds;  // wall time of the whole compile; 0 = none
  // Bytes of heap the compile may add (enforced for the whole compile by
  // CompileGrammar); 0 = three quarters of the machine's physical memory.
  int64_t max_memory = defaults::kMaxMemory;
  // When set, receives one line per likely mistake the compile accepts
  // ("FILE:LINE:COL: warning: ..."): unreachable rules, unused terminals,
  // %declare'd terminals nothing produces.
  std::vector<std::string>* warnings = nullptr;
  // A token whose walk from a root holds more lexing hypotheses than this
  // at some byte is not given rows under that root: the runtime checks it by
  // simulation (CompiledStore::sim_token).  Exact either way; this bounds the
  // walk on tokens with exponentially many splits.
  int32_t max_walk_hypotheses = defaults::kMaxWalkHypotheses;
  // Bytes the vocabulary walk may keep of finished sub-walks (the subtree
  // below a first byte from one walk state, shared by every root that reaches
  // it) between batches of roots; past it, those the latest batch did not
  // use are dropped, least recently used first.  Speed only: the store is the
  // same for any value (0: none kept across batches).
  int64_t walk_memo_bytes = defaults::kWalkMemoBytes;
  // The walk drops a lexing as soon as two adjacent terminals of it can never
  // touch (FOLLOW).  Off, the store holds every lexing of the terminal
  // automaton, as the design's nfa_transition does, and the never-legal
  // streamlining step deletes them instead: same masks, more work; for
  // measuring reductions against the design's (cfgmask compile
  // --no-pair-pruning).
  bool prune_pairs = defaults::kPrunePairs;
  // Lexer modes (parser/lexer_modes.h): where the grammar's scanners split
  // into parts that no parser state scans together (an f-string's text and
  // code), the lexer keeps them apart.  Off, every terminal is live after
  // every boundary: the same masks from a larger automaton; for measuring
  // (cfgmask compile --no-lexer-modes).
  bool lexer_modes = defaults::kLexerModes;
  // Threads of the vocabulary walk and of streamlining: 0 = all cores, 1 =
  // serial; above 1, the terminals' successors also run on one more thread
  // beside the phases up to the walk's end.  The store is byte-identical for
  // every value.
  int32_t num_threads = defaults::kNumThreads;
  std::vector<std::string> import_paths;
  std::string lark_grammars_dir;  // see LarkReaderOptions
  // When set, receives the BNF grammar the store is built from (for the
  // analyses that run after the build, e.g. interchangeable terminals).
  Grammar* grammar_out = nullptr;
  // Receives a report when each phase begins and, during the vocabulary
  // walk, after each batch of roots, on the thread that called the compile.
  // It may throw: the compile then unwinds and `out` is left empty.
  std::function<void(const CompileProgress&)> progress;
  // Tests only: walk just these token ids (empty: the whole vocabulary).
  std::vector<int32_t> vocab_subset;
  // Tests only: receives the automaton and every nfa_transition entry.
  WalkRecord* record = nullptr;
};

// The store phases alone (grammar to store: no streamlining, no memory
// budget, no option check), for tests and tools that look at the store as
// built.
Status CompileStore(const std::string& grammar_path, const std::string& tokenizer_path,
                    const CompileOptions& options, CompiledStore* out);
// The same with a prepared tokenizer: the store's seconds_tokenizer is 0
// (no tokenizer work in this compile).
Status CompileStore(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                    const CompileOptions& options, CompiledStore* out);

// Both compile the same way: options are checked first (a bad one is
// kInvalidArgument); the compile runs under a heap budget of
// options.max_memory bytes (0: DefaultMaxMemory()), and running out of
// memory anywhere in it, by that budget or by the machine, is one
// kResourceLimit error naming the phase, with `out` left empty.
int64_t DefaultMaxMemory();  // three quarters of the physical memory

// Is `v` an indenter the compile accepts (defaults::kIndenterChoices)?  The
// command line and the binding check their arguments with it.
bool IsIndenterChoice(std::string_view v);


// What a compile found beyond the store's own statistics: the streamlining
// pass's named steps (the seed's figure 6) and the interchangeable terminal
// classes it reports (by terminal name).
struct CompileDetails {
  std::vector<StreamlineStep> streamline_steps;
  // When set, receives a copy of the store as built, before streamlining
  // (`cfgmask reduction` walks both).
  CompiledStore* unstreamlined = nullptr;
  std::vector<std::vector<std::string>> interchangeable;
};

// `eos`, when not empty, names the end-of-sequence token (a token id in
// decimal, or the token's exact text) for a tokenizer that names none or
// another one: it becomes the store's only EOS and is never text.
// `details`, when given, receives CompileDetails.
Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos = "", CompileDetails* details = nullptr);
// The same into a store the compile makes when its store phases begin (null
// after an error): for a caller that needs the store only from the compile on
// (`cfgmask compile`).
Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline,
                      std::unique_ptr<CompiledStore>* out, const std::string& eos = "",
                      CompileDetails* details = nullptr);
// The same with a tokenizer prepared once (PrepareTokenizer) for many grammars.
Status CompileGrammar(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                      const CompileOptions& options, bool streamline, CompiledStore* out,
                      const std::string& eos = "", CompileDetails* details = nullptr);

// The last step of the pipeline: the store written to `path`
// (store_writer.h: the format of maskstore/store_format.h, the file replaced
// atomically), nothing left behind on failure.
Status WriteCompiledStore(const CompiledStore& store, const std::string& path);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_COMPILE_COMPILE_H_
