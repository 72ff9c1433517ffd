// firstfault/lsp.hpp: a Language Server Protocol server for logs (`firstfault lsp`), over stdio.
//
// Protocol: LSP 3.17 (https://microsoft.github.io/language-server-protocol/specifications/lsp/3.17/specification/),
// JSON-RPC 2.0 messages framed by a `Content-Length: N\r\n\r\n` header (the body is N bytes of UTF-8 JSON).
// Nothing leaves the machine: every diagnosis runs in this process, on a private temporary copy of the
// document (a 0700 directory removed after each run) so that unsaved edits are diagnosed too.
//
// What the server does for an open document that looks like a log (looks_like_log()):
//  - publishes diagnostics (textDocument/publishDiagnostics), source "firstfault", code = the signature:
//      Error       each evidence line of the root cause;
//      Information one example line per collateral group, relatedInformation -> the root cause's line;
//      Warning     with an undetermined verdict, the lines that look wrong but match no signature;
//    every diagnostic's `data` is {"role": "root"|"collateral"|"suspicious", "signature", "kind"};
//  - sends the custom notification `firstfault/verdict` {uri, verdict, kind, title, initiatingRank,
//    initiatingHost} after each diagnosis (the VS Code extension's status bar shows it);
//  - hover on a diagnosed line: at most kMaxHoverChars of Markdown (hover_markdown()): the verdict, the root
//    cause in a sentence, the first lines of the fix, and a link to the full entry;
//  - code actions on a diagnosed line: "Explain" (firstfault.explain [signature]) and "Copy fix"
//    (firstfault.copyFix [uri]);
//  - workspace/executeCommand:
//      firstfault.explain [name]          -> {"title", "markdown"}   (a signature or a kind)
//      firstfault.copyFix [uri]           -> {"text"}  the fix and verify lines of that document's diagnosis
//      firstfault.diagnoseFolder [path]   -> the JSON report (firstfault.report/v1) of every log under the
//                                            folder (a path or a file: URI); diagnostics go to each file
// Edits (full-text sync) are debounced (options::debounce_ms) and a diagnosis still running for an older
// version of the document is cancelled (its pipeline::sink says stop), so a huge file costs one bounded run
// per pause in typing, not one per keystroke. Requests the server does not know get MethodNotFound;
// malformed JSON gets ParseError; a frame without Content-Length or over options::max_message_bytes ends
// the session with a one-line message on stderr (the stream cannot be resynchronised).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "firstfault/kb.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/pipeline.hpp"

namespace ff::lsp {

/// LSP DiagnosticSeverity (specification 3.17, "Diagnostic").
inline constexpr int kSeverityError = 1, kSeverityWarning = 2, kSeverityInformation = 3;

struct options {
  mask::options mask;                        ///< masking of everything in messages (on by default)
  int debounce_ms = 300;                     ///< quiet time after an edit before the document is diagnosed
  std::uint64_t max_message_bytes = 512u << 20;  ///< largest JSON-RPC body accepted (bytes)
  std::uint64_t max_document_bytes = 256u << 20; ///< larger documents get one Warning saying so, no diagnosis
  unsigned threads = 1;                      ///< pipeline::options::threads for each diagnosis
  std::string version;                       ///< serverInfo.version in the initialize answer
};

/// Runs the server until `exit` (or end of input). Returns the process exit status: 0 after
/// shutdown + exit, 1 for exit without shutdown or end of input (the LSP specification's rule), 2 when the
/// framing broke.
int serve(std::istream& in, std::ostream& out, const kb::library& lib, const options& opt);

// ---- The pure parts, for tests ----

enum class read_status { message, eof, error };
/// Reads one framed message body. error: `err` says why (no Content-Length, too large, cut short).
read_status read_message(std::istream& in, std::string& body, std::string& err, std::uint64_t max_bytes);
/// The framed form of a message (header + compact JSON; invalid UTF-8 in strings replaced by U+FFFD).
std::string frame(const nlohmann::json& msg);

/// file:///a%20b/c.log for /a b/c.log (RFC 3986: unreserved characters and '/' kept, the rest %XX).
std::string path_to_uri(std::string_view abs_path);
/// The local path of a file: URI (percent-decoded; "file://localhost/..." too); nullopt for other schemes.
std::optional<std::string> uri_to_path(std::string_view uri);

/// True when the document should be diagnosed: a log language id ("log", "firstfault-log"), a log file
/// name (.log .out .err .stdout .stderr, dmesg, syslog, messages, kern.log), or, for other names, text
/// whose first lines mostly carry a log prefix the catalogue knows (a rank, host or time prefix) or that
/// holds a Python traceback or torchelastic failure block.
bool looks_like_log(std::string_view uri, std::string_view language_id, std::string_view text,
                    const normalize::prefix_catalog& prefixes);

/// The length of line `line` (0-based; '\n', '\r\n' and '\r' end lines, as ingest reads them) in UTF-16
/// code units (LSP's default position encoding) or, with utf8, in bytes. 0 past the end.
std::uint32_t line_length(std::string_view text, std::uint64_t line, bool utf8);

/// line_length() for many lines of one text: the line starts are found in one pass, so measuring every
/// diagnostic of a large document reads it once instead of once per diagnostic. `text` must outlive it.
class line_index {
 public:
  explicit line_index(std::string_view text);
  std::uint32_t width(std::uint64_t line, bool utf8) const;  ///< as line_length(text, line, utf8)

