// The exported encyclopedia: every entry has its page with every section, and every link resolves.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include "firstfault/encyclopedia.hpp"
#include "firstfault/kb.hpp"

namespace {

using ff::testing::builtin;

TEST(encyclopedia, html_site_has_every_entry_and_no_broken_link) {
  auto pages = ff::encyclopedia::render_site(builtin(), ff::encyclopedia::format::html);
  EXPECT_EQ(pages.size(), builtin().signatures.size() + 2);  // entries + index + NCCL hub
  auto broken = ff::encyclopedia::broken_links(pages);
  for (const auto& b : broken) ADD_FAILURE() << "broken link: " << b;
  for (const auto& p : pages) {
    EXPECT_EQ(p.content.find("http://cdn"), std::string::npos) << p.path;  // no external assets
    EXPECT_EQ(p.content.find("<script"), std::string::npos) << p.path;
    // the body that firstfault serve frames with its own head and navigation: the page's, without the site's
    EXPECT_FALSE(p.title.empty()) << p.path;
    EXPECT_NE(p.content.find(p.body), std::string::npos) << p.path;
    EXPECT_EQ(p.body.find("<nav"), std::string::npos) << p.path;
    EXPECT_EQ(p.body.find("</body>"), std::string::npos) << p.path;
    EXPECT_NE(p.body.find("<h1>"), std::string::npos) << p.path;
    if (p.path.rfind("entries/", 0) != 0) continue;
    for (const char* section : {"What it is", "What you will observe", "Symptoms and what they mean", "How to confirm",
                                "Root cause", "Fix", "Verification", "How it scales from 1 to 1,000 GPUs",
                                "Related entries", "References"})
      EXPECT_NE(p.content.find(section), std::string::npos) << p.path << " lacks " << section;
  }
}

TEST(encyclopedia, broken_links_finds_a_missing_page_and_anchor) {
  std::vector<ff::encyclopedia::page> pages = {
      {"index.html", "<a href=\"entries/a.html\">a</a> <a href=\"entries/b.html\">b</a> <a href=\"entries/a.html#nope\">c</a>"},
      {"entries/a.html", "<h2 id=\"fix\">Fix</h2><a href=\"../index.html\">up</a> <a href=\"a.html#fix\">self</a>"}};
  auto bad = ff::encyclopedia::broken_links(pages);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[0], "index.html -> entries/b.html");
  EXPECT_EQ(bad[1], "index.html -> entries/a.html#nope (no such anchor)");
}

TEST(encyclopedia, nccl_hub_lists_nccl_entries_with_their_variables) {
  auto pages = ff::encyclopedia::render_site(builtin(), ff::encyclopedia::format::html);
  const ff::encyclopedia::page* hub = nullptr;
  for (const auto& p : pages)
    if (p.path == "nccl.html") hub = &p;
  ASSERT_NE(hub, nullptr);
  std::size_t rows = 0;
  for (std::size_t pos = 0; (pos = hub->content.find("<tr><td>", pos)) != std::string::npos; ++pos) ++rows;
  EXPECT_GE(rows, 20u);
  EXPECT_NE(hub->content.find("nccl_shm_dev_shm_full"), std::string::npos);
  EXPECT_NE(hub->content.find("<code>NCCL_"), std::string::npos);
}

TEST(encyclopedia, markdown_site_links_md_pages) {
  auto pages = ff::encyclopedia::render_site(builtin(), ff::encyclopedia::format::markdown);
  bool index = false;
  for (const auto& p : pages) {
    EXPECT_EQ(p.path.substr(p.path.size() - 3), ".md");
    if (p.path == "index.md") {
      index = true;
      EXPECT_NE(p.content.find("(entries/cuda_oom.md)"), std::string::npos);
    }
  }
  EXPECT_TRUE(index);
}

}  // namespace
