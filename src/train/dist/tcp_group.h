#pragma once
// The TCP process group every communicator stands on: the rendezvous, the control plane (a socket from rank 0 to
// each rank: collectives are checked there before any data moves) and the ring (rank r -> r+1) that carries the
// CPU communicator's data. dist.h describes the protocol.
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "train/dist/dist.h"
#include "train/dist/socket.h"

namespace kiln::train::dist {

enum class Op : uint8_t { kAllReduce = 1, kBroadcast, kHost, kBarrier };

/// What one rank is about to do; rank 0 compares every rank's call with its own.
struct Call {
  Op op = Op::kBarrier;
  int root = 0;
  std::string problem;  ///< a local error (a tensor on the wrong device): every rank fails with it
  std::vector<DataType> dtypes;
  std::vector<uint64_t> counts;  ///< elements per tensor
  std::vector<double> values;    ///< Op::kHost: the values to sum
};

class TcpGroup {
 public:
  /// Meets the other ranks (see dist.h); an error names the ranks that did not come or what was wrong.
  static Result<std::unique_ptr<TcpGroup>> connect(const DistConfig& config);

  int rank() const { return config_.rank; }
  int world_size() const { return config_.world_size; }
  const DistConfig& config() const { return config_; }

  /// Every rank's call checked on rank 0 (same op, root, tensor count, dtypes and sizes; no rank with a
  /// problem); every rank gets the same verdict. Op::kHost returns the values summed in rank order.
  Result<std::vector<double>> agree(const Call& call);
  /// Rank 0's `bytes` to every rank over the control plane.
  Status share(std::vector<uint8_t>& bytes);
  /// Sums `count` floats over the ranks in place: ring reduce-scatter, then all-gather, in chunks.
  Status ring_all_reduce(float* data, size_t count);
  /// `bytes` from `root` to every rank along the ring, pipelined in chunks.
  Status ring_broadcast(void* data, size_t bytes, int root);

 private:
  explicit TcpGroup(const DistConfig& config);
  Status rendezvous();
  Status check_usable() const;
  Status fail(Status status);
  Deadline deadline() const { return deadline_after(config_.timeout_seconds); }
  const std::string& name(int rank) const { return names_[static_cast<size_t>(rank)]; }

  DistConfig config_;
  std::vector<std::string> names_;  ///< "rank 3"
  std::vector<Socket> workers_;     ///< rank 0: the control socket of each other rank
  Socket master_;                   ///< other ranks: the control socket to rank 0
  Socket next_, prev_;              ///< the ring
  std::vector<float> scratch_;
  Status broken_;
};

}  // namespace kiln::train::dist
