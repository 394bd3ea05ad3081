// Blocked float32 product on a B packed ahead (see packed_gemm.h). Work is split into tasks of (a block of A's rows,
// a group of B's panels); each task walks K in blocks of kDepth rows and, for each six rows of A, runs the register
// kernel against every panel of its group: those six rows' K block (9 KB) stays in L1 while the group's panels
// (192 KB) come from L2. A is read in place: packing it cost a fifth of the time (it was packed again for every
// group). Blocks of 384 K rows rather than 128 ran BERT-base's shapes 5-13% faster in alternating runs on 2 Zen 3
// cores (fewer passes of partial sums through c; the register kernel's loop runs longer per call). On BERT-base's
// shapes this runs about level with oneDNN 2.6's sgemm; the register kernel is bound by its loads: with the data in
// L1 it runs 70-90 GFLOP/s per core on this VM, whose FMA peak is about 137. Partial sums go to c between K blocks:
// the first block adds bias and residual (each element's residual is read just before c is written there, so the
// residual may be c itself), the last applies the activation. Where the CPU has AVX-512 (cpu::use_avx512), the
// tasks run the 8 x 32 kernel of packed_gemm_wide.cpp on the same panels instead.
#include "kernels/cpu/packed_gemm.h"

#include <immintrin.h>

#include <algorithm>

#include "core/parallel.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/packed_gemm_task.h"
#include "kernels/cpu/panel_gemm.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/ref/activation.h"