 private:
  std::string_view text_;
  std::vector<std::size_t> starts_;
};

/// The diagnostics of one run, by document URI. `uri_of` maps a report's (masked) source name to the
/// URI of the file it came from (nullopt: not a file the client can open); `width` gives a line's length
/// in the client's position encoding for the range end (uri, 0-based line).
using uri_fn = std::function<std::optional<std::string>(const std::string& source)>;
using width_fn = std::function<std::uint32_t(const std::string& uri, std::uint64_t line)>;
std::map<std::string, std::vector<nlohmann::json>> to_diagnostics(const pipeline::run& r, const uri_fn& uri_of,
                                                                  const width_fn& width);

/// The `firstfault/verdict` notification's params for `uri`.
nlohmann::json verdict_params(const pipeline::run& r, const std::string& uri);

/// The fix, verify and confirm lines of a diagnosis as one text to paste (empty without a root cause).
std::string fix_text(const correlate::diagnosis& d);

/// The most a hover holds, in bytes of UTF-8 (so in characters too): a tooltip, not the whole entry, which
/// runs to 2,100-17,700 characters and is one code action ("explain") away.
inline constexpr std::size_t kMaxHoverChars = 2000;
/// Fix lines a hover shows; the rest are counted ("3 more in the entry").
inline constexpr std::size_t kHoverFixLines = 3;
/// Where built-in entries are read in full: their source in the project's repository (`builtin:cuda/x.yaml`
/// -> kEntryBaseUrl + "cuda/x.yaml"). Entries from a --kb directory link to their file instead.
inline constexpr std::string_view kEntryBaseUrl = "https://github.com/firstfault/firstfault/blob/main/kb/";

/// The link to a signature's full entry (kEntryBaseUrl for built-in ones, a file: URI for --kb ones).
std::string entry_url(const kb::signature& s);

/// What a document's diagnosis says about its root cause, kept for the hover of its root-cause lines.
struct root_facts {
  std::string summary;            ///< the root cause in a sentence, its placeholders filled
  std::vector<std::string> fix;   ///< the fix lines, filled
};
root_facts facts_of(const correlate::diagnosis& d);

/// The hover of a diagnosed line: the diagnostic's verdict line; for the root cause, `root`'s sentence and
/// its first kHoverFixLines fix lines (the signature's own when `root` is null); for collateral, what the line
/// is and that the fix is the root cause's; then a link to the full entry and the `firstfault explain NAME`
/// command. `sig` is the diagnostic's signature (null when it has none: the message alone). Never over
/// kMaxHoverChars: long pieces are cut at a character boundary with an ellipsis, the link always stays.
std::string hover_markdown(const nlohmann::json& diagnostic, const kb::signature* sig, const root_facts* root);

}  // namespace ff::lsp
