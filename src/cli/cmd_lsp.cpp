// firstfault lsp: the language server over stdio (firstfault/lsp.hpp has the protocol and what it serves).
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/lsp.hpp"

namespace ff::cli {
namespace {

class lsp_command final : public command {
 public:
  lsp_command(CLI::App& app, std::vector<std::string>& kb_dirs) {
    sub_ = app.add_subcommand("lsp", "a language server for logs over stdio: diagnostics, hover, code actions (for editors)");
    sub_->add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);
    sub_->add_flag("--stdio", stdio_, "talk over stdin/stdout (the only transport; accepted because clients pass it)");
    sub_->add_option("--debounce-ms", debounce_ms_, "quiet time after an edit before a document is diagnosed (ms, 0-10000)")
        ->check(CLI::Range(0, 10000));
    sub_->add_option("--max-document-mib", max_document_mib_, "larger documents are not diagnosed in the editor (MiB, 1-4096)")
        ->check(CLI::Range(1, 4096));
    sub_->add_flag("--no-mask", no_mask_, "do not mask secrets and e-mail addresses in messages (host names are shown unless --redact)");
    sub_->add_flag("--redact", redact_, "mask host names, addresses and user names in messages too (the per-user key's pseudonyms, as diagnose --redact)");
    sub_->add_option("--mask-config", mask_config_, "team masking config (YAML: enabled, rules, keep_hosts)");
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override {
    lsp::options o;
    o.debounce_ms = debounce_ms_;
    o.max_document_bytes = static_cast<std::uint64_t>(max_document_mib_) << 20;
    o.version = FF_VERSION;
    auto mo = mask_options(mask_config_, {}, no_mask_, redact_);
    if (!mo) {
      print_error(mo.error().message);
      return kExitUsage;
    }
    o.mask = mo.value();
    if (o.mask.enabled && o.mask.redact) {
      auto key = user_redact_key();
      if (!key) {
        print_error(key.error().message);
        return kExitUsage;
      }
      o.mask.key = key.value();
    }
    std::ios::sync_with_stdio(false);
    return lsp::serve(std::cin, std::cout, lib, o);
  }

 private:
  CLI::App* sub_;
  std::string mask_config_;
  int debounce_ms_ = 300;
  unsigned max_document_mib_ = 256;
  bool stdio_ = false, no_mask_ = false, redact_ = false;
};

}  // namespace

std::unique_ptr<command> add_lsp(CLI::App& app, std::vector<std::string>& kb_dirs) {
  return std::make_unique<lsp_command>(app, kb_dirs);
}

}  // namespace ff::cli
