#pragma once
// What the communicators share: the per-call description of tensors that rank 0 checks, and the NCCL factory.
#include <memory>
#include <span>

#include "train/dist/dist.h"
#include "train/dist/tcp_group.h"

namespace kiln::train::dist {

/// The call for `tensors`; `accept(i, tensor)` returns a problem ("" when the tensor is fine).
template <class Accept>
Call describe(Op op, std::span<Tensor> tensors, int root, const Accept& accept) {
  Call call;
  call.op = op;
  call.root = root;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    call.dtypes.push_back(t.dtype());
    call.counts.push_back(t.defined() ? static_cast<uint64_t>(t.numel()) : 0);
    if (!call.problem.empty()) continue;
    if (!t.defined())
      call.problem = str_cat("tensor ", i, " is undefined");
    else if (!t.is_contiguous())
      call.problem = str_cat("tensor ", i, " (", t.describe(), ") is not contiguous");
    else
      call.problem = accept(i, t);
  }
  return call;
}

/// The NCCL communicator (world size > 1) on GPU `device`: cudaSetDevice, the TCP rendezvous, then NCCL's.
Result<std::unique_ptr<Communicator>> create_nccl_communicator(const DistConfig& config, int device);

}  // namespace kiln::train::dist
