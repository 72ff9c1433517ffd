#include <gtest/gtest.h>

#include "test_support.hpp"

#include "firstfault/text.hpp"
#include "firstfault/watch.hpp"

TEST(text, sanitize_strips_escape_sequences_and_controls) {
  EXPECT_EQ(ff::text::sanitize("\x1b[31mred\x1b[0m plain\x07"), "red plain");
  EXPECT_EQ(ff::text::sanitize("a\x1b]0;title\x07" "b"), "ab");
}

TEST(text, sanitize_replaces_invalid_utf8) {
  std::size_t bad = 0;
  EXPECT_EQ(ff::text::sanitize("ok\xff!", &bad), "ok\xEF\xBF\xBD!");
  EXPECT_EQ(bad, 1u);
  EXPECT_EQ(ff::text::sanitize("\xe2\x96\x88"), "\xe2\x96\x88");  // a tqdm block stays
}

TEST(text, rank_ranges) {
  EXPECT_EQ(ff::text::rank_ranges({4, 0, 1, 2, 7, 5, 6}), "0-2,4-7");
  EXPECT_EQ(ff::text::rank_ranges({3}), "3");
}

// Issue 10: bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and the rest of the set) would reorder
// what a reader sees in a terminal, ticket or web page: they are shown escaped, never applied.
TEST(text, bidi_controls_are_shown_escaped) {
  EXPECT_EQ(ff::text::sanitize("rank\xE2\x80\xAE" "3 gnp.exe"), "rank<U+202E>3 gnp.exe");
  EXPECT_EQ(ff::text::sanitize("a\xE2\x81\xA6" "b\xE2\x81\xA9" "c\xE2\x80\x8F" "d\xD8\x9C"), "a<U+2066>b<U+2069>c<U+200F>d<U+061C>");
  EXPECT_EQ(ff::text::sanitize("caf\xC3\xA9 \xE2\x80\x94 ok"), "caf\xC3\xA9 \xE2\x80\x94 ok");  // other UTF-8 stays
}

// A root-cause sentence without a value says it without the value, never "(unknown)".
TEST(text, fill_sentence_drops_what_only_carries_a_missing_value) {
  auto none = [](const std::string&) { return std::string(); };
  auto rank3 = [](const std::string& n) { return n == "rank" ? std::string("3") : std::string(); };
  EXPECT_EQ(ff::text::fill_sentence("Rank {rank} ran out of GPU memory allocating {bytes}.", rank3), "Rank 3 ran out of GPU memory.");
  EXPECT_EQ(ff::text::fill_sentence("Rank {rank} ran out of GPU memory allocating {bytes}.", none), "A rank ran out of GPU memory.");
  EXPECT_EQ(ff::text::fill_sentence("CUDA could not initialise on {host}: driver missing.", none), "CUDA could not initialise: driver missing.");
  EXPECT_EQ(ff::text::fill_sentence("The worker exited (pid {pid}) with {signal}.", none), "The worker exited.");
  EXPECT_EQ(ff::text::fill_sentence("Rank {rank} raised {exc}: see the traceback.", none), "A rank raised an exception: see the traceback.");
  EXPECT_EQ(ff::text::fill_sentence("A task was blocked for more than {secs} s.", none), "A task was blocked.");
  EXPECT_EQ(ff::text::fill_sentence("Ranks {rank} and {peer_rank} shared a GPU.", none), "Some ranks shared a GPU.");
  EXPECT_EQ(ff::text::fill_sentence("needs accelerate>={v}, which is missing.", none), "needs accelerate, which is missing.");
  EXPECT_EQ(ff::text::fill_sentence("on {host} the NCCL {size}-byte segment", [](const std::string& n) { return n == "size" ? std::string("4096") : std::string(); }),
            "the NCCL 4096-byte segment");
}

