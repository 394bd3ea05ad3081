// Reference pooling: every output visits every tap of its window and classifies it as input,
// padding or outside (ceil-mode overhang).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ref/layout.h"
#include "kernels/registry.h"
#include "ops/pooling/pooling.h"

namespace kiln {
namespace {

constexpr int kMaxSpatial = PoolingGeometry::kMaxSpatial;

// Advances a row-major multi-index over `dims`; false after the last one.
bool next_index(int64_t* idx, const int64_t* dims, int rank) {
  for (int d = rank - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Pools NCHW `src` into NCHW `dst` (and `indices` when not null).
template <class T>
void pool(const PoolingAttrs& a, const PoolingGeometry& g, const T* src, T* dst, int64_t* indices) {
  const int r = g.spatial;
  int64_t in_plane = 1, out_plane = 1;
  for (int d = 0; d < r; ++d) {
    in_plane *= g.in[d];
    out_plane *= g.out[d];
  }
  if (out_plane == 0) return;
  const float p = static_cast<float>(a.p);
  for (int64_t nc = 0; nc < g.batch * g.channels; ++nc) {
    const T* plane = src + nc * in_plane;
    int64_t o[kMaxSpatial] = {};
    int64_t flat_out = 0;
    do {
      float best = -std::numeric_limits<float>::infinity();
      int64_t best_at = -1;
      float sum = 0.f;
      int64_t valid = 0, padded_window = 0;
      int64_t k[kMaxSpatial] = {};
      do {
        bool inside = true, in_padded = true;
        int64_t at = 0;
        for (int d = 0; d < r; ++d) {
          const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
          inside = inside && pos >= 0 && pos < g.in[d];
          in_padded = in_padded && pos >= -g.pad_begin[d] && pos < g.in[d] + g.pad_end[d];
          at = at * g.in[d] + pos;
        }
        if (in_padded) ++padded_window;
        if (!inside) continue;
        ++valid;
        const float v = static_cast<float>(plane[at]);
        switch (a.mode) {
          case PoolingMode::kMax:
            if (best_at < 0 || v > best) {
              best = v;
              best_at = at;
            }
            break;
          case PoolingMode::kAverage: sum += v; break;
          case PoolingMode::kLp: sum += std::pow(std::fabs(v), p); break;
        }
      } while (next_index(k, g.kernel, r));
      float y = 0.f;
      switch (a.mode) {
        case PoolingMode::kMax: y = best; break;
        case PoolingMode::kAverage: {
          const int64_t divisor = a.count_include_pad ? padded_window : valid;
          y = divisor ? sum / static_cast<float>(divisor) : 0.f;
          break;
        }
        case PoolingMode::kLp: y = std::pow(sum, 1.f / p); break;
      }
      if constexpr (std::is_floating_point_v<T>)
        dst[nc * out_plane + flat_out] = y;
      else
        dst[nc * out_plane + flat_out] = best_at < 0 ? std::numeric_limits<T>::lowest() : static_cast<T>(y);
      if (indices) indices[nc * out_plane + flat_out] = best_at < 0 ? -1 : nc * in_plane + best_at;
      ++flat_out;
    } while (next_index(o, g.out, r));
  }
}

template <class T>
Status run_pool(KernelContext& ctx, const PoolingGeometry& g) {
  const auto& a = ctx.attrs<PoolingAttrs>();
  const T* src = ctx.src[0].data<T>();
  T* dst = ctx.dst[0].data<T>();
  if (!a.channels_last) {
    pool(a, g, src, dst, a.return_indices ? ctx.dst[1].data<int64_t>() : nullptr);
    return Status::ok();
  }
  // channels_last (2-D, no indices; the geometry checked both): the same pooling on NCHW copies.
  const int64_t in_plane = g.in[0] * g.in[1], out_plane = g.out[0] * g.out[1];
  const std::vector<T> x = ref::to_channels_first(src, g.batch, in_plane, g.channels);
  std::vector<T> y(static_cast<size_t>(g.batch * g.channels * out_plane));
  pool(a, g, x.data(), y.data(), nullptr);
  ref::to_channels_last(y.data(), dst, g.batch, g.channels, out_plane);
  return Status::ok();
}

Status run_pooling(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(ctx.attrs<PoolingAttrs>(), ctx.src[0].dims()));
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return run_pool<float>(ctx, g);
    case DataType::kInt8: return run_pool<int8_t>(ctx, g);
    case DataType::kUInt8: return run_pool<uint8_t>(ctx, g);
    default: return unsupported("ref.pooling has no ", dtype_name(ctx.src[0].dtype()), " path");
  }
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.pooling",
    .op = "Pooling",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) -> Status {
      const DataType d = call.inputs[0].dtype;
      if (d != DataType::kFloat32 && d != DataType::kInt8 && d != DataType::kUInt8)
        return unsupported("ref.pooling takes float32, int8 or uint8 input, not ", dtype_name(d));
      return Status::ok();
    },
    .create = stateless(run_pooling),
}));

}  // namespace
}  // namespace kiln
