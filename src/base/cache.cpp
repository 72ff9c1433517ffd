#include "cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ff::detail {

std::string cache_dir() {
  std::string dir;
  if (const char* d = std::getenv("FIRSTFAULT_CACHE_DIR")) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/firstfault";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/firstfault";
  if (dir == "off") return "";
  return dir;
}

cache_bytes::~cache_bytes() {
  if (data_) ::munmap(data_, size_);
}

bool cache_bytes::read(const std::string& path, std::size_t max_bytes) {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && static_cast<std::uint64_t>(st.st_size) <= max_bytes;
  std::size_t size = ok ? static_cast<std::size_t>(st.st_size) : 0;
  void* m = ok ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0) : MAP_FAILED;
  if (m != MAP_FAILED) {
    data_ = static_cast<char*>(m);
    size_ = size;
    std::size_t got = 0;
    while (got < size) {
      ssize_t n = ::read(fd, data_ + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ok = got == size;
  } else {
    ok = false;
  }
  ::close(fd);
  if (!ok && data_) {
    ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  return ok;
}

void store_cache_file(const std::string& path, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace ff::detail
