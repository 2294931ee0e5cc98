// Lexer modes, the data: see lexer_modes.h.
#include "grammar/lexer_modes.h"

#include <algorithm>

namespace cfgmask {

std::string LexerModes::DebugString(const Grammar& grammar) const {
  std::string out;
  for (int32_t k = 0; k < std::max(num_modes, 1); ++k) {
    out += "mode " + std::to_string(k) + ":";
    for (int32_t t = 0; t < static_cast<int32_t>(mode_of.size()); ++t) {
      if (mode_of[t] == k) out += " " + grammar.terminals[t].name;
    }
    out += "\n";
  }
  return out;
}

}  // namespace cfgmask
