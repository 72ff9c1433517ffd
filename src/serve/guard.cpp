// firstfault serve: connection limits under cpp-httplib (guard.hpp says why they are not the library's).
#include "guard.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace ff::serve {
namespace {

using steady = std::chrono::steady_clock;

// The request being served on this thread: set by handlers (close) and by its stream (fault).
thread_local bool tl_close = false;
thread_local stream_fault tl_fault = stream_fault::none;

// The numeric address (and port) of either end of a socket; "" when it cannot be read.
std::string address_of(int sock, bool peer, int* port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  int rc = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&a), &len) : ::getsockname(sock, reinterpret_cast<sockaddr*>(&a), &len);
  if (rc != 0) return "";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  if (port) *port = std::atoi(serv);
  return host;
}

int ms_until(steady::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - steady::now()).count();
  return ms <= 0 ? 0 : ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

// True when `sock` has `events` within `ms` milliseconds (0: now or not).
bool wait_for(int sock, short events, int ms) {
  pollfd p{sock, events, 0};
  const auto until = steady::now() + std::chrono::milliseconds(ms);
  for (;;) {
    int rc = ::poll(&p, 1, ms);
    if (rc >= 0) return rc > 0;
    if (errno != EINTR) return false;
    ms = ms_until(until);
  }
}

// After an answer given before the request's body was read: stop sending, and read (and drop) what the client
// still sends for a moment, so that closing does not reset the connection before the client has read the
// answer (a close with unread data sends RST, RFC 9112 section 9.6 "tear-down"). At most `ms`, 0.5 s of silence.
void linger_and_drop(int sock, int ms) {
  ::shutdown(sock, SHUT_WR);
  std::array<char, 16384> buf;
  const auto until = steady::now() + std::chrono::milliseconds(ms);
  while (wait_for(sock, POLLIN, std::min(ms_until(until), 500))) {
    ssize_t n = ::recv(sock, buf.data(), buf.size(), 0);
    if (n <= 0 && !(n < 0 && errno == EINTR)) break;
  }
}

// One connection's bytes, with the limits of connection_limits: cpp-httplib's parser reads the request line and
// headers from it a byte at a time (detail::stream_line_reader::getline), then the body in 4 KiB reads, so the
// bytes handed over tell where the headers end (the first line that is exactly CRLF after the request line,
// as detail::read_headers decides).
class deadline_stream final : public httplib::Stream {
 public:
  deadline_stream(int sock, const connection_limits& lim) : sock_(sock), lim_(lim) {}

  // Waits for a request's first byte (keep_alive_seconds), then starts its clocks. False: none came.
  bool next_request() {
    if (off_ == len_ && !wait_for(sock_, POLLIN, lim_.keep_alive_seconds * 1000)) return false;
    in_headers_ = true;
    first_line_ = true;
    line_len_ = 0;
    prev_ = 0;
    header_bytes_ = body_bytes_ = 0;
    failed_ = false;
    writing_ = false;
    header_deadline_ = steady::now() + std::chrono::seconds(lim_.header_seconds);
    return true;
  }
  bool failed() const { return failed_; }

