// CUDA LSTM, GRU and RNN forward, and LSTMBackward, GRUBackward and RNNBackward (float32; float16 and bfloat16
// through float32 copies of every tensor). Per direction: X W^T for every step in one cuBLAS GEMM, then per step one
// GEMM h R^T and one kernel of the cell's element math (kernels/common/rnn_cell.h, shared with the reference and CPU
// kernels; GRU with linear_before_reset = 0 needs a second GEMM and kernel for (r * h) R_h^T). The backward
// recomputes the forward, saving pre-activations and states, walks the steps back (element kernel, then
// dh += dstep R), and ends with GEMMs over all steps (dW = dpre^T X, dX += dpre W, dR = dpre^T h_prev) and column
// sums (dB, dP). sequence_lens is read on the device: every step runs, entries past their length skip it; a length
// outside [0, seq] (which the reference reports as an error) is clamped.
#include <cublas_v2.h>

#include <cstdint>
#include <vector>

#include "kernels/common/rnn_backward.h"
#include "kernels/cuda/cublaslt_gemm.h"  // DeviceScratch
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"

namespace kiln {
namespace {

using namespace rnn_input;

template <class L>
__global__ void lens_kernel(const L* __restrict__ lens, int64_t* __restrict__ out, int64_t batch, int64_t seq) {
  for (int64_t b = cuda::thread_index(); b < batch; b += cuda::thread_count()) {
    const auto len = static_cast<int64_t>(lens[b]);
    out[b] = len < 0 ? 0 : len > seq ? seq : len;
  }
}

// pre[row, j] += W's and R's biases (GRU lbr: R's h-gate bias joins inside the reset product instead).
__global__ void bias_kernel(float* __restrict__ pre, const float* __restrict__ bd, int64_t rows, int64_t gh,
                            int64_t h_from, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t j = i % gh;
    pre[i] += bd[j] + (j >= h_from ? 0.f : bd[gh + j]);
  }
}

// Offset of (direction d, entry b) in an initial_h / Y_h shaped [dirs, batch, H] (layout 0) or [batch, dirs, H].
struct StateLayout {
  int64_t batch, hidden, dirs, d, layout;
  __device__ int64_t at(int64_t b) const { return (layout == 0 ? d * batch + b : b * dirs + d) * hidden; }
};

// dst[b, j] = src's state of direction d (0 when src is absent).
__global__ void load_state_kernel(const float* __restrict__ src, float* __restrict__ dst, StateLayout l) {
  const int64_t n = l.batch * l.hidden;
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t b = i / l.hidden, j = i - b * l.hidden;
    dst[i] = src ? src[l.at(b) + j] : 0.f;
  }
}

__global__ void store_state_kernel(const float* __restrict__ src, float* __restrict__ dst, StateLayout l) {
  const int64_t n = l.batch * l.hidden;
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t b = i / l.hidden, j = i - b * l.hidden;
    dst[l.at(b) + j] = src[i];
  }
}

__global__ void forward_step_kernel(rnn::Step<float> s, int phase) {
  const int64_t n = s.batch * s.hidden;
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t b = i / s.hidden;
    rnn::forward_element(s, phase, b, i - b * s.hidden);
  }
}

__global__ void backward_step_kernel(rnn::Step<float> s, int phase) {
  const int64_t n = s.batch * s.hidden;
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t b = i / s.hidden;
    rnn::backward_element(s, phase, b, i - b * s.hidden);
  }
}

// out[j] = sum over rows of a[row * ld + j] (one thread per column; rows is seq * batch).
__global__ void column_sum_kernel(const float* __restrict__ a, int64_t rows, int64_t cols, int64_t ld,
                                  float* __restrict__ out) {
  for (int64_t j = cuda::thread_index(); j < cols; j += cuda::thread_count()) {
    float s = 0.f;
    for (int64_t r = 0; r < rows; ++r) s += a[r * ld + j];
    out[j] = s;
  }
}

// dP of one direction: i and f against c before the step, o against c after it.
__global__ void peephole_kernel(const float* __restrict__ dpre, const float* __restrict__ c_prev,
                                const float* __restrict__ c_new, int64_t rows, int64_t hidden, float* __restrict__ dp) {
  const int64_t gh = 4 * hidden;
  for (int64_t j = cuda::thread_index(); j < hidden; j += cuda::thread_count()) {
    float si = 0.f, so = 0.f, sf = 0.f;
    for (int64_t r = 0; r < rows; ++r) {
      si += dpre[r * gh + j] * c_prev[r * hidden + j];
      so += dpre[r * gh + hidden + j] * c_new[r * hidden + j];
      sf += dpre[r * gh + 2 * hidden + j] * c_prev[r * hidden + j];
    }
    dp[j] = si;
    dp[hidden + j] = so;
    dp[2 * hidden + j] = sf;
  }
}

