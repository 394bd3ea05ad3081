#pragma once
// A pooling problem's spatial geometry as the CUDA pooling kernels read it (a plain struct passed by value), made
// from the op's PoolingGeometry, and what those kernels take of it.
#include <cstdint>

#include "kernels/registry.h"
#include "ops/pooling/pooling.h"

namespace kiln::cuda {

struct PoolingDims {
  static constexpr int kMaxSpatial = PoolingGeometry::kMaxSpatial;
  int r = 0;  ///< spatial dims
  int64_t in[kMaxSpatial] = {}, out[kMaxSpatial] = {}, kernel[kMaxSpatial] = {}, stride[kMaxSpatial] = {};
  int64_t dilation[kMaxSpatial] = {}, pad_begin[kMaxSpatial] = {}, pad_end[kMaxSpatial] = {};
  int64_t in_plane = 1, out_plane = 1;  ///< elements of one (n, c) plane of x and of y
};

inline PoolingDims pooling_dims(const PoolingGeometry& g) {
  PoolingDims d;
  d.r = g.spatial;
  for (int i = 0; i < d.r; ++i) {
    d.in[i] = g.in[i];
    d.out[i] = g.out[i];
    d.kernel[i] = g.kernel[i];
    d.stride[i] = g.stride[i];
    d.dilation[i] = g.dilation[i];
    d.pad_begin[i] = g.pad_begin[i];
    d.pad_end[i] = g.pad_end[i];
    d.in_plane *= g.in[i];
    d.out_plane *= g.out[i];
  }
  return d;
}

/// The kernels take at least one spatial dim, no negative pad, and positive kernel, stride and dilation.
inline Status check_pooling_dims(const PoolingGeometry& g, const char* kernel) {
  if (g.spatial < 1) return unsupported(kernel, " needs at least one spatial dim");
  for (int i = 0; i < g.spatial; ++i)
    if (g.pad_begin[i] < 0 || g.pad_end[i] < 0 || g.stride[i] < 1 || g.dilation[i] < 1 || g.kernel[i] < 1)
      return unsupported(kernel, " takes no negative pads and positive kernel, stride and dilation");
  return Status::ok();
}

}  // namespace kiln::cuda
