// Unit tests for stage 1 (ingest): line splitting, compressed files, bundles, directory walks,
// special files and path hints. Every test works in its own temporary directory.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "firstfault/ingest.hpp"
#include "firstfault/kb.hpp"
#include "test_support.hpp"

#include <re2/re2.h>

namespace fs = std::filesystem;
using ff::ingest::input_error;
using ff::ingest::options;

namespace {

// A unique directory under the system temp dir, removed (with everything in it) at scope exit.
class temp_dir {
 public:
  temp_dir() {
    static std::atomic<int> counter{0};
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() /
            ("ff_ingest_test_" + std::to_string(::getpid()) + "_" + std::to_string(stamp) + "_" +
             std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str(const std::string& rel) const { return (path_ / rel).string(); }
  // Writes `bytes` to rel (creating parent directories) and returns the full path.
  std::string write(const std::string& rel, const std::string& bytes) const {
    fs::path p = path_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }

 private:
  fs::path path_;
};

struct stream_rec {
  std::string display;
  ff::ingest::source_hint hint;
  std::vector<std::string> lines;
  std::vector<std::uint64_t> line_nos;
  std::vector<bool> truncated;
};

struct read_result {
  std::vector<stream_rec> streams;
  std::vector<input_error> errors;
  const stream_rec* find_suffix(const std::string& suffix) const {
    for (const auto& s : streams)
      if (s.display.size() >= suffix.size() && s.display.compare(s.display.size() - suffix.size(), suffix.size(), suffix) == 0)
        return &s;
    return nullptr;
  }
  const input_error* error_for(const std::string& path_suffix) const {
    for (const auto& e : errors)
      if (e.path.size() >= path_suffix.size() &&
          e.path.compare(e.path.size() - path_suffix.size(), path_suffix.size(), path_suffix) == 0)
        return &e;
    return nullptr;
  }
};

read_result read_all(const std::vector<std::string>& paths, const options& opt = options{}) {
  read_result out;
  out.errors = ff::ingest::read_inputs(paths, opt, [&](const ff::ingest::source& s, ff::ingest::line_reader& r) {
    stream_rec rec;
    rec.display = s.display;
    rec.hint = s.hint;
    ff::ingest::raw_line line;
    while (r.next(line)) {
      rec.lines.emplace_back(line.text);
      rec.line_nos.push_back(line.line_no);
      rec.truncated.push_back(line.truncated);
    }
    out.streams.push_back(std::move(rec));
    return true;
  });
  return out;
}

int sh(const std::string& cmd) { return std::system(cmd.c_str()); }

std::string numbered_lines(int n) {
  std::string s;
  char buf[96];
  for (int i = 1; i <= n; ++i) {
    std::snprintf(buf, sizeof buf, "line %06d the quick brown fox jumps over the lazy dog %d\n", i, i * 7919 % 1000);
    s += buf;
  }
  return s;
}

std::string numbered_line(int i) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "line %06d the quick brown fox jumps over the lazy dog %d", i, i * 7919 % 1000);
  return buf;
}

bool has_python3() { return sh("python3 -c 'import zipfile, tarfile' >/dev/null 2>&1") == 0; }

}  // namespace

// ------------------------------------------------------------------ line splitting

TEST(line_source, plain_file_lines_and_numbers) {
  temp_dir t;
  auto p = t.write("train.log", "first line\nsecond line\n\nfourth\n");
  auto r = read_all({p});
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].display, p);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"first line", "second line", "", "fourth"}));
  EXPECT_EQ(r.streams[0].line_nos, (std::vector<std::uint64_t>{1, 2, 3, 4}));
}

TEST(line_source, crlf_is_one_line) {
  temp_dir t;
  auto p = t.write("win.log", "alpha\r\nbeta\r\ngamma\r\n");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"alpha", "beta", "gamma"}));
  EXPECT_EQ(r.streams[0].line_nos.back(), 3u);
}

TEST(line_source, bare_cr_ends_a_line) {
  temp_dir t;
  auto p = t.write("cr.log", "one\rtwo\rthree\n");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"one", "two", "three"}));
}

TEST(line_source, tqdm_bar_glued_with_cr_gives_separate_lines) {
  temp_dir t;
  auto p = t.write("tqdm.log",
                   "Epoch 0:   1%|\xe2\x96\x88         | 10/1000 [00:01<01:39]\r"
                   "Epoch 0:   2%|\xe2\x96\x88         | 20/1000 [00:02<01:38]\r"
                   "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout\n"
                   "after\n");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u);
  const auto& l = r.streams[0].lines;
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0], "Epoch 0:   1%|\xe2\x96\x88         | 10/1000 [00:01<01:39]");
  EXPECT_EQ(l[1], "Epoch 0:   2%|\xe2\x96\x88         | 20/1000 [00:02<01:38]");
  EXPECT_EQ(l[2], "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout");
  EXPECT_EQ(l[3], "after");
  EXPECT_EQ(r.streams[0].line_nos, (std::vector<std::uint64_t>{1, 2, 3, 4}));
}

