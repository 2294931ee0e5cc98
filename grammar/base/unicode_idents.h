// Python names above ASCII as CPython 3.11 reads them: a name is
// `str.isidentifier()` (XID_Start or `_`, then XID_Continue) and is compared
// after unicodedata.normalize('NFKC'), so `ﬁle` and `file` are one name.
// The data is the unicodedata of the Python that configured the build
// (grammar/base/gen_unicode_idents.py; CPython 3.11 has Unicode 14.0.0).
// Used by the strict Python grammar's scope layer (runtime/scope_layer.h),
// which judges each character of a name; the grammar's NAME takes any
// character above ASCII.
#ifndef CFGMASK_GRAMMAR_BASE_UNICODE_IDENTS_H_
#define CFGMASK_GRAMMAR_BASE_UNICODE_IDENTS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace cfgmask {

// May code point `cp` begin a name (ASCII: a letter or `_`)?
bool IsXidStart(uint32_t cp);
// May it go on a name (ASCII: a letter, a digit or `_`)?
bool IsXidContinue(uint32_t cp);
// Does some code point in [lo, hi] begin a name (AnyXidStartIn) or go on
// one (AnyXidContinueIn)?  How the scope layer refuses, at its first byte,
// a UTF-8 sequence that no character a name may hold completes.
bool AnyXidStartIn(uint32_t lo, uint32_t hi);
bool AnyXidContinueIn(uint32_t lo, uint32_t hi);
// NFKC of `s`, which must be well-formed UTF-8 (of a name's characters:
// the decompositions of characters outside XID_Continue are not held).  A
// composition never takes an ASCII character second, so NFKC(s + t) is
// NFKC(s) + t for ASCII t (checked by the generator).
std::string NfkcName(std::string_view s);
// The Unicode version of the data (unicodedata.unidata_version).
std::string_view UnicodeIdentsVersion();

}  // namespace cfgmask

#endif  // CFGMASK_GRAMMAR_BASE_UNICODE_IDENTS_H_
