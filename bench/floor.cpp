// bench/floor.cpp: the floor of a scan-first design on one console, measured beside firstfault (bench/run.sh).
//
// Not part of firstfault. It does the least that issue 11's design (section 1 and 3) asks of every byte and
// line, and nothing else, so the benchmark can say how far the real diagnosis is from what that design
// could cost on the same machine:
//   - 1 MiB pread()s, cut at the last line end;
//   - one Vectorscan scan per buffer over the gate firstfault compiles (`firstfault kb export --gate`:
//     flags, a tab, the expression, one per line), counting the lines it hits;
//   - per line: its end (memchr), a hand lexer for torchrun's `[defaultN]:`/`[rankN]:` tag, an ISO time
//     `YYYY-MM-DD HH:MM:SS,mmm` and a `[rankN]` after the level, and per rank (or local rank) the line
//     count, the last line's offset, the last time and the longest silence.
// It keeps no step, planned step count, last line text, learnt prefix or host, masks nothing and reads no
// hit line in full: what firstfault does beyond this is the price of those per-rank facts and of the
// report being the same as --exact's.
//
// Usage: floor GATE_FILE LOG_FILE. Prints the line count, the lines the gate hits and the lines with a rank.
// A line longer than the buffer (1 MiB) is cut: its first MiB is lexed, the rest only counted as bytes.
#include <fcntl.h>
#include <hs/hs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct rank_facts {
  long lines = 0;
  long last_offset = -1;
  double last_seconds = -1, longest_silence = 0;
};

bool digit(char c) { return c >= '0' && c <= '9'; }
int two(const char* p) { return (p[0] - '0') * 10 + (p[1] - '0'); }

// Days from 1970-01-01 to the civil date y-m-d (proleptic Gregorian; Howard Hinnant's days_from_civil,
// http://howardhinnant.github.io/date_algorithms.html).
long days_from_civil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long>(doe) - 719468;
}

// `YYYY-MM-DD HH:MM:SS` with a ',' or '.' and three digits after it, at p (at least 23 bytes).
bool iso_time(const char* x) {
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22})
    if (!digit(x[i])) return false;
  return x[4] == '-' && x[7] == '-' && (x[10] == ' ' || x[10] == 'T') && x[13] == ':' && x[16] == ':' && (x[19] == ',' || x[19] == '.');
}