TEST(line_source, crlf_split_across_read_boundary_is_one_line) {
  // The first read of a stream is the 8 KiB binary-check block: put '\r' as its last byte and '\n'
  // as the first byte of the next read.
  temp_dir t;
  std::string first(8191, 'a');
  auto p = t.write("split.log", first + "\r\n" + "b\r\nc");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u);
  ASSERT_EQ(r.streams[0].lines.size(), 3u);
  EXPECT_EQ(r.streams[0].lines[0], first);
  EXPECT_EQ(r.streams[0].lines[1], "b");
  EXPECT_EQ(r.streams[0].lines[2], "c");
}

TEST(line_source, last_line_without_newline) {
  temp_dir t;
  auto p = t.write("nonl.log", "a\nRuntimeError: no newline at end");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"a", "RuntimeError: no newline at end"}));
  EXPECT_TRUE(r.errors.empty());
}

TEST(line_source, trailing_cr_does_not_add_an_empty_line) {
  temp_dir t;
  auto p = t.write("trail.log", "x\r\ny\r");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"x", "y"}));
}

TEST(line_source, long_line_is_cut_and_next_line_intact) {
  temp_dir t;
  std::string big(10000, 'x');
  auto p = t.write("long.log", "before\n" + big + "TAIL\nnext line\n");
  options opt;
  opt.max_line_bytes = 4096;
  auto r = read_all({p}, opt);
  ASSERT_EQ(r.streams.size(), 1u);
  const auto& s = r.streams[0];
  ASSERT_EQ(s.lines.size(), 3u);
  EXPECT_EQ(s.lines[0], "before");
  EXPECT_FALSE(s.truncated[0]);
  EXPECT_EQ(s.lines[1], std::string(4096, 'x'));
  EXPECT_TRUE(s.truncated[1]);
  EXPECT_EQ(s.lines[2], "next line");
  EXPECT_FALSE(s.truncated[2]);
  EXPECT_EQ(s.line_nos[2], 3u);
  const input_error* e = r.error_for("long.log");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->reason.find("1 line(s) longer than 4 KiB were cut"), std::string::npos) << e->reason;
  EXPECT_FALSE(e->fatal_for_input);
}

TEST(line_source, long_line_spanning_many_buffers) {
  temp_dir t;
  std::string big(300000, 'y');  // several 64 KiB buffers
  auto p = t.write("huge.log", big + "\r\nafter\n");
  options opt;
  opt.max_line_bytes = 100000;
  auto r = read_all({p}, opt);
  ASSERT_EQ(r.streams.size(), 1u);
  const auto& s = r.streams[0];
  ASSERT_EQ(s.lines.size(), 2u);
  EXPECT_EQ(s.lines[0].size(), 100000u);
  EXPECT_TRUE(s.truncated[0]);
  EXPECT_EQ(s.lines[1], "after");
  EXPECT_FALSE(s.truncated[1]);
}

// containerd/CRI-O split a long line into P records ended by an F record; the reader joins them (per
// stream: a stderr record between stdout parts is its own line), with the first record's line number.
TEST(line_source, cri_partial_records_are_joined) {
  temp_dir t;
  auto p = t.write("0.log",
                   "2024-05-01T10:00:00.000000001Z stdout F step 1\n"
                   "2024-05-01T10:00:01.000000001Z stderr P torch.OutOfMemoryError: CUDA out of memory. Tried to allocate \n"
                   "2024-05-01T10:00:01.000000002Z stderr P 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB\n"
                   "2024-05-01T10:00:01.000000003Z stderr F  of which 1.02 GiB is free.\n"
                   "2024-05-01T10:00:02.000000001Z stdout P half a line\n"
                   "2024-05-01T10:00:02.000000002Z stderr F other stream\n"
                   "2024-05-01T10:00:02.000000003Z stdout P  cut at the end\n");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u);
  const auto& l = r.streams[0].lines;
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[1], "2024-05-01T10:00:01.000000001Z stderr P torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                  "2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.");
  EXPECT_EQ(l[2], "2024-05-01T10:00:02.000000001Z stdout P half a line");
  EXPECT_EQ(l[3], "2024-05-01T10:00:02.000000002Z stderr F other stream");
  EXPECT_EQ(l[4], "2024-05-01T10:00:02.000000003Z stdout P  cut at the end");
  EXPECT_EQ(r.streams[0].line_nos, (std::vector<std::uint64_t>{1, 2, 5, 6, 7}));
}

