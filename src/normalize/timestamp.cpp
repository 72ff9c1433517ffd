// Timestamp formats seen in training logs (../shared/reference/log_formats.md §0).
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "firstfault/normalize.hpp"

namespace ff::normalize {

namespace {

int month_index(std::string_view m) {
  static const char* names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i)
    if (m.size() >= 3 && std::strncmp(m.data(), names[i], 3) == 0) return i;
  return -1;
}

// Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse in H. Hinnant,
// "chrono-Compatible Low-Level Date Algorithms", https://howardhinnant.github.io/date_algorithms.html).
long days_from_civil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long>(doe) - 719468;
}

double epoch(int y, int mon0, int d, int h, int mi, double s) {
  // timegm() normalises out-of-range fields the same way: a day past the month's end rolls over.
  return static_cast<double>(days_from_civil(y, static_cast<unsigned>(mon0 + 1), 1) + (d - 1)) * 86400.0 + h * 3600.0 + mi * 60.0 + s;
}

std::size_t fast_iso_seconds(std::string_view t, double& sec);

// "YYYY-MM-DD?HH:MM:SS[.,]frac" with exactly these digit counts: the common ISO form, parsed without
// sscanf (the per-line cost of a diagnosis). Returns the bytes consumed, 0 when the text has another shape.
std::size_t fast_iso(std::string_view t, int& y, int& mo, int& d, int& h, int& mi, double& sec) {
  auto dig = [&](std::size_t i, std::size_t n, int& out) {
    if (i + n > t.size()) return false;
    int v = 0;
    for (std::size_t k = i; k < i + n; ++k) {
      if (t[k] < '0' || t[k] > '9') return false;
      v = v * 10 + (t[k] - '0');
    }
    out = v;
    return true;
  };
  if (!dig(0, 4, y) || t[4] != '-' || !dig(5, 2, mo) || t[7] != '-' || !dig(8, 2, d) || !dig(11, 2, h) || t[13] != ':' ||
      !dig(14, 2, mi))
    return 0;
  return fast_iso_seconds(t, sec);
}

// fast_iso() from ":SS" on (t[16]), once the minute's fields are read (or known: parse_timestamp's memo).
std::size_t fast_iso_seconds(std::string_view t, double& sec) {
  const std::size_t n = t.size();
  if (n < 19 || t[16] != ':') return 0;
  const unsigned s1 = static_cast<unsigned char>(t[17]) - '0', s0 = static_cast<unsigned char>(t[18]) - '0';
  if (s1 > 9 || s0 > 9) return 0;
  // the seconds as strtod reads them (the same double as the sscanf path's seconds_field). With at most 15
  // digits, SS.frac is the integer of its digits over a power of ten, both exact doubles, and IEEE division
  // rounds their exact quotient correctly: the same double strtod gives, without its cost on every line.
  // The fraction's digits are read in the loop that finds its end (only the first 13 are used that way).
  std::int64_t v = s1 * 10 + s0;
  double scale = 1;
  std::size_t i = 19;
  if (i < n && (t[i] == '.' || t[i] == ',')) {
    ++i;
    const std::size_t start = i;
    for (; i < n; ++i) {
      const unsigned d = static_cast<unsigned char>(t[i]) - '0';
      if (d > 9) break;
      if (i - 17 <= 16) {
        v = v * 10 + d;
        scale *= 10;
      }
    }
    if (i == start || i - 17 > 38) return 0;
  }
  if (i < n && ((t[i] >= '0' && t[i] <= '9') || t[i] == '.' || t[i] == ',')) return 0;  // an odd shape: sscanf decides
  if (i - 17 <= 16) {
    sec = static_cast<double>(v) / scale;
    return i;
  }
  char buf[40];
  std::size_t len = i - 17;
  std::memcpy(buf, t.data() + 17, len);
  if (len > 2) buf[2] = '.';
  auto r = std::from_chars(buf, buf + len, sec);
  if (r.ec != std::errc()) return 0;
  return i;
}

