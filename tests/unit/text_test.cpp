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
