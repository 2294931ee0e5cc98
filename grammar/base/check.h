// Internal invariant checks.  CFGMASK_CHECK is always on (cheap, off the hot
// path); CFGMASK_DCHECK compiles out in release builds.  A failed check is a
// bug in cfgmask, never a user error: user errors are Status values.
#ifndef CFGMASK_GRAMMAR_BASE_CHECK_H_
#define CFGMASK_GRAMMAR_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define CFGMASK_CHECK(cond)                                                        \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "cfgmask: internal error: %s:%d: check failed: %s\n", \
                   __FILE__, __LINE__, #cond);                                     \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

#ifdef NDEBUG
#define CFGMASK_DCHECK(cond) \
  do {                       \
  } while (0)
#else
#define CFGMASK_DCHECK(cond) CFGMASK_CHECK(cond)
#endif

#endif  // CFGMASK_GRAMMAR_BASE_CHECK_H_
