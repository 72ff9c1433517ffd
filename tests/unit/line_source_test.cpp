// One line source (ingest::line_reader) for every command: a followed file written in pieces gives the
// lines a whole read gives, and `watch` finds what `diagnose` finds in the same bytes (issue 47).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "firstfault/ingest.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/watch.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

// The bytes written so far of a file that grows: read() gives what is written and 0 after it ("nothing yet").
class growing final : public ff::ingest::line_reader::byte_source {
 public:
  explicit growing(std::string all) : all_(std::move(all)) {}
  void write_to(std::size_t n) { written_ = std::min(n, all_.size()); }
  long read(char* buf, std::size_t n, std::string*) override {
    std::size_t k = std::min(n, written_ - at_);
    std::copy_n(all_.data() + at_, k, buf);
    at_ += k;
    return static_cast<long>(k);
  }

 private:
  std::string all_;
  std::size_t written_ = 0, at_ = 0;
};

using lines = std::vector<std::pair<std::string, std::uint64_t>>;

lines read_whole(const std::string& bytes, const ff::ingest::options& opt) {
  growing src(bytes);
  src.write_to(bytes.size());
  ff::ingest::line_reader r(src, opt);
  lines out;
  ff::ingest::raw_line l;
  while (r.next(l)) out.emplace_back(std::string(l.text), l.line_no);
  return out;
}

lines read_followed(const std::string& bytes, const ff::ingest::options& opt, ff::testing::lcg& rnd) {
  growing src(bytes);
  ff::ingest::line_reader r(src, opt);
  r.follow(true);
  lines out;
  ff::ingest::raw_line l;
  for (std::size_t at = 0; at < bytes.size();) {
    at = std::min(bytes.size(), at + 1 + rnd() % 97);  // a write of 1 to 97 bytes
    src.write_to(at);
    while (r.next(l)) out.emplace_back(std::string(l.text), l.line_no);
  }
  r.end_of_input();
  while (r.next(l)) out.emplace_back(std::string(l.text), l.line_no);
  return out;
}

TEST(line_source, a_followed_file_written_in_pieces_gives_the_lines_of_a_whole_read) {
  std::string cri;
  for (int i = 0; i < 20; ++i) {
    cri += "2026-01-02T03:04:05.123456789Z stdout P [rank1]: part one of line " + std::to_string(i) + " ";
    cri += "\n2026-01-02T03:04:05.223456789Z stderr F other stream " + std::to_string(i) + "\n";
    cri += "2026-01-02T03:04:05.323456789Z stdout P second part ";
    cri += "\n2026-01-02T03:04:05.423456789Z stdout F [rank1]: the end " + std::to_string(i) + "\n";
  }
  const std::vector<std::string> inputs = {
      "plain\nlines\r\nwith\rcarriage returns\r\n\r\nand a last one without",
      "10%|#         | 10/100 [00:01<00:09, 9.1it/s]\r20%|##        | 20/100\r100%|##########| 100/100\nRuntimeError: boom\n",
      std::string("a NUL run\0\0\0here\nnext\n", 22),  // 22 bytes: the literal's own, without its terminating NUL
      cri,
      "{\"time\": \"2026-12-06T16:41:05.341Z\", \"level\": \"error\", \"rank\": 3, \"message\": \"boom\", \"exc_info\": "
      "\"Traceback (most recent call last):\\n  File \\\"x.py\\\", line 1\\nValueError: bad\"}\nafter\n",
  };
  ff::ingest::options opt;
  ff::testing::lcg rnd(47);
  for (const auto& in : inputs) {
    auto whole = read_whole(in, opt);
    for (int round = 0; round < 20; ++round) EXPECT_EQ(read_followed(in, opt, rnd), whole) << in.substr(0, 40);
  }
  // a line bound cut across writes is the same cut
  ff::ingest::options small;
  small.max_line_bytes = 16;
  const std::string longer = "short\n" + std::string(100, 'x') + "\nnext line that is long too\n";
  for (int round = 0; round < 20; ++round) EXPECT_EQ(read_followed(longer, small, rnd), read_whole(longer, small));
}

// ------------------------------------------------------------------------ diagnose and watch, same bytes

struct verdict {
  std::string kind, signature;
  std::optional<int> rank;
  std::vector<std::string> evidence;  // source:line: text
  bool operator==(const verdict&) const = default;
};

std::string show(const verdict& v) {
  std::ostringstream o;
  o << v.kind << " / " << v.signature << " / rank " << (v.rank ? std::to_string(*v.rank) : "-");
  for (const auto& e : v.evidence) o << "\n  " << e;
  return o.str();
}

verdict verdict_of(const ff::correlate::diagnosis& d) {
  verdict v{d.kind, d.signature, d.initiating_rank, {}};
  for (const auto& e : d.evidence_lines) v.evidence.push_back(e.source + ":" + std::to_string(e.line_no) + ": " + e.text);
  return v;
}

