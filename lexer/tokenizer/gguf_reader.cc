// GGUF metadata reader: a buffered, bounds-checked cursor over the file.
// The file is never read past the metadata, and every count read from it is
// compared with the bytes that remain before it is trusted: a string of
// length L needs L bytes, an array of C elements needs C times the smallest
// encoding of its element type.  So the largest allocation is bounded by the
// file size, whatever the header claims.  Tested by tokenizer_test.cc.
#include "lexer/tokenizer/gguf_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

namespace cfgmask {
namespace {

constexpr int kMaxArrayNesting = 8;  // GGUF writers never nest more than 2

// Smallest number of bytes one element of `type` occupies, 0 if unknown.
uint64_t MinEncodedSize(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 0;
}

bool IsScalarNumber(GgufType type) {
  return type != GgufType::kString && type != GgufType::kArray;
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// Sequential reader with a buffer of up to 1 MiB and a logical offset.
class Cursor {
 public:
  explicit Cursor(std::string path) : path_(std::move(path)) {}

  Status Open() {
    file_.reset(std::fopen(path_.c_str(), "rb"));
    if (!file_) return Status(ErrorCode::kIo, path_ + ": cannot open file");
    if (fseeko(file_.get(), 0, SEEK_END) != 0) return IoError();
    off_t end = ftello(file_.get());
    if (end < 0 || fseeko(file_.get(), 0, SEEK_SET) != 0) return IoError();
    size_ = static_cast<uint64_t>(end);
    buffer_.resize(std::min<uint64_t>(size_ + 1, 1 << 20));
    return Status::Ok();
  }

  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - offset_; }
  const std::string& path() const { return path_; }

  Status Error(uint64_t at, const std::string& what) const {
    return Status(ErrorCode::kTokenizer, path_ + ": offset " + std::to_string(at) + ": " + what);
  }

  Status Read(void* dst, uint64_t n, const char* what) {
    if (n > remaining()) {
      return Error(offset_, std::string("truncated ") + what + ": needs " + std::to_string(n) +
                                " bytes, " + std::to_string(remaining()) + " left");
    }
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      if (buffer_pos_ == buffer_len_) CFGMASK_RETURN_IF_ERROR(Fill());
      size_t take = std::min<uint64_t>(n, buffer_len_ - buffer_pos_);
      std::memcpy(out, buffer_.data() + buffer_pos_, take);
      out += take;
      buffer_pos_ += take;
      offset_ += take;
      n -= take;
    }
    return Status::Ok();
  }

  Status Skip(uint64_t n, const char* what) {
    if (n > remaining()) {
      return Error(offset_, std::string("truncated ") + what + ": needs " + std::to_string(n) +
                                " bytes, " + std::to_string(remaining()) + " left");
    }
    if (n <= buffer_len_ - buffer_pos_) {
      buffer_pos_ += n;
      offset_ += n;
      return Status::Ok();
    }
    offset_ += n;
    buffer_pos_ = buffer_len_ = 0;
    if (fseeko(file_.get(), static_cast<off_t>(offset_), SEEK_SET) != 0) return IoError();
    return Status::Ok();
  }

  template <typename T>
  Status ReadScalar(T* value, const char* what) {
    return Read(value, sizeof(T), what);
  }

  // A GGUF string: uint64 length, then the bytes.
  Status ReadString(std::string* s, const char* what) {
    uint64_t at = offset_;
    uint64_t length = 0;
    CFGMASK_RETURN_IF_ERROR(ReadScalar(&length, what));
    if (length > remaining()) {
      return Error(at, std::string(what) + " length " + std::to_string(length) + " exceeds the " +
                           std::to_string(remaining()) + " bytes left in the file");
    }
    if (s == nullptr) return Skip(length, what);
    s->resize(length);
    return Read(s->data(), length, what);
  }

