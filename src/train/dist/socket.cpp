#include "train/dist/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace kiln::train::dist {
namespace {

Status io_error(std::string message) { return {StatusCode::kIoError, std::move(message)}; }

std::string errno_text(int err) { return std::strerror(err); }

int ms_left(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, INT_MAX));
}

void set_no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

sockaddr_in to_sockaddr(Endpoint e) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(e.port));
  sa.sin_addr.s_addr = e.addr;
  return sa;
}

// A connection to a local port nobody listens on can meet itself (TCP simultaneous open).
bool is_self_connection(int fd) {
  sockaddr_in mine{}, peer{};
  socklen_t a = sizeof(mine), b = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &a) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &b) != 0) return false;
  return mine.sin_addr.s_addr == peer.sin_addr.s_addr && mine.sin_port == peer.sin_port;
}

}  // namespace

Deadline deadline_after(double seconds) {
  const double capped = std::clamp(seconds, 0.0, 1e7);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(capped));
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Endpoint::to_string() const {
  char text[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr;
  inet_ntop(AF_INET, &a, text, sizeof(text));
  return str_cat(text, ":", port);
}

bool is_loopback(uint32_t addr) { return (ntohl(addr) >> 24) == 127; }

Result<uint32_t> resolve_ipv4(const std::string& host, std::string_view what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found)
    return io_error(str_cat(what, "='", host, "' does not resolve to an IPv4 address (", gai_strerror(rc),
                            "): set it to rank 0's host name or address"));
  const uint32_t addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(found);
  return addr;
}

Result<Socket> listen_on(Endpoint at, int backlog) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return io_error(str_cat("socket() failed: ", errno_text(errno)));
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_in sa = to_sockaddr(at);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int err = errno;
    if (err == EADDRINUSE)
      return io_error(str_cat("cannot listen on ", at.to_string(), ": the port is in use (another job, or one still ",
                              "closing): set MASTER_PORT to a free port"));
    return io_error(str_cat("cannot listen on ", at.to_string(), ": ", errno_text(err)));
  }
  if (::listen(s.fd(), backlog) != 0) return io_error(str_cat("listen() failed: ", errno_text(errno)));
  return s;
}

Result<int> local_port(const Socket& socket) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return io_error(str_cat("getsockname() failed: ", errno_text(errno)));
  return static_cast<int>(ntohs(sa.sin_port));
}

Result<Socket> connect_until(Endpoint to, Deadline deadline, std::string_view who) {
  std::string last_error = "no attempt";
  for (;;) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) return io_error(str_cat("socket() failed: ", errno_text(errno)));
    const sockaddr_in sa = to_sockaddr(to);
    int err = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      const int ready = poll(&p, 1, std::min(ms_left(deadline), 2000));
      if (ready > 0) {
        socklen_t len = sizeof(err);
        if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      } else {
        err = ready == 0 ? ETIMEDOUT : errno;
      }
    }
    if (err == 0 && is_self_connection(s.fd())) err = ECONNREFUSED;
    if (err == 0) {
      set_no_delay(s.fd());
      return s;
    }
    last_error = errno_text(err);
    s.reset();
    if (ms_left(deadline) == 0)
      return io_error(
          str_cat("could not connect to ", who, " at ", to.to_string(), " before the timeout (last error: ", last_error,
                  "): is it running, and do all processes use the same MASTER_ADDR, ", "MASTER_PORT and world size?"));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms_left(deadline), 50)));
  }
}

Result<std::pair<Socket, uint32_t>> accept_until(const Socket& listener, Deadline deadline, std::string_view whom) {
  for (;;) {
    pollfd p{listener.fd(), POLLIN, 0};
    const int ready = poll(&p, 1, ms_left(deadline));
    if (ready < 0 && errno != EINTR) return io_error(str_cat("poll() failed: ", errno_text(errno)));
    if (ready == 0) return io_error(str_cat("no connection from ", whom, " before the timeout"));
    if (ready < 0) continue;
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    Socket s(accept4(listener.fd(), reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!s.valid()) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED) continue;
      return io_error(str_cat("accept() failed: ", errno_text(err)));
    }
    set_no_delay(s.fd());
    return std::pair<Socket, uint32_t>(std::move(s), sa.sin_addr.s_addr);
  }
}