TEST(line_source, line_of_exactly_max_bytes_is_not_cut) {
  temp_dir t;
  auto p = t.write("exact.log", std::string(64, 'z') + "\nok\n");
  options opt;
  opt.max_line_bytes = 64;
  auto r = read_all({p}, opt);
  ASSERT_EQ(r.streams.size(), 1u);
  ASSERT_EQ(r.streams[0].lines.size(), 2u);
  EXPECT_FALSE(r.streams[0].truncated[0]);
  EXPECT_EQ(r.streams[0].lines[0].size(), 64u);
  EXPECT_TRUE(r.errors.empty());
}

TEST(line_source, invalid_utf8_passes_through_unchanged) {
  temp_dir t;
  // A mostly-text log with a few stray bytes (Latin-1 path, a cut UTF-8 sequence, colour codes).
  std::string bad = "Loading dataset from /data/caf\xe9/train.jsonl: 1000 samples \xc3( \x1b[31mloss=0.5\x1b[0m";
  auto p = t.write("utf.log", "step 1 ok\n" + bad + "\nstep 2 ok\n");
  auto r = read_all({p});
  ASSERT_EQ(r.streams.size(), 1u) << (r.errors.empty() ? "" : r.errors[0].reason);
  ASSERT_EQ(r.streams[0].lines.size(), 3u);
  EXPECT_EQ(r.streams[0].lines[1], bad);  // bytes unchanged: sanitising is normalize's job
  EXPECT_EQ(r.streams[0].lines[2], "step 2 ok");
  EXPECT_TRUE(r.errors.empty());
}

// ------------------------------------------------------------------ compressed files and bundles

TEST(compressed, gzip_file_is_read) {
  temp_dir t;
  auto p = t.write("rank5.log", "hello gz\r\nsecond\n");
  ASSERT_EQ(sh("gzip -c '" + p + "' > '" + p + ".gz'"), 0);
  auto r = read_all({p + ".gz"});
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].display, p + ".gz");
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"hello gz", "second"}));
  ASSERT_TRUE(r.streams[0].hint.rank.has_value());
  EXPECT_EQ(*r.streams[0].hint.rank, 5);
}

TEST(compressed, zstd_file_is_read) {
  temp_dir t;
  auto p = t.write("node-b.log", numbered_lines(3000));
  ASSERT_EQ(sh("zstd -q -f '" + p + "' -o '" + p + ".zst'"), 0);
  auto r = read_all({p + ".zst"});
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].display, p + ".zst");
  ASSERT_EQ(r.streams[0].lines.size(), 3000u);
  EXPECT_EQ(r.streams[0].lines[0], numbered_line(1));
  EXPECT_EQ(r.streams[0].lines[2999], numbered_line(3000));
  EXPECT_EQ(r.streams[0].hint.host.value_or(""), "node-b");
}

// A plain file is read directly, not through libarchive; a file whose name does not say it is compressed
// but whose first bytes do (a .log that is really gzip or zstd) still goes through libarchive's filters.
TEST(compressed, compressed_bytes_under_a_plain_name_are_decompressed) {
  temp_dir t;
  auto p = t.write("src.txt", numbered_lines(500));
  ASSERT_EQ(sh("gzip -c '" + p + "' > '" + t.str("gz-rank1.log") + "'"), 0);
  ASSERT_EQ(sh("zstd -q -c '" + p + "' > '" + t.str("zst-rank2.log") + "'"), 0);
  auto plain = read_all({p});
  ASSERT_EQ(plain.streams.size(), 1u);
  for (const char* name : {"gz-rank1.log", "zst-rank2.log"}) {
    auto r = read_all({t.str(name)});
    EXPECT_TRUE(r.errors.empty()) << name;
    ASSERT_EQ(r.streams.size(), 1u) << name;
    EXPECT_EQ(r.streams[0].lines, plain.streams[0].lines) << name;
  }
  EXPECT_EQ(plain.streams[0].lines.size(), 500u);
  EXPECT_EQ(plain.streams[0].lines[499], numbered_line(500));
}

TEST(compressed, tar_gz_bundle_members_read_in_place) {
  temp_dir t;
  t.write("src/rank0.log", "r0 line\n");
  t.write("src/sub/rank1.log", "r1 a\nr1 b\n");
  t.write("src/model.bin", std::string(100, '\0'));
  std::string bundle = t.str("bundle.tar.gz");
  ASSERT_EQ(sh("tar czf '" + bundle + "' -C '" + t.str("src") + "' rank0.log sub/rank1.log model.bin"), 0);
  fs::remove_all(t.path() / "src");
  auto r = read_all({bundle});
  EXPECT_TRUE(r.errors.empty()) << r.errors[0].path << ": " << r.errors[0].reason;
  ASSERT_EQ(r.streams.size(), 2u);  // model.bin is not a log name
  EXPECT_EQ(r.streams[0].display, bundle + "!rank0.log");
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"r0 line"}));
  EXPECT_EQ(r.streams[0].hint.rank.value_or(-1), 0);
  EXPECT_EQ(r.streams[1].display, bundle + "!sub/rank1.log");
  EXPECT_EQ(r.streams[1].lines, (std::vector<std::string>{"r1 a", "r1 b"}));
  EXPECT_EQ(r.streams[1].hint.rank.value_or(-1), 1);
  // Read in place: nothing was extracted next to the bundle.
  EXPECT_FALSE(fs::exists(t.path() / "rank0.log"));
  EXPECT_FALSE(fs::exists(t.path() / "sub"));
}

