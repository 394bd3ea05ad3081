#pragma once
// Helpers shared by the op unit tests: build tensors and descs, run inference, run an op on every
// reference and CPU implementation that accepts it (through the builder and the runtime: runner/op_runner.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/registry.h"
#include "runner/op_runner.h"

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

// Runs `op` on every ref and CPU implementation that accepts it (inputs absent where undefined), each as a
// one-node engine pinned to that implementation (builder and runtime, as every engine runs); each result is
// its outputs or the error that building or running gave. A backend in `must_run` (default: the reference,
// and the CPU backend when it registers the op) with no accepting implementation fails the test, so a loop
// over the result cannot pass by running nothing.
inline Runs run_all(const char* op, const Attrs& a, std::vector<Tensor> src, std::vector<Backend> must_run = {}) {
  OpSpec spec;
  spec.op = op;
  spec.attrs = &a;
  spec.inputs = std::move(src);
  Runs out;
  if (must_run.empty()) {
    must_run.push_back(Backend::kRef);
    if (!KernelRegistry::global().find(op, Backend::kCpu).empty()) must_run.push_back(Backend::kCpu);
  }
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    spec.backend = b;
    auto candidates = OpRunner::candidates(spec, b);
    if (!candidates.is_ok()) {
      out.emplace_back("infer", Result<std::vector<Tensor>>(candidates.status()));
      return out;
    }
    for (const OpCandidates::Accepted& c : candidates->accepted) {
      spec.pin = KernelPin{c.impl->name, ""};
      out.emplace_back(c.impl->name, run_op(spec));
    }
    spec.pin.reset();
    if (candidates->accepted.empty() && std::find(must_run.begin(), must_run.end(), b) != must_run.end())
      ADD_FAILURE() << op << ": no " << backend_name(b) << " implementation ran this problem" << candidates->rejected;
  }
  return out;
}

// Runs `call`'s op on `src` once on `backend` as a one-node engine (builder and runtime; the first kernel of the
// backend that accepts it, inputs the call marks constant built in as constants), the outputs written into `dst`
// where it holds tensors (bound as the engine's outputs) and returned in it.
inline Status run_engine(const OpCall& call, Backend backend, std::vector<Tensor> src, std::vector<Tensor>& dst) {
  if (!call.schema || !call.attrs) return invalid_argument("run_engine: the call names no op or attributes");
  OpSpec spec;
  spec.op = call.schema->name;
  spec.attrs = call.attrs;
  spec.inputs = std::move(src);
  spec.backend = backend;
  for (size_t i = 0; i < call.constants.size(); ++i)
    if (call.constants[i]) spec.constant_inputs.push_back(static_cast<int>(i));
  KILN_ASSIGN_OR_RETURN(OpRunner runner, OpRunner::build(spec));
  for (size_t i = 0; i < dst.size() && i < runner.output_count(); ++i)
    if (dst[i].defined()) KILN_RETURN_IF_ERROR(runner.set_output(i, dst[i]));
  KILN_RETURN_IF_ERROR(runner.run());
  KILN_ASSIGN_OR_RETURN(dst, runner.outputs());
  return Status::ok();
}

inline void expect_values(const Tensor& t, std::vector<double> want, const std::string& who, double tol = 0.0) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << who;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.at(static_cast<int64_t>(i)), want[i], tol) << who << " element " << i;
}

}  // namespace kiln::op_test