// An explicit UTC offset after the `consumed` bytes of an ISO time (+02:00, -0700) moves the instant;
// "Z" or none means UTC.
timestamp with_offset(timestamp ts, std::string_view text_in, std::size_t consumed) {
  if (consumed > 0 && consumed < text_in.size() && (text_in[consumed] == '+' || text_in[consumed] == '-')) {
    std::string z(text_in.substr(consumed + 1));
    int oh = 0, om = 0;
    if (std::sscanf(z.c_str(), "%2d:%2d", &oh, &om) == 2 || std::sscanf(z.c_str(), "%2d%2d", &oh, &om) == 2) {
      double off = oh * 3600.0 + om * 60.0;
      ts.seconds += text_in[consumed] == '+' ? -off : off;
    }
  }
  return ts;
}

// Parses "SS[.,]frac" into seconds.
double seconds_field(const std::string& s) {
  std::string c = s;
  for (auto& ch : c)
    if (ch == ',') ch = '.';
  return std::strtod(c.c_str(), nullptr);
}

// parse_timestamp()'s memo of the last ISO minute read on this thread: its epoch is kept with the 16 bytes
// "YYYY-MM-DD?HH:MM" it was read from (only a valid minute read by fast_iso).
struct minute_memo {
  char key[16];
  double base = 0;
  bool valid = false;
};
thread_local minute_memo tl_minute;

}  // namespace

bool detail::iso_plain_shape(std::string_view t) {
  auto digits = [&](std::size_t i, std::size_t n) {
    for (std::size_t k = i; k < i + n; ++k)
      if (t[k] < '0' || t[k] > '9') return false;
    return true;
  };
  if (t.size() < 19 || t.size() == 20 || t.size() > 33) return false;
  if (!digits(0, 4) || t[4] != '-' || !digits(5, 2) || t[7] != '-' || !digits(8, 2) || !digits(11, 2) || t[13] != ':' ||
      !digits(14, 2) || t[16] != ':' || !digits(17, 2))
    return false;
  return t.size() == 19 || ((t[19] == '.' || t[19] == ',') && digits(20, t.size() - 20));
}

std::optional<timestamp> detail::parse_iso_plain(std::string_view t) {
  const auto& memo = tl_minute;
  if (!memo.valid || std::memcmp(memo.key, t.data(), 16) != 0) return parse_timestamp("iso", t, 0);
  // fast_iso_seconds() on a text of this shape: SS.frac as an integer over a power of ten, consumed whole
  std::int64_t v = (t[17] - '0') * 10 + (t[18] - '0');
  double scale = 1;
  for (std::size_t k = 20; k < t.size(); ++k) {
    v = v * 10 + (t[k] - '0');
    scale *= 10;
  }
  const double secs = static_cast<double>(v) / scale;
  if (secs >= 61) return std::nullopt;
  timestamp ts;
  ts.seconds = memo.base + secs;
  return ts;
}