TEST(compressed, zip_bundle_with_path_traversal_member_is_read_not_written) {
  if (!has_python3()) GTEST_SKIP() << "python3 zipfile not available";
  temp_dir t;
  fs::create_directories(t.path() / "a" / "b");
  std::string zip = t.str("a/b/bundle.zip");
  ASSERT_EQ(sh("python3 -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w',zipfile.ZIP_DEFLATED); "
               "z.writestr('../evil.log','evil line\\n'); z.writestr('job-worker-2.log','w2 a\\nw2 b\\n'); "
               "z.writestr('notes.png','PNG'); z.close()\" '" + zip + "'"),
            0);
  auto r = read_all({zip});
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.streams.size(), 2u);
  EXPECT_EQ(r.streams[0].display, zip + "!../evil.log");
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"evil line"}));
  EXPECT_EQ(r.streams[1].display, zip + "!job-worker-2.log");
  EXPECT_EQ(r.streams[1].lines, (std::vector<std::string>{"w2 a", "w2 b"}));
  EXPECT_EQ(r.streams[1].hint.host.value_or(""), "job-worker-2");
  // Nothing written anywhere: only the zip exists under the temp dir.
  EXPECT_FALSE(fs::exists(t.path() / "a" / "evil.log"));
  EXPECT_FALSE(fs::exists(t.path() / "a" / "b" / "evil.log"));
  EXPECT_FALSE(fs::exists(t.path() / "evil.log"));
  int files = 0;
  for (auto& e : fs::recursive_directory_iterator(t.path()))
    if (e.is_regular_file()) ++files;
  EXPECT_EQ(files, 1);
}

TEST(compressed, tar_member_named_dotdot_is_read_not_written) {
  if (!has_python3()) GTEST_SKIP() << "python3 tarfile not available";
  temp_dir t;
  fs::create_directories(t.path() / "x");
  std::string tarp = t.str("x/logs.tar");
  ASSERT_EQ(sh("python3 -c \"import tarfile,io,sys; tf=tarfile.open(sys.argv[1],'w'); d=b'escaped\\n'; "
               "ti=tarfile.TarInfo('../evil.log'); ti.size=len(d); tf.addfile(ti, io.BytesIO(d)); tf.close()\" '" +
               tarp + "'"),
            0);
  auto r = read_all({tarp});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].display, tarp + "!../evil.log");
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"escaped"}));
  EXPECT_FALSE(fs::exists(t.path() / "evil.log"));
}

TEST(compressed, compressed_log_inside_a_bundle_is_decompressed) {
  // looks_like_log_name() accepts "kern.log.2.gz" inside archives, so its text should be read.
  temp_dir t;
  t.write("src/kern.log", "NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.\n");
  ASSERT_EQ(sh("gzip '" + t.str("src/kern.log") + "'"), 0);
  std::string bundle = t.str("node.tar");
  ASSERT_EQ(sh("tar cf '" + bundle + "' -C '" + t.str("src") + "' kern.log.gz"), 0);
  auto r = read_all({bundle});
  const stream_rec* s = r.find_suffix("!kern.log.gz");
  EXPECT_EQ(s->lines[0], "NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.");
}

TEST(compressed, truncated_gzip_keeps_lines_before_damage) {
  temp_dir t;
  auto p = t.write("cut.log", numbered_lines(20000));
  ASSERT_EQ(sh("gzip -c '" + p + "' > '" + p + ".gz'"), 0);
  auto gz = p + ".gz";
  auto size = fs::file_size(gz);
  fs::resize_file(gz, size / 2);
  auto r = read_all({gz});
  ASSERT_EQ(r.streams.size(), 1u);
  const auto& l = r.streams[0].lines;
  ASSERT_GT(l.size(), 100u);
  EXPECT_LT(l.size(), 20000u);
  // Every line but the last (which may be cut at the damage) is intact and in order.
  for (std::size_t i = 0; i + 1 < l.size(); ++i) {
    ASSERT_EQ(l[i], numbered_line(static_cast<int>(i) + 1)) << "line " << i + 1;
  }
  const input_error* e = r.error_for("cut.log.gz");
  ASSERT_NE(e, nullptr) << "no input_error names the truncated file";
  EXPECT_EQ(e->path, gz);
  EXPECT_TRUE(e->fatal_for_input);
  EXPECT_NE(e->reason.find("runcated"), std::string::npos) << e->reason;
}

