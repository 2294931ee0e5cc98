// Every default of a compile and of a decoding session, defined once: the
// option structs (runtime/compile/compile.h CompileOptions, maskstore/vocab_walk.h
// WalkOptions, streamline/streamline.h StreamlineOptions, runtime/session.h
// SessionLimits), the command line (runtime/cli/cfgmask_main.cc), the Python
// binding (runtime/python/cfgmask_python.cc, which exports them as
// cfgmask._core.DEFAULTS) and the Python package read them from here.
// Tested by tests/py/test_package.py (the binding's and the package's
// defaults are this header's).
#ifndef CFGMASK_MASKSTORE_DEFAULTS_H_
#define CFGMASK_MASKSTORE_DEFAULTS_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace cfgmask::defaults {

// Compile.
inline constexpr std::string_view kIndenter = "auto";  // "auto", "python" or "none"
inline constexpr int32_t kMaxLexerStates = 2000000;      // terminal-automaton states
inline constexpr int32_t kMaxRoots = 200000;             // lexer states at token boundaries
inline constexpr int64_t kMaxStoreEntries = 2000000000;  // nfa_transition (root, token, S) entries
inline constexpr int64_t kMaxStoreRows = 200000000;      // mask-store rows (root, S)
inline constexpr double kMaxSeconds = 3600;              // wall time of a compile; 0 = none
inline constexpr int64_t kMaxMemory = 0;       // heap a compile may add; 0 = 3/4 of physical memory
inline constexpr int32_t kMaxWalkHypotheses = 128;       // per token and root, else simulated
inline constexpr int64_t kWalkMemoBytes = int64_t{64} << 20;  // finished sub-walks kept
inline constexpr bool kPrunePairs = true;                // drop lexings FOLLOW refutes
inline constexpr bool kLexerModes = true;                // lex each scanner's mode apart
inline constexpr bool kStreamline = true;                // run the streamlining pass
inline constexpr int32_t kNumThreads = 0;                // 0 = all cores

// Streamlining's exploration.
inline constexpr int32_t kExplorationMaxStack = 8;       // known part of the parse stack
inline constexpr int64_t kExplorationMaxSteps = 50000;   // per query; beyond it: not proved
inline constexpr int64_t kExplorationMemoBytes = int64_t{64} << 20;  // per step's memo

// Decoding session.
inline constexpr int32_t kMaxLiveStates = 64;            // lexing hypotheses per step
inline constexpr int64_t kSessionMemoBytes = int64_t{16} << 20;  // the session's row memo

// The indenter choices a compile accepts: the Python indenter when the
// grammar declares _INDENT/_DEDENT, always, or never (checked by the compile
// driver's IsIndenterChoice, runtime/compile/compile.h).
inline constexpr std::array<std::string_view, 3> kIndenterChoices = {"auto", "python", "none"};

}  // namespace cfgmask::defaults

#endif  // CFGMASK_MASKSTORE_DEFAULTS_H_
