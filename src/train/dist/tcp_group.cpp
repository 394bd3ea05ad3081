#include "train/dist/tcp_group.h"

#include <netinet/in.h>

#include <algorithm>

#include "kiln/logger.h"

namespace kiln::train::dist {
namespace {

constexpr uint32_t kMagic = 0x4e4c494b;  // "KILN"
constexpr uint32_t kVersion = 1;
enum class Hello : uint8_t { kControl = 1, kRing = 2 };
enum class Verdict : uint8_t { kOk = 0, kError = 1, kBroken = 2 };
constexpr size_t kMaxControlBytes = size_t{64} << 20;
constexpr size_t kMaxTensors = size_t{1} << 24;
constexpr size_t kMaxProblemBytes = 4096;
// How long a fresh connection may take to say who it is (a port scanner must not stall the rendezvous).
constexpr double kHelloSeconds = 10;

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kAllReduce: return "all_reduce_sum";
    case Op::kBroadcast: return "broadcast";
    case Op::kHost: return "all_reduce_host";
    case Op::kBarrier: return "barrier";
  }
  return "an unknown collective";
}

Status io_error(std::string message) { return {StatusCode::kIoError, std::move(message)}; }

std::vector<uint8_t> encode(const Call& call) {
  Writer w;
  w.u8(static_cast<uint8_t>(call.op));
  w.i32(call.root);
  w.str(call.problem.substr(0, kMaxProblemBytes));
  w.u32(static_cast<uint32_t>(call.dtypes.size()));
  for (size_t i = 0; i < call.dtypes.size(); ++i) {
    w.u8(static_cast<uint8_t>(call.dtypes[i]));
    w.u64(call.counts[i]);
  }
  w.u32(static_cast<uint32_t>(call.values.size()));
  for (double v : call.values) w.f64(v);
  return std::move(w.bytes);
}

bool decode(const std::vector<uint8_t>& bytes, Call& call) {
  Reader r(bytes);
  uint8_t op = 0;
  uint32_t tensors = 0, values = 0;
  if (!r.u8(op) || op < static_cast<uint8_t>(Op::kAllReduce) || op > static_cast<uint8_t>(Op::kBarrier)) return false;
  call.op = static_cast<Op>(op);
  if (!r.i32(call.root) || !r.str(call.problem, kMaxProblemBytes) || !r.u32(tensors)) return false;
  if (tensors > kMaxTensors || tensors > r.left() / 9) return false;
  call.dtypes.resize(tensors);
  call.counts.resize(tensors);
  for (uint32_t i = 0; i < tensors; ++i) {
    uint8_t dtype = 0;
    if (!r.u8(dtype) || dtype > static_cast<uint8_t>(DataType::kString) || !r.u64(call.counts[i])) return false;
    call.dtypes[i] = static_cast<DataType>(dtype);
  }
  if (!r.u32(values) || values != r.left() / 8) return false;
  call.values.resize(values);
  for (double& v : call.values) r.f64(v);
  return r.done();
}

// Rank 0's check of every rank's call against its own; the values summed in rank order for Op::kHost.
Result<std::vector<double>> check_calls(const std::vector<Call>& calls) {
  const Call& mine = calls[0];
  for (size_t k = 0; k < calls.size(); ++k)
    if (!calls[k].problem.empty()) return invalid_argument("rank ", k, ": ", calls[k].problem);
  for (size_t k = 1; k < calls.size(); ++k) {
    const Call& c = calls[k];
    if (c.op != mine.op)
      return invalid_argument("rank ", k, " called ", op_name(c.op), " while rank 0 called ", op_name(mine.op),
                              ": every rank must run the same collectives in the same order");
    if (c.root != mine.root)
      return invalid_argument("rank ", k, " broadcasts from rank ", c.root, ", rank 0 from rank ", mine.root);
    if (c.dtypes.size() != mine.dtypes.size())
      return invalid_argument("rank ", k, " sent ", c.dtypes.size(), " tensors, rank 0 has ", mine.dtypes.size(),
                              ": every rank must pass the same tensors in the same order");
    for (size_t i = 0; i < c.dtypes.size(); ++i) {
      if (c.dtypes[i] != mine.dtypes[i])
        return invalid_argument("rank ", k, " sent ", dtype_name(c.dtypes[i]), " for tensor ", i, ", rank 0 has ",
                                dtype_name(mine.dtypes[i]));
      if (c.counts[i] != mine.counts[i]) {
        const char* what = mine.dtypes[i] == DataType::kFloat32 ? " floats" : " elements";
        return invalid_argument("rank ", k, " sent ", c.counts[i], what, " for tensor ", i, ", rank 0 has ",
                                mine.counts[i], ": every rank must pass the same tensors in the same order");
      }
    }
    if (c.values.size() != mine.values.size())
      return invalid_argument("rank ", k, " sent ", c.values.size(), " values, rank 0 has ", mine.values.size());
  }
  std::vector<double> sums(mine.values.size(), 0.0);
  for (const Call& c : calls)
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += c.values[i];
  return sums;
}