TEST(compressed, decompression_bomb_is_stopped) {
  temp_dir t;
  std::string line(63, 'a');
  line += '\n';
  std::string body;
  for (int i = 0; i < 65536; ++i) body += line;  // 4 MiB of very compressible text
  auto p = t.write("bomb.log", body);
  ASSERT_EQ(sh("gzip -9 -c '" + p + "' > '" + p + ".gz'"), 0);
  options opt;
  opt.bomb_min_bytes = 1 << 20;
  opt.bomb_ratio = 50;
  auto r = read_all({p + ".gz"}, opt);
  const input_error* e = r.error_for("bomb.log.gz");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->reason.find("decompression bomb"), std::string::npos) << e->reason;
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_LT(r.streams[0].lines.size(), 65536u);
}

TEST(compressed, stream_byte_limit_stops_reading) {
  temp_dir t;
  auto p = t.write("big.log", numbered_lines(40000));  // ~2.6 MB
  options opt;
  opt.max_stream_bytes = 1 << 20;
  auto r = read_all({p}, opt);
  const input_error* e = r.error_for("big.log");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->reason.find("stopped after 1 MiB"), std::string::npos) << e->reason;
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_GT(r.streams[0].lines.size(), 1000u);
  EXPECT_LT(r.streams[0].lines.size(), 40000u);
}

// ------------------------------------------------------------------ bad inputs

TEST(bad_input, empty_file_is_a_warning) {
  temp_dir t;
  auto p = t.write("empty.log", "");
  auto r = read_all({p});
  EXPECT_TRUE(r.streams.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, p);
  EXPECT_EQ(r.errors[0].reason, "empty file");
  EXPECT_FALSE(r.errors[0].fatal_for_input);
}

TEST(bad_input, empty_gzip_is_reported_empty) {
  temp_dir t;
  auto p = t.write("empty2.log", "");
  ASSERT_EQ(sh("gzip -c '" + p + "' > '" + p + ".gz'"), 0);
  auto r = read_all({p + ".gz"});
  for (const auto& s : r.streams) EXPECT_TRUE(s.lines.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].reason, "empty file");
  EXPECT_FALSE(r.errors[0].fatal_for_input);
}

TEST(bad_input, binary_file_skipped_other_file_still_read) {
  temp_dir t;
  std::mt19937 rng(12345);
  std::string bin(16384, '\0');
  for (std::size_t i = 0; i < bin.size(); ++i) bin[i] = (i % 3 == 0) ? '\0' : static_cast<char>(rng() & 0xff);
  auto pb = t.write("weights.log", bin);
  auto pg = t.write("good.log", "good line\n");
  auto r = read_all({pb, pg});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].display, pg);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"good line"}));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, pb);
  EXPECT_NE(r.errors[0].reason.find("binary"), std::string::npos) << r.errors[0].reason;
  EXPECT_TRUE(r.errors[0].fatal_for_input);
}

TEST(bad_input, missing_path) {
  temp_dir t;
  auto p = t.str("does/not/exist.log");
  auto r = read_all({p});
  EXPECT_TRUE(r.streams.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, p);
  EXPECT_EQ(r.errors[0].reason, "no such file or directory");
  EXPECT_TRUE(r.errors[0].fatal_for_input);
}

TEST(bad_input, fifo_on_command_line_is_skipped) {
  temp_dir t;
  auto fifo = t.str("pipe.log");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto pg = t.write("good.log", "still read\n");
  auto r = read_all({fifo, pg});  // must not block on the FIFO
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"still read"}));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, fifo);
  EXPECT_NE(r.errors[0].reason.find("not a regular file"), std::string::npos) << r.errors[0].reason;
}

TEST(bad_input, unreadable_file) {
  temp_dir t;
  auto p = t.write("secret.log", "hidden\n");
  ASSERT_EQ(::chmod(p.c_str(), 0), 0);
  auto r = read_all({p});
  if (::geteuid() == 0) {
    // root reads mode-000 files; the permission error cannot be provoked, but reading must work.
    ASSERT_EQ(r.streams.size(), 1u);
    EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"hidden"}));
  } else {
    EXPECT_TRUE(r.streams.empty());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].path, p);
    EXPECT_NE(r.errors[0].reason.find("ermission denied"), std::string::npos) << r.errors[0].reason;
  }
  ::chmod(p.c_str(), 0644);
}

// ------------------------------------------------------------------ directories

