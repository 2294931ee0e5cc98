// The last step of the compile pipeline: the store written to its file.
// The format is maskstore/store_format.h (shared with the reader,
// maskstore/store_file.cc); this is the writing: the payload laid out field
// by field, the header, and the file replaced atomically so that nothing
// half-written is ever left.  Tested by store_file_test.cc.
#ifndef CFGMASK_RUNTIME_COMPILE_STORE_WRITER_H_
#define CFGMASK_RUNTIME_COMPILE_STORE_WRITER_H_

#include <functional>
#include <string>

#include "grammar/base/status.h"
#include "maskstore/compiled_store.h"

namespace cfgmask {

// Writes `store` to `path` (WriteFileAtomically), its per-root row
// checksums computed from the rows as written; the payload is streamed to
// the file (no second copy of the store in memory).
Status WriteStoreFile(const CompiledStore& store, const std::string& path);

// Writes `head` + `body` to `path` atomically (the old file or the complete
// new one, whenever the process is killed), to a regular file only, through
// a temporary name of its own (store_writer.cc says how).
Status WriteFileAtomically(const std::string& path, const std::string& head,
                           const std::string& body);
// The same, the contents written by `fill` to the open file (false: a write
// failed, errno says why), so that a large file needs no copy in memory.
Status WriteFileAtomically(const std::string& path, const std::function<bool(int fd)>& fill);

}  // namespace cfgmask

#endif  // CFGMASK_RUNTIME_COMPILE_STORE_WRITER_H_
