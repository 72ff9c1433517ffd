#include <gtest/gtest.h>

#include "firstfault/text.hpp"

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