TEST(directory_walk, recursive_sorted_and_filters_non_logs) {
  temp_dir t;
  t.write("tree/b.log", "b\n");
  t.write("tree/a/x.log", "x\n");
  t.write("tree/c", "c\n");  // no extension: a log name
  t.write("tree/d.log.1", "d\n");  // rotated
  t.write("tree/e.txt", "e\n");
  t.write("tree/model.bin", "not a log but text\n");
  t.write("tree/notes.png", "not a log\n");
  t.write("tree/.hidden.log", "hidden\n");
  auto r = read_all({t.str("tree")});
  EXPECT_TRUE(r.errors.empty());
  std::vector<std::string> got;
  for (const auto& s : r.streams) got.push_back(fs::relative(s.display, t.path() / "tree").string());
  EXPECT_EQ(got, (std::vector<std::string>{"a/x.log", "b.log", "c", "d.log.1", "e.txt"}));
  ASSERT_EQ(r.streams.size(), 5u);
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"x"}));
  EXPECT_EQ(r.streams[2].lines, (std::vector<std::string>{"c"}));
}

TEST(directory_walk, symlink_loop_does_not_hang_and_links_are_not_followed) {
  temp_dir t;
  t.write("tree/a.log", "a\n");
  t.write("outside.log", "outside\n");
  fs::create_directory_symlink(t.path() / "tree", t.path() / "tree" / "loop");
  fs::create_directory_symlink(".", t.path() / "tree" / "self");
  fs::create_symlink(t.path() / "outside.log", t.path() / "tree" / "link.log");
  auto r = read_all({t.str("tree")});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].display, t.str("tree/a.log"));
  EXPECT_EQ(r.streams[0].lines, (std::vector<std::string>{"a"}));
}

TEST(directory_walk, torchrun_tree_hints_and_error_json) {
  temp_dir t;
  const std::string json =
      R"({"message": {"message": "RendezvousConnectionError: store failed", "extraInfo": {"py_callstack": )"
      R"("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    boom()\nRuntimeError: boom\n", )"
      R"("timestamp": "1700000000"}}})";
  t.write("run/none_x/attempt_0/1/error.json", json);
  t.write("run/none_x/attempt_0/3/stderr.log", "[default3]:hello\n");
  auto r = read_all({t.str("run")});
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.streams.size(), 2u);
  const stream_rec* ej = r.find_suffix("attempt_0/1/error.json");
  ASSERT_NE(ej, nullptr);
  EXPECT_TRUE(ej->hint.error_json);
  EXPECT_EQ(ej->hint.local_rank.value_or(-1), 1);
  EXPECT_EQ(ej->hint.attempt.value_or(-1), 0);
  ASSERT_TRUE(ej->hint.epoch_seconds.has_value());
  EXPECT_DOUBLE_EQ(*ej->hint.epoch_seconds, 1700000000.0);
  ASSERT_GE(ej->lines.size(), 5u);
  EXPECT_EQ(ej->lines[0], "RendezvousConnectionError: store failed");
  EXPECT_EQ(ej->lines[1], "Traceback (most recent call last):");
  EXPECT_EQ(ej->lines[2], "  File \"train.py\", line 3, in <module>");
  EXPECT_EQ(ej->lines[4], "RuntimeError: boom");
  const stream_rec* se = r.find_suffix("attempt_0/3/stderr.log");
  ASSERT_NE(se, nullptr);
  EXPECT_EQ(se->hint.local_rank.value_or(-1), 3);
  EXPECT_FALSE(se->hint.error_json);
  EXPECT_EQ(se->lines, (std::vector<std::string>{"[default3]:hello"}));
}

TEST(error_json, named_directly_and_malformed) {
  temp_dir t;
  auto good = t.write("none_y/attempt_2/0/error.json",
                      R"({"message": {"message": "x", "extraInfo": {"py_callstack": "Traceback (most recent call last):\nRuntimeError: boom\n", "timestamp": "1700000000"}}})");
  auto bad = t.write("none_z/attempt_0/0/error.json", R"({"not_message": 1})");
  auto r = read_all({good, bad});
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_EQ(r.streams[0].display, good);
  EXPECT_EQ(r.streams[0].hint.attempt.value_or(-1), 2);
  EXPECT_DOUBLE_EQ(r.streams[0].hint.epoch_seconds.value_or(0), 1700000000.0);
  bool saw = false;
  for (const auto& l : r.streams[0].lines) saw |= l == "RuntimeError: boom";
  EXPECT_TRUE(saw);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, bad);
  EXPECT_NE(r.errors[0].reason.find("not a torchelastic error file"), std::string::npos);
}

// ------------------------------------------------------------------ visitor control