// The run watch would report once it has read everything: its sink's finish() when the watch ends, which
// it does after a pass that read nothing new.
struct end_of_watch final : ff::pipeline::sink {
  std::optional<ff::correlate::diagnosis> diag;
  std::uint64_t last = UINT64_MAX;
  bool progress(std::uint64_t bytes, std::size_t) override {
    bool same = bytes == last;
    last = bytes;
    return !same;
  }
  void finish(ff::pipeline::collector&, const ff::pipeline::run& r) override { diag = r.diag; }
};

verdict watch_verdict(const std::vector<std::string>& files) {
  ff::watch::options wo;
  wo.paths = files;
  wo.from_start = true;
  wo.silence_s = 1e9;
  wo.poll_ms = 1;
  wo.run_for_s = 60;
  end_of_watch events;
  wo.events = &events;
  std::atomic<bool> stop{false};
  auto st = ff::watch::run(ff::testing::engine(), wo, [](const ff::watch::alert&) {}, stop);
  EXPECT_TRUE(st) << st.error().message;
  EXPECT_TRUE(events.diag);
  return events.diag ? verdict_of(*events.diag) : verdict{};
}

verdict diagnose_verdict(const std::vector<std::string>& files) {
  auto r = ff::pipeline::diagnose(files, ff::testing::engine(), ff::pipeline::options{});
  EXPECT_TRUE(r) << r.error().message;
  return r ? verdict_of(r.value().diag) : verdict{};
}

// The files of a corpus case's logs, copied to a fresh directory (its name names no rank or host), sorted:
// both commands are given the same list.
std::vector<std::string> copy_logs(const fs::path& from, const fs::path& to) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    if (!e.is_regular_file()) continue;
    fs::path dst = to / fs::relative(e.path(), from);
    fs::create_directories(dst.parent_path());
    fs::copy_file(e.path(), dst, fs::copy_options::overwrite_existing);
    out.push_back(dst.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// A real log as a container runtime writes it on a Kubernetes node (/var/log/pods, CRI format): each line a
// record, a line longer than 60 bytes split into P records ended by an F record.
std::string as_cri(const std::string& log) {
  std::string out;
  std::istringstream in(log);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const std::string stamp = "2026-01-02T03:04:" + std::to_string(10 + n++ % 50) + ".123456789Z stdout ";
    for (std::size_t at = 0;; at += 60) {
      bool last = at + 60 >= line.size();
      out += stamp + (last ? "F " : "P ") + line.substr(at, 60) + "\n";
      if (last) break;
    }
  }
  return out;
}

// A real log whose progress bars are redrawn in place, as tqdm writes them: bar lines end in '\r'.
std::string with_cr_bars(const std::string& log) {
  std::string out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) out += line + (line.find("it/s]") != std::string::npos || line.find("s/it]") != std::string::npos ? "\r" : "\n");
  return out;
}

class diagnose_and_watch : public ::testing::TestWithParam<std::string> {};

TEST_P(diagnose_and_watch, find_the_same_kind_rank_and_evidence_in_the_same_bytes) {
  static int n = 0;  // (the directory names no case: "rank11" in a case's name is not a hint)
  const fs::path dir = fs::temp_directory_path() / ("ff-same-bytes-" + std::to_string(::getpid()) + "-" + std::to_string(++n));
  fs::remove_all(dir);
  const std::string name = GetParam();
  std::vector<std::string> files;
  if (name == "cri" || name == "cr-bars") {
    // derived from real logs: tests/corpus/gh-myria3d-123 (tqdm bars) and fx-mleng-cuda-oom-h200-modern-message
    const fs::path src = name == "cri" ? fs::path(FF_TEST_DATA) / "corpus/fx-mleng-cuda-oom-h200-modern-message/logs"
                                       : fs::path(FF_TEST_DATA) / "corpus/gh-myria3d-123/logs";
    fs::create_directories(dir);
    for (const auto& f : copy_logs(src, dir / "orig")) {
      fs::path out = dir / fs::path(f).filename();
      put(out, name == "cri" ? as_cri(slurp(f)) : with_cr_bars(slurp(f)));
      files.push_back(out.string());
    }
    fs::remove_all(dir / "orig");
    std::sort(files.begin(), files.end());
  } else {
    files = copy_logs(fs::path(FF_TEST_DATA) / "corpus" / name / "logs", dir);
  }
  ASSERT_FALSE(files.empty());
  verdict d = diagnose_verdict(files), w = watch_verdict(files);
  fs::remove_all(dir);
  EXPECT_FALSE(d.kind.empty());
  EXPECT_EQ(d, w) << "diagnose: " << show(d) << "\nwatch:    " << show(w);
}

INSTANTIATE_TEST_SUITE_P(same_bytes, diagnose_and_watch,
                         ::testing::Values("fx-mleng-cuda-oom-h200-modern-message", "fw-gh-msswift-6301-rank11-oom-sdpa-multinode",
                                           "fx-pytorch-docs-monitored-barrier-rank1", "fx-gpud-xid79-fallen-off-bus",
                                           "gh-myria3d-123", "cri", "cr-bars"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