// Reads the number at p (advancing p), or -1 when there is none.
long number(const char*& p, const char* end) {
  if (p == end || !digit(*p)) return -1;
  long n = 0;
  while (p != end && digit(*p) && n < 1000000) n = n * 10 + (*p++ - '0');
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: floor GATE_FILE LOG_FILE\n");
    return 2;
  }
  std::ifstream gate_file(argv[1]);
  std::vector<std::string> exprs;
  std::vector<unsigned> flags, ids;
  for (std::string line; std::getline(gate_file, line);) {
    auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    flags.push_back(static_cast<unsigned>(std::stoul(line.substr(0, tab))));
    exprs.push_back(line.substr(tab + 1));
    ids.push_back(static_cast<unsigned>(ids.size()));
  }
  std::vector<const char*> c;
  for (const auto& e : exprs) c.push_back(e.c_str());
  hs_database_t* db = nullptr;
  hs_compile_error_t* err = nullptr;
  if (c.empty() || hs_compile_multi(c.data(), flags.data(), ids.data(), static_cast<unsigned>(c.size()), HS_MODE_BLOCK, nullptr, &db, &err) != HS_SUCCESS) {
    std::fprintf(stderr, "floor: %s: the gate does not compile\n", argv[1]);
    return 1;
  }
  hs_scratch_t* scratch = nullptr;
  if (hs_alloc_scratch(db, &scratch) != HS_SUCCESS) {
    std::fprintf(stderr, "floor: no scratch space for the gate\n");
    return 1;
  }
  int fd = open(argv[2], O_RDONLY);
  if (fd < 0) {
    std::perror(argv[2]);
    return 1;
  }

  constexpr std::size_t kBuffer = 1u << 20;
  std::vector<char> buf(kBuffer);
  std::vector<rank_facts> global(65536), local(64);
  long lines = 0, hit_lines = 0, ranked = 0;
  off_t file_at = 0;   // file offset of buf[0]
  std::size_t have = 0;
  bool eof = false;
  bool cut = false;  // the buffer ended inside a line: its rest opens the next buffer
  std::vector<unsigned> match_ends;  // per buffer: where each gate match ends (not in order)
  auto on_match = [](unsigned, unsigned long long, unsigned long long to, unsigned, void* ctx) -> int {
    static_cast<std::vector<unsigned>*>(ctx)->push_back(static_cast<unsigned>(to));
    return 0;
  };
  while (!eof || have > 0) {
    if (!eof) {
      ssize_t r = pread(fd, buf.data() + have, kBuffer - have, file_at + static_cast<off_t>(have));
      if (r < 0) {
        std::perror(argv[2]);
        return 1;
      }
      if (r == 0) eof = true;
      have += static_cast<std::size_t>(r);
    }
    std::size_t end = have;
    if (!eof) {
      const void* last = memrchr(buf.data(), '\n', have);
      if (!last) {
        if (have == kBuffer) end = have;  // a line longer than the buffer: cut it
        else continue;
      } else {
        end = static_cast<std::size_t>(static_cast<const char*>(last) - buf.data()) + 1;
      }
    }
    match_ends.clear();
    if (hs_scan(db, buf.data(), static_cast<unsigned>(end), 0, scratch, on_match, &match_ends) != HS_SUCCESS) {
      std::fprintf(stderr, "floor: the gate's scan failed\n");
      return 1;
    }
    std::sort(match_ends.begin(), match_ends.end());
    auto next_match = match_ends.begin();
    bool was_cut = cut;
    cut = false;
    for (const char* p = buf.data(), *stop = buf.data() + end; p < stop;) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(stop - p)));
      const char* e = nl ? nl : stop;
      if (!nl && !eof) cut = true;  // (only when the buffer is full of one line: end is the last '\n' otherwise)
      // A match ending in (p, e] is on this line (a match's end is one past its last byte).
      const auto line_begin = static_cast<unsigned>(p - buf.data()), line_end = static_cast<unsigned>(e - buf.data());
      bool hit = false;
      while (next_match != match_ends.end() && *next_match <= line_end) hit |= *next_match++ > line_begin;
      if (was_cut) {  // the rest of a line cut at the last buffer's end: counted and lexed there
        was_cut = false;
        p = e + 1;
        continue;
      }
      ++lines;
      hit_lines += hit;
      const char* x = p;
      long tag = -1, rank = -1;
      double seconds = -1;
      if (e - x > 3 && x[0] == '[') {  // [defaultN]: or [rankN]:
        const char* y = x + 1;
        const bool is_default = e - y > 7 && std::memcmp(y, "default", 7) == 0;
        const bool is_rank = e - y > 4 && std::memcmp(y, "rank", 4) == 0;
        if (is_default || is_rank) {
          y += is_default ? 7 : 4;
          long n = number(y, e);
          if (n >= 0 && e - y >= 2 && y[0] == ']' && y[1] == ':') {
            (is_default ? tag : rank) = n;
            x = y + 2;
          }
        }
      }
      if (e - x >= 23 && iso_time(x)) {
        const long day = days_from_civil(two(x) * 100 + two(x + 2), static_cast<unsigned>(two(x + 5)), static_cast<unsigned>(two(x + 8)));
        const int hh = two(x + 11), mm = two(x + 14), ss = two(x + 17);
        const int ms = (x[20] - '0') * 100 + two(x + 21);
        seconds = static_cast<double>(day) * 86400.0 + hh * 3600 + mm * 60 + ss + ms / 1000.0;
        x += 23;
        while (x < e && (*x == ' ' || (*x >= 'A' && *x <= 'Z'))) ++x;  // the level and its padding
        if (rank < 0 && e - x > 6 && std::memcmp(x, "[rank", 5) == 0) {
          const char* y = x + 5;
          long n = number(y, e);
          if (n >= 0 && y < e && *y == ']') rank = n;
        }
      }
      rank_facts* f = rank >= 0 && rank < 65536 ? &global[static_cast<std::size_t>(rank)]
                      : tag >= 0 && tag < 64   ? &local[static_cast<std::size_t>(tag)]
                                               : nullptr;
      if (f) {
        ++ranked;
        ++f->lines;
        f->last_offset = static_cast<long>(file_at) + (p - buf.data());
        if (seconds >= 0) {
          if (f->last_seconds >= 0 && seconds - f->last_seconds > f->longest_silence) f->longest_silence = seconds - f->last_seconds;
          f->last_seconds = seconds;
        }
      }
      p = e + 1;
    }
    std::memmove(buf.data(), buf.data() + end, have - end);
    file_at += static_cast<off_t>(end);
    have -= end;
  }
  close(fd);
  std::printf("lines %ld, lines the gate hits %ld, lines with a rank %ld\n", lines, hit_lines, ranked);
  hs_free_scratch(scratch);
  hs_free_database(db);
  return 0;
}
