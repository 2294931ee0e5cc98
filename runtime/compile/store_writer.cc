// The store writer: see store_writer.h.  The payload is every field of
// CompiledStore in store_format.h's order (CFGMASK_STORE_FIELDS), each array
// as a 64-bit count and its raw bytes at 8-byte aligned offsets; the header
// (StoreFileHeader) gives its size and checksums; both go to the file
// through WriteFileAtomically, so a killed compile never leaves a partial
// store and a file being replaced never changes under a reader that read
// the old one.
#include "runtime/compile/store_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "maskstore/store_format.h"

namespace cfgmask {
namespace {

bool WriteAll(int fd, const char* data, size_t size);

// The payload's bytes, streamed to the file through a small buffer (no copy
// of the store in memory), with the checksums the header gives: of the
// whole payload and of its index part.
class Writer {
 public:
  explicit Writer(int fd) : fd_(fd) { buf_.reserve(kBuffer); }
  template <typename T>
  void Pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  // Count and elements, each at an 8-byte aligned offset.
  template <typename T>
  void Vec(const StoreArray<T>& v) {
    Align();
    Pod<uint64_t>(v.size());
    if (!v.empty()) Put(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    Align();
  }
  void Align() {
    static const char zeros[8] = {};
    Put(zeros, (8 - size_ % 8) % 8);
  }
  void Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    Put(s.data(), s.size());
  }
  // The index part ends here (its size and checksum go to the header).
  void IndexEnd() {
    index_end = size_;
    index_checksum = sum_.Value();
  }
  // Writes what the buffer holds; false when a write failed (now or before).
  bool Flush() {
    ok_ = ok_ && WriteAll(fd_, buf_.data(), buf_.size());
    buf_.clear();
    return ok_;
  }
  uint64_t size() const { return size_; }
  uint64_t checksum() const { return sum_.Value(); }
  uint64_t index_end = 0, index_checksum = 0;

 private:
  static constexpr size_t kBuffer = size_t{1} << 20;
  void Put(const char* p, size_t n) {
    sum_.Add(p, n);
    size_ += n;
    if (buf_.size() + n > kBuffer) Flush();
    if (n >= kBuffer) {
      ok_ = ok_ && WriteAll(fd_, p, n);
    } else {
      buf_.insert(buf_.end(), p, p + n);
    }
  }
  int fd_;
  bool ok_ = true;
  std::vector<char> buf_;
  uint64_t size_ = 0;
  StreamChecksum sum_;
};

// The payload of `s`, store_format.h's fields in order; the per-root row
// checksums are computed from the rows as written.
void WritePayload(const CompiledStore& s, Writer* w) {
#define CFGMASK_STR(f) w->Str(s.f);
#define CFGMASK_POD(f) w->Pod(s.f);
#define CFGMASK_VEC(f) w->Vec(s.f);
#define CFGMASK_STRINGS(f)                       \
  w->Pod<uint64_t>(s.f.size());                  \
  for (const std::string& one : s.f) w->Str(one);
#define CFGMASK_SUMS(f)                                                                     \
  {                                                                                         \
    std::vector<uint64_t> sums(static_cast<size_t>(std::max(s.num_roots, 0)));              \
    for (int32_t root = 0; root < s.num_roots; ++root) sums[root] = RootRowsChecksum(s, root); \
    w->Vec(StoreArray<uint64_t>(std::move(sums)));                                          \
  }
#define CFGMASK_INDEX_END() \
  w->Align();               \
  w->IndexEnd();
  CFGMASK_STORE_FIELDS(CFGMASK_STR, CFGMASK_POD, CFGMASK_VEC, CFGMASK_STRINGS, CFGMASK_SUMS,
                       CFGMASK_INDEX_END)
  w->Align();
}

bool WriteAll(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool WriteAllAt(int fd, const char* data, size_t size, off_t at) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A random suffix for a temporary name (16 hex digits).
std::string RandomSuffix() {
  uint64_t r = 0;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, &r, sizeof(r)) != static_cast<ssize_t>(sizeof(r))) {
    r = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  if (fd >= 0) close(fd);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(r));
  return buf;
}

}  // namespace

// Writes `head` + `body` to `path` so that a reader (or a later run, after
// this process is killed at any instant) sees either the old file or the
// complete new one.  Only a regular file (or a new name) is written: a
// device node, FIFO, socket or directory at `path` is refused, never
// replaced.  The bytes go to an unnamed file in the same folder (O_TMPFILE:
// it vanishes with the process if killed), synced, then linked under a
// temporary name of our own (`path`.tmp.<16 random hex digits>, created
// exclusively: an existing name is never reused or removed) and renamed
// over `path`.  Where the filesystem has no O_TMPFILE, a named temporary
// file (O_CREAT | O_EXCL, the same kind of name) takes its place.  Only the
// names this call created are ever removed; a writer killed between the
// link and the rename leaves its complete temporary file, which no later
// run deletes (it may be someone's file).
Status WriteFileAtomically(const std::string& path, const std::string& head,
                           const std::string& body) {
  return WriteFileAtomically(path, [&](int fd) {
    return WriteAll(fd, head.data(), head.size()) && WriteAll(fd, body.data(), body.size());
  });
}

Status WriteFileAtomically(const std::string& path, const std::function<bool(int fd)>& fill) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kIo, path + ": is not a regular file (" +
                                      (S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket") +
                                      "); refusing to replace it");
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::string tmp;
  bool named = false, created = false;
  int fd = open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    named = true;
    for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
      tmp = path + ".tmp." + RandomSuffix();
      fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) break;
    }
    created = fd >= 0;
  }
  if (fd < 0) return Status(ErrorCode::kIo, path + ": cannot write: " + std::strerror(errno));
  errno = 0;
  bool ok = fill(fd) && fsync(fd) == 0;
  if (!ok && errno == 0) errno = EIO;
  int err = errno;
  if (ok && !named) {
    // Umask-respecting mode, as a named file would get.
    const mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    ok = false;
    // linkat never replaces an existing name: a clash takes another suffix.
    for (int attempt = 0; attempt < 16 && !ok; ++attempt) {
      tmp = path + ".tmp." + RandomSuffix();
      ok = linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) == 0;
      err = errno;
      if (!ok && err != EEXIST) break;
    }
    created = ok;
  }
  ok = (close(fd) == 0) && ok;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    if (created) unlink(tmp.c_str());  // our own name only
    return Status(ErrorCode::kIo, path + ": write failed: " + std::strerror(err));
  }
  return Status::Ok();
}

// The payload is streamed to the file after a header of zeros; the header,
// whose sizes and checksums are known only then, is written over them.
Status WriteStoreFile(const CompiledStore& store, const std::string& path) {
  return WriteFileAtomically(path, [&](int fd) {
    StoreFileHeader h;
    std::memset(&h, 0, sizeof(h));
    if (!WriteAll(fd, reinterpret_cast<const char*>(&h), sizeof(h))) return false;
    Writer payload(fd);
    WritePayload(store, &payload);
    if (!payload.Flush()) return false;
    std::memcpy(h.magic, kStoreMagic, sizeof(h.magic));
    h.format = kStoreFormatVersion;
    h.cfgmask_version = kCfgmaskVersion;
    h.tokenizer_identity = store.tokenizer_identity;
    h.payload_bytes = payload.size();
    h.payload_checksum = payload.checksum();
    h.index_bytes = payload.index_end;
    h.index_checksum = payload.index_checksum;
    return WriteAllAt(fd, reinterpret_cast<const char*>(&h), sizeof(h), 0);
  });
}

}  // namespace cfgmask
