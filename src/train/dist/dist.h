#pragma once
// Distributed data parallel: the launch configuration and the communicators below the trainer.
//
// One process per device. A job is launched with environment variables (KILN_RANK or RANK, KILN_WORLD_SIZE or
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; several nodes work the same way) or with Open MPI's
// `mpirun -np N kiln train ...`, whose OMPI_COMM_WORLD_* variables are read directly (no MPI library is linked):
//   one node:   mpirun -np 2 kiln train ...            (or RANK=r WORLD_SIZE=2 kiln train ... for r = 0, 1)
//   two nodes:  mpirun -np 4 -H node0:2,node1:2 -x MASTER_ADDR=node0 -x MASTER_PORT=29500 kiln train ...
//               (or RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set by hand on each node)
// The trainer creates the communicator on Device::cuda(config.local_rank) (or the CPU), one process per GPU.
//
// Every communicator first meets over TCP: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects
// (retrying until the timeout) and says who it is; rank 0 answers with every rank's address, and the ranks then
// connect in a ring (rank r to rank r+1). Afterwards:
//   - control plane (rank 0 and a socket to each rank): before every collective each rank tells rank 0 what it
//     is about to do (op, tensor count, dtypes, sizes); rank 0 checks that they agree and answers every rank with
//     the same verdict, so a mismatch is the same error everywhere ("rank 1 sent 4096 floats for tensor 3,
//     rank 0 has 1024"), never a hang or a corrupted sum. Host values (all_reduce_host) travel here too and are
//     summed on rank 0 in rank order.
//   - data plane on the CPU: the ring. all_reduce_sum is a ring reduce-scatter then all-gather over the
//     concatenated tensors, sent in chunks (DistConfig::chunk_bytes); each element's sum is taken in one fixed
//     order and then copied to every rank, so all ranks get bit-identical results. broadcast is a pipelined chain
//     along the ring.
//   - data plane on CUDA: NCCL. The ncclUniqueId travels over the control plane; collectives are enqueued on the
//     caller's stream inside ncclGroupStart/End. The communicator is non-blocking, so initialization and enqueue
//     are bounded by the timeout.
// A rank that does not arrive, a peer that closes its sockets (it died) or stops answering gives an error
// naming the rank within DistConfig::timeout_seconds. After an error in the middle of a transfer the
// communicator refuses further work (its streams are out of step); an error found by the check before a
// collective (a size mismatch) leaves it usable. A communicator is used by one thread at a time.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/status.h"
#include "kiln/stream.h"
#include "kiln/tensor.h"

namespace kiln::train {

struct DistConfig {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double timeout_seconds = 300;          ///< a rank that does not arrive or a peer that dies: an error, never a hang
  size_t chunk_bytes = size_t{1} << 20;  ///< the TCP ring's message size
  bool enabled() const { return world_size > 1; }
};

/// Looks up one environment variable (empty optional when unset).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// From the environment: KILN_RANK or RANK, KILN_WORLD_SIZE or WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
/// KILN_DIST_TIMEOUT (seconds); under mpirun (Open MPI) OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (MASTER_ADDR
/// defaults to 127.0.0.1 then). LOCAL_RANK defaults to the rank. Nothing set: world_size 1. Errors name the
/// variable and say what is expected.
Result<DistConfig> dist_config_from_env();
/// The same from `lookup` (tests).
Result<DistConfig> dist_config_from_env(const EnvLookup& lookup);

/// Whether this kiln was built with NCCL (the CUDA communicator needs it).
bool nccl_built_in();

class Communicator {
 public:
  /// CPU device: a TCP communicator (rank 0 listens on master_addr:master_port; ring all-reduce over sockets,
  /// chunked, deterministic summation order so every rank gets bit-identical results). CUDA device: NCCL
  /// (the ncclUniqueId travels over the same TCP rendezvous; cudaSetDevice(device index) first). Errors when
  /// NCCL is not built in say so. World size 1 needs neither: every collective is a no-op.
  static Result<std::unique_ptr<Communicator>> create(const DistConfig& config, Device device);
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Sums each tensor over the ranks, in place. float32 (float16/bfloat16 too on NCCL); all tensors on the host
  /// (TCP) or all on this communicator's GPU (NCCL, enqueued on `stream`, grouped with ncclGroupStart/End).
  /// Tensors must be contiguous; every rank passes the same count, dtypes and sizes in the same order.
  virtual Status all_reduce_sum(std::span<Tensor> tensors, Stream& stream) = 0;
  /// Copies root's tensors to every rank (the trainer broadcasts the initial parameters). TCP: any dtype.
  virtual Status broadcast(std::span<Tensor> tensors, int root, Stream& stream) = 0;
  /// Sums small host values over the ranks (loss, correct counts, a found-inf flag) — always over TCP/host,
  /// in rank order (every rank gets the same doubles).
  virtual Result<std::vector<double>> all_reduce_host(std::vector<double> values) = 0;
  virtual Status barrier() = 0;
  /// Waits for the work queued on `stream` (the collectives with it), at most the timeout. On the GPU a peer
  /// that dies in the middle of an NCCL collective would leave the stream waiting forever: this aborts NCCL and
  /// returns an error instead (the communicator stops). Call it where the stream would be synchronized after
  /// all_reduce_sum / broadcast. On the CPU the collectives are done when they return: stream.synchronize().
  virtual Status synchronize(Stream& stream) = 0;
};

}  // namespace kiln::train
