#include "kernels/cpu/onednn.h"

#include <array>
#include <cstdlib>
#include <memory>

namespace kiln::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

std::optional<dnnl::memory::data_type> to_dnnl(DataType dtype) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case DataType::kFloat32: return dt::f32;
    case DataType::kFloat16: return dt::f16;
    case DataType::kBFloat16: return dt::bf16;
    case DataType::kInt8: return dt::s8;
    case DataType::kUInt8: return dt::u8;
    case DataType::kInt32: return dt::s32;
    default: return std::nullopt;
  }
}

bool supports_dtype(DataType dtype) { return dtype == DataType::kFloat32; }

dnnl::memory::dims to_dims(const Dims& dims) {
  if (dims.rank() == 0) return {1};
  return dnnl::memory::dims(dims.begin(), dims.end());
}

dnnl::memory::desc plain_desc(const Dims& dims, DataType dtype) {
  const dnnl::memory::dims d = to_dims(dims);
  dnnl::memory::dims strides(d.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    strides[i] = acc;
    acc *= std::max<int64_t>(d[i], 1);
  }
  return dnnl::memory::desc(d, *to_dnnl(dtype), strides);
}

dnnl::memory::desc nhwc_desc(const Dims& nhwc, DataType dtype) {
  const int64_t n = nhwc[0], h = nhwc[1], w = nhwc[2], c = nhwc[3];
  return dnnl::memory::desc({n, c, h, w}, *to_dnnl(dtype), dnnl::memory::format_tag::nhwc);
}

dnnl::memory::desc strided_desc(const Tensor& t) {
  if (t.rank() == 0) return plain_desc(t.dims(), t.dtype());
  return dnnl::memory::desc(to_dims(t.dims()), *to_dnnl(t.dtype()),
                            dnnl::memory::dims(t.strides().begin(), t.strides().end()));
}

namespace {
struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};
struct ScratchBuffer {
  std::unique_ptr<void, FreeAligned> data;
  size_t bytes = 0;
};
}  // namespace

void* scratch(size_t bytes, int slot) {
  thread_local std::array<ScratchBuffer, 3> buffers;
  ScratchBuffer& b = buffers.at(static_cast<size_t>(slot));
  if (bytes > b.bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    b.data.reset();  // free first: the old buffer is never needed alongside the new one
    b.data.reset(std::aligned_alloc(64, rounded));
    if (!b.data) throw std::bad_alloc();
    b.bytes = rounded;
  }
  return b.data.get();
}

dnnl::memory memory(const dnnl::memory::desc& desc, const Tensor& t) { return dnnl::memory(desc, engine(), t.raw()); }

}  // namespace kiln::onednn