std::optional<timestamp> parse_timestamp(std::string_view format, std::string_view text_in, int default_year) {
  timestamp ts;
  if (format == "iso" || format == "elastic") {
    // 2026-11-30 02:14:01,880 | 2025-11-24T03:20:21.001125857Z | 2026-09-07_13:02:58
    // The usual digit counts are read from the caller's bytes (this runs on nearly every line); sscanf, on
    // a NUL-terminated copy, only decides the other shapes.
    int y = 0, mo = 0, d = 0, h = 0, mi = 0;
    double secs = 0;
    // Consecutive lines mostly share their minute: its epoch (tl_minute) is added to the seconds in
    // epoch()'s order, so the sum is the same double.
    auto& memo = tl_minute;
    std::size_t consumed = 0;
    if (memo.valid && text_in.size() >= 19 && std::memcmp(memo.key, text_in.data(), 16) == 0 &&
        (consumed = fast_iso_seconds(text_in, secs)) > 0) {
      if (secs >= 61) return std::nullopt;
      ts.seconds = memo.base + secs;
      return with_offset(ts, text_in, consumed);
    }
    consumed = text_in.size() >= 19 ? fast_iso(text_in, y, mo, d, h, mi, secs) : 0;
    const bool fast = consumed > 0;
    if (consumed == 0) {
      std::string text(text_in);
      char sec[40] = {0};
      int n = 0;
      if (std::sscanf(text.c_str(), "%d-%d-%d%*c%d:%d:%39[0-9.,]%n", &y, &mo, &d, &h, &mi, sec, &n) < 6) {
        n = 0;
        if (std::sscanf(text.c_str(), "%d-%d-%d%*c%d:%d%n", &y, &mo, &d, &h, &mi, &n) < 5) return std::nullopt;
      }
      consumed = static_cast<std::size_t>(n);
      secs = seconds_field(sec);
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || secs >= 61) return std::nullopt;
    ts.seconds = epoch(y, mo - 1, d, h, mi, secs);
    if (fast) {
      std::memcpy(memo.key, text_in.data(), 16);
      memo.base = epoch(y, mo - 1, d, h, mi, 0.0);  // epoch(..., s) is this + s, the last addition of its sum
      memo.valid = true;
    }
    return with_offset(ts, text_in, consumed);
  }
  std::string text(text_in);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  char sec[40] = {0};
  if (format == "c10" || format == "glog") {
    // 1206 18:44:12.715298746  (MMDD HH:MM:SS.frac), level letter already stripped; glog since 0.7 and
    // PyTorch's c10 logging with it write the year too: 20261206 16:25:36.656649 (YYYYMMDD)
    if (text.size() < 4) return std::nullopt;
    std::size_t sp = text.find(' ');
    if (sp == std::string::npos || (sp != 3 && sp != 4 && sp != 8)) return std::nullopt;
    long date = std::atol(text.substr(0, sp).c_str());
    const bool dated = sp == 8;
    if (dated) y = static_cast<int>(date / 10000);
    mo = static_cast<int>(date / 100 % 100);
    d = static_cast<int>(date % 100);
    if (std::sscanf(text.c_str() + sp + 1, "%d:%d:%39[0-9.]", &h, &mi, sec) < 3) return std::nullopt;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || (dated && (y < 1970 || y > 9999))) return std::nullopt;
    ts.seconds = epoch(dated ? y : default_year, mo - 1, d, h, mi, seconds_field(sec));
    ts.has_date = dated;
    return ts;
  }
  if (format == "syslog") {
    // Feb 14 05:03:41
    char mon[8] = {0};
    if (std::sscanf(text.c_str(), "%3s %d %d:%d:%39[0-9.]", mon, &d, &h, &mi, sec) < 5) return std::nullopt;
    int m = month_index(mon);
    if (m < 0) return std::nullopt;
    ts.seconds = epoch(default_year, m, d, h, mi, seconds_field(sec));
    ts.has_date = false;
    return ts;
  }
  if (format == "ctime") {
    // Fri Aug 11 12:31:45 2023
    char wd[8] = {0}, mon[8] = {0};
    if (std::sscanf(text.c_str(), "%3s %3s %d %d:%d:%39[0-9.] %d", wd, mon, &d, &h, &mi, sec, &y) < 7) return std::nullopt;
    int m = month_index(mon);
    if (m < 0) return std::nullopt;
    ts.seconds = epoch(y, m, d, h, mi, seconds_field(sec));
    return ts;
  }
  if (format == "uptime") {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) return std::nullopt;
    ts.seconds = v;
    ts.kind = timestamp::clock::uptime;
    return ts;
  }
  if (format == "uptime_us") {  // /dev/kmsg: microseconds since boot
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) return std::nullopt;
    ts.seconds = v / 1e6;
    ts.kind = timestamp::clock::uptime;
    return ts;
  }
  if (format == "epoch") {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) return std::nullopt;
    ts.seconds = v;
    return ts;
  }
  return std::nullopt;
}

}  // namespace ff::normalize
