// GGUF metadata reader.  A GGUF file (llama.cpp, versions 2 and 3) starts
// with the magic "GGUF", a uint32 version, a uint64 tensor count and a uint64
// key/value count, then that many (key, type, value) records: strings are a
// uint64 length plus bytes, arrays a uint32 element type plus a uint64 count
// plus the elements (arrays may nest).  Tensor descriptions and data follow;
// this reader stops after the metadata, so a full model file costs only its
// header to read.  Every length is checked against the bytes left in the
// file before anything is allocated, so a truncated or corrupted file gives a
// kTokenizer Status "FILE: offset N: what" and never a crash or a huge
// allocation.  Only little-endian files are accepted.
// Tested by tokenizer_test.cc.
#ifndef CFGMASK_LEXER_GGUF_READER_H_
#define CFGMASK_LEXER_GGUF_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/base/status.h"

namespace cfgmask {

enum class GgufType : uint32_t {
  kUint8 = 0,     // 1-byte unsigned integer
  kInt8 = 1,      // 1-byte signed integer
  kUint16 = 2,    // 2-byte unsigned integer
  kInt16 = 3,     // 2-byte signed integer
  kUint32 = 4,    // 4-byte unsigned integer
  kInt32 = 5,     // 4-byte signed integer
  kFloat32 = 6,   // IEEE single
  kBool = 7,      // 1 byte, 0 or 1
  kString = 8,    // uint64 length + bytes
  kArray = 9,     // uint32 element type + uint64 count + elements
  kUint64 = 10,   // 8-byte unsigned integer
  kInt64 = 11,    // 8-byte signed integer
  kFloat64 = 12,  // IEEE double
};

// One metadata value.  Scalars fill one of `integer`, `real`, `text`; arrays
// of scalars fill `strings`, `integers` or `reals` (bools and integers both
// land in `integers`); arrays of arrays keep only their length.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  GgufType element_type = GgufType::kUint8;  // arrays only
  uint64_t offset = 0;                       // file offset of the value
  int64_t integer = 0;   // integer and bool scalars (uint64 above 2^63 wraps)
  double real = 0;       // float scalars
  std::string text;      // string scalars
  uint64_t array_length = 0;
  std::vector<std::string> strings;
  std::vector<int64_t> integers;
  std::vector<double> reals;

  bool is_integer() const;  // an integer or bool scalar
};

struct GgufMetadata {
  uint32_t version = 0;
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  uint64_t file_size = 0;
  uint64_t metadata_end = 0;  // offset just after the last key/value record
  std::map<std::string, GgufValue, std::less<>> values;

  const GgufValue* Find(std::string_view key) const;
};

// True when `head` (the first bytes of a file) starts with the GGUF magic.
bool LooksLikeGguf(std::string_view head);

// Reads the header and all key/value records of `path`.  Values whose key
// `keep` rejects are parsed and bounds-checked but not stored (merges, chat
// templates); a null `keep` stores everything.
Status ReadGgufMetadata(const std::string& path,
                        const std::function<bool(std::string_view)>& keep,
                        GgufMetadata* out);

}  // namespace cfgmask

#endif  // CFGMASK_LEXER_GGUF_READER_H_
