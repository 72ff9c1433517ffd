// systemd journal files read directly (ingest.hpp, options::journal_dirs), through libsystemd's sd-journal
// API (https://www.freedesktop.org/software/systemd/man/latest/sd_journal_open.html).
#pragma once

#include <memory>
#include <string>

#include "firstfault/ingest.hpp"

namespace ff::ingest::detail {

/// The entries of every journal file in `dir` (sd_journal_open_directory; files of several hosts and boots
/// are interleaved by time), as text lines in journalctl's short-iso-precise form:
///   2026-11-30T02:00:05.123456+0000 HOST IDENTIFIER[PID]: MESSAGE
/// (UTC; a multi-line MESSAGE gives one such line per line). nullptr with `*err` set when the directory
/// cannot be opened or holds no journal file.
std::unique_ptr<line_reader::byte_source> open_journal(const std::string& dir, std::string* err);

}  // namespace ff::ingest::detail