std::vector<uint8_t> encode_verdict(Verdict verdict, const Status& status, const std::vector<double>& values) {
  Writer w;
  w.u8(static_cast<uint8_t>(verdict));
  if (verdict == Verdict::kOk) {
    w.u32(static_cast<uint32_t>(values.size()));
    for (double v : values) w.f64(v);
  } else {
    w.u8(static_cast<uint8_t>(status.code()));
    w.str(status.message());
  }
  return std::move(w.bytes);
}

}  // namespace

TcpGroup::TcpGroup(const DistConfig& config) : config_(config) {
  for (int k = 0; k < config.world_size; ++k) names_.push_back(str_cat("rank ", k));
}

Result<std::unique_ptr<TcpGroup>> TcpGroup::connect(const DistConfig& config) {
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size)
    return invalid_argument("distributed config: rank ", config.rank, " is outside the world size ", config.world_size);
  if (config.master_port < 1 || config.master_port > 65535)
    return invalid_argument("distributed config: MASTER_PORT ", config.master_port, " is not a port (1..65535)");
  if (!(config.timeout_seconds > 0))
    return invalid_argument("distributed config: the timeout must be > 0 seconds, not ", config.timeout_seconds);
  std::unique_ptr<TcpGroup> group(new TcpGroup(config));
  if (config.world_size > 1) {
    Status status = group->rendezvous();
    if (!status.is_ok())
      return std::move(status).with_prefix(
          str_cat("rank ", config.rank, " of ", config.world_size, ": distributed rendezvous at ", config.master_addr,
                  ":", config.master_port, " (timeout ", config.timeout_seconds, " s, KILN_DIST_TIMEOUT)"));
  }
  return group;
}

