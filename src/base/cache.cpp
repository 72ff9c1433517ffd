#include "cache.hpp"

#include <unistd.h>

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

bool read_cache_file(const std::string& path, std::size_t max_bytes, std::string& out) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0 || size > max_bytes) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.resize(size);
  in.read(out.data(), static_cast<std::streamsize>(size));
  return in.gcount() == static_cast<std::streamsize>(size);
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
