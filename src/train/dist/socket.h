#pragma once
// TCP sockets for the communicators: non-blocking, every wait bounded by a deadline, peers named in errors,
// no SIGPIPE (MSG_NOSIGNAL), descriptors closed by their owner. IPv4.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/status.h"

namespace kiln::train::dist {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

Deadline deadline_after(double seconds);

/// An owned socket descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

/// An IPv4 address (network byte order) and port.
struct Endpoint {
  uint32_t addr = 0;
  int port = 0;
  std::string to_string() const;
};

bool is_loopback(uint32_t addr);
/// `host` (a name or dotted address) as an IPv4 address; the error names `what` (e.g. "MASTER_ADDR").
Result<uint32_t> resolve_ipv4(const std::string& host, std::string_view what);
/// A listening socket on addr:port (port 0: any free port); the error says what to do when the port is taken.
Result<Socket> listen_on(Endpoint at, int backlog);
/// The port a bound socket got.
Result<int> local_port(const Socket& socket);
/// Connects to `to`, retrying refused or unreachable attempts until the deadline.
Result<Socket> connect_until(Endpoint to, Deadline deadline, std::string_view who);
/// Waits for one connection on `listener` until the deadline; returns it and the peer's address.
Result<std::pair<Socket, uint32_t>> accept_until(const Socket& listener, Deadline deadline, std::string_view whom);

/// One side of a transfer: a socket, a buffer and the peer's name for errors. No socket or zero bytes: nothing.
struct Transfer {
  const Socket* socket = nullptr;
  void* data = nullptr;
  size_t bytes = 0;
  std::string_view peer;
};
/// Sends `send` and receives `recv` at the same time (neither can block the other), until the deadline.
Status exchange(Transfer send, Transfer recv, Deadline deadline);
Status send_all(const Socket& s, const void* data, size_t bytes, std::string_view peer, Deadline deadline);
Status recv_all(const Socket& s, void* data, size_t bytes, std::string_view peer, Deadline deadline);

/// Length-prefixed messages (u32 length, at most `max_bytes`).
Status send_message(const Socket& s, const std::vector<uint8_t>& payload, std::string_view peer, Deadline deadline);
Result<std::vector<uint8_t>> recv_message(const Socket& s, size_t max_bytes, std::string_view peer, Deadline deadline);

/// Little-endian building and parsing of message payloads (the reader fails instead of reading past the end).
class Writer {
 public:
  void u8(uint8_t v) { raw(&v, 1); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  bool u8(uint8_t& v) { return raw(&v, 1); }
  bool u32(uint32_t& v) { return raw(&v, 4); }
  bool i32(int32_t& v) { return raw(&v, 4); }
  bool u64(uint64_t& v) { return raw(&v, 8); }
  bool f64(double& v) { return raw(&v, 8); }
  bool str(std::string& s, size_t max_bytes);
  bool raw(void* data, size_t n);
  size_t left() const { return bytes_.size() - pos_; }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t pos_ = 0;
};

}  // namespace kiln::train::dist
