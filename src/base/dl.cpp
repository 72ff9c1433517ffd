#include "dl.hpp"

namespace ff::detail {

void* open_shared(const char* soname, const char* what, std::string* why) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *why = std::string(what) + " could not be loaded: " + (e ? e : "dlopen failed");
  }
  return h;
}

}  // namespace ff::detail
