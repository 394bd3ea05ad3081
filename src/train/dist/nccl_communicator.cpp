// The CUDA communicator: NCCL collectives on the caller's stream, the TCP group for the rendezvous (the
// ncclUniqueId), the checks before each collective, host sums and barriers. Compiled against NCCL only when
// CMake found it (KILN_WITH_NCCL); otherwise create says NCCL is not built in.
#include "train/dist/internal.h"

#if defined(KILN_WITH_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <optional>
#include <thread>
#endif

namespace kiln::train {

#if defined(KILN_WITH_NCCL)
bool nccl_built_in() { return true; }

namespace dist {
namespace {

Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::ok();
  cudaGetLastError();
  return {StatusCode::kDeviceError, str_cat(what, " failed: ", cudaGetErrorString(err))};
}

Status nccl_error(ncclComm_t comm, ncclResult_t result, std::string_view what) {
  const char* detail = comm ? ncclGetLastError(comm) : nullptr;
  return {StatusCode::kDeviceError, str_cat(what, " failed: ", ncclGetErrorString(result),
                                            detail && *detail ? str_cat(" (", detail, ")") : std::string())};
}

// The communicator is non-blocking: a call may answer ncclInProgress and finish in the background. Waits for it
// until the deadline.
Status wait_nccl(ncclComm_t comm, ncclResult_t result, Deadline deadline, std::string_view what) {
  while (result == ncclInProgress) {
    if (Clock::now() >= deadline)
      return {StatusCode::kIoError, str_cat(what, " did not finish before the timeout: is every rank running and ",
                                            "reaching the same collective? (KILN_DIST_TIMEOUT)")};
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    ncclResult_t state = ncclSuccess;
    const ncclResult_t polled = ncclCommGetAsyncError(comm, &state);
    result = polled != ncclSuccess ? polled : state;
  }
  if (result != ncclSuccess) return nccl_error(comm, result, what);
  return Status::ok();
}

std::optional<ncclDataType_t> nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    default: return std::nullopt;
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<TcpGroup> group, int device, ncclComm_t comm, cudaEvent_t done)
      : group_(std::move(group)), device_(device), comm_(comm), done_(done) {}
  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    cudaEventDestroy(done_);
    if (!comm_) return;  // aborted
    if (broken_.is_ok()) {
      // Flush what is queued, then free; a peer that went away turns this into an abort after the timeout.
      Status done = wait_nccl(comm_, ncclCommFinalize(comm_), deadline(), "ncclCommFinalize");
      if (done.is_ok()) {
        ncclCommDestroy(comm_);
        return;
      }
    }
    ncclCommAbort(comm_);
  }
  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }

  Status all_reduce_sum(std::span<Tensor> tensors, Stream& stream) override {
    return collective(Op::kAllReduce, tensors, 0, stream, "all_reduce_sum");
  }
  Status broadcast(std::span<Tensor> tensors, int root, Stream& stream) override {
    return collective(Op::kBroadcast, tensors, root, stream, "broadcast");
  }

  Result<std::vector<double>> all_reduce_host(std::vector<double> values) override {
    Call call;
    call.op = Op::kHost;
    call.values = std::move(values);
    auto sums = group_->agree(call);
    if (!sums.is_ok()) return sums.take_status().with_prefix("all_reduce_host");
    return sums;
  }
  Status barrier() override {
    Status status = group_->agree(Call{}).take_status();
    if (status.is_ok()) return status;
    return std::move(status).with_prefix("barrier");
  }

  Status synchronize(Stream& stream) override {
    if (!comm_)
      return {broken_.code(), str_cat("synchronize: NCCL stopped after an earlier error (", broken_.message(), ")")};
    if (stream.device() != Device::cuda(device_))
      return invalid_argument("synchronize: the stream is on ", stream.device().to_string(),
                              ", this communicator's GPU is cuda:", device_);
    KILN_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
    KILN_RETURN_IF_ERROR(
        cuda_status(cudaEventRecord(done_, static_cast<cudaStream_t>(stream.native_handle())), "cudaEventRecord"));
    const Deadline until = deadline();
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      const cudaError_t state = cudaEventQuery(done_);
      if (state == cudaSuccess) return Status::ok();
      if (state != cudaErrorNotReady) return cuda_status(state, "synchronize: cudaEventQuery");
      ncclResult_t nccl_state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &nccl_state);
      if (nccl_state != ncclSuccess && nccl_state != ncclInProgress)
        return abort(nccl_error(comm_, nccl_state, "an NCCL collective"));
      if (Clock::now() >= until)
        return abort({StatusCode::kIoError,
                      str_cat("the NCCL collectives did not finish within ", group_->config().timeout_seconds,
                              " s: a rank probably died or stopped in the middle of one (its log says why); ",
                              "NCCL was aborted (KILN_DIST_TIMEOUT sets the limit)")});
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

 private:
  Deadline deadline() const { return deadline_after(group_->config().timeout_seconds); }

  // Ends NCCL here (ncclCommAbort also stops kernels that wait for a dead peer); every later call fails.
  Status abort(Status status) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    broken_ = status;
    return std::move(status).with_prefix("synchronize");
  }

  Status collective(Op op, std::span<Tensor> tensors, int root, Stream& stream, std::string_view name) {
    const int n = world_size();
    const Device gpu = Device::cuda(device_);
    Call call = describe(op, tensors, root, [&](size_t i, const Tensor& t) -> std::string {
      if (t.device() != gpu)
        return str_cat("tensor ", i, " is on ", t.device().to_string(), ", this communicator's GPU is ",
                       gpu.to_string());
      if (!nccl_type(t.dtype()))
        return str_cat("tensor ", i, " is ", dtype_name(t.dtype()), ": NCCL sums float32, float16 and bfloat16");
      return "";
    });
    if (!broken_.is_ok())
      call.problem = str_cat("NCCL stopped after an earlier error (", broken_.message(), ")");
    else if (stream.device() != gpu)
      call.problem =
          str_cat("the stream is on ", stream.device().to_string(), ", this communicator's GPU is ", gpu.to_string());
    else if (root < 0 || root >= n)
      call.problem = str_cat("the root rank ", root, " is outside 0..", n - 1);
    Status agreed = group_->agree(call).take_status();
    if (!agreed.is_ok()) return std::move(agreed).with_prefix(name);
    Status status = enqueue(op, tensors, root, static_cast<cudaStream_t>(stream.native_handle()));
    if (!status.is_ok()) {
      broken_ = status;
      return std::move(status).with_prefix(name);
    }
    return Status::ok();
  }

  Status enqueue(Op op, std::span<Tensor> tensors, int root, cudaStream_t stream) {
    KILN_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return nccl_error(comm_, result, "ncclGroupStart");
    // In a group of a non-blocking communicator a call may answer ncclInProgress; ncclGroupEnd's wait covers it.
    for (size_t i = 0; i < tensors.size() && (result == ncclSuccess || result == ncclInProgress); ++i) {
      Tensor& t = tensors[i];
      if (t.numel() == 0) continue;
      const size_t count = static_cast<size_t>(t.numel());
      const ncclDataType_t type = *nccl_type(t.dtype());
      result = op == Op::kAllReduce ? ncclAllReduce(t.raw(), t.raw(), count, type, ncclSum, comm_, stream)
                                    : ncclBroadcast(t.raw(), t.raw(), count, type, root, comm_, stream);
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (result != ncclSuccess && result != ncclInProgress) return nccl_error(comm_, result, "enqueueing the tensors");
    return wait_nccl(comm_, ended, deadline(), "ncclGroupEnd");
  }

  std::unique_ptr<TcpGroup> group_;
  int device_;
  ncclComm_t comm_;
  cudaEvent_t done_;
  Status broken_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> create_nccl_communicator(const DistConfig& config, int device) {
  int devices = 0;
  KILN_RETURN_IF_ERROR(cuda_status(cudaGetDeviceCount(&devices), "cudaGetDeviceCount"));
  if (device < 0 || device >= devices)
    return invalid_argument("rank ", config.rank, " asks for GPU ", device, " (LOCAL_RANK ", config.local_rank,
                            "), but this node has ", devices, " GPUs: start at most one process per GPU on each node");
  KILN_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), "cudaSetDevice"));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<TcpGroup> group, TcpGroup::connect(config));
  std::vector<uint8_t> id_bytes(sizeof(ncclUniqueId));
  if (config.rank == 0) {
    ncclUniqueId id{};
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) return nccl_error(nullptr, result, "ncclGetUniqueId");
    std::memcpy(id_bytes.data(), &id, sizeof(id));
  }
  KILN_RETURN_IF_ERROR(group->share(id_bytes));
  if (id_bytes.size() != sizeof(ncclUniqueId))
    return Status(StatusCode::kIoError, "rank 0 sent an NCCL id of the wrong size: is it the same kiln build?");
  ncclUniqueId id{};
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
  nccl_config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, config.world_size, id, config.rank, &nccl_config);
  Status ready = comm ? wait_nccl(comm, started, deadline_after(config.timeout_seconds), "ncclCommInitRankConfig")
                      : nccl_error(nullptr, started, "ncclCommInitRankConfig");
  if (!ready.is_ok()) {
    if (comm) ncclCommAbort(comm);
    return std::move(ready).with_prefix(str_cat("rank ", config.rank, ": NCCL setup on GPU ", device));
  }
  cudaEvent_t done = nullptr;
  Status event = cuda_status(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  if (!event.is_ok()) {
    ncclCommAbort(comm);
    return event;
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(std::move(group), device, comm, done));
}

}  // namespace dist

#else

bool nccl_built_in() { return false; }

namespace dist {
Result<std::unique_ptr<Communicator>> create_nccl_communicator(const DistConfig& config, int device) {
  return unsupported("the CUDA communicator needs NCCL, and this kiln was built without it");
}
}  // namespace dist

#endif

}  // namespace kiln::train
