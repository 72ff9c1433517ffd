// firstfault/encyclopedia.hpp: the knowledge base rendered as a browsable site (firstfault kb export).
//
// A pure function of the library: returns the pages (relative path, content); the CLI writes them.
// HTML pages are self-contained (the report's stylesheet, report::html_css(), inline; no external asset);
// Markdown pages link with .md names.
// Pages: index (by category, tag, system and severity), one page per signature, and an NCCL hub that lists
// every NCCL-related entry side by side with what it really indicates and the environment variables that
// tell them apart.
//
//   auto pages = ff::encyclopedia::render_site(lib.value(), ff::encyclopedia::format::html);
//   for (auto& p : pages) write(dir / p.path, p.content);
#pragma once

#include <string>
#include <vector>

#include "firstfault/kb.hpp"

namespace ff::encyclopedia {

enum class format { html, markdown };

struct page {
  std::string path;     ///< relative, e.g. "index.html", "entries/cuda_oom.html"
  std::string content;  ///< the whole page
  /// HTML only: the page's title, and what its <body> holds after the site's navigation, for a server that
  /// frames the page with its own head and navigation (firstfault serve). Empty for Markdown.
  std::string title, body;
};

std::vector<page> render_site(const kb::library& lib, format f);

/// Every relative link in the HTML pages that does not resolve to a page (or an id in it). Empty when
/// the site is consistent; used by the tests and by `kb export`.
std::vector<std::string> broken_links(const std::vector<page>& pages);

}  // namespace ff::encyclopedia
