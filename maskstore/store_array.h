// StoreArray<T>: one array of a compiled store, either owned (a vector, while
// a compile builds it) or a read-only view into the mapped store file (after
// ReadStoreFile, zero-copy: several processes serving the same store share
// its pages, and opening a store costs no copy).
//
// Reads (size, data, const operator[], iteration, span) are the same in both
// modes and read one pointer.  Every mutating call first turns a view into
// an owned copy (copy on write), so code that builds or edits a store never
// writes through the mapping; a view is never written, and a store read from
// a file stays a view as long as only const accessors are used
// (store_file_test.cc checks this after a decoding session).  The mapping
// itself is kept alive by CompiledStore::mapping, not here.
// Tested by store_file_test.cc.
#ifndef CFGMASK_MASKSTORE_STORE_ARRAY_H_
#define CFGMASK_MASKSTORE_STORE_ARRAY_H_

#include <cstddef>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace cfgmask {

template <typename T>
class StoreArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  using value_type = T;
  using const_iterator = const T*;
  using iterator = T*;

  StoreArray() = default;
  StoreArray(std::initializer_list<T> init) : own_(init) { Sync(); }
  StoreArray(size_t n, const T& v) : own_(n, v) { Sync(); }
  template <typename It>
  StoreArray(It b, It e) : own_(b, e) { Sync(); }
  StoreArray(std::vector<T>&& v) : own_(std::move(v)) { Sync(); }  // NOLINT: implicit
  StoreArray(const std::vector<T>& v) : own_(v) { Sync(); }        // NOLINT: implicit
  // A copy of a view is the same view (the mapping is shared by the store);
  // a copy of an owned array owns a copy.
  StoreArray(const StoreArray& o) : own_(o.own_), viewing_(o.viewing_) {
    if (viewing_) {
      data_ = o.data_;
      size_ = o.size_;
    } else {
      Sync();
    }
  }
  StoreArray(StoreArray&& o) noexcept
      : own_(std::move(o.own_)), data_(o.data_), size_(o.size_), viewing_(o.viewing_) {
    if (!viewing_) Sync();
    o.Reset();
  }
  StoreArray& operator=(const StoreArray& o) {
    if (this != &o) *this = StoreArray(o);
    return *this;
  }
  StoreArray& operator=(StoreArray&& o) noexcept {
    if (this != &o) {
      own_ = std::move(o.own_);
      viewing_ = o.viewing_;
      data_ = o.data_;
      size_ = o.size_;
      if (!viewing_) Sync();
      o.Reset();
    }
    return *this;
  }
  StoreArray& operator=(std::initializer_list<T> init) {
    own_.assign(init);
    viewing_ = false;
    Sync();
    return *this;
  }
  StoreArray& operator=(std::vector<T>&& v) {
    own_ = std::move(v);
    viewing_ = false;
    Sync();
    return *this;
  }
  StoreArray& operator=(const std::vector<T>& v) {
    own_ = v;
    viewing_ = false;
    Sync();
    return *this;
  }

  // A read-only view of n elements at p (the caller keeps p alive).
  static StoreArray View(const T* p, size_t n) {
    StoreArray a;
    a.viewing_ = true;
    a.data_ = p;
    a.size_ = n;
    return a;
  }
  bool is_view() const { return viewing_; }

  // Reads.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* data() const { return data_; }
  const T& operator[](size_t i) const { return data_[i]; }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("StoreArray::at");
    return data_[i];
  }
  const T& front() const { return data_[0]; }
  const T& back() const { return data_[size_ - 1]; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  std::span<const T> span() const { return {data_, size_}; }
  operator std::span<const T>() const { return span(); }  // NOLINT: implicit
  std::vector<T> ToVector() const { return std::vector<T>(begin(), end()); }
  bool operator==(const StoreArray& o) const {
    if (size_ != o.size_) return false;
    for (size_t i = 0; i < size_; ++i) {
      if (!(data_[i] == o.data_[i])) return false;
    }
    return true;
  }

  // Writes (a view becomes an owned copy first).
  T* data() { return Own().data(); }
  T& operator[](size_t i) { return Own()[i]; }
  T& back() { return Own().back(); }
  T* begin() { return Own().data(); }
  T* end() { return Own().data() + own_.size(); }
  void push_back(const T& v) { Edit([&](std::vector<T>& o) { o.push_back(v); }); }
  template <typename... A>
  T& emplace_back(A&&... a) {
    Edit([&](std::vector<T>& o) { o.emplace_back(std::forward<A>(a)...); });
    return own_.back();
  }
  void pop_back() { Edit([](std::vector<T>& o) { o.pop_back(); }); }
  void resize(size_t n) { Edit([&](std::vector<T>& o) { o.resize(n); }); }
  void resize(size_t n, const T& v) { Edit([&](std::vector<T>& o) { o.resize(n, v); }); }
  void assign(size_t n, const T& v) { Edit([&](std::vector<T>& o) { o.assign(n, v); }); }
  template <typename It>
  void assign(It b, It e) {
    Edit([&](std::vector<T>& o) { o.assign(b, e); });
  }
  template <typename It>
  void append(It b, It e) {
    Edit([&](std::vector<T>& o) { o.insert(o.end(), b, e); });
  }
  template <typename It>
  void insert(const T* pos, It b, It e) {
    const size_t at = static_cast<size_t>(pos - data_);
    Edit([&](std::vector<T>& o) { o.insert(o.begin() + at, b, e); });
  }
  void reserve(size_t n) { Edit([&](std::vector<T>& o) { o.reserve(n); }); }
  void clear() {
    own_.clear();
    viewing_ = false;
    Sync();
  }
  void shrink_to_fit() { Edit([](std::vector<T>& o) { o.shrink_to_fit(); }); }
  // The owned vector, to hand to code that builds a std::vector; Sync() by
  // the next mutating call or explicitly via Adopt.
  std::vector<T> Release() {
    std::vector<T> v = viewing_ ? ToVector() : std::move(own_);
    Reset();
    return v;
  }

 private:
  std::vector<T>& Own() {
    if (viewing_) {
      own_.assign(data_, data_ + size_);
      viewing_ = false;
      Sync();
    }
    return own_;
  }
  template <typename F>
  void Edit(F f) {
    f(Own());
    Sync();
  }
  void Sync() {
    data_ = own_.data();
    size_ = own_.size();
  }
  void Reset() {
    own_.clear();
    viewing_ = false;
    Sync();
  }

  std::vector<T> own_;
  const T* data_ = nullptr;
  size_t size_ = 0;
  bool viewing_ = false;
};

}  // namespace cfgmask

#endif  // CFGMASK_MASKSTORE_STORE_ARRAY_H_
