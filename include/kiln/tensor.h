#pragma once
/// Tensor: a typed, shaped view of memory that may own it.
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/allocator.h"
#include "kiln/device.h"
#include "kiln/dims.h"
#include "kiln/dtype.h"
#include "kiln/status.h"

namespace kiln {

/// A block of memory; frees itself through its allocator when it owns the memory, or keeps another
/// owner (a memory-mapped file) alive while it lives.
class Buffer {
 public:
  Buffer(void* data, size_t bytes, Device device, Allocator* owner);
  Buffer(void* data, size_t bytes, Device device, std::shared_ptr<const void> keep_alive);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  Allocator* owner_;
  std::shared_ptr<const void> keep_alive_;
};

/// Element type, dims and strides (in elements) over a shared Buffer.
class Tensor {
 public:
  Tensor() = default;
  /// Allocates a contiguous tensor (contents undefined). Fails on absurd sizes or out of memory.
  static Result<Tensor> empty(DataType dtype, const Dims& dims, Allocator& allocator = cpu_allocator(),
                              std::string_view tag = "tensor");
  /// Like empty() but zero-filled (host memory only).
  static Result<Tensor> zeros(DataType dtype, const Dims& dims);
  /// A non-owning view of memory the caller keeps alive.
  static Tensor view(void* data, DataType dtype, const Dims& dims, Device device = Device::cpu());
  static Tensor view(void* data, DataType dtype, const Dims& dims, const Dims& strides, Device device);
  /// A contiguous tensor over memory that `owner` keeps alive (e.g. a memory-mapped file); the tensor
  /// shares that ownership, so the memory lives as long as any tensor over it.
  static Tensor view(void* data, DataType dtype, const Dims& dims, std::shared_ptr<const void> owner,
                     Device device = Device::cpu());

  bool defined() const { return buffer_ != nullptr || data_ != nullptr; }
  DataType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  const Dims& strides() const { return strides_; }
  int rank() const { return dims_.rank(); }
  int64_t numel() const { return dims_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  Device device() const { return device_; }
  bool is_contiguous() const;

  void* raw() const { return data_; }
  template <class T>
  T* data() const {
    return static_cast<T*>(data_);
  }

  /// A view with other dims over the same contiguous memory; the element count must match.
  Result<Tensor> reshape(const Dims& dims) const;
  /// A contiguous host copy (or this tensor when it already is one).
  Result<Tensor> contiguous() const;
  /// A deep copy to host memory, contiguous.
  Result<Tensor> clone() const;

  /// Element `index` in row-major order of a contiguous tensor, as double.
  double at(int64_t index) const { return load_element(data_, dtype_, index); }
  void set(int64_t index, double value) { store_element(data_, dtype_, index, value); }

  /// "float32[2, 3] cpu".
  std::string describe() const;

 private:
  std::shared_ptr<Buffer> buffer_;
  void* data_ = nullptr;
  DataType dtype_ = DataType::kFloat32;
  Dims dims_;
  Dims strides_;
  Device device_;
};

}  // namespace kiln