Status exchange(Transfer send, Transfer recv, Deadline deadline) {
  size_t sent = 0, got = 0;
  if (!send.socket) send.bytes = 0;
  if (!recv.socket) recv.bytes = 0;
  auto* out = static_cast<const uint8_t*>(send.data);
  auto* in = static_cast<uint8_t*>(recv.data);
  constexpr size_t kMaxIo = size_t{1} << 30;
  while (sent < send.bytes || got < recv.bytes) {
    pollfd fds[2];
    int n = 0, si = -1, ri = -1;
    if (sent < send.bytes) {
      fds[n] = {send.socket->fd(), POLLOUT, 0};
      si = n++;
    }
    if (got < recv.bytes) {
      fds[n] = {recv.socket->fd(), POLLIN, 0};
      ri = n++;
    }
    const int ready = poll(fds, static_cast<nfds_t>(n), ms_left(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return io_error(str_cat("poll() failed: ", errno_text(errno)));
    }
    if (ready == 0) {
      if (got < recv.bytes)
        return io_error(str_cat("timed out waiting for ", recv.peer, " (", got, " of ", recv.bytes,
                                " bytes received): is it still running? A rank that is much slower than the others ",
                                "needs a larger KILN_DIST_TIMEOUT"));
      return io_error(str_cat("timed out sending to ", send.peer, " (", sent, " of ", send.bytes,
                              " bytes sent): it stopped reading; is it still running?"));
    }
    if (ri >= 0 && fds[ri].revents != 0) {
      const ssize_t r = ::recv(recv.socket->fd(), in + got, std::min(recv.bytes - got, kMaxIo), 0);
      if (r > 0) {
        got += static_cast<size_t>(r);
      } else if (r == 0) {
        return io_error(str_cat(recv.peer, " closed the connection (did it exit or fail? its log says why)"));
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return io_error(str_cat("the connection to ", recv.peer, " failed: ", errno_text(errno),
                                " (did it exit or fail? its log says why)"));
      }
    }
    if (si >= 0 && fds[si].revents != 0) {
      const ssize_t w = ::send(send.socket->fd(), out + sent, std::min(send.bytes - sent, kMaxIo), MSG_NOSIGNAL);
      if (w >= 0) {
        sent += static_cast<size_t>(w);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        if (errno == EPIPE || errno == ECONNRESET)
          return io_error(str_cat(send.peer, " closed the connection (did it exit or fail? its log says why)"));
        return io_error(str_cat("sending to ", send.peer, " failed: ", errno_text(errno)));
      }
    }
  }
  return Status::ok();
}

Status send_all(const Socket& s, const void* data, size_t bytes, std::string_view peer, Deadline deadline) {
  return exchange({&s, const_cast<void*>(data), bytes, peer}, {}, deadline);
}

Status recv_all(const Socket& s, void* data, size_t bytes, std::string_view peer, Deadline deadline) {
  return exchange({}, {&s, data, bytes, peer}, deadline);
}

Status send_message(const Socket& s, const std::vector<uint8_t>& payload, std::string_view peer, Deadline deadline) {
  if (payload.size() > UINT32_MAX) return internal_error("a control message of ", payload.size(), " bytes");
  Writer w;
  w.u32(static_cast<uint32_t>(payload.size()));
  w.raw(payload.data(), payload.size());
  return send_all(s, w.bytes.data(), w.bytes.size(), peer, deadline);
}

Result<std::vector<uint8_t>> recv_message(const Socket& s, size_t max_bytes, std::string_view peer, Deadline deadline) {
  uint32_t size = 0;
  KILN_RETURN_IF_ERROR(recv_all(s, &size, sizeof(size), peer, deadline));
  if (size > max_bytes)
    return io_error(str_cat(peer, " sent a message of ", size, " bytes where at most ", max_bytes,
                            " were expected: is it the same kiln version, and is it a kiln process?"));
  std::vector<uint8_t> payload(size);
  KILN_RETURN_IF_ERROR(recv_all(s, payload.data(), payload.size(), peer, deadline));
  return payload;
}

bool Reader::raw(void* data, size_t n) {
  if (n > left()) return false;
  if (n > 0) std::memcpy(data, bytes_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool Reader::str(std::string& s, size_t max_bytes) {
  uint32_t n = 0;
  if (!u32(n) || n > max_bytes || n > left()) return false;
  s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
  pos_ += n;
  return true;
}

}  // namespace kiln::train::dist