Status TcpGroup::rendezvous() {
  const int n = config_.world_size, me = config_.rank;
  const Deadline until = deadline();
  KILN_ASSIGN_OR_RETURN(const uint32_t master_ip, resolve_ipv4(config_.master_addr, "MASTER_ADDR"));
  // On one machine (a loopback master) nothing listens beyond it; across nodes the ring listens everywhere.
  const uint32_t bind_ip = is_loopback(master_ip) ? master_ip : htonl(INADDR_ANY);
  KILN_ASSIGN_OR_RETURN(Socket ring_listener, listen_on({bind_ip, 0}, 8));
  KILN_ASSIGN_OR_RETURN(const int ring_port, local_port(ring_listener));
  std::vector<Endpoint> table(static_cast<size_t>(n));

  if (me == 0) {
    KILN_ASSIGN_OR_RETURN(Socket listener, listen_on({bind_ip, config_.master_port}, n + 16));
    workers_.resize(static_cast<size_t>(n));
    table[0] = {0, ring_port};
    int missing = n - 1;
    // A fatal problem is told to every process that came so far, so none of them waits for the timeout.
    auto reject = [&](const Status& status, Socket* extra) {
      const std::vector<uint8_t> verdict = encode_verdict(Verdict::kError, status, {});
      const Deadline soon = deadline_after(1);
      if (extra) (void)send_message(*extra, verdict, "a connecting process", soon);
      for (int k = 1; k < n; ++k)
        if (workers_[k].valid()) (void)send_message(workers_[k], verdict, name(k), soon);
      return status;
    };
    while (missing > 0) {
      auto accepted = accept_until(listener, until, "the other ranks");
      if (!accepted.is_ok()) {
        std::string absent;
        for (int k = 1; k < n; ++k)
          if (!workers_[k].valid()) absent += str_cat(absent.empty() ? "" : ", ", k);
        return reject(io_error(str_cat("rank", missing > 1 ? "s " : " ", absent, " did not connect to ",
                                       config_.master_addr, ":", config_.master_port,
                                       ": are they running with the same MASTER_ADDR, MASTER_PORT and world size?")),
                      nullptr);
      }
      auto& [socket, peer_ip] = accepted.value();
      const Endpoint peer{peer_ip, 0};
      const Deadline hello_until = std::min(until, deadline_after(kHelloSeconds));
      auto hello = recv_message(socket, 256, "a connecting process", hello_until);
      uint32_t magic = 0, version = 0, port = 0;
      uint8_t kind = 0;
      int32_t rank = -1, world = 0;
      bool parsed = false;
      if (hello.is_ok()) {
        Reader r(hello.value());
        parsed = r.u32(magic) && r.u32(version) && r.u8(kind) && r.i32(rank) && r.i32(world) && r.u32(port) &&
                 r.done() && magic == kMagic && kind == static_cast<uint8_t>(Hello::kControl);
      }
      if (!parsed) {
        log_warning("distributed rendezvous: ignored a connection from ", peer.to_string(),
                    " that is not a kiln rank (", hello.is_ok() ? "unknown greeting" : hello.status().message(), ")");
        continue;
      }
      if (version != kVersion)
        return reject(invalid_argument("rank ", rank, " speaks kiln's distributed protocol version ", version,
                                       ", rank 0 version ", kVersion, ": run the same kiln build on every node"),
                      &socket);
      if (world != n)
        return reject(invalid_argument("rank ", rank, " was started with world size ", world, ", rank 0 with ", n,
                                       ": start every process with the same WORLD_SIZE"),
                      &socket);
      if (rank < 1 || rank >= n || port < 1 || port > 65535)
        return reject(
            invalid_argument("a process says it is rank ", rank, " (ring port ", port, "), but the world size is ", n),
            &socket);
      if (workers_[rank].valid())
        return reject(invalid_argument("two processes say they are rank ", rank,
                                       ": give each process its own RANK (or check the launcher)"),
                      &socket);
      table[rank] = {peer_ip, static_cast<int>(port)};
      workers_[rank] = std::move(socket);
      --missing;
    }
    Writer w;
    w.u8(static_cast<uint8_t>(Verdict::kOk));
    for (const Endpoint& e : table) {
      w.u32(e.addr);
      w.u32(static_cast<uint32_t>(e.port));
    }
    for (int k = 1; k < n; ++k) KILN_RETURN_IF_ERROR(send_message(workers_[k], w.bytes, name(k), until));
  } else {
    KILN_ASSIGN_OR_RETURN(master_, connect_until({master_ip, config_.master_port}, until, "rank 0"));
    Writer w;
    w.u32(kMagic);
    w.u32(kVersion);
    w.u8(static_cast<uint8_t>(Hello::kControl));
    w.i32(me);
    w.i32(n);
    w.u32(static_cast<uint32_t>(ring_port));
    KILN_RETURN_IF_ERROR(send_message(master_, w.bytes, "rank 0", until));
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> reply,
                          recv_message(master_, 64 + 8 * size_t(n) + 4096, "rank 0", until));
    Reader r(reply);
    uint8_t verdict = 0;
    if (!r.u8(verdict)) return io_error("rank 0 sent an empty answer");
    if (verdict != static_cast<uint8_t>(Verdict::kOk)) {
      uint8_t code = 0;
      std::string message;
      if (!r.u8(code) || !r.str(message, 1 << 16)) return io_error("rank 0 refused this process");
      return {StatusCode::kInvalidArgument, str_cat("rank 0 refused the job: ", message)};
    }
    for (Endpoint& e : table) {
      uint32_t port = 0;
      if (!r.u32(e.addr) || !r.u32(port) || port > 65535) return io_error("rank 0 sent a malformed address table");
      e.port = static_cast<int>(port);
    }
    table[0].addr = master_ip;
  }

  // The ring: connect to the next rank, then take the previous rank's connection.
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  KILN_ASSIGN_OR_RETURN(next_, connect_until(table[next], until, name(next)));
  Writer hello;
  hello.u32(kMagic);
  hello.u32(kVersion);
  hello.u8(static_cast<uint8_t>(Hello::kRing));
  hello.i32(me);
  KILN_RETURN_IF_ERROR(send_message(next_, hello.bytes, name(next), until));
  while (!prev_.valid()) {
    KILN_ASSIGN_OR_RETURN(auto accepted, accept_until(ring_listener, until, name(prev)));
    auto message = recv_message(accepted.first, 64, name(prev), std::min(until, deadline_after(kHelloSeconds)));
    uint32_t magic = 0, version = 0;
    uint8_t kind = 0;
    int32_t rank = -1;
    if (message.is_ok()) {
      Reader r(message.value());
      if (r.u32(magic) && r.u32(version) && r.u8(kind) && r.i32(rank) && r.done() && magic == kMagic &&
          version == kVersion && kind == static_cast<uint8_t>(Hello::kRing) && rank == prev) {
        prev_ = std::move(accepted.first);
        continue;
      }
    }
    log_warning("distributed rendezvous: rank ", me, " ignored a ring connection that is not from rank ", prev);
  }
  ring_listener.reset();
  // Everyone's ring is up once everyone passes this.
  return agree(Call{}).take_status();
}

