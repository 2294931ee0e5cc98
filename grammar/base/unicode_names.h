// Character names as a `\N{...}` escape of a Python string takes them: the
// names of the unicodedata of the Python that configured the build
// (grammar/base/gen_unicode_names.py; the strict Python grammar's reference,
// CPython 3.11, has Unicode 14.0.0), written in upper case as
// unicodedata.name() gives them, the CJK unified ideographs with four or
// five upper-case hex digits as CPython reads them.  CPython also takes
// lower-case spellings and the name aliases; these are refused here (a
// subset: every name accepted here is one CPython reads).
#ifndef CFGMASK_GRAMMAR_BASE_UNICODE_NAMES_H_
#define CFGMASK_GRAMMAR_BASE_UNICODE_NAMES_H_

#include <cstdint>
#include <string_view>

namespace cfgmask {

// Is `name` a character's name?
bool IsUnicodeName(std::string_view name);
// The code point a name stands for (as unicodedata.lookup gives it), or -1
// where IsUnicodeName(name) is false.
int32_t UnicodeNameCode(std::string_view name);
// Can `prefix` still become one (some name begins with it)?
bool IsUnicodeNamePrefix(std::string_view prefix);
// The Unicode version of the names (unicodedata.unidata_version).
std::string_view UnicodeNamesVersion();

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_BASE_UNICODE_NAMES_H_
