// The head of a small regular file that holds a secret (serve's --token-file, the mask key file): a FIFO, a
// device or a directory is refused before anything is read (an O_NONBLOCK open, then fstat), and at most
// kSmallFileBytes are read, so /dev/zero or a named pipe can neither block nor fill memory.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "firstfault/result.hpp"
#include "firstfault/text.hpp"

namespace ff::base {

inline constexpr std::size_t kSmallFileBytes = 4096;

struct small_file {
  std::string head;     ///< the first kSmallFileBytes bytes at most
  bool larger = false;  ///< the file holds more than `head`
};

/// Errors name the path (sanitised) and `what` ("token file"): it cannot be opened or read, or it is not a
/// regular file.
inline result<small_file> read_small_file(const std::string& path, const std::string& what) {
  const std::string shown = text::sanitize(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return error{shown + ": cannot read the " + what + ": " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return error{shown + ": the " + what + " is not a regular file"};
  }
  char buf[kSmallFileBytes];
  ssize_t n = ::read(fd, buf, sizeof buf);
  int err = errno;
  ::close(fd);
  if (n < 0) return error{shown + ": cannot read the " + what + ": " + std::strerror(err)};
  return small_file{std::string(buf, static_cast<std::size_t>(n)), st.st_size > static_cast<off_t>(sizeof buf)};
}

}  // namespace ff::base