Status TcpGroup::check_usable() const {
  if (broken_.is_ok()) return Status::ok();
  return {broken_.code(), str_cat("the distributed communicator stopped after an earlier error (", broken_.message(),
                                  "); restart the job")};
}

Status TcpGroup::fail(Status status) {
  if (broken_.is_ok()) broken_ = status;
  return status;
}

Result<std::vector<double>> TcpGroup::agree(const Call& call) {
  KILN_RETURN_IF_ERROR(check_usable());
  if (config_.world_size == 1) {
    std::vector<Call> calls{call};
    return check_calls(calls);
  }
  const Deadline until = deadline();
  const int n = config_.world_size;
  if (config_.rank != 0) {
    Status sent = send_message(master_, encode(call), "rank 0", until);
    if (!sent.is_ok()) return fail(std::move(sent));
    auto reply = recv_message(master_, kMaxControlBytes, "rank 0", until);
    if (!reply.is_ok()) return fail(reply.take_status());
    Reader r(reply.value());
    uint8_t verdict = 0, code = 0;
    uint32_t count = 0;
    if (!r.u8(verdict)) return fail(io_error("rank 0 sent an empty answer"));
    if (verdict == static_cast<uint8_t>(Verdict::kOk)) {
      if (!r.u32(count) || count != r.left() / 8 || r.left() % 8 != 0)
        return fail(io_error("rank 0 sent a malformed answer"));
      std::vector<double> sums(count);
      for (double& v : sums) r.f64(v);
      return sums;
    }
    std::string message;
    if (!r.u8(code) || !r.str(message, kMaxControlBytes) || code == 0 ||
        code > static_cast<uint8_t>(StatusCode::kInternal))
      return fail(io_error("rank 0 sent a malformed answer"));
    Status status(static_cast<StatusCode>(code), message);
    if (verdict == static_cast<uint8_t>(Verdict::kBroken)) return fail(std::move(status));
    return status;
  }
  std::vector<Call> calls(static_cast<size_t>(n));
  calls[0] = call;
  Status io;
  for (int k = 1; k < n && io.is_ok(); ++k) {
    auto message = recv_message(workers_[k], kMaxControlBytes, name(k), until);
    if (!message.is_ok())
      io = message.take_status();
    else if (!decode(message.value(), calls[k]))
      io = io_error(str_cat(name(k), " sent a malformed control message: is it the same kiln version?"));
  }
  if (!io.is_ok()) {
    // The others are told (they would wait for the timeout otherwise); the streams are out of step: broken.
    const std::vector<uint8_t> verdict = encode_verdict(Verdict::kBroken, io, {});
    for (int k = 1; k < n; ++k) (void)send_message(workers_[k], verdict, name(k), deadline_after(1));
    return fail(std::move(io));
  }
  Result<std::vector<double>> result = check_calls(calls);
  const std::vector<uint8_t> verdict = result.is_ok() ? encode_verdict(Verdict::kOk, Status::ok(), result.value())
                                                      : encode_verdict(Verdict::kError, result.status(), {});
  for (int k = 1; k < n; ++k) {
    Status sent = send_message(workers_[k], verdict, name(k), until);
    if (!sent.is_ok()) return fail(std::move(sent));
  }
  return result;
}

Status TcpGroup::share(std::vector<uint8_t>& bytes) {
  KILN_RETURN_IF_ERROR(check_usable());
  const Deadline until = deadline();
  if (config_.rank == 0) {
    for (int k = 1; k < config_.world_size; ++k) {
      Status sent = send_message(workers_[k], bytes, name(k), until);
      if (!sent.is_ok()) return fail(std::move(sent));
    }
    return Status::ok();
  }
  auto message = recv_message(master_, kMaxControlBytes, "rank 0", until);
  if (!message.is_ok()) return fail(message.take_status());
  bytes = std::move(message).value();
  return Status::ok();
}

