#include "kiln/tensor.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/cuda_runtime.h"

namespace kiln {

Buffer::Buffer(void* data, size_t bytes, Device device, Allocator* owner)
    : data_(data), bytes_(bytes), device_(device), owner_(owner) {}

Buffer::Buffer(void* data, size_t bytes, Device device, std::shared_ptr<const void> keep_alive)
    : data_(data), bytes_(bytes), device_(device), owner_(nullptr), keep_alive_(std::move(keep_alive)) {}

Buffer::~Buffer() {
  if (owner_ && data_) owner_->deallocate(data_, bytes_);
}

namespace {
// Anything beyond this is a malformed shape, not a real tensor.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 42;

Result<size_t> checked_bytes(DataType dtype, const Dims& dims) {
  if (!dims.is_static()) return invalid_argument("cannot allocate a tensor of dynamic shape ", dims.to_string());
  uint64_t n = dtype_size(dtype);
  for (int64_t d : dims) {
    if (d != 0 && n > kMaxTensorBytes / static_cast<uint64_t>(d))
      return Status(StatusCode::kOutOfMemory, str_cat("a ", dtype_name(dtype), " tensor of shape ", dims.to_string(),
                                                      " is larger than kiln's 4 TiB tensor limit"));
    n *= static_cast<uint64_t>(d);
  }
  return static_cast<size_t>(n);
}
}  // namespace

Result<Tensor> Tensor::empty(DataType dtype, const Dims& dims, Allocator& allocator, std::string_view tag) {
  KILN_ASSIGN_OR_RETURN(size_t bytes, checked_bytes(dtype, dims));
  void* p = allocator.allocate(bytes, 64, tag);
  if (!p && allocator.device().is_cuda())
    return cuda::out_of_memory(allocator.device().index, bytes, str_cat(tag, " ", dims.to_string()));
  if (!p)
    return Status(StatusCode::kOutOfMemory, str_cat("out of memory allocating ", bytes, " bytes for ", tag, " ",
                                                    dims.to_string(), " on ", allocator.device().to_string()));
  Tensor t;
  t.buffer_ = std::make_shared<Buffer>(p, bytes, allocator.device(), &allocator);
  t.data_ = p;
  t.dtype_ = dtype;
  t.dims_ = dims;
  t.strides_ = contiguous_strides(dims);
  t.device_ = allocator.device();
  return t;
}

Result<Tensor> Tensor::zeros(DataType dtype, const Dims& dims) {
  KILN_ASSIGN_OR_RETURN(Tensor t, empty(dtype, dims));
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::view(void* data, DataType dtype, const Dims& dims, Device device) {
  return view(data, dtype, dims, contiguous_strides(dims), device);
}

Tensor Tensor::view(void* data, DataType dtype, const Dims& dims, const Dims& strides, Device device) {
  Tensor t;
  t.data_ = data;
  t.dtype_ = dtype;
  t.dims_ = dims;
  t.strides_ = strides;
  t.device_ = device;
  return t;
}

Tensor Tensor::view(void* data, DataType dtype, const Dims& dims, std::shared_ptr<const void> owner, Device device) {
  Tensor t = view(data, dtype, dims, contiguous_strides(dims), device);
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(dims.numel(), 0)) * dtype_size(dtype);
  t.buffer_ = std::make_shared<Buffer>(data, bytes, device, std::move(owner));
  return t;
}

bool Tensor::is_contiguous() const {
  const Dims s = contiguous_strides(dims_);
  for (int i = 0; i < dims_.rank(); ++i)
    if (dims_[i] > 1 && s[i] != strides_[i]) return false;
  return true;
}

Result<Tensor> Tensor::reshape(const Dims& dims) const {
  if (dims.numel() != numel())
    return invalid_argument("cannot reshape ", dims_.to_string(), " (", numel(), " elements) to ", dims.to_string());
  if (!is_contiguous()) return invalid_argument("reshape of a non-contiguous tensor");
  Tensor t = *this;
  t.dims_ = dims;
  t.strides_ = contiguous_strides(dims);
  return t;
}

Result<Tensor> Tensor::contiguous() const {
  if (is_contiguous() && device_.is_cpu()) return *this;
  return clone();
}

Result<Tensor> Tensor::clone() const {
  if (!device_.is_cpu())
    return unsupported("Tensor::clone of a ", device_.to_string(), " tensor: copy it to the host first");
  KILN_ASSIGN_OR_RETURN(Tensor out, empty(dtype_, dims_));
  const size_t esize = dtype_size(dtype_);
  if (is_contiguous()) {
    std::memcpy(out.raw(), data_, nbytes());
    return out;
  }
  const int64_t n = numel();
  const int r = rank();
  auto* dst = static_cast<char*>(out.raw());
  const auto* src = static_cast<const char*>(data_);
  int64_t idx[kMaxRank] = {};
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < r; ++d) off += idx[d] * strides_[d];
    std::memcpy(dst + i * esize, src + off * esize, esize);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < dims_[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::string Tensor::describe() const {
  return str_cat(dtype_name(dtype_), dims_.to_string(), " ", device_.to_string());
}

}  // namespace kiln