  bool is_readable() const override { return off_ < len_ || wait_for(sock_, POLLIN, lim_.idle_seconds * 1000); }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, writing_ ? ms_until(write_deadline_) : lim_.write_seconds * 1000); }

  ssize_t read(char* ptr, size_t size) override {
    if (failed_) return -1;
    if (off_ == len_) {
      ssize_t got = fill();
      if (got <= 0) return got;
    }
    std::size_t n = std::min(size, len_ - off_);
    if (!account(buf_.data() + off_, n)) return -1;
    writing_ = false;  // a write after this read starts a new write deadline ("100 Continue", then the body, then the answer)
    std::memcpy(ptr, buf_.data() + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!writing_) {  // each run of writes has write_seconds in all: a client that reads a byte a second is cut off
      writing_ = true;
      write_deadline_ = steady::now() + std::chrono::seconds(lim_.write_seconds);
    }
    for (;;) {
      if (!wait_for(sock_, POLLOUT, ms_until(write_deadline_))) return -1;
      ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = address_of(sock_, true, &port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = address_of(sock_, false, &port); }
  socket_t socket() const override { return sock_; }

 private:
  bool fail(stream_fault f) {
    failed_ = true;
    if (f != stream_fault::none) tl_fault = f;
    return false;
  }

  // Reads what has arrived into the buffer: -1 after a limit or an error, 0 at the end of the stream.
  ssize_t fill() {
    off_ = len_ = 0;
    for (;;) {
      steady::time_point limit = in_headers_ ? header_deadline_
                                             : body_start_ + std::chrono::seconds(lim_.idle_seconds) +
                                                   std::chrono::milliseconds(body_bytes_ * 1000 / lim_.min_body_rate);
      int ms = std::min(ms_until(limit), lim_.idle_seconds * 1000);
      if (ms == 0 || !wait_for(sock_, POLLIN, ms)) {
        fail(in_headers_ ? stream_fault::header_timeout : stream_fault::body_too_slow);
        return -1;
      }
      ssize_t n = ::recv(sock_, buf_.data(), buf_.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        fail(stream_fault::none);
        return -1;
      }
      len_ = static_cast<std::size_t>(n);
      return n;
    }
  }

  // Counts the bytes handed to the parser against the header or the body limits.
  bool account(const char* p, std::size_t n) {
    std::size_t i = 0;
    for (; i < n && in_headers_; ++i) {
      if (++header_bytes_ > lim_.max_header_bytes) return fail(stream_fault::header_too_large);
      ++line_len_;
      if (p[i] == '\n') {
        if (!first_line_ && line_len_ == 2 && prev_ == '\r') {
          in_headers_ = false;
          body_start_ = steady::now();
        }
        first_line_ = false;
        line_len_ = 0;
      }
      prev_ = p[i];
    }
    body_bytes_ += n - i;
    if (body_bytes_ > lim_.max_body_bytes) return fail(stream_fault::body_too_large);
    return true;
  }

  int sock_;
  const connection_limits& lim_;
  std::array<char, 16384> buf_{};
  std::size_t off_ = 0, len_ = 0;
  bool in_headers_ = true, first_line_ = true, failed_ = false, writing_ = false;
  std::size_t line_len_ = 0, header_bytes_ = 0;
  char prev_ = 0;
  std::uint64_t body_bytes_ = 0;
  steady::time_point header_deadline_, body_start_, write_deadline_;
};

}  // namespace

guarded_server::guarded_server(connection_limits lim) : lim_(lim) {
  if (lim_.min_body_rate == 0) lim_.min_body_rate = 1;
  new_task_queue = [n = lim_.threads] { return new httplib::ThreadPool(n); };
  set_keep_alive_max_count(lim_.keep_alive_max);  // what the Keep-Alive header says; the loop below counts it
  set_keep_alive_timeout(lim_.keep_alive_seconds);
}

void guarded_server::close_after_response() { tl_close = true; }
stream_fault guarded_server::fault() { return tl_fault; }

std::size_t guarded_server::open_from(const std::string& address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(address);
  return it == open_.end() ? 0 : it->second;
}

bool guarded_server::enter(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& n = open_[address];
  if (n >= lim_.per_client) return false;
  ++n;
  return true;
}

void guarded_server::leave(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = open_.find(address); it != open_.end() && --it->second == 0) open_.erase(it);
}

// The loop of detail::process_server_socket_core() (keep-alive, at most keep_alive_max requests), with this
// file's stream, the per-address count, and a close after a request that was answered before it was read.
bool guarded_server::process_and_close_socket(socket_t sock) {
  const std::string peer = address_of(sock, true, nullptr);
  bool ret = false;
  int linger_ms = 0;
  if (!enter(peer)) {
    static constexpr char busy[] =
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 5\r\nContent-Type: text/plain\r\n"
        "Content-Length: 39\r\n\r\ntoo many connections from this address\n";
    (void)::send(sock, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    linger_ms = 250;  // short: a thread spent on a refused connection is what the cap saves
  } else {
    deadline_stream strm(sock, lim_);
    for (std::size_t left = lim_.keep_alive_max; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
      if (!strm.next_request()) break;
      tl_close = false;
      tl_fault = stream_fault::none;
      bool closed = false;
      ret = process_request(strm, left == 1, closed, nullptr);
      if (tl_close || (strm.failed() && tl_fault != stream_fault::none)) linger_ms = 2000;
      if (!ret || closed || tl_close || strm.failed()) break;
    }
    leave(peer);
  }
  if (linger_ms > 0) linger_and_drop(sock, linger_ms);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace ff::serve
