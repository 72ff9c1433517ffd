// One runner per subcommand (ripgrep's layout: the flags, then one function per command). Each add_*()
// declares its subcommand and options on the application; main() parses once, loads the knowledge base
// and calls run() on the command that was parsed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "firstfault/kb.hpp"

namespace ff::cli {

class command {
 public:
  virtual ~command() = default;
  /// True when this command (or one of its subcommands) was given on the command line.
  virtual bool parsed() const = 0;
  /// Runs it; returns the process exit status.
  virtual int run(const kb::library& lib) = 0;
};

/// `--kb DIR` is accepted on the application and on every command that reads the knowledge base.
std::unique_ptr<command> add_diagnose(CLI::App& app, std::vector<std::string>& kb_dirs);  // cmd_diagnose.cpp
std::unique_ptr<command> add_watch(CLI::App& app);                                        // cmd_watch.cpp
std::unique_ptr<command> add_history(CLI::App& app);                                      // cmd_history.cpp
std::unique_ptr<command> add_kb(CLI::App& app, std::vector<std::string>& kb_dirs);       // cmd_kb.cpp
std::unique_ptr<command> add_explain(CLI::App& app);                                      // cmd_kb.cpp
std::unique_ptr<command> add_serve(CLI::App& app);                                        // cmd_serve.cpp
std::unique_ptr<command> add_scan(CLI::App& app, std::vector<std::string>& kb_dirs);     // cmd_scan.cpp
std::unique_ptr<command> add_lsp(CLI::App& app, std::vector<std::string>& kb_dirs);      // cmd_lsp.cpp
std::unique_ptr<command> add_run(CLI::App& app, std::vector<std::string>& kb_dirs);      // cmd_run.cpp

}  // namespace ff::cli