// float16 / bfloat16 tensors run through float32 copies.
template <class T>
__global__ void widen_kernel(const T* __restrict__ src, float* __restrict__ dst, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) dst[i] = cuda::load(src[i]);
}

template <class T>
__global__ void narrow_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) dst[i] = cuda::store<T>(src[i]);
}

// Row-major c = op(a) op(b) + beta c (beta 0 or 1) with cuBLAS (column-major): c^T = op(b)^T op(a)^T.
Status gemm(cublasHandle_t blas, cudaStream_t stream, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return Status::ok();
  if (k <= 0) {
    if (beta != 0.f) return Status::ok();
    return cuda::check(cudaMemset2DAsync(c, static_cast<size_t>(ldc) * sizeof(float), 0,
                                         static_cast<size_t>(n) * sizeof(float), static_cast<size_t>(m), stream),
                       "cudaMemset2DAsync (RNN GEMM with k = 0)");
  }
  const float alpha = 1.f;
  return cuda::check(cublasSgemm_64(blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                    &alpha, b, ldb, a, lda, &beta, c, ldc),
                     "cublasSgemm (RNN)");
}

Status launched(const char* what) { return cuda::check(cudaGetLastError(), what); }

const RnnCommonAttrs& common_attrs(const OpCall& call, rnn::CellKind cell) {
  if (cell == rnn::CellKind::kLstm) return call.attrs_as<LstmAttrs>();
  if (cell == rnn::CellKind::kGru) return call.attrs_as<GruAttrs>();
  return call.attrs_as<RnnAttrs>();
}

int64_t gates_of(rnn::CellKind cell) { return cell == rnn::CellKind::kLstm ? 4 : cell == rnn::CellKind::kGru ? 3 : 1; }