 private:
  Status Fill() {
    buffer_pos_ = 0;
    buffer_len_ = std::fread(buffer_.data(), 1, buffer_.size(), file_.get());
    if (buffer_len_ == 0) return Error(offset_, "unexpected end of file while reading");
    return Status::Ok();
  }
  Status IoError() const { return Status(ErrorCode::kIo, path_ + ": cannot read file"); }

  std::string path_;
  std::unique_ptr<FILE, FileCloser> file_;
  std::vector<char> buffer_;
  size_t buffer_pos_ = 0;
  size_t buffer_len_ = 0;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
};

// Reads one scalar of `type` as an integer or a real.
Status ReadNumber(Cursor* in, GgufType type, int64_t* integer, double* real) {
  switch (type) {
    case GgufType::kUint8: {
      uint8_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "uint8 value"));
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kInt8: {
      int8_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "int8 value"));
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kBool: {
      uint64_t at = in->offset();
      uint8_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "bool value"));
      if (v > 1) return in->Error(at, "bool value " + std::to_string(v) + " is not 0 or 1");
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kUint16: {
      uint16_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "uint16 value"));
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kInt16: {
      int16_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "int16 value"));
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kUint32: {
      uint32_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "uint32 value"));
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kInt32: {
      int32_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "int32 value"));
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kUint64: {
      uint64_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "uint64 value"));
      *integer = static_cast<int64_t>(v);
      return Status::Ok();
    }
    case GgufType::kInt64: {
      int64_t v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "int64 value"));
      *integer = v;
      return Status::Ok();
    }
    case GgufType::kFloat32: {
      float v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "float32 value"));
      *real = v;
      return Status::Ok();
    }
    case GgufType::kFloat64: {
      double v;
      CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&v, "float64 value"));
      *real = v;
      return Status::Ok();
    }
    case GgufType::kString:
    case GgufType::kArray:
      break;
  }
  return in->Error(in->offset(), "internal: not a number type");
}

bool IsReal(GgufType type) { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }

// Reads (or with value == nullptr, skips) a value of `raw_type`.
Status ReadValue(Cursor* in, uint32_t raw_type, uint64_t type_at, int nesting, GgufValue* value) {
  if (MinEncodedSize(raw_type) == 0) {
    return in->Error(type_at, "unknown value type " + std::to_string(raw_type));
  }
  GgufType type = static_cast<GgufType>(raw_type);
  if (value != nullptr) {
    value->type = type;
    value->offset = in->offset();
  }
  if (type == GgufType::kString) {
    return in->ReadString(value ? &value->text : nullptr, "string value");
  }
  if (type != GgufType::kArray) {
    int64_t integer = 0;
    double real = 0;
    CFGMASK_RETURN_IF_ERROR(ReadNumber(in, type, &integer, &real));
    if (value != nullptr) {
      value->integer = integer;
      value->real = real;
    }
    return Status::Ok();
  }

  if (nesting >= kMaxArrayNesting) {
    return in->Error(type_at, "arrays nested deeper than " + std::to_string(kMaxArrayNesting));
  }
  uint64_t element_type_at = in->offset();
  uint32_t raw_element_type = 0;
  CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&raw_element_type, "array element type"));
  uint64_t element_size = MinEncodedSize(raw_element_type);
  if (element_size == 0) {
    return in->Error(element_type_at,
                     "unknown array element type " + std::to_string(raw_element_type));
  }
  uint64_t count_at = in->offset();
  uint64_t count = 0;
  CFGMASK_RETURN_IF_ERROR(in->ReadScalar(&count, "array length"));
  if (count > in->remaining() / element_size) {
    return in->Error(count_at, "array length " + std::to_string(count) + " exceeds the " +
                                   std::to_string(in->remaining()) + " bytes left in the file");
  }
  GgufType element_type = static_cast<GgufType>(raw_element_type);
  if (value != nullptr) {
    value->element_type = element_type;
    value->array_length = count;
  }

  if (element_type == GgufType::kString) {
    if (value != nullptr) value->strings.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      CFGMASK_RETURN_IF_ERROR(
          in->ReadString(value ? &value->strings[i] : nullptr, "array string element"));
    }
    return Status::Ok();
  }
  if (element_type == GgufType::kArray) {
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t inner_type_at = in->offset();
      CFGMASK_RETURN_IF_ERROR(
          ReadValue(in, static_cast<uint32_t>(GgufType::kArray), inner_type_at, nesting + 1,
                    nullptr));
    }
    return Status::Ok();
  }
  if (value == nullptr) return in->Skip(count * element_size, "array data");
  if (IsReal(element_type)) {
    value->reals.resize(count);
  } else {
    value->integers.resize(count);
  }
  for (uint64_t i = 0; i < count; ++i) {
    int64_t integer = 0;
    double real = 0;
    CFGMASK_RETURN_IF_ERROR(ReadNumber(in, element_type, &integer, &real));
    if (IsReal(element_type)) {
      value->reals[i] = real;
    } else {
      value->integers[i] = integer;
    }
  }
  return Status::Ok();
}

}  // namespace

