#pragma once
// Helpers shared by the op unit tests: build tensors and descs, run inference, run an op on every
// reference and CPU implementation that accepts it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/registry.h"

namespace kiln::op_test {

inline Tensor make(DataType d, Dims dims, std::vector<double> v) {
  Tensor t = *Tensor::empty(d, dims);
  for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
  return t;
}

inline TensorDesc desc(DataType d, Dims dims) { return {d, dims, true}; }

inline Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& a, std::vector<TensorDesc> in,
                                             std::vector<const Tensor*> values = {}) {
  values.resize(in.size(), nullptr);
  return OpRegistry::global().find(op)->infer_outputs(InferContext(a, in, values));
}

inline void expect_error(const Result<std::vector<TensorDesc>>& r, const std::string& needle) {
  ASSERT_FALSE(r.is_ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

using Runs = std::vector<std::pair<std::string, Result<std::vector<Tensor>>>>;

// Runs `op` on every ref and CPU implementation that accepts it (inputs absent where undefined); each
// result is its outputs or the error that `create` or `run` gave. A backend in `must_run` (default: the
// reference, and the CPU backend when it registers the op) with no accepting implementation fails the
// test, so a loop over the result cannot pass by running nothing.
inline Runs run_all(const char* op, const Attrs& a, std::vector<Tensor> src, std::vector<Backend> must_run = {}) {
  OpCall call;
  call.schema = OpRegistry::global().find(op);
  call.attrs = &a;
  std::vector<const Tensor*> values;
  for (const Tensor& t : src) {
    call.inputs.push_back(t.defined() ? desc(t.dtype(), t.dims()) : TensorDesc::absent());
    values.push_back(t.defined() ? &t : nullptr);
  }
  Runs out;
  auto outs = call.schema->infer_outputs(InferContext(a, call.inputs, values));
  if (!outs.is_ok()) {
    out.emplace_back("infer", Result<std::vector<Tensor>>(outs.status()));
    return out;
  }
  call.outputs = *outs;
  pad_optional_inputs(*call.schema, call.inputs, src);
  if (must_run.empty()) {
    must_run.push_back(Backend::kRef);
    if (!KernelRegistry::global().find(op, Backend::kCpu).empty()) must_run.push_back(Backend::kCpu);
  }
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    int ran = 0;
    std::string reasons;
    for (const KernelImpl* impl : KernelRegistry::global().find(op, b)) {
      if (Status s = impl->supports(call); !s.is_ok()) {
        reasons += str_cat("\n  ", impl->name, ": ", s.message());
        continue;
      }
      ++ran;
      std::vector<Tensor> dst;
      for (const TensorDesc& d : call.outputs) dst.push_back(*Tensor::empty(d.dtype, d.dims));
      auto kernel = impl->create(call);
      if (!kernel.is_ok()) {
        out.emplace_back(impl->name, Result<std::vector<Tensor>>(kernel.status()));
        continue;
      }
      KernelContext ctx{call, src, dst, cpu_stream(), cpu_allocator()};
      Status s = (*kernel)->run(ctx);
      out.emplace_back(impl->name, s.is_ok() ? Result<std::vector<Tensor>>(dst) : Result<std::vector<Tensor>>(s));
    }
    if (ran == 0 && std::find(must_run.begin(), must_run.end(), b) != must_run.end())
      ADD_FAILURE() << op << ": no " << backend_name(b) << " implementation ran this problem" << reasons;
  }
  return out;
}

inline void expect_values(const Tensor& t, std::vector<double> want, const std::string& who, double tol = 0.0) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << who;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.at(static_cast<int64_t>(i)), want[i], tol) << who << " element " << i;
}

}  // namespace kiln::op_test
