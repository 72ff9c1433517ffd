// Journal files as text lines (journal.hpp).
#include "journal.hpp"

#include "../base/dl.hpp"

#include <systemd/sd-journal.h>

#include <cstring>
#include <ctime>
#include <filesystem>

namespace ff::ingest::detail {

namespace {

// libsystemd is opened at first use (base/dl.hpp): only `--journal DIR` needs it. The functions called:
#define FF_SDJ_FUNCTIONS(X) \
  X(sd_journal_close) X(sd_journal_get_data) X(sd_journal_get_realtime_usec) X(sd_journal_next) X(sd_journal_open_directory)
struct sd_journal_api {
  FF_SDJ_FUNCTIONS(FF_DL_FIELD)
};
const sd_journal_api* sdj = nullptr;  // set by load_sd_journal()

// libsystemd of the Debian package libsystemd0, once per process: "" or why it could not be loaded.
std::string load_sd_journal() {
  return ff::detail::load_library_once(sdj, "libsystemd.so.0", "libsystemd (Debian package libsystemd0)", [](void* h, sd_journal_api& api) {
    bool ok = true;
    FF_SDJ_FUNCTIONS(FF_DL_BIND)
    return ok;
  });
}
#undef FF_SDJ_FUNCTIONS

// One field of the current entry ("" when absent): sd_journal_get_data returns "FIELD=value".
std::string field(sd_journal* j, const char* name) {
  const void* data = nullptr;
  std::size_t len = 0;
  if (sdj->sd_journal_get_data(j, name, &data, &len) < 0) return "";
  std::size_t skip = std::strlen(name) + 1;
  if (len < skip) return "";
  return std::string(static_cast<const char*>(data) + skip, len - skip);
}

class journal_source final : public line_reader::byte_source {
 public:
  /// `j` is positioned on its first entry already (open_journal checked that there is one).
  explicit journal_source(sd_journal* j) : j_(j) { format_entry(); }
  ~journal_source() override { sdj->sd_journal_close(j_); }
  journal_source(const journal_source&) = delete;
  journal_source& operator=(const journal_source&) = delete;

  long read(char* buf, std::size_t n, std::string* err) override {
    while (pos_ >= pending_.size()) {
      if (done_) return 0;
      pending_.clear();
      pos_ = 0;
      int r = sdj->sd_journal_next(j_);
      if (r < 0) {
        *err = std::string("journal: ") + std::strerror(-r);
        return -1;
      }
      if (r == 0) {
        done_ = true;
        return 0;
      }
      format_entry();
    }
    std::size_t k = std::min(n, pending_.size() - pos_);
    std::memcpy(buf, pending_.data() + pos_, k);
    pos_ += k;
    return static_cast<long>(k);
  }

 private:
  void format_entry() {
    std::uint64_t usec = 0;
    if (sdj->sd_journal_get_realtime_usec(j_, &usec) < 0) usec = 0;
    std::time_t secs = static_cast<std::time_t>(usec / 1000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[64];
    std::size_t w = std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(ts + w, sizeof ts - w, ".%06u+0000", static_cast<unsigned>(usec % 1000000));
    std::string host = field(j_, "_HOSTNAME");
    std::string ident = field(j_, "SYSLOG_IDENTIFIER");
    if (ident.empty()) ident = field(j_, "_COMM");
    if (ident.empty() && field(j_, "_TRANSPORT") == "kernel") ident = "kernel";
    std::string pid = field(j_, "_PID");
    if (pid.empty()) pid = field(j_, "SYSLOG_PID");
    std::string head = std::string(ts) + " " + (host.empty() ? "localhost" : host) + " " + (ident.empty() ? "unknown" : ident) +
                       (pid.empty() || ident == "kernel" ? "" : "[" + pid + "]") + ": ";
    std::string msg = field(j_, "MESSAGE");
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.pop_back();
    // MESSAGE may be binary (journald keeps it as given): a NUL would make the reader take the whole
    // journal for a binary file and stop, so it becomes U+FFFD like any byte that is not text.
    for (std::size_t p = msg.find('\0'); p != std::string::npos; p = msg.find('\0', p + 3)) msg.replace(p, 1, "\xEF\xBF\xBD");
    std::size_t start = 0;
    for (;;) {  // one text line per line of the message, each with the entry's prefix
      auto nl = msg.find('\n', start);
      pending_ += head;
      pending_.append(msg, start, nl == std::string::npos ? std::string::npos : nl - start);
      pending_ += '\n';
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  sd_journal* j_;
  std::string pending_;
  std::size_t pos_ = 0;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<line_reader::byte_source> open_journal(const std::string& dir, std::string* err) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    *err = "not a directory of journal files";
    return nullptr;
  }
  // sd_journal_open_directory reads the directory's journal files and those of its machine-id
  // subdirectories (/var/log/journal/<machine-id>/), so that is all the check looks at: two levels, at most
  // 100,000 entries (`--journal /` must not walk the whole filesystem).
  bool any = false;
  std::size_t entries = 0;
  auto is_journal = [](const std::string& n) {
    return n.size() > 8 && (n.compare(n.size() - 8, 8, ".journal") == 0 || n.find(".journal~") != std::string::npos);
  };
  namespace fs = std::filesystem;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !any && !ec && it != end && entries < 100000;
       it.increment(ec)) {
    ++entries;
    if (is_journal(it->path().filename().string())) any = true;
    else if (it->is_directory(ec) && !it->is_symlink(ec))
      for (fs::directory_iterator sub(it->path(), fs::directory_options::skip_permission_denied, ec); !any && !ec && sub != end && entries < 100000;
           sub.increment(ec)) {
        ++entries;
        if (is_journal(sub->path().filename().string())) any = true;
      }
    ec.clear();
  }
  if (!any) {
    *err = "no journal files (*.journal) in this directory";
    return nullptr;
  }
  if (auto why = load_sd_journal(); !why.empty()) {
    *err = why;
    return nullptr;
  }
  sd_journal* j = nullptr;
  if (int r = sdj->sd_journal_open_directory(&j, dir.c_str(), 0); r < 0) {
    *err = std::string("cannot open the journal: ") + std::strerror(-r);
    return nullptr;
  }
  int r = sdj->sd_journal_next(j);
  if (r <= 0) {
    sdj->sd_journal_close(j);
    *err = r < 0 ? std::string("cannot read the journal: ") + std::strerror(-r)
                 : "no readable journal entries (the files are empty or corrupt)";
    return nullptr;
  }
  return std::make_unique<journal_source>(j);
}

}  // namespace ff::ingest::detail