// Scratch laid out in 256-byte aligned pieces: a first pass sizes them, a second hands out pointers.
class Carve {
 public:
  explicit Carve(char* base) : base_(base) {}
  template <class T>
  T* take(int64_t count) {
    const size_t at = used_;
    used_ += (static_cast<size_t>(count) * sizeof(T) + 255) / 256 * 256;
    return base_ && count > 0 ? reinterpret_cast<T*>(base_ + at) : nullptr;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// cuBLAS's workspace, part of the kernel's scratch.
constexpr size_t kBlasWorkspace = size_t{4} << 20;

class CudaRnn final : public Kernel {
 public:
  CudaRnn(rnn::CellSpec spec, bool backward) : spec_(spec), backward_(backward) {}

  Status run(KernelContext& ctx) override {
    const RnnCommonAttrs& a = common_attrs(ctx.call, spec_.cell);
    const rnn::Problem p(ctx, a, gates_of(spec_.cell));
    cudaStream_t stream = cuda::native(ctx.stream);
    for (Tensor& t : ctx.dst)
      if (t.numel() > 0)
        KILN_RETURN_IF_ERROR(cuda::check(cudaMemsetAsync(t.raw(), 0, t.nbytes(), stream), "cudaMemsetAsync (RNN)"));
    if (p.batch == 0 || p.hidden == 0) return Status::ok();
    KILN_ASSIGN_OR_RETURN(cublasHandle_t blas, cuda::cublas_handle(ctx.stream));

    // Two passes: sizes, then pointers into the scratch (its start rounded up to 256 bytes, which cuBLAS's
    // workspace needs; the allocator promises less).
    bytes_ = carve(nullptr, ctx, p).bytes + 256;
    KILN_ASSIGN_OR_RETURN(void* raw, scratch_.get(ctx.allocator, bytes_, "rnn scratch", stream));
    const auto at = reinterpret_cast<uintptr_t>(raw);
    const Buffers buf = carve(static_cast<char*>(raw) + ((256 - at % 256) % 256), ctx, p);
    // cuBLAS works in this kernel's scratch (the next cublas_handle() call's cublasSetStream resets it).
    KILN_RETURN_IF_ERROR(
        cuda::check(cublasSetWorkspace(blas, buf.blas_workspace, kBlasWorkspace), "cublasSetWorkspace"));

    // The float32 views of the inputs and outputs: the tensors themselves, or (16-bit floats) copies.
    Io io;
    io.in.assign(ctx.src.size(), nullptr);
    io.out.assign(ctx.dst.size(), nullptr);
    for (size_t i = 0; i < ctx.src.size(); ++i) {
      const Tensor& t = ctx.src[i];
      if (!t.defined() || static_cast<int>(i) == kSequenceLens) continue;
      if (!buf.wide) {
        io.in[i] = t.data<float>();
        continue;
      }
      io.in[i] = buf.wide_in[i];
      if (t.numel() == 0) continue;
      const bool known = cuda::dispatch_float(t.dtype(), [&](auto tag) {
        using T = cuda::type_of<decltype(tag)>;
        widen_kernel<T>
            <<<cuda::blocks_for(t.numel()), cuda::kThreads, 0, stream>>>(t.data<T>(), buf.wide_in[i], t.numel());
      });
      if (!known) return unsupported("RNN input ", i, " of type ", dtype_name(t.dtype()));
      KILN_RETURN_IF_ERROR(launched("rnn widen kernel"));
    }
    for (size_t i = 0; i < ctx.dst.size(); ++i) {
      io.out[i] = buf.wide ? buf.wide_out[i] : ctx.dst[i].data<float>();
      if (buf.wide) KILN_RETURN_IF_ERROR(zero(io.out[i], ctx.dst[i].numel(), stream));
    }

    const int64_t* lens = nullptr;
    if (static_cast<int>(ctx.src.size()) > kSequenceLens && ctx.src[kSequenceLens].defined()) {
      const Tensor& l = ctx.src[kSequenceLens];
      if (l.numel() != p.batch)
        return invalid_argument("sequence_lens has ", l.numel(), " entries but the batch is ", p.batch);
      if (l.dtype() == DataType::kInt32)
        lens_kernel<int32_t>
            <<<cuda::blocks_for(p.batch), cuda::kThreads, 0, stream>>>(l.data<int32_t>(), buf.lens, p.batch, p.seq);
      else if (l.dtype() == DataType::kInt64)
        lens_kernel<int64_t>
            <<<cuda::blocks_for(p.batch), cuda::kThreads, 0, stream>>>(l.data<int64_t>(), buf.lens, p.batch, p.seq);
      else
        return invalid_argument("sequence_lens is ", dtype_name(l.dtype()), "; expected int32 or int64");
      KILN_RETURN_IF_ERROR(launched("rnn lens kernel"));
      lens = buf.lens;
    }
    for (int64_t d = 0; d < p.dirs; ++d) KILN_RETURN_IF_ERROR(direction(io, a, p, buf, lens, d, blas, stream));
    if (!buf.wide) return Status::ok();
    for (size_t i = 0; i < ctx.dst.size(); ++i) {
      Tensor& t = ctx.dst[i];
      if (t.numel() == 0) continue;
      const bool known = cuda::dispatch_float(t.dtype(), [&](auto tag) {
        using T = cuda::type_of<decltype(tag)>;
        narrow_kernel<T><<<cuda::blocks_for(t.numel()), cuda::kThreads, 0, stream>>>(io.out[i], t.data<T>(), t.numel());
      });
      if (!known) return unsupported("RNN output ", i, " of type ", dtype_name(t.dtype()));
      KILN_RETURN_IF_ERROR(launched("rnn narrow kernel"));
    }
    return Status::ok();
  }

  size_t workspace_bytes() const override { return bytes_; }
  std::string detail() const override { return "cuBLAS SGEMM + element kernels"; }

 private:
  struct Buffers {
    void* blas_workspace;
    int64_t* lens;
    float *pre, *hr, *h, *c, *q, *save_h, *save_c, *save_c_new, *save_extra;
    float *dpre, *dpre_r, *dstep, *dh, *dc, *dq;
    bool wide;                              // 16-bit floats: float32 copies of every float tensor
    std::vector<float*> wide_in, wide_out;  // per input / output
    size_t bytes;
  };
  struct Io {
    std::vector<const float*> in;  // per input; null where absent (and for sequence_lens)
    std::vector<float*> out;
  };

  Buffers carve(char* base, const KernelContext& ctx, const rnn::Problem& p) const {
    const int64_t rows = p.seq * p.batch, gh = p.gates * p.hidden, bh = p.batch * p.hidden;
    const bool lstm = spec_.cell == rnn::CellKind::kLstm, gru = spec_.cell == rnn::CellKind::kGru;
    Carve c(base);
    Buffers b{};
    b.blas_workspace = c.take<char>(static_cast<int64_t>(kBlasWorkspace));
    b.lens = c.take<int64_t>(p.batch);
    b.pre = c.take<float>(rows * gh);
    b.hr = c.take<float>(p.batch * gh);
    b.h = c.take<float>(bh);
    b.c = c.take<float>(bh);
    b.q = c.take<float>(bh);
    if (backward_) {
      b.save_h = c.take<float>(rows * p.hidden);
      b.save_c = lstm ? c.take<float>(rows * p.hidden) : nullptr;
      b.save_c_new = lstm ? c.take<float>(rows * p.hidden) : nullptr;
      b.save_extra = gru ? c.take<float>(rows * p.hidden) : nullptr;
      b.dpre = c.take<float>(rows * gh);
      b.dpre_r = gru && spec_.lbr ? c.take<float>(rows * gh) : nullptr;
      b.dstep = c.take<float>(p.batch * gh);
      b.dh = c.take<float>(bh);
      b.dc = c.take<float>(bh);
      b.dq = c.take<float>(bh);
    }
    b.wide = ctx.src[kX].dtype() != DataType::kFloat32;
    b.wide_in.assign(ctx.src.size(), nullptr);
    b.wide_out.assign(ctx.dst.size(), nullptr);
    if (b.wide) {
      for (size_t i = 0; i < ctx.src.size(); ++i)
        if (ctx.src[i].defined() && static_cast<int>(i) != kSequenceLens)
          b.wide_in[i] = c.take<float>(ctx.src[i].numel());
      for (size_t i = 0; i < ctx.dst.size(); ++i) b.wide_out[i] = c.take<float>(ctx.dst[i].numel());
    }
    b.bytes = c.used();
    return b;
  }

  static const float* optional(const Io& io, int i) { return i < static_cast<int>(io.in.size()) ? io.in[i] : nullptr; }

  static Status zero(void* p, int64_t floats, cudaStream_t stream) {
    if (!p || floats <= 0) return Status::ok();
    return cuda::check(cudaMemsetAsync(p, 0, static_cast<size_t>(floats) * sizeof(float), stream),
                       "cudaMemsetAsync (RNN scratch)");
  }

  Status direction(const Io& io, const RnnCommonAttrs& a, const rnn::Problem& p, const Buffers& buf,
                   const int64_t* lens, int64_t d, cublasHandle_t blas, cudaStream_t stream) const {
    const int64_t H = p.hidden, I = p.input, B = p.batch, gh = p.gates * H, rows = p.seq * p.batch;
    const bool lstm = spec_.cell == rnn::CellKind::kLstm, gru = spec_.cell == rnn::CellKind::kGru;
    const bool split = gru && !spec_.lbr;
    const int64_t rec_cols = split ? 2 * H : gh;
    const float* x = io.in[kX];
    const float* wd = io.in[kW] + d * gh * I;
    const float* rd = io.in[kR] + d * gh * H;
    const float* bias = optional(io, kB);
    const float* bd = bias ? bias + d * 2 * gh : nullptr;
    const float* peep = lstm ? optional(io, kP) : nullptr;
    const StateLayout state{B, H, p.dirs, d, p.layout};
    const unsigned step_blocks = cuda::blocks_for(B * H);

    const std::vector<rnn::Fn> fns = rnn::functions(a, spec_.functions, static_cast<int>(d));
    rnn::Step<float> s;
    s.cell = spec_.cell;
    s.lbr = spec_.lbr;
    s.input_forget = spec_.input_forget;
    s.clip = a.clip;
    s.f = rnn::to_act(fns[0]);
    if (fns.size() > 1) s.g = rnn::to_act(fns[1]);
    if (fns.size() > 2) s.fh = rnn::to_act(fns[2]);
    s.seq = p.seq;
    s.batch = B;
    s.hidden = H;
    s.dirs = p.dirs;
    s.d = d;
    s.layout = p.layout;
    s.reversed = p.reversed(d);
    s.lens = lens;
    s.peep = peep ? peep + d * 3 * H : nullptr;
    s.rb_h = gru && spec_.lbr && bd ? bd + gh + 2 * H : nullptr;
    s.pre = buf.pre;
    s.hr = buf.hr;
    s.h = buf.h;
    s.c = buf.c;
    s.q = buf.q;
    s.save_h = buf.save_h;
    s.save_c = buf.save_c;
    s.save_c_new = buf.save_c_new;
    s.save_extra = buf.save_extra;
    s.y = backward_ ? nullptr : io.out[0];

    // Forward.
    KILN_RETURN_IF_ERROR(gemm(blas, stream, false, true, rows, gh, I, x, I, wd, I, 0.f, buf.pre, gh));
    if (bd && rows * gh > 0) {
      bias_kernel<<<cuda::blocks_for(rows * gh), cuda::kThreads, 0, stream>>>(buf.pre, bd, rows, gh,
                                                                              gru && spec_.lbr ? 2 * H : gh, rows * gh);
      KILN_RETURN_IF_ERROR(launched("rnn bias kernel"));
    }
    load_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(optional(io, kInitialH), buf.h, state);
    KILN_RETURN_IF_ERROR(launched("rnn load_state kernel"));
    if (lstm) {
      load_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(optional(io, kInitialC), buf.c, state);
      KILN_RETURN_IF_ERROR(launched("rnn load_state kernel"));
    }
    KILN_RETURN_IF_ERROR(zero(buf.q, B * H, stream));
    KILN_RETURN_IF_ERROR(zero(buf.save_h, rows * H, stream));
    KILN_RETURN_IF_ERROR(zero(buf.save_c, rows * H, stream));
    KILN_RETURN_IF_ERROR(zero(buf.save_c_new, rows * H, stream));
    KILN_RETURN_IF_ERROR(zero(buf.save_extra, rows * H, stream));
    for (int64_t k = 0; k < p.seq; ++k) {
      s.k = k;
      KILN_RETURN_IF_ERROR(gemm(blas, stream, false, true, B, rec_cols, H, buf.h, H, rd, H, 0.f, buf.hr, gh));
      forward_step_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(s, 0);
      KILN_RETURN_IF_ERROR(launched("rnn forward step kernel"));
      if (split) {
        KILN_RETURN_IF_ERROR(
            gemm(blas, stream, false, true, B, H, H, buf.q, H, rd + 2 * H * H, H, 0.f, buf.hr + 2 * H, gh));
        forward_step_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(s, 1);
        KILN_RETURN_IF_ERROR(launched("rnn forward step kernel"));
      }
    }
    if (!backward_) {
      store_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(buf.h, io.out[1], state);
      KILN_RETURN_IF_ERROR(launched("rnn store_state kernel"));
      if (lstm) {
        store_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(buf.c, io.out[2], state);
        KILN_RETURN_IF_ERROR(launched("rnn store_state kernel"));
      }
      return Status::ok();
    }

    // Backward.
    const int dy = rnn_grad_input::dy(lstm);
    s.dy = optional(io, dy);
    s.dh = buf.dh;
    s.dc = buf.dc;
    s.dq = buf.dq;
    s.dstep = buf.dstep;
    s.dpre = buf.dpre;
    s.dpre_r = buf.dpre_r;
    KILN_RETURN_IF_ERROR(zero(buf.dpre, rows * gh, stream));
    KILN_RETURN_IF_ERROR(zero(buf.dpre_r, rows * gh, stream));
    load_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(optional(io, dy + 1), buf.dh, state);
    KILN_RETURN_IF_ERROR(launched("rnn load_state kernel"));
    if (lstm) {
      load_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(optional(io, dy + 2), buf.dc, state);
      KILN_RETURN_IF_ERROR(launched("rnn load_state kernel"));
    }
    for (int64_t k = p.seq - 1; k >= 0; --k) {
      s.k = k;
      backward_step_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(s, 0);
      KILN_RETURN_IF_ERROR(launched("rnn backward step kernel"));
      if (split) {
        KILN_RETURN_IF_ERROR(
            gemm(blas, stream, false, false, B, H, H, buf.dstep + 2 * H, gh, rd + 2 * H * H, H, 0.f, buf.dq, H));
        backward_step_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(s, 1);
        KILN_RETURN_IF_ERROR(launched("rnn backward step kernel"));
      }
      KILN_RETURN_IF_ERROR(gemm(blas, stream, false, false, B, H, rec_cols, buf.dstep, gh, rd, H, 1.f, buf.dh, H));
    }
    store_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(buf.dh, io.out[4], state);
    KILN_RETURN_IF_ERROR(launched("rnn store_state kernel"));
    if (lstm) {
      store_state_kernel<<<step_blocks, cuda::kThreads, 0, stream>>>(buf.dc, io.out[5], state);
      KILN_RETURN_IF_ERROR(launched("rnn store_state kernel"));
    }

    // Weights, input, biases, peepholes.
    const float* dpre_rec = buf.dpre_r ? buf.dpre_r : buf.dpre;
    float* dwd = io.out[1] + d * gh * I;
    float* drd = io.out[2] + d * gh * H;
    KILN_RETURN_IF_ERROR(gemm(blas, stream, true, false, gh, I, rows, buf.dpre, gh, x, I, 0.f, dwd, I));
    KILN_RETURN_IF_ERROR(gemm(blas, stream, false, false, rows, I, gh, buf.dpre, gh, wd, I, 1.f, io.out[0], I));
    if (split) {
      KILN_RETURN_IF_ERROR(gemm(blas, stream, true, false, 2 * H, H, rows, buf.dpre, gh, buf.save_h, H, 0.f, drd, H));
      KILN_RETURN_IF_ERROR(gemm(blas, stream, true, false, H, H, rows, buf.dpre + 2 * H, gh, buf.save_extra, H, 0.f,
                                drd + 2 * H * H, H));
    } else {
      KILN_RETURN_IF_ERROR(gemm(blas, stream, true, false, gh, H, rows, dpre_rec, gh, buf.save_h, H, 0.f, drd, H));
    }
    float* dbd = io.out[3] + d * 2 * gh;
    column_sum_kernel<<<cuda::blocks_for(gh), cuda::kThreads, 0, stream>>>(buf.dpre, rows, gh, gh, dbd);
    KILN_RETURN_IF_ERROR(launched("rnn column_sum kernel"));
    column_sum_kernel<<<cuda::blocks_for(gh), cuda::kThreads, 0, stream>>>(dpre_rec, rows, gh, gh, dbd + gh);
    KILN_RETURN_IF_ERROR(launched("rnn column_sum kernel"));
    if (lstm) {
      peephole_kernel<<<cuda::blocks_for(H), cuda::kThreads, 0, stream>>>(buf.dpre, buf.save_c, buf.save_c_new, rows, H,
                                                                          io.out[6] + d * 3 * H);
      KILN_RETURN_IF_ERROR(launched("rnn peephole kernel"));
    }
    return Status::ok();
  }

  rnn::CellSpec spec_;
  bool backward_;
  size_t bytes_ = 0;
  cuda::DeviceScratch scratch_;
};

rnn::CellSpec spec_of(const OpCall& call, rnn::CellKind cell) {
  if (cell == rnn::CellKind::kLstm) return {cell, false, call.attrs_as<LstmAttrs>().input_forget, 3};
  if (cell == rnn::CellKind::kGru) return {cell, call.attrs_as<GruAttrs>().linear_before_reset, false, 2};
  return {cell, false, false, 1};
}

KernelImpl cuda_impl(const char* name, const char* op, rnn::CellKind cell, bool backward) {
  return {
      .name = name,
      .op = op,
      .backend = Backend::kCuda,
      .priority = 10,
      .supports =
          [](const OpCall& call) {
            return require_float_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
          },
      .create = [cell, backward](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(std::make_unique<CudaRnn>(spec_of(call, cell), backward));
      },
  };
}

KILN_REGISTER_KERNEL(cuda_impl("cuda.lstm", "LSTM", rnn::CellKind::kLstm, false));
KILN_REGISTER_KERNEL(cuda_impl("cuda.gru", "GRU", rnn::CellKind::kGru, false));
KILN_REGISTER_KERNEL(cuda_impl("cuda.rnn", "RNN", rnn::CellKind::kRnn, false));
KILN_REGISTER_KERNEL(cuda_impl("cuda.lstm_backward", "LSTMBackward", rnn::CellKind::kLstm, true));
KILN_REGISTER_KERNEL(cuda_impl("cuda.gru_backward", "GRUBackward", rnn::CellKind::kGru, true));
KILN_REGISTER_KERNEL(cuda_impl("cuda.rnn_backward", "RNNBackward", rnn::CellKind::kRnn, true));

}  // namespace
}  // namespace kiln
