// A private temporary directory (mkdtemp: mode 0700) under $TMPDIR or /tmp, removed with everything in it
// when the object goes. `path` is empty when it could not be made. Used by `serve` for uploads and by the
// language server for the copy of an open document.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace ff::base {

struct temp_dir {
  std::string path;
  explicit temp_dir(std::string_view tag) {
    const char* base = std::getenv("TMPDIR");
    std::string tpl = std::string(base && *base ? base : "/tmp") + "/" + std::string(tag) + "-XXXXXX";
    std::vector<char> buf(tpl.begin(), tpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data())) path = buf.data();
  }
  ~temp_dir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

}  // namespace ff::base
