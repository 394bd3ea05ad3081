// The TCP communicator (host tensors; also every world of size 1) and Communicator::create.
#include <cstring>

#include "train/dist/internal.h"

namespace kiln::train {
namespace {

using dist::Call;
using dist::Op;
using dist::TcpGroup;

class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(std::unique_ptr<TcpGroup> group, Device device) : group_(std::move(group)), device_(device) {}
  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }

  Status all_reduce_sum(std::span<Tensor> tensors, Stream& stream) override {
    const Call call = dist::describe(Op::kAllReduce, tensors, 0, [&](size_t i, const Tensor& t) -> std::string {
      if (t.device() != device_) return on_wrong_device(i, t);
      // One GPU (a world of one) accepts what NCCL would; the TCP ring sums float32.
      const bool half = t.dtype() == DataType::kFloat16 || t.dtype() == DataType::kBFloat16;
      if (t.dtype() != DataType::kFloat32 && !(half && device_.is_cuda()))
        return str_cat(
            "tensor ", i, " is ", dtype_name(t.dtype()),
            ": the TCP communicator sums float32 tensors (cast, or sum float16/bfloat16 on the GPU with NCCL)");
      return "";
    });
    KILN_RETURN_IF_ERROR(prefixed(group_->agree(call).take_status(), "all_reduce_sum"));
    if (world_size() == 1) return Status::ok();
    size_t total = 0;
    for (uint64_t c : call.counts) total += c;
    if (tensors.size() == 1)
      return prefixed(group_->ring_all_reduce(tensors[0].data<float>(), total), "all_reduce_sum");
    staging_.resize(total * sizeof(float));
    auto* flat = reinterpret_cast<float*>(staging_.data());
    size_t at = 0;
    for (const Tensor& t : tensors) {
      const size_t n = static_cast<size_t>(t.numel());
      if (n > 0) std::memcpy(flat + at, t.raw(), n * sizeof(float));
      at += n;
    }
    KILN_RETURN_IF_ERROR(prefixed(group_->ring_all_reduce(flat, total), "all_reduce_sum"));
    at = 0;
    for (Tensor& t : tensors) {
      const size_t n = static_cast<size_t>(t.numel());
      if (n > 0) std::memcpy(t.raw(), flat + at, n * sizeof(float));
      at += n;
    }
    return Status::ok();
  }

  Status broadcast(std::span<Tensor> tensors, int root, Stream& stream) override {
    const int n = world_size();
    Call call = dist::describe(Op::kBroadcast, tensors, root, [&](size_t i, const Tensor& t) -> std::string {
      if (t.device() != device_) return on_wrong_device(i, t);
      return "";
    });
    if (root < 0 || root >= n) call.problem = str_cat("the root rank ", root, " is outside 0..", n - 1);
    KILN_RETURN_IF_ERROR(prefixed(group_->agree(call).take_status(), "broadcast"));
    if (n == 1) return Status::ok();
    size_t total = 0;
    for (const Tensor& t : tensors) total += t.nbytes();
    if (tensors.size() == 1) return prefixed(group_->ring_broadcast(tensors[0].raw(), total, root), "broadcast");
    staging_.resize(total);
    size_t at = 0;
    if (rank() == root) {
      for (const Tensor& t : tensors) {
        if (t.nbytes() > 0) std::memcpy(staging_.data() + at, t.raw(), t.nbytes());
        at += t.nbytes();
      }
    }
    KILN_RETURN_IF_ERROR(prefixed(group_->ring_broadcast(staging_.data(), total, root), "broadcast"));
    if (rank() == root) return Status::ok();
    at = 0;
    for (Tensor& t : tensors) {
      if (t.nbytes() > 0) std::memcpy(t.raw(), staging_.data() + at, t.nbytes());
      at += t.nbytes();
    }
    return Status::ok();
  }

  Result<std::vector<double>> all_reduce_host(std::vector<double> values) override {
    Call call;
    call.op = Op::kHost;
    call.values = std::move(values);
    auto sums = group_->agree(call);
    if (!sums.is_ok()) return prefixed(sums.take_status(), "all_reduce_host");
    return sums;
  }

  Status barrier() override { return prefixed(group_->agree(Call{}).take_status(), "barrier"); }
  Status synchronize(Stream& stream) override { return stream.synchronize(); }

 private:
  std::string on_wrong_device(size_t i, const Tensor& t) const {
    return str_cat("tensor ", i, " is on ", t.device().to_string(), ", this communicator works on ",
                   device_.to_string(), " tensors (create one for that device)");
  }
  static Status prefixed(Status status, std::string_view op) {
    if (status.is_ok()) return status;
    return std::move(status).with_prefix(op);
  }

  std::unique_ptr<TcpGroup> group_;
  Device device_;
  std::vector<uint8_t> staging_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> Communicator::create(const DistConfig& config, Device device) {
  if (device.is_cuda() && config.world_size > 1) {
    if (!nccl_built_in())
      return unsupported("data parallel training on CUDA needs NCCL, and this kiln was built without it: install ",
                         "NCCL and rebuild (cmake -DKILN_NCCL_ROOT=<folder with include/nccl.h and lib/libnccl.so*>), ",
                         "or train on the CPU");
    return dist::create_nccl_communicator(config, device.index);
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<TcpGroup> group, TcpGroup::connect(config));
  return std::unique_ptr<Communicator>(new TcpCommunicator(std::move(group), device));
}

}  // namespace kiln::train
