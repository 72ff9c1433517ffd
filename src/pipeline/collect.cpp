// Reading every input into a collector, on one thread or two (pipeline::options::threads): the reader cuts
// lines into blocks (line_block) and posts them, in input order, to the thread that runs the collector.
#include <fmt/format.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "internal.hpp"

namespace ff::pipeline {

void line_block::add(std::string_view line, std::uint64_t line_no, bool plain) {
  starts.push_back(static_cast<std::uint32_t>(text.size()));
  line_nos.push_back(line_no);
  known_plain.push_back(plain ? 1 : 0);
  text.append(line);
  text.push_back('\n');
}

std::string_view line_block::line(std::size_t i) const {
  std::size_t b = starts[i], e = (i + 1 < starts.size() ? starts[i + 1] : text.size()) - 1;  // without its '\n'
  return std::string_view(text).substr(b, e - b);
}

void line_block::clear() {
  text.clear();
  starts.clear();
  line_nos.clear();
  known_plain.clear();
  gated = false;
}

status line_block::scan_gate(const engine& eng, match::gate_scratch& gate_scratch) {
  auto g = eng.gate.hit_lines(text, starts, gate_hit, gate_scratch);
  gated = static_cast<bool>(g);
  return g;
}

std::size_t wrap_width(const std::vector<std::pair<std::string, std::uint64_t>>& head, const normalize::prefix_catalog* prefixes) {
  // Evident only when no line is longer than some width W >= 60, at least 5 lines (and 5%) are exactly W
  // long, and those are not rules of one repeated character ("-----", "=====").
  std::size_t longest = 0;
  for (const auto& [t, _] : head) longest = std::max(longest, t.size());
  if (longest < 60 || longest > 1000) return 0;
  std::size_t at_width = 0, next_starts_alike = 0;
  for (std::size_t i = 0; i < head.size(); ++i) {
    const auto& t = head[i].first;
    if (t.size() != longest || t.find_first_not_of(t[0]) == std::string::npos || t.back() == ' ') continue;
    ++at_width;
    // A log of fixed-width lines (one format, numbers of one width) is not a wrapped paste: the line after
    // a W-long line starts with the same prefix as it, where a wrapped line's rest starts mid-message.
    if (prefixes && i + 1 < head.size()) {
      normalize::line_meta a, b;
      if (prefixes->normalize(t, a) && prefixes->normalize(head[i + 1].first, b) && a.prefixes[0] == b.prefixes[0]) ++next_starts_alike;
    }
  }
  if (next_starts_alike * 2 >= at_width && at_width > 0) return 0;
  return at_width >= 5 && at_width * 20 >= head.size() ? longest : 0;
}

namespace {
// Runs posted tasks in the order posted, on one thread of its own, or inline on the caller's thread
// (`threaded` false). Bounded (see post()). A task's exception stops the tasks after it; finish() rethrows it
// on the caller's thread.
class serial_worker {
 public:
  explicit serial_worker(bool threaded) {
    if (threaded) thread_ = std::thread([this] { loop(); });
  }
  serial_worker(const serial_worker&) = delete;
  serial_worker& operator=(const serial_worker&) = delete;
  ~serial_worker() { stop(false); }
  // `bytes`: the text the task holds (a block's, a stream's first lines'). The queue takes it when fewer
  // than kAlways tasks wait, whatever their size (the bound before stop 40), or when fewer than kMaxQueued
  // wait and their text with this one's stays within kMaxBytes: many small tasks (1,024 rank files, each
  // opened, its first lines, a block or two, closed) queue deep, large ones (a first batch of long lines:
  // 256 lines of up to --max-line-kib each) no deeper than before.
  void post(std::function<void()> task, std::size_t bytes = 0) {
    if (!thread_.joinable()) {
      task();
      return;
    }
    std::unique_lock lk(m_);
    space_.wait(lk, [&] {
      return error_ || q_.size() < kAlways || (q_.size() < kMaxQueued && queued_bytes_ + bytes <= kMaxBytes);
    });
    if (error_) return;  // a task failed: finish() reports it, the rest would build on a broken state
    q_.push_back({std::move(task), bytes});
    queued_bytes_ += bytes;
    ready_.notify_one();
  }
  /// Waits until the tasks waiting and the one running hold at most kMaxBytes of text: the caller is about
  /// to read a stream's first batch (up to 256 lines of --max-line-kib each), which it holds while it reads
  /// and posts; without this, a batch of long lines was read while the previous one was still being worked
  /// on (a review measured 149 MB -> 215 MB of peak RSS on files of 256 lines of 256 KiB).
  void wait_for_room() {
    if (!thread_.joinable()) return;
    std::unique_lock lk(m_);
    space_.wait(lk, [&] { return error_ || queued_bytes_ + running_bytes_ <= kMaxBytes; });
  }
  /// Tasks waiting (not the one running): the worker is behind the caller when this is not 0.
  std::size_t queued() {
    std::lock_guard lk(m_);
    return q_.size();
  }
  /// Runs every pending task, joins the thread, rethrows a task's exception.
  void finish() {
    stop(true);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // A caller waiting for room is woken when the queue is down to kResume tasks (and after each task from
  // there on), not after every task.
  static constexpr std::size_t kAlways = 2, kMaxQueued = 8, kResume = 2;
  static constexpr std::size_t kMaxBytes = 1u << 20;
  void stop(bool drain) {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lk(m_);
      closing_ = true;
      if (!drain) q_.clear();
    }
    ready_.notify_one();
    thread_.join();
  }
  void loop() {
    for (;;) {
      std::function<void()> task;
      bool resume = false;
      {
        std::unique_lock lk(m_);
        ready_.wait(lk, [&] { return !q_.empty() || closing_; });
        if (q_.empty()) return;
        task = std::move(q_.front().first);
        running_bytes_ = q_.front().second;
        queued_bytes_ -= running_bytes_;
        q_.pop_front();
        resume = q_.size() <= kResume;
      }
      // The caller is woken when the queue is down to kResume tasks, not after every task: with the
      // worker behind (1,024 small rank files), a wake per task cost two context switches each (15,000,
      // and more wall time than the second thread saved).
      if (resume) space_.notify_one();
      try {
        task();
      } catch (...) {
        std::lock_guard lk(m_);
        error_ = std::current_exception();
        q_.clear();
        space_.notify_all();
        return;
      }
      task = nullptr;  // what it held (a first batch's lines) is freed before wait_for_room() hears of it
      {
        std::lock_guard lk(m_);
        running_bytes_ = 0;
        resume = q_.size() <= kResume;
      }
      if (resume) space_.notify_one();
    }
  }
  std::mutex m_;
  std::condition_variable ready_, space_;
  std::deque<std::pair<std::function<void()>, std::size_t>> q_;  // each task and its bytes
  std::size_t queued_bytes_ = 0, running_bytes_ = 0;
  bool closing_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

unsigned thread_count(unsigned asked) {
  if (asked > 0) return std::min(asked, 2u);
  return std::thread::hardware_concurrency() >= 2 ? 2 : 1;
}

// glibc gives a second thread its own malloc arena: blocks allocated by the reader and freed by the worker
// then spread over two heaps, which cost 14 MB of peak RSS on a 400,000-finding input (76 MB vs 62 MB)
// and broke the 64 MiB bound. One arena for the process keeps the bound; the two threads allocate
// little per line, and the measured time did not change. https://man7.org/linux/man-pages/man3/mallopt.3.html
// Freed memory at the heap's top is also kept (up to 32 MiB) instead of given back to the kernel at each
// free() past glibc's 128 KiB default: a 1,024-file tree made the heap grow and shrink 2,400 times (brk),
// every regrowth paid in page faults again. The peak, the only RSS the bound speaks of, does not change.
void one_malloc_arena() {
#if defined(__GLIBC__)
  static const bool once = (mallopt(M_ARENA_MAX, 1), mallopt(M_TRIM_THRESHOLD, 32 << 20), true);
  (void)once;
#endif
}
}  // namespace

namespace {
// Blocks are reused: a new one per 256 KiB grew its text by doubling (and once allocated its peel results
// afresh), which on a tree of 1,024 rank files was 4% of the CPU in first-touch page faults alone. The reader
// takes, the worker gives back (cleared, capacity kept); at most a few exist (serial_worker's queue and the
// two in hand). A block grown past its reserve by a long line is not kept: its memory goes back.
class block_pool {
 public:
  std::shared_ptr<line_block> take() {
    {
      std::lock_guard lk(m_);
      if (!free_.empty()) {
        auto b = std::move(free_.back());
        free_.pop_back();
        return b;
      }
    }
    auto b = std::make_shared<line_block>();
    b->text.reserve(kReserve);
    return b;
  }
  void give(const std::shared_ptr<line_block>& b) {
    if (b->text.capacity() > kReserve) return;
    b->clear();
    std::lock_guard lk(m_);
    if (free_.size() < kKept) free_.push_back(b);
  }

