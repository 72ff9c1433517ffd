// Shared CLI helpers (common.hpp).
#include "common.hpp"
#include "../base/small_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "firstfault/text.hpp"

namespace ff::cli {

void print_error(const std::string& message) { std::fprintf(stderr, "firstfault: %s\n", text::sanitize(message).c_str()); }

result<kb::library> load_kb(const std::vector<std::string>& dirs) { return kb::library::load(true, dirs); }

bool use_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* nc = std::getenv("NO_COLOR");
  return isatty(STDOUT_FILENO) && !(nc && *nc);
}

result<mask::options> mask_options(std::string config, const std::vector<std::string>& rules, bool no_mask, bool redact) {
  mask::options o;
  if (config.empty()) {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    std::string def = xdg && *xdg ? std::string(xdg) + "/firstfault/mask.yaml"
                      : home      ? std::string(home) + "/.config/firstfault/mask.yaml"
                                  : "";
    // An unusable default location (symlink loop, name too long, no permission) is not an error of the run:
    // only an existing file is used. The error_code overload never throws.
    std::error_code ec;
    if (!def.empty() && std::filesystem::exists(def, ec) && !ec) config = def;
  }
  if (!config.empty()) {
    auto mo = mask::load_config(config, o);
    if (!mo) return mo.error();
    o = mo.value();
  }
  for (const auto& r : rules) o.extra.push_back({"custom", r});
  if (redact) o.redact = true;
  if (no_mask) o.enabled = false;
  return o;
}

result<std::string> user_redact_key() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  if (!(xdg && *xdg) && !(home && *home)) return error{"--redact: no $XDG_CONFIG_HOME or $HOME for the per-user key (give --mask-key-file)"};
  const std::string dir = xdg && *xdg ? std::string(xdg) + "/firstfault" : std::string(home) + "/.config/firstfault";
  const std::string path = dir + "/redact.key";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // (an existing one is fine; a failure shows at open)
  // Created with O_EXCL, so two first runs at once cannot both write: the loser reads the winner's key.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1) {
      ::close(fd);
      ::unlink(path.c_str());
      return error{"--redact: no random bytes for the per-user key (OpenSSL RAND_bytes failed)"};
    }
    static const char* hex = "0123456789abcdef";
    std::string line;
    for (unsigned char c : raw) line += {hex[c >> 4], hex[c & 15]};
    line += '\n';
    const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!ok) {
      ::unlink(path.c_str());
      return error{text::sanitize(path) + ": cannot write the per-user redact key"};
    }
  } else if (errno != EEXIST) {
    return error{text::sanitize(path) + ": cannot create the per-user redact key: " + std::strerror(errno)};
  }
  return mask_key("", path, "");
}

result<std::string> mask_key(const std::string& key, const std::string& key_file, const std::string& job_id) {
  std::string site = key;
  if (!key_file.empty()) {
    // The key is the file's first line (base::read_small_file: a regular file, at most 4 KiB read).
    std::string shown = text::sanitize(key_file);
    auto file = base::read_small_file(key_file, "mask key file");
    if (!file) return file.error();
    std::string_view first = file.value().head;
    auto nl = first.find('\n');
    if (nl == std::string_view::npos && file.value().larger)
      return error{shown + ": the mask key file's first line is longer than 4 KiB"};
    site = std::string(first.substr(0, nl));
    while (!site.empty() && (site.back() == '\r' || site.back() == ' ' || site.back() == '\t')) site.pop_back();
    if (site.empty()) return error{shown + ": the mask key file's first line is empty"};
  }
  if (site.empty() && job_id.empty()) return std::string();
  return mask::job_key(site, job_id);
}

std::optional<double> parse_duration(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  std::string unit(end);
  if (unit.empty() || unit == "s") return v;
  if (unit == "ms") return v / 1000;
  if (unit == "m") return v * 60;
  if (unit == "h") return v * 3600;
  return std::nullopt;
}

history_session::history_session(const std::string& path, bool enabled, std::string consequence)
    : path_(path.empty() ? history::default_path() : path), consequence_(std::move(consequence)), enabled_(enabled) {}

history::store* history_session::get() {
  if (!enabled_) return nullptr;
  if (!tried_) {
    tried_ = true;
    auto h = history::store::open(path_);
    if (!h) print_error(h.error().message + "; " + consequence_);
    else store_ = std::move(h).value();
  }
  return store_ ? &*store_ : nullptr;
}

std::optional<std::int64_t> history_session::recurrences(const std::string& host_key, const std::string& kind, int days) {
  auto* s = get();
  if (!s) return std::nullopt;
  auto n = s->recurrences(host_key, kind, days);
  if (!n) return std::nullopt;
  return n.value();
}

void history_session::add(history::entry e) {
  auto* s = get();
  if (!s) return;
  if (auto st = s->add(e); !st) print_error(st.error().message + "; " + consequence_);
}

}  // namespace ff::cli