TEST(text, is_plain_word_at_a_time_equals_the_byte_rule) {
  auto naive = [](const std::string& s) {
    for (unsigned char c : s)
      if ((c < 0x20 && c != '\t') || c >= 0x7F) return false;
    return true;
  };
  std::uint64_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned>(seed >> 33);
  };
  const unsigned char special[] = {0x00, 0x09, 0x0A, 0x1B, 0x1F, 0x20, 0x7E, 0x7F, 0x80, 0xC3, 0xFF};
  std::size_t plain = 0;
  for (int i = 0; i < 100000; ++i) {
    std::string s(next() % 40, 'a');
    for (auto& c : s) c = static_cast<char>(0x20 + next() % 95);
    if (next() % 2 && !s.empty()) s[next() % s.size()] = static_cast<char>(special[next() % sizeof special]);
    ASSERT_EQ(ff::text::is_plain(s), naive(s)) << i;
    plain += naive(s);
  }
  EXPECT_GT(plain, 20000u);
  EXPECT_LT(plain, 90000u);
}

// line_reader's pass answers two questions at once: where the line ends, and whether the bytes before the
// end are plain (line_block::known_plain: the light path need not look again).
TEST(text, find_line_end_tells_whether_the_line_is_plain) {
  std::uint64_t seed = 777;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned>(seed >> 33);
  };
  const unsigned char special[] = {0x00, 0x09, 0x0A, 0x0B, 0x0D, 0x1B, 0x1F, 0x7F, 0x80, 0xE2, 0xFF};
  std::size_t plain_lines = 0, ends = 0;
  for (int i = 0; i < 50000; ++i) {
    std::string s(next() % 80, 'a');
    for (auto& c : s) c = static_cast<char>(0x20 + next() % 95);
    for (unsigned n = next() % 3; n > 0 && !s.empty(); --n) s[next() % s.size()] = static_cast<char>(special[next() % sizeof special]);
    const std::size_t want_end = s.find_first_of(std::string_view("\n\r\0", 3));
    const bool want_plain = ff::text::is_plain(std::string_view(s).substr(0, want_end));
    bool plain = !want_plain;
    ASSERT_EQ(ff::text::find_line_end(s, plain), want_end) << i;
    ASSERT_EQ(plain, want_plain) << i;
    plain_lines += want_plain;
    ends += want_end != std::string::npos;
  }
  EXPECT_GT(plain_lines, 10000u);
  EXPECT_LT(plain_lines, 45000u);
  EXPECT_GT(ends, 10000u);
}

// Metrics labels come from a struct key: a '|' or a quote in a host name stays inside its label.
TEST(watch_metrics, a_bar_in_a_host_name_stays_in_the_host_label) {
  ff::watch::metrics m;
  m.hits[{"cuda_oom", "cuda_oom", "2", "node|a\"b"}] = 3;
  auto text = ff::watch::to_prometheus(m, 0);
  EXPECT_NE(text.find(R"(firstfault_signature_hits_total{signature="cuda_oom",kind="cuda_oom",rank="2",host="node|a\"b"} 3)"),
            std::string::npos)
      << text;
}

// is_clean() decides the light path for non-ASCII lines: it must be true exactly when sanitize() returns
// the line unchanged. Pieces: ASCII, tab, CR, ESC sequences, DEL, valid 2/3/4-byte characters (a tqdm
// block, e-acute, an emoji), C1 controls, bidi controls, overlong and truncated sequences, stray bytes;
// ASCII runs longer than the 16-byte steps that skip them.
TEST(text, is_clean_exactly_when_sanitize_changes_nothing) {
  const std::vector<std::string> pieces = {"a", "Z", "| 450/1000 [00:36<5:33:20, 0.73it/s]", " ", "\t", "\r", "\x1b[31m", "\x1b]0;t\x07", "\x7f", "\xe2\x96\x88",
                                           "\xc3\xa9", "\xf0\x9f\x98\x80", "\xc2\x85", "\xc2\xa0", "\xe2\x80\xae",
                                           "\xe2\x81\xa6", "\xd8\x9c", "\xe2\x80\x8e", "\xe2\x80\xa9", "\xc0\xaf",
                                           "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x96", "\xff", "\x80"};
  ff::testing::lcg next(99);
  int clean = 0;
  for (int i = 0; i < 100000; ++i) {
    std::string s;
    std::size_t n = next() % 12;
    for (std::size_t k = 0; k < n; ++k) s += pieces[next() % (k % 3 == 0 ? pieces.size() : 3)];  // ASCII runs past 16 bytes
    bool unchanged = ff::text::sanitize(s) == s;
    clean += unchanged;
    ASSERT_EQ(ff::text::is_clean(s), unchanged) << "input bytes: " << ::testing::PrintToString(s);
  }
  EXPECT_GT(clean, 1000);  // both outcomes are exercised
  EXPECT_LT(clean, 99000);
  EXPECT_TRUE(ff::text::is_clean("Epoch 3:  45%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88      | 450/1000"));
  EXPECT_FALSE(ff::text::is_clean("45%|\xe2\x96\x88\r46%|\xe2\x96\x88"));
}