 private:
  static constexpr std::size_t kKept = 10;  // serial_worker's queue (8) and the two in hand: no block is allocated twice
  static constexpr std::size_t kReserve = line_block::kBytes + (64u << 10);
  std::mutex m_;
  std::vector<std::shared_ptr<line_block>> free_;
};

}  // namespace

// (internal.hpp)
status collect(const std::vector<std::string>& paths, const engine& eng, const options& opt, collector& col, run& out, sink& events) {
  // Two threads (options::threads): this one reads, cuts blocks and scans them with the gate when the worker
  // is behind (a pure function of the bytes); the worker runs every collector call, in input order, so the
  // report does not depend on the thread count.
  const bool threaded = thread_count(opt.threads) > 1;
  if (threaded) one_malloc_arena();
  block_pool pool;  // declared before the worker: its tasks give blocks back until the worker is done
  serial_worker worker(threaded);
  std::optional<match::gate_scratch> reader_gate;  // this thread's gate scratch, when there are two threads
  if (threaded && col.gated()) reader_gate.emplace(eng.gate);
  std::uint64_t bytes_done = 0;
  std::size_t inputs_started = 0;
  bool stopped = false;  // the sink said stop
  auto visit = [&](const ingest::source& src, ingest::line_reader& reader) -> bool {
    if (stopped || !events.begin(static_cast<std::uint32_t>(std::min<std::size_t>(inputs_started, UINT32_MAX)), src.display)) {
      stopped = true;
      return false;
    }
    ++inputs_started;
    auto st = std::make_shared<collector::stream>();
    worker.post([&col, st, src] { *st = col.open_stream(src); });
    ingest::raw_line raw;
    // The first lines are read as a batch so unknown prefixes are learnt before any line is matched.
    worker.wait_for_room();
    std::vector<std::pair<std::string, std::uint64_t>> head;
    while (head.size() < opt.learn_lines && reader.next(raw)) head.emplace_back(std::string(raw.text), raw.line_no);
    // A paste hard-wrapped by a terminal: rejoin a line cut at the wrap width with the line after it.
    std::size_t wrap = wrap_width(head, &eng.prefixes);
    if (wrap > 0) {
      std::vector<std::pair<std::string, std::uint64_t>> joined;
      for (auto& l : head) {
        if (!joined.empty() && joined.back().first.size() % wrap == 0 && joined.back().first.size() < 64 * wrap)
          joined.back().first += l.first;
        else
          joined.push_back(std::move(l));
      }
      head = std::move(joined);
    }
    std::string pending;
    std::uint64_t pending_no = 0;
    bool have_pending = false;
    if (wrap > 0 && !head.empty()) {  // the last head line may continue in the stream
      pending = std::move(head.back().first);
      pending_no = head.back().second;
      have_pending = true;
      head.pop_back();
    }
    std::size_t head_bytes = 0;
    for (const auto& l : head) head_bytes += l.first.size();
    worker.post([&col, st, head = std::move(head)] { col.add_lines(*st, head); }, head_bytes);
    auto post_line = [&](std::string text, std::uint64_t no) {
      const std::size_t bytes = text.size();
      worker.post([&col, st, text = std::move(text), no] { col.add_line(*st, text, no); }, bytes);
    };
    auto post_block = [&](std::shared_ptr<line_block> blk) {
      // The gate's scan goes to whichever thread is ahead: here when the worker still has tasks waiting
      // (the usual case: the worker carries the per-line work), there otherwise.
      if (reader_gate && worker.queued() > 0) (void)blk->scan_gate(eng, *reader_gate);
      const std::size_t bytes = blk->text.size();
      worker.post([&col, &pool, st, blk = std::move(blk)] {
        col.add_block(*st, *blk);  // no view into the block outlives this (add_block flushes at its end)
        pool.give(blk);
      }, bytes);
    };
    auto blk = pool.take();
    while (reader.next(raw)) {
      if (wrap == 0) {
        blk->add(raw.text, raw.line_no, raw.plain);
        if (blk->full()) {
          post_block(std::move(blk));
          blk = pool.take();
          if (!events.progress(bytes_done + reader.bytes_read(), inputs_started)) {
            stopped = true;
            break;
          }
        }
        continue;
      }
      if (have_pending && pending.size() % wrap == 0 && pending.size() < 64 * wrap) {
        pending += raw.text;
        continue;
      }
      if (have_pending) post_line(std::move(pending), pending_no);
      pending.assign(raw.text);
      pending_no = raw.line_no;
      have_pending = true;
    }
    if (have_pending) post_line(std::move(pending), pending_no);
    post_block(std::move(blk));
    worker.post([&col, &out, st, bytes = reader.bytes_read()] {
      col.close_stream(*st);
      input_stats stats{st->display, st->lines, bytes};
      // Lines, but none with a letter or a digit (blank, or rules of '=' and '-'; last_body keeps the last line
      // that has one): nothing to read, as an empty file.
      if (stats.lines > 0 && !st->last_body.empty()) out.any_readable = true;
      else if (stats.lines > 0) out.errors.push_back({st->display, "no line with a letter or a digit", false});
      out.total_lines += stats.lines;
      out.total_bytes += stats.bytes;
      out.inputs.push_back(std::move(stats));
    });
    bytes_done += reader.bytes_read();
    if (!stopped && !events.progress(bytes_done, inputs_started)) stopped = true;
    return !stopped;
  };
  auto errors = ingest::read_inputs(paths, opt.ingest, visit);
  worker.finish();
  if (stopped) return error{"cancelled", errc::cancelled};
  // (the inputs' own notes first, then the worker's: an input of blank lines only, unless a bound cut it short:
  // what was not read may hold text, and the run is "cut short", not "nothing readable")
  for (auto& e : out.errors) {
    const bool cut = std::any_of(errors.begin(), errors.end(), [&](const ingest::input_error& x) { return x.cut_short && x.path == e.path; });
    if (cut && e.reason == "no line with a letter or a digit") {
      out.any_readable = true;
      continue;
    }
    errors.push_back(std::move(e));
  }
  out.errors = std::move(errors);
  return col.check();  // an engine error mid-run: no verdict from partial matching
}

// The masking that finish() does before correlating: paths of errors, the last lines kept unmasked by the

}  // namespace ff::pipeline