namespace kiln::cpu {
namespace gemm_detail {

bool inline_activation(const FusedActivation& f) {
  return f.on && (f.kind == ActivationKind::kRelu || f.kind == ActivationKind::kClip);
}

__attribute__((target("avx2,fma"))) void activate_span(const FusedActivation& f, float* y, int64_t n) {
  if (f.kind == ActivationKind::kGelu && f.beta == 0.f)
    gelu_erf_in_place(y, n);
  else
    ref::apply_fused(f, y, n);
}

Plan plan(int64_t m, int64_t panels, int64_t strip_rows, int64_t min_group_panels) {
  Plan p;
  // Row blocks of nearly equal size (a multiple of the strip), so that no thread's share is a block longer.
  p.row_blocks = (m + kMaxBlockRows - 1) / kMaxBlockRows;
  p.block_rows = ((m + p.row_blocks - 1) / p.row_blocks + strip_rows - 1) / strip_rows * strip_rows;
  p.row_blocks = (m + p.block_rows - 1) / p.block_rows;
  p.group_panels = std::min(kMaxGroupPanels, panels);
  const int64_t wanted = kTasksPerThread * std::max(1, omp_get_max_threads());
  while (p.group_panels > min_group_panels && p.row_blocks * ((panels + p.group_panels - 1) / p.group_panels) < wanted)
    p.group_panels = (p.group_panels + 1) / 2;
  p.groups = (panels + p.group_panels - 1) / p.group_panels;
  return p;
}

}  // namespace gemm_detail

namespace {

using namespace gemm_detail;
constexpr int64_t kRows = kPanelRows, kCols = kPanelCols;

struct Tile {
  float* c;
  int64_t ldc, rows, cols;
  const float* bias;      // at the tile's first column, or null
  const float* residual;  // at the tile's first element, or null
  bool first, last;
};

__attribute__((target("avx2,fma"))) void store_tile(const Tile& t, __m256 (&s)[kRows][2], const FusedActivation& f) {
  const bool clamp = t.last && inline_activation(f);
  const bool clip = f.kind == ActivationKind::kClip;
  const float lo_value = clip ? f.alpha : 0.f;
  const __m256 lo = _mm256_set1_ps(lo_value), hi = _mm256_set1_ps(f.beta);
  if (t.cols == kCols) {
    for (int64_t i = 0; i < t.rows; ++i) {
      float* ci = t.c + i * t.ldc;
      __m256 v[2] = {s[i][0], s[i][1]};
      for (int64_t h = 0; h < 2; ++h) {
        if (!t.first) {
          v[h] = _mm256_add_ps(v[h], _mm256_loadu_ps(ci + 8 * h));
        } else {
          if (t.bias) v[h] = _mm256_add_ps(v[h], _mm256_loadu_ps(t.bias + 8 * h));
          if (t.residual) v[h] = _mm256_add_ps(v[h], _mm256_loadu_ps(t.residual + i * t.ldc + 8 * h));
        }
        if (clamp) v[h] = clip ? _mm256_min_ps(_mm256_max_ps(v[h], lo), hi) : _mm256_max_ps(v[h], lo);
        _mm256_storeu_ps(ci + 8 * h, v[h]);
      }
    }
  } else {
    alignas(32) float sums[kRows][kCols];
    for (int64_t i = 0; i < t.rows; ++i) {
      _mm256_store_ps(sums[i], s[i][0]);
      _mm256_store_ps(sums[i] + 8, s[i][1]);
      float* ci = t.c + i * t.ldc;
      for (int64_t j = 0; j < t.cols; ++j) {
        float v = sums[i][j];
        if (!t.first) {
          v += ci[j];
        } else {
          if (t.bias) v += t.bias[j];
          if (t.residual) v += t.residual[i * t.ldc + j];
        }
        if (clamp) v = clip ? std::min(std::max(v, lo_value), f.beta) : std::max(v, lo_value);
        ci[j] = v;
      }
    }
  }
  if (t.last && f.on && !inline_activation(f))
    for (int64_t i = 0; i < t.rows; ++i) activate_span(f, t.c + i * t.ldc, t.cols);
}

__attribute__((target("avx2,fma"))) void run_task(int64_t m, const Source& src, const PackedColumns& b, float* c,
                                                  int64_t ldc, const GemmEpilogue& e, const Plan& p, int64_t task) {
  const TaskSpan span = task_span(p, m, b.panels(), task);
  alignas(32) float rows_here[kRows * kDepth];  // gathered rows
  for (int64_t p0 = 0; p0 < b.k; p0 += kDepth) {
    const int64_t depth = std::min(kDepth, b.k - p0);
    for (int64_t i = 0; i < span.rows; i += kRows) {
      const int64_t live = std::min(kRows, span.rows - i), r0 = span.r0;
      int64_t stride = 0;
      const float* ai = strip_rows(src, r0 + i, live, p0, depth, rows_here, stride);
      for (int64_t panel = span.panel0; panel < span.panel1; ++panel) {
        const int64_t col = panel * kCols, at = (r0 + i) * ldc + col;
        prefetch_tile(p0 > 0 || !e.residual ? c + at : e.residual + at, ldc, live, kCols);
        __m256 sums[kRows][2];
        // only the live rows, read in place (fewer than six in a block's last rows)
        panel_product_rows(live, ai, stride, 1, b.data + (panel * b.k + p0) * kCols, depth, sums);
        const Tile t{c + at,
                     ldc,
                     live,
                     std::min(kCols, b.n - col),
                     e.bias ? e.bias + col : nullptr,
                     e.residual ? e.residual + at : nullptr,
                     p0 == 0,
                     p0 + depth >= b.k};
        store_tile(t, sums, e.fused);
      }
    }
  }
}

// b's panels into out (panels * k * 16 floats, the padding columns zero).
void pack_columns(const MatrixView& b, float* out) {
  const int64_t panels = (b.n + kCols - 1) / kCols;
  for (int64_t panel = 0; panel < panels; ++panel)
    for (int64_t p = 0; p < b.k; ++p) {
      float* d = out + (panel * b.k + p) * kCols;
      for (int64_t j = 0; j < kCols; ++j) {
        const int64_t col = panel * kCols + j;
        d[j] = col < b.n ? b.data[p * b.row_stride + col * b.col_stride] : 0.f;
      }
    }
}

constexpr int64_t kPreparedHeader = 64;

int64_t packed_floats(int64_t k, int64_t n) { return (n + kCols - 1) / kCols * k * kCols; }

}  // namespace

Result<Tensor> PackedWeights::prepare(const MatrixView& b) {
  const int64_t floats = packed_floats(b.k, b.n);
  KILN_ASSIGN_OR_RETURN(Tensor blob,
                        Tensor::empty(DataType::kUInt8, Dims{kPreparedHeader + floats * int64_t{sizeof(float)}}));
  auto* base = static_cast<char*>(blob.raw());
  std::fill(base, base + kPreparedHeader, char{0});
  const int64_t header[2] = {b.k, b.n};
  std::copy_n(reinterpret_cast<const char*>(header), sizeof(header), base);
  pack_columns(b, reinterpret_cast<float*>(base + kPreparedHeader));
  return blob;
}

bool PackedWeights::adopt(const Tensor* prepared, int64_t k, int64_t n) {
  if (!prepared || !prepared->defined()) return false;
  if (prepared->nbytes() != static_cast<size_t>(kPreparedHeader + packed_floats(k, n) * int64_t{sizeof(float)}))
    return false;
  const auto* base = static_cast<const char*>(prepared->raw());
  int64_t header[2];
  std::copy_n(base, sizeof(header), reinterpret_cast<char*>(header));
  if (header[0] != k || header[1] != n) return false;
  columns_ = PackedColumns{k, n, reinterpret_cast<const float*>(base + kPreparedHeader)};
  return true;
}

void PackedWeights::pack(const MatrixView& b) {
  storage_.resize(static_cast<size_t>(packed_floats(b.k, b.n)));
  pack_columns(b, storage_.data());
  columns_ = PackedColumns{b.k, b.n, storage_.data()};
}

void PackedWeights::init(const Tensor* prepared, const MatrixView& constant) {
  fixed_ = adopt(prepared, constant.k, constant.n);
  if (!fixed_ && constant.data) {
    pack(constant);
    fixed_ = true;
  }
}

Result<const PackedColumns*> PackedWeights::for_run(const MatrixView& given) {
  if (!fixed_ && !given.data)
    return invalid_argument("the engine holds these weights only packed, and its packed copy (", given.k, " x ",
                            given.n, ") does not fit the kernel; rebuild the engine from the model");
  if (!fixed_) pack(given);
  return &columns_;
}

namespace {

void run(int64_t m, const Source& src, const PackedColumns& b, float* c, int64_t ldc, const GemmEpilogue& e) {
  if (m <= 0 || b.n <= 0) return;
  const bool wide = use_avx512();
  const Plan p = wide ? plan(m, b.panels(), kWideStripRows, kWideStripPanels) : plan(m, b.panels(), kRows, 1);
  const int64_t per_task = 2 * p.block_rows * p.group_panels * kCols * std::max<int64_t>(b.k, 1);
  const auto run_one = [&](int64_t task) {
    if (wide)
      run_wide_task(m, src, b, c, ldc, e, p, task);
    else
      run_task(m, src, b, c, ldc, e, p, task);
  };
  if (p.row_blocks > 1 && p.groups >= kGroupsPerThread * omp_get_max_threads()) {
    // Groups enough to deal out whole: a thread takes a group with all its rows, so that the group's panels come
    // from memory once, into the core that uses them. Tasks dealt two at a time split a group's rows between the
    // cores, each reading its panels. ResNet-50's 14x14 1x1 layers (196 x 256 x 1024): 0.46 -> 0.43 ms in the model's
    // run on two Zen 5 cores (one core takes 0.59: the two-core scaling is still short of 2x).
    parallel_for(p.groups, grain_for(per_task * p.row_blocks), [&](int64_t group) {
      for (int64_t block = 0; block < p.row_blocks; ++block) run_one(group * p.row_blocks + block);
    });
    return;
  }
  parallel_for(p.row_blocks * p.groups, grain_for(per_task), run_one);
}

}  // namespace

void packed_gemm(int64_t m, const float* a, int64_t lda, const PackedColumns& b, float* c, int64_t ldc,
                 const GemmEpilogue& epilogue) {
  run(m, Source{a, lda, nullptr}, b, c, ldc, epilogue);
}

void packed_gemm(int64_t m, const RowGather& gather, const PackedColumns& b, float* c, int64_t ldc,
                 const GemmEpilogue& epilogue) {
  run(m, Source{nullptr, 0, &gather}, b, c, ldc, epilogue);
}

}  // namespace kiln::cpu