bool GgufValue::is_integer() const { return IsScalarNumber(type) && !IsReal(type); }

const GgufValue* GgufMetadata::Find(std::string_view key) const {
  auto it = values.find(key);
  return it == values.end() ? nullptr : &it->second;
}

bool LooksLikeGguf(std::string_view head) { return head.substr(0, 4) == "GGUF"; }

Status ReadGgufMetadata(const std::string& path,
                        const std::function<bool(std::string_view)>& keep,
                        GgufMetadata* out) {
  *out = GgufMetadata();
  Cursor in(path);
  CFGMASK_RETURN_IF_ERROR(in.Open());
  out->file_size = in.size();

  char magic[4];
  CFGMASK_RETURN_IF_ERROR(in.Read(magic, 4, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0) return in.Error(0, "not a GGUF file (bad magic)");
  CFGMASK_RETURN_IF_ERROR(in.ReadScalar(&out->version, "version"));
  if (out->version == 1) return in.Error(4, "GGUF version 1 is not supported");
  if (out->version != 2 && out->version != 3) {
    if ((out->version & 0xFFFF) == 0) {
      return in.Error(4, "big-endian GGUF is not supported");
    }
    return in.Error(4, "unsupported GGUF version " + std::to_string(out->version));
  }
  CFGMASK_RETURN_IF_ERROR(in.ReadScalar(&out->tensor_count, "tensor count"));
  uint64_t kv_count_at = in.offset();
  CFGMASK_RETURN_IF_ERROR(in.ReadScalar(&out->kv_count, "key/value count"));
  // A record is at least a key length (8), a type (4) and a 1-byte value.
  if (out->kv_count > in.remaining() / 13) {
    return in.Error(kv_count_at, "key/value count " + std::to_string(out->kv_count) +
                                     " exceeds what the file can hold");
  }

  for (uint64_t i = 0; i < out->kv_count; ++i) {
    uint64_t key_at = in.offset();
    std::string key;
    CFGMASK_RETURN_IF_ERROR(in.ReadString(&key, "key"));
    uint64_t type_at = in.offset();
    uint32_t raw_type = 0;
    CFGMASK_RETURN_IF_ERROR(in.ReadScalar(&raw_type, "value type"));
    if (out->values.count(key) != 0) return in.Error(key_at, "duplicate key '" + key + "'");
    if (keep && !keep(key)) {
      CFGMASK_RETURN_IF_ERROR(ReadValue(&in, raw_type, type_at, 0, nullptr));
      continue;
    }
    GgufValue value;
    CFGMASK_RETURN_IF_ERROR(ReadValue(&in, raw_type, type_at, 0, &value));
    out->values.emplace(std::move(key), std::move(value));
  }
  out->metadata_end = in.offset();
  return Status::Ok();
}

}  // namespace cfgmask