// line_reader's one-pass search for the end of a line: the first '\n', '\r' or NUL, at any offset.
TEST(text, find_line_end_is_the_first_newline_return_or_nul) {
  std::uint64_t seed = 4242;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned>(seed >> 33);
  };
  const char ends[] = {'\n', '\r', '\0'};
  std::size_t found = 0;
  for (int i = 0; i < 50000; ++i) {
    std::string s(next() % 70, 'a');
    for (auto& c : s) c = static_cast<char>(0x01 + next() % 0xFE);  // every byte but the three (mostly)
    for (auto& c : s)
      if (c == '\n' || c == '\r') c = 'x';
    for (unsigned n = next() % 3; n > 0 && !s.empty(); --n) s[next() % s.size()] = ends[next() % 3];
    std::size_t naive = s.find_first_of(std::string_view("\n\r\0", 3));
    ASSERT_EQ(ff::text::find_line_end(s), naive) << i;
    found += naive != std::string::npos;
  }
  EXPECT_GT(found, 20000u);
  EXPECT_EQ(ff::text::find_line_end(""), std::string_view::npos);
}

TEST(text, with_fallbacks_shows_a_template_as_documented) {
  EXPECT_EQ(ff::text::with_fallbacks("torchrun --nproc_per_node {nproc|2} {script|train.py}; echo exit=$?  # exit=0"),
            "torchrun --nproc_per_node 2 train.py; echo exit=$?  # exit=0");
  EXPECT_EQ(ff::text::with_fallbacks("df -h {ckpt_dir|$CKPT_DIR} on {host}"), "df -h $CKPT_DIR on {host}");
  EXPECT_EQ(ff::text::with_fallbacks("a { b"), "a { b");
}

namespace {
// A step's placeholders are {name} and {name|fallback}; the command's own braces (awk, a jsonpath, docker's
// Go template, ${VAR}) are not placeholders, so the step is shown as written instead of being dropped.
TEST(text, fill_template_keeps_the_commands_own_braces) {
  auto fill = [](std::string_view t) {
    return ff::text::fill_template(t, [](const std::string& spec) { return spec == "nproc" ? std::string("8") : "<" + spec + ">"; });
  };
  EXPECT_EQ(fill("torchrun --nproc_per_node {nproc|2} {script|train.py}"), "torchrun --nproc_per_node <nproc|2> <script|train.py>");
  EXPECT_EQ(fill("x {nproc} y"), "x 8 y");
  for (const char* literal : {"awk '{print $1}' $HOSTFILE", "kubectl get pod $POD -o jsonpath='{.status.reason}'",
                              "docker inspect -f '{{.HostConfig.ShmSize}}' $CONTAINER", "echo ${SLURM_JOB_ID} ${PIPESTATUS[0]}",
                              "awk '{bad=1} END {exit bad}'", "kubectl get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}'"})
    EXPECT_EQ(fill(literal), literal);
  EXPECT_EQ(ff::text::with_fallbacks("awk '{print $1}' {dev|$DEV} {.a|b}"), "awk '{print $1}' $DEV {.a|b}");
}
}  // namespace
