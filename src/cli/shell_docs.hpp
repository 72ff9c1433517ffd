// Shell completion scripts and the man page, generated from the same CLI11 definitions as --help
// (so a new option shows up in all of them without anyone writing it twice).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace ff::cli {
/// A completion script for `shell` ("bash", "zsh" or "fish"); empty for another shell.
std::string completion_script(const CLI::App& app, const std::string& shell);
/// The man page (roff, section 1): NAME, SYNOPSIS, DESCRIPTION, one subsection per command with its
/// options, EXIT STATUS, FILES, ENVIRONMENT.
std::string man_page(const CLI::App& app, const std::string& version);
}  // namespace ff::cli
