// firstfault serve: the local web page (src/serve/server.hpp holds the routes and their rules).
#include <cstdlib>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/history.hpp"
#include "serve/server.hpp"

namespace ff::cli {
namespace {

class serve_command final : public command {
 public:
  explicit serve_command(CLI::App& app) {
    sub_ = app.add_subcommand("serve", "a local web page: paste a log or upload files, see the report and timeline, browse the encyclopedia and history");
    sub_->add_option("--listen", listen_, "ADDR:PORT to listen on (default 127.0.0.1:8765; port 0: any free port)");
    sub_->add_flag("--allow-remote", allow_remote_, "allow a non-loopback address");
    sub_->add_option("--token-file", token_file_, "read the access token from this file (default: a new random token, printed in the URL)");
    sub_->add_option("--token", token_, "the access token every request must carry (default: $FIRSTFAULT_TOKEN; visible to ps, prefer --token-file)");
    sub_->add_option("--max-upload-mib", max_upload_mib_, "largest request body (MiB, 1-4096)")->check(CLI::Range(1, 4096));
    sub_->add_option("--request-timeout", request_timeout_, "seconds a client has to send a request's line and headers, in all (default 10)")
        ->check(CLI::Range(1, 3600));
    sub_->add_option("--ready-file", ready_file_, "write the URL to this file once listening (for scripts and tests)");
    sub_->add_flag("--no-history", no_history_, "do not store the diagnoses in the local history");
    sub_->add_option("--history", history_path_, "history database (default $XDG_DATA_HOME/firstfault/history.db)");
    sub_->add_flag("--no-mask", no_mask_, "do not mask secrets and e-mail addresses (host names and addresses are shown unless --redact)");
    sub_->add_flag("--redact", redact_, "mask host names, addresses, MACs and user names too, in reports, the log viewer and history (the per-user key's pseudonyms, as diagnose --redact)");
    sub_->add_option("--mask-config", mask_config_, "team masking config (YAML: enabled, rules, keep_hosts)");
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override {
    serve::options o;
    auto colon = listen_.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      print_error("--listen wants ADDR:PORT, e.g. 127.0.0.1:8765");
      return kExitUsage;
    }
    o.host = listen_.substr(0, colon);
    if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']') o.host = o.host.substr(1, o.host.size() - 2);
    std::string port = listen_.substr(colon + 1);
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 0 || p > 65535) {
      print_error("--listen: port must be 0-65535, not '" + port + "'");
      return kExitUsage;
    }
    o.port = static_cast<int>(p);
    o.allow_remote = allow_remote_;
    // The token: --token-file, --token, $FIRSTFAULT_TOKEN, or a new random one (printed in the URL).
    if (!token_file_.empty() && !token_.empty()) {
      print_error("--token-file and --token: give one");
      return kExitUsage;
    }
    if (!token_file_.empty()) {
      auto t = serve::read_token_file(token_file_);
      if (!t) {
        print_error(t.error().message);
        return kExitUsage;
      }
      o.token = t.value();
    } else {
      o.token = token_;
      if (const char* t = std::getenv("FIRSTFAULT_TOKEN"); o.token.empty() && t && *t) o.token = t;
      if (o.token.empty()) o.token = serve::new_token();
    }
    o.max_upload_bytes = static_cast<std::uint64_t>(max_upload_mib_) << 20;
    o.ready_file = ready_file_;
    o.header_timeout_seconds = request_timeout_;
    if (!no_history_) o.history_path = history_path_.empty() ? history::default_path() : history_path_;
    auto mo = mask_options(mask_config_, {}, no_mask_, redact_);
    if (!mo) {
      print_error(mo.error().message);
      return kExitUsage;
    }
    o.mask = mo.value();
    if (o.mask.enabled && o.mask.redact) {  // the same pseudonyms as diagnose --redact for the same user
      auto key = user_redact_key();
      if (!key) {
        print_error(key.error().message);
        return kExitUsage;
      }
      o.mask.key = key.value();
    }
    serve::server srv(lib, o);
    if (auto st = srv.check(); !st) {
      print_error(st.error().message);
      return kExitUsage;
    }
    return srv.run();
  }

 private:
  CLI::App* sub_;
  std::string listen_ = "127.0.0.1:8765", token_, token_file_, ready_file_, history_path_, mask_config_;
  unsigned max_upload_mib_ = 64;
  int request_timeout_ = 10;
  bool allow_remote_ = false, no_history_ = false, no_mask_ = false, redact_ = false;
};

}  // namespace

std::unique_ptr<command> add_serve(CLI::App& app) { return std::make_unique<serve_command>(app); }

}  // namespace ff::cli