TEST(read_inputs, visitor_returning_false_stops) {
  temp_dir t;
  auto a = t.write("a.log", "a\n");
  auto b = t.write("b.log", "b\n");
  int calls = 0;
  auto errs = ff::ingest::read_inputs({a, b}, options{}, [&](const ff::ingest::source&, ff::ingest::line_reader&) {
    ++calls;
    return false;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(errs.empty());
}

// ------------------------------------------------------------------ path hints and names

TEST(hints_from_path, torchrun_stderr) {
  auto h = ff::ingest::hints_from_path("/tmp/torchelastic_abc/none_x/attempt_0/3/stderr.log");
  EXPECT_EQ(h.local_rank.value_or(-1), 3);
  EXPECT_EQ(h.attempt.value_or(-1), 0);
  EXPECT_FALSE(h.rank.has_value());
  EXPECT_FALSE(h.host.has_value());
  EXPECT_FALSE(h.error_json);
  auto h2 = ff::ingest::hints_from_path("/tmp/torchelastic_abc/none_x/attempt_4/0/stdout.log");
  EXPECT_EQ(h2.local_rank.value_or(-1), 0);
  EXPECT_EQ(h2.attempt.value_or(-1), 4);
}

TEST(hints_from_path, rank_names) {
  EXPECT_EQ(ff::ingest::hints_from_path("logs/rank12.log").rank.value_or(-1), 12);
  EXPECT_EQ(ff::ingest::hints_from_path("logs/rank-3.log").rank.value_or(-1), 3);
  EXPECT_EQ(ff::ingest::hints_from_path("out_rank_7.txt").rank.value_or(-1), 7);
  EXPECT_EQ(ff::ingest::hints_from_path("logs/mpi/1/rank.3/stderr").rank.value_or(-1), 3);  // mpirun --output-filename
  EXPECT_EQ(ff::ingest::hints_from_path("run/rank4/stdout").rank.value_or(-1), 4);
  EXPECT_FALSE(ff::ingest::hints_from_path("logs/ranking.log").rank.has_value());
  EXPECT_FALSE(ff::ingest::hints_from_path("logs/frank3.log").rank.has_value());
}

TEST(hints_from_path, host_names) {
  auto h = ff::ingest::hints_from_path("node-b.log");
  EXPECT_EQ(h.host.value_or(""), "node-b");
  EXPECT_FALSE(h.rank.has_value());
  EXPECT_EQ(ff::ingest::hints_from_path("job-worker-2.log").host.value_or(""), "job-worker-2");
  EXPECT_EQ(ff::ingest::hints_from_path("/var/log/cluster/node-01.log").host.value_or(""), "node-01");
  EXPECT_FALSE(ff::ingest::hints_from_path("train.log").host.has_value());
  EXPECT_FALSE(ff::ingest::hints_from_path("/data/node-01/train.log").host.has_value());
}

TEST(hints_from_path, error_json) {
  auto h = ff::ingest::hints_from_path("/tmp/torchelastic_abc/none_x/attempt_0/1/error.json");
  EXPECT_TRUE(h.error_json);
  EXPECT_EQ(h.local_rank.value_or(-1), 1);
  EXPECT_EQ(h.attempt.value_or(-1), 0);
  EXPECT_FALSE(ff::ingest::hints_from_path("results/error.json").error_json);
  EXPECT_FALSE(ff::ingest::hints_from_path("results/metrics.json").error_json);
}

TEST(hints_from_path, plain_name_has_no_hints) {
  auto h = ff::ingest::hints_from_path("train.log");
  EXPECT_FALSE(h.rank || h.local_rank || h.host || h.attempt || h.epoch_seconds);
  EXPECT_FALSE(h.error_json);
}

TEST(looks_like_log_name, accepts_and_rejects) {
  using ff::ingest::looks_like_log_name;
  for (const char* ok : {"x.log", "stderr", "a.txt", "job.out", "job.err", "error.json", "kern.log.1", "syslog",
                         "messages", "x.log.gz", "bundle.tar.gz", "b.tgz", "b.zip", "dir/rank3.log.zst", "X.LOG"})
    EXPECT_TRUE(looks_like_log_name(ok)) << ok;
  for (const char* no : {"model.bin", "notes.png", "ckpt.pt", ".hidden.log", "weights.safetensors", "model.bin.1",
                         "x.so"})
    EXPECT_FALSE(looks_like_log_name(no)) << no;
}

namespace {

// A file that is truncated and rewritten while it is being read (log rotation by copytruncate racing
// the reader): no crash, no hang, every line returned is a complete line from one of the versions.
TEST(changing_input, file_truncated_and_rewritten_while_read) {
  temp_dir t;
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "old line " + std::to_string(i) + " padding padding padding\n";
  auto p = t.write("live.log", big);
  std::vector<std::string> got;
  bool rewritten = false;
  auto errors = ff::ingest::read_inputs({p}, options{}, [&](const ff::ingest::source&, ff::ingest::line_reader& r) {
    ff::ingest::raw_line line;
    while (r.next(line)) {
      got.emplace_back(line.text);
      if (!rewritten && got.size() == 10) {  // mid-read: truncate and write something new
        std::ofstream f(p, std::ios::binary | std::ios::trunc);
        f << "new line A\nnew line B\n";
        rewritten = true;
      }
    }
    return true;
  });
  ASSERT_TRUE(rewritten);
  ASSERT_GE(got.size(), 10u);
  for (const auto& l : got)
    EXPECT_TRUE(l.rfind("old line ", 0) == 0 || l.rfind("new line ", 0) == 0 || l.empty()) << l;
}

TEST(changing_input, file_growing_while_read_is_read_to_some_end) {
  temp_dir t;
  auto p = t.write("grow.log", "first\n");
  std::size_t n = 0;
  auto errors = ff::ingest::read_inputs({p}, options{}, [&](const ff::ingest::source&, ff::ingest::line_reader& r) {
    ff::ingest::raw_line line;
    while (r.next(line)) {
      if (++n < 100) std::ofstream(p, std::ios::app) << "more " << n << "\n";  // appended while reading
    }
    return true;
  });
  EXPECT_GE(n, 1u);
  EXPECT_LE(n, 100u);
  EXPECT_TRUE(errors.empty());
}

}  // namespace

TEST(hints_from_path, a_rank_only_below_the_input_the_user_named) {
  // "job-rank1/" above the logs is the job's name, not rank 1 (every file there was taken for rank 1's).
  auto h = ff::ingest::hints_from_path("runs/job-rank1/logs/console.log", "console.log");
  EXPECT_FALSE(h.rank);
  auto h2 = ff::ingest::hints_from_path("runs/job-rank1/logs/rank3/stdout.log", "rank3/stdout.log");
  EXPECT_EQ(h2.rank, 3);
  auto h3 = ff::ingest::hints_from_path("runs/job-rank1/logs/tl/x/attempt_2/5/stderr.log", "tl/x/attempt_2/5/stderr.log");
  EXPECT_FALSE(h3.rank);
  EXPECT_EQ(h3.attempt, 2);
  EXPECT_EQ(h3.local_rank, 5);
}

TEST(read_inputs, a_directory_named_like_a_rank_above_the_input_names_no_rank) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ff-rankdir-" + std::to_string(::getpid())) / "job-rank1" / "logs";
  fs::create_directories(dir);
  std::ofstream(dir / "console.log") << "step 1\n";
  std::ofstream(dir / "rank4.log") << "step 1\n";
  std::map<std::string, std::optional<int>> ranks;
  ff::ingest::options opt;
  (void)ff::ingest::read_inputs({dir.string()}, opt, [&](const ff::ingest::source& s, ff::ingest::line_reader&) {
    ranks[fs::path(s.display).filename().string()] = s.hint.rank;
    return true;
  });
  fs::remove_all(dir.parent_path().parent_path());
  EXPECT_FALSE(ranks["console.log"]);
  EXPECT_EQ(ranks["rank4.log"], 4);
}

// A JSON log record becomes the lines a plain formatter would have written (json_record_lines).
TEST(json_records, a_record_with_a_traceback_becomes_text_lines) {
  auto lines = ff::ingest::json_record_lines(
      R"({"time": "2026-12-06T16:41:16.191Z", "level": "error", "logger": "train", "rank": 1, "message": "training failed", )"
      R"("exc_info": "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nRuntimeError: boom"})");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "2026-12-06 16:41:16.191 ERROR [rank1] training failed");
  EXPECT_EQ(lines[1], "[rank1]:Traceback (most recent call last):");
  EXPECT_EQ(lines[3], "[rank1]:RuntimeError: boom");
  EXPECT_TRUE(ff::ingest::json_record_lines(R"({"step": 3, "loss": 0.5})").empty());  // no message: a metrics record, kept as is
  EXPECT_TRUE(ff::ingest::json_record_lines("{not json}").empty());
}

// kb/_tables/path_hints.tsv: the reader asks for each row by name and reads its groups in order; each sample
// gives the hints its groups name.
TEST(hints_from_path, path_hint_rows_have_their_groups) {
  const auto& t = ff::testing::builtin().tables.at("path_hints");
  EXPECT_EQ(t.order, (std::vector<std::string>{"torchrun_log", "torchrun_error_json", "rank"}));
  for (const auto& name : t.order) {
    re2::RE2 re(t.get(name, "regex"));
    ASSERT_TRUE(re.ok()) << name;
    const std::string groups = t.get(name, "groups");
    EXPECT_EQ(re.NumberOfCapturingGroups(), groups == "attempt local_rank" ? 2 : 1) << name;
    const auto h = ff::ingest::hints_from_path(t.get(name, "sample"));
    if (groups == "attempt local_rank") {
      EXPECT_TRUE(h.attempt && h.local_rank) << name;
      EXPECT_EQ(h.error_json, name == "torchrun_error_json");
    } else {
      EXPECT_EQ(groups, "rank");
      EXPECT_TRUE(h.rank) << name;
    }
  }
}