Status TcpGroup::ring_all_reduce(float* data, size_t count) {
  KILN_RETURN_IF_ERROR(check_usable());
  const size_t n = static_cast<size_t>(config_.world_size);
  if (n == 1 || count == 0) return Status::ok();
  const Deadline until = deadline();
  const size_t me = static_cast<size_t>(config_.rank);
  const size_t chunk = std::max<size_t>(1, config_.chunk_bytes / sizeof(float));
  // Segment k of the ring: [begin(k), begin(k + 1)); (count * k) cannot overflow for any real tensor.
  auto begin = [&](size_t k) { return count / n * k + std::min(k, count % n); };
  auto segment = [&](size_t step_back) { return (me + n - step_back % n) % n; };
  const std::string& to = name(static_cast<int>((me + 1) % n));
  const std::string& from = name(static_cast<int>((me + n - 1) % n));
  scratch_.resize(std::min(chunk, count / n + 1));
  // Reduce-scatter: at step s this rank sends segment (me - s) and adds segment (me - s - 1) into its own; the
  // sum of segment k is taken in ring order k, k+1, ..., k-1. Afterwards this rank holds segment (me + 1) summed.
  for (size_t s = 0; s + 1 < n; ++s) {
    const size_t send_seg = segment(s), recv_seg = segment(s + 1);
    size_t so = begin(send_seg), ro = begin(recv_seg);
    const size_t se = begin(send_seg + 1), re = begin(recv_seg + 1);
    while (so < se || ro < re) {
      const size_t sl = std::min(chunk, se - so), rl = std::min(chunk, re - ro);
      Status status = exchange({&next_, data + so, sl * sizeof(float), to},
                               {&prev_, scratch_.data(), rl * sizeof(float), from}, until);
      if (!status.is_ok()) return fail(std::move(status));
      float* dst = data + ro;
      const float* partial = scratch_.data();
      for (size_t i = 0; i < rl; ++i) dst[i] = partial[i] + dst[i];
      so += sl;
      ro += rl;
    }
  }
  // All-gather: at step s this rank passes on segment (me + 1 - s) and receives segment (me - s), summed.
  for (size_t s = 0; s + 1 < n; ++s) {
    const size_t send_seg = (me + 1 + n - s % n) % n, recv_seg = segment(s);
    size_t so = begin(send_seg), ro = begin(recv_seg);
    const size_t se = begin(send_seg + 1), re = begin(recv_seg + 1);
    while (so < se || ro < re) {
      const size_t sl = std::min(chunk, se - so), rl = std::min(chunk, re - ro);
      Status status =
          exchange({&next_, data + so, sl * sizeof(float), to}, {&prev_, data + ro, rl * sizeof(float), from}, until);
      if (!status.is_ok()) return fail(std::move(status));
      so += sl;
      ro += rl;
    }
  }
  return Status::ok();
}

Status TcpGroup::ring_broadcast(void* data, size_t bytes, int root) {
  KILN_RETURN_IF_ERROR(check_usable());
  const size_t n = static_cast<size_t>(config_.world_size);
  if (n == 1 || bytes == 0) return Status::ok();
  const Deadline until = deadline();
  const size_t me = static_cast<size_t>(config_.rank);
  const size_t chunk = std::max<size_t>(1, config_.chunk_bytes);
  const size_t chunks = (bytes + chunk - 1) / chunk;
  // Position along the chain root -> root+1 -> ... -> root-1: the root only sends, the last only receives, the
  // others receive chunk j while passing on chunk j-1.
  const size_t pos = (me + n - static_cast<size_t>(root)) % n;
  const bool sends = pos + 1 < n, receives = pos > 0;
  auto* p = static_cast<uint8_t*>(data);
  auto piece = [&](size_t j) { return j < chunks ? std::min(chunk, bytes - j * chunk) : size_t{0}; };
  const std::string& to = name(static_cast<int>((me + 1) % n));
  const std::string& from = name(static_cast<int>((me + n - 1) % n));
  for (size_t j = 0; j <= chunks; ++j) {
    Transfer out, in;
    if (sends && !receives && j < chunks) out = {&next_, p + j * chunk, piece(j), to};
    if (sends && receives && j >= 1) out = {&next_, p + (j - 1) * chunk, piece(j - 1), to};
    if (receives && j < chunks) in = {&prev_, p + j * chunk, piece(j), from};
    Status status = exchange(out, in, until);
    if (!status.is_ok()) return fail(std::move(status));
  }
  return Status::ok();
}

}  // namespace kiln::train::dist
