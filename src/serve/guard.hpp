// firstfault serve: the connection layer under cpp-httplib's request parsing. It bounds what one client can
// hold: the time to send a request's line and headers (in all, not per read), the rate of its body, the
// bytes of both, and the connections open from one address; and it closes a connection whose request was
// answered before its body was read, instead of parsing that body as the next request.
//
// Why not cpp-httplib alone (Debian 12's libcpp-httplib 0.11.4, read in httplib.h of tag v0.11.4):
//  - its read timeout is per recv (SocketStream::read waits read_timeout for each read): a client that
//    sends a header byte a second is never cut off, and holds one of the pool's threads while it does;
//  - the pool has max(8, cores - 1) threads (CPPHTTPLIB_THREAD_POOL_COUNT), fixed when the library was
//    built, so eight such clients stop the server;
//  - detail::read_content() checks payload_max_length only against a Content-Length: a chunked body (and the
//    chunk-size line, a stream_line_reader that grows without bound) is read whatever its size;
//  - detail::process_server_socket_core() goes on to the next request after a handler answers without
//    reading the body, so the unread body would be parsed as a request.
// Server::process_and_close_socket() is virtual: this class overrides it with the same keep-alive loop
// around the protected Server::process_request(), over a stream of its own (deadline_stream in guard.cpp),
// and new_task_queue gives a larger pool. Everything above the socket (parsing, routing) stays the library's.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace ff::serve {

struct connection_limits {
  int header_seconds = 10;        ///< request line and headers, in all, from the request's first byte
  int idle_seconds = 10;          ///< the longest silence within a request (headers or body)
  int keep_alive_seconds = 5;     ///< how long a connection may wait for its (next) request
  int write_seconds = 30;         ///< one response, in all
  std::size_t max_header_bytes = 64 << 10;
  std::uint64_t max_body_bytes = 64ull << 20;  ///< a body as sent (chunk framing included): the stream fails past it
  std::uint64_t min_body_rate = 32 << 10;      ///< bytes per second a body must average after its first idle_seconds
  std::size_t per_client = 16;    ///< connections open at once from one address; more are answered 503 and closed
  std::size_t threads = 64;       ///< connections served at once
  std::size_t keep_alive_max = 20;
};

/// What went wrong with the current request's bytes (for the error handler, on the thread that serves it).
enum class stream_fault { none, header_timeout, header_too_large, body_too_large, body_too_slow };

class guarded_server : public httplib::Server {
 public:
  explicit guarded_server(connection_limits lim);

  /// Called from a handler: close the connection once this response is written (the body was not read in
  /// full, or the request was refused). Applies to the request being served on the calling thread.
  static void close_after_response();
  /// The fault of the request being served on the calling thread.
  static stream_fault fault();
  /// How many connections are open from `address` now (for tests and logs).
  std::size_t open_from(const std::string& address) const;

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool enter(const std::string& address);
  void leave(const std::string& address);

  connection_limits lim_;
  mutable std::mutex mu_;
  std::map<std::string, std::size_t> open_;  // address -> connections open
};

}  // namespace ff::serve
