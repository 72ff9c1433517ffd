// Shared libraries opened at first use (dlopen(3): https://man7.org/linux/man-pages/man3/dlopen.3.html), so
// that a run which never needs one does not load it and its dependencies. Each user lists the functions it
// calls in an X-macro, keeps them in a table of pointers, and binds them once per process:
//
//   #define FF_PQ_FUNCTIONS(X) X(PQclear) X(PQexec)
//   struct pq_api { FF_PQ_FUNCTIONS(FF_DL_FIELD) };
//   const pq_api* pq = nullptr;
//   auto why = ff::detail::load_library_once(pq, "libpq.so.5", "libpq (Debian package libpq5)",
//                                            [](void* h, pq_api& api) { bool ok = true; FF_PQ_FUNCTIONS(FF_DL_BIND) return ok; });
//
// Measured on a small diagnosis (this repository's Debian 12 VM): libpq linked cost 12 ms of every start
// (22 dependencies), libarchive 5 ms (11), libsystemd 2.5 ms.
#pragma once

#include <dlfcn.h>

#include <string>

namespace ff::detail {

/// dlopen(soname, RTLD_NOW | RTLD_LOCAL). nullptr on failure, with `*why` = "<what> could not be loaded:
/// <dlerror()>" (`what` names the library and the Debian package that provides it).
void* open_shared(const char* soname, const char* what, std::string* why);

/// fn = dlsym(handle, name), typed; false when the library lacks it.
template <class F>
bool bind_symbol(void* handle, F*& fn, const char* name) {
  fn = reinterpret_cast<F*>(dlsym(handle, name));
  return fn != nullptr;
}

/// Opens `soname` once per process (per Api type) and fills a static Api with `bind(handle, api)`, which
/// returns false when a function is missing. Sets `table` on success. Returns "" or why it failed.
template <class Api, class Bind>
const std::string& load_library_once(const Api*& table, const char* soname, const char* what, Bind bind) {
  static const std::string why = [&] {
    std::string w;
    void* h = open_shared(soname, what, &w);
    if (!h) return w;
    static Api api;
    if (!bind(h, api)) return std::string(soname) + " lacks a function firstfault uses";
    table = &api;
    return std::string();
  }();
  return why;
}

}  // namespace ff::detail

/// A table field for one function: `decltype(&::name) name = nullptr;`
#define FF_DL_FIELD(name) decltype(&::name) name = nullptr;
/// Binds one function into `api` from `h`, and-ing the result into `ok`.
#define FF_DL_BIND(name) ok = ok && ::ff::detail::bind_symbol(h, api.name, #name);
