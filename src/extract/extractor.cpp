// Record grouping and the torchelastic ChildFailedError parser.
#include <re2/re2.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "firstfault/extract.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"
#include "kb_data/tables.hpp"

namespace ff::extract {

namespace {
// The row `name` of kb/_tables/exit_reports.tsv, compiled (its groups in the order the table lists them). A
// name with no row is a regexp that matches nothing (extract.exit_report_rows_have_their_groups fails then).
// (Each caller keeps the reference in a static: one lookup per name and process.)
const re2::RE2& exit_report(std::string_view name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<re2::RE2>, std::less<>> compiled;
  std::lock_guard<std::mutex> lock(mu);
  auto it = compiled.find(name);
  if (it == compiled.end()) {
    std::string re = kb::detail::cell_where(kb::detail::embedded_table("exit_reports"), "name", name, "regex");
    it = compiled.emplace(std::string(name), std::make_unique<re2::RE2>(re.empty() ? R"([^\s\S])" : re)).first;
  }
  return *it->second;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// "XxxError: msg", "pkg.mod.XxxException: msg", "KeyboardInterrupt", "SystemExit: 1". Python writes the type and
// the message in separate writes, so under mpirun --tag-output ("[jobid,rank]<stdxxx>:" before every chunk, Open
// MPI's mpirun(1)) the type can be followed by a tag: "RuntimeError[1,0]<stderr>:: [1,0]<stderr>:[./gloo...".
bool looks_like_exception(std::string_view s) {
  static const re2::RE2 re(R"(^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)\b(?:\[\d+,\d+\]<std(?:out|err|diag)>:)?(?::|$))");
  return re2::RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), re);
}
// A frame of installed code, not the user's: site-packages and dist-packages (pip, Debian), the standard
// library (lib/pythonX.Y/), frozen modules, and a launcher's console script (an extensionless wrapper that pip
// writes into the environment's bin/: /usr/local/bin/accelerate, /opt/conda/bin/torchrun; entry points,
// https://packaging.python.org/en/latest/specifications/entry-points/). Python's traceback format: File "PATH",
// line N, in NAME (https://docs.python.org/3/library/traceback.html).
bool console_script(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash != std::string_view::npos && slash >= 4 && path.substr(slash - 4, 5) == "/bin/" &&
         path.substr(slash + 1).find('.') == std::string_view::npos;
}
bool library_path(std::string_view path) {
  return contains(path, "site-packages/") || contains(path, "dist-packages/") || contains(path, "/lib/python3") ||
         contains(path, "/lib/python2") || starts_with(path, "<frozen") || contains(path, "\\Lib\\") || console_script(path);
}
}  // namespace

void extractor::flush_entry(std::vector<exit_record>& exits) {
  if (entry_ && (entry_->rank || entry_->local_rank || entry_->exitcode)) exits.push_back(*entry_);
  entry_.reset();
}

void extractor::feed(std::string_view body_in, std::uint64_t line_no, line_note& note, std::vector<exit_record>& exits,
                     std::vector<terminated_pid>& terms) {
  std::string_view body = body_in;
  std::string_view t = text::trim(body);

  feed_user_frame(t, note);
  // A re-raised worker exception puts the cause after it. Under "During handling of the above exception" and
  // "The above exception was the direct cause" the first exception is the cause and the later one its echo,
  // but the later traceback may hold the user's frame the first lacked (torch.save's own frames, then the
  // user's call).
  if (starts_with(t, "Original Traceback (most recent call last):")) note.chain = line_note::chain_kind::original;
  else if (starts_with(t, "During handling of the above exception") || starts_with(t, "The above exception was the direct cause"))
    note.chain = line_note::chain_kind::context;

  if (feed_failure_block(t, line_no, note, exits) || feed_launcher_exit(t, line_no, exits)) return;
  feed_agent_line(t, line_no, exits, terms);
  if (feed_stack_dump(t, note) || feed_cpp_frames(t, note)) return;
  feed_traceback(t, body, note);
}

// The deepest user frame of a Python traceback, for the report (line_note::user_frame).
void extractor::feed_user_frame(std::string_view t, line_note& note) {
  if (starts_with(t, "File \"")) {
    static const re2::RE2 frame(R"re(^File "([^"]+)", line (\d+), in (\S+))re");
    std::string path, fn;
    int n = 0;
    want_code_ = false;
    if (re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), frame, &path, &n, &fn) && !library_path(path)) {
      // The script the job ran: the user's frame at module level ("<module>"), or its main() under a wrapper
      // (torchelastic's @record); a user frame in another function (a Dataset's __getitem__ under a
      // DataLoader worker) is a module of the user's, not the entry. "<string>" and "<stdin>" (python -c, a
      // here-document) are no file to run again.
      if (entry_script_.empty() && (fn == "<module>" || fn == "main") && path.size() < 512 && path.find(' ') == std::string::npos &&
          path[0] != '<')
        entry_script_ = path;
      auto slash = path.find_last_of('/');
      user_frame_ = (slash == std::string::npos ? path : path.substr(slash + 1)) + ":" + std::to_string(n) + " in " + fn;
      want_code_ = true;
    }
  } else if (want_code_) {
    want_code_ = false;
    if (!t.empty() && t[0] != '~' && t[0] != '^' && !looks_like_exception(t))  // a frame without source (python -c)
      user_frame_ += ": " + std::string(text::prefix_utf8(t, 200));
  }
  if (!user_frame_.empty() && !starts_with(t, "File \"") && looks_like_exception(t)) {
    note.user_frame = user_frame_;
    note.entry_script = std::move(entry_script_);
    user_frame_.clear();
    entry_script_.clear();
  }
}

// The torchelastic ChildFailedError block ("Failures:", "Root Cause", one "[N]:" entry per failed
// worker). True when the line was consumed.
bool extractor::feed_failure_block(std::string_view t, std::uint64_t line_no, line_note& note, std::vector<exit_record>& exits) {
  if (block_ == block::none && contains(t, "ChildFailedError:")) {
    block_ = block::header;
  } else if (block_ != block::none) {
    if (starts_with(t, "Failures:")) { flush_entry(exits); block_ = block::failures; note.skip_match = true; return true; }
    if (starts_with(t, "Root Cause")) { flush_entry(exits); block_ = block::root_cause; note.skip_match = true; return true; }
    if (re2::RE2::FullMatch(re2::StringPiece(t.data(), t.size()), exit_report("torchelastic_entry"))) {
      flush_entry(exits);
      entry_ = exit_record{};
      entry_->root_cause = block_ == block::root_cause;
      entry_->source = source_;
      entry_->line_no = line_no;
      note.skip_match = true;
      return true;
    }
    if (entry_) {
      re2::StringPiece sp(t.data(), t.size());
      // ChildFailedError's entry fields (kb/_tables/exit_reports.tsv)
      static const re2::RE2 &time_re = exit_report("torchelastic_time"), &host_re = exit_report("torchelastic_host"),
                            &rank_re = exit_report("torchelastic_rank"), &exit_re = exit_report("torchelastic_exitcode"),
                            &sig_re = exit_report("torchelastic_signal");
      std::string s1;
      int a = 0, b = 0;
      if (re2::RE2::PartialMatch(sp, time_re, &s1)) { entry_->time = s1; note.skip_match = true; return true; }
      if (re2::RE2::PartialMatch(sp, host_re, &s1)) { entry_->host = s1; note.skip_match = true; return true; }
      if (re2::RE2::PartialMatch(sp, rank_re, &a, &b)) { entry_->rank = a; entry_->local_rank = b; note.skip_match = true; return true; }
      if (re2::RE2::PartialMatch(sp, exit_re, &a, &b)) { entry_->exitcode = a; entry_->pid = b; note.skip_match = true; return true; }
      if (re2::RE2::PartialMatch(sp, sig_re, &s1)) entry_->signal = s1;
      note.rank = entry_->rank;  // e.g. "traceback : Signal 9 (SIGKILL) received by PID ..." of this entry
    }
    if (starts_with(t, "=====") && block_ != block::header) {
      flush_entry(exits);
      block_ = block::none;
      note.skip_match = true;
      return true;
    }
    if (starts_with(t, "-----") || starts_with(t, "=====") || contains(t, "<NO_OTHER_FAILURES>")) {
      note.skip_match = true;
      return true;
    }
  }

  return false;
}

exit_record extractor::new_record(const char* launcher, std::uint64_t line_no) const {
  exit_record r;
  r.launcher = launcher;
  r.source = source_;
  r.line_no = line_no;
  return r;
}

// Other launchers' exit reports (mpirun, srun, torch.distributed.launch). True when the line was consumed.
bool extractor::feed_launcher_exit(std::string_view t, std::uint64_t line_no, std::vector<exit_record>& exits) {
  {
    re2::StringPiece sp(t.data(), t.size());
    // mpirun: "The first process to do so was:" / "Process name: [[37533,1],3]" / "Exit code:    1"
    if (contains(t, "The first process to do so was")) {
      mpi_first_ = true;
      mpi_entry_ = new_record("mpirun", line_no);
      mpi_entry_->root_cause = true;
      return true;
    }
    if (mpi_first_) {
      static const re2::RE2 &proc_re = exit_report("mpirun_process"), &code_re = exit_report("mpirun_exit_code"),
                            &host_re = exit_report("mpirun_host");
      int v = 0;
      std::string h;
      if (re2::RE2::PartialMatch(sp, proc_re, &v)) { mpi_entry_->rank = v; return true; }
      if (re2::RE2::PartialMatch(sp, host_re, &h)) { mpi_entry_->host = h; return true; }
      if (re2::RE2::PartialMatch(sp, code_re, &v)) {  // the block's last field (help-mpirun.txt): a log may end here
        mpi_entry_->exitcode = v;
        if (mpi_entry_->rank) exits.push_back(*mpi_entry_);
        mpi_first_ = false;
        mpi_entry_.reset();
        return true;
      }
      if (t.empty()) return true;
      if (mpi_entry_->rank) exits.push_back(*mpi_entry_);
      mpi_first_ = false;
      mpi_entry_.reset();
    }
    // mpirun: "mpirun noticed that process rank 0 with PID 0 on node vm exited on signal 9 (Killed)."
    // (Open MPI help-orterun.txt, proc-aborted-signal; mpiexec and orterun print the same)
    if (contains(t, "noticed that process rank")) {
      static const re2::RE2& sig_re = exit_report("mpirun_signal");
      int rank = 0, signo = 0;
      std::string node;
      if (re2::RE2::PartialMatch(sp, sig_re, &rank, &node, &signo)) {
        auto r = new_record("mpirun", line_no);
        r.rank = rank;
        r.host = node;
        r.exitcode = -signo;
        r.signal = signo == 9 ? "SIGKILL" : signo == 11 ? "SIGSEGV" : signo == 6 ? "SIGABRT" : signo == 15 ? "SIGTERM" : signo == 7 ? "SIGBUS" : "";
        r.root_cause = true;  // the process mpirun saw die first
        exits.push_back(r);
        return true;
      }
    }
    // srun: "srun: error: node3: task 5: Exited with exit code 2", or the signal's text ("Killed", "Segmentation
    // fault"), from Slurm's launch plugin (launch_slurm.c, _task_finish); the task id is the rank under srun
    static const re2::RE2& srun_re = exit_report("srun_task");
    // The code is read as text: RE2 fails a whole match when an int argument's group took no part in it,
    // which hid every "Killed" / "Segmentation fault" task (only "Exited with exit code N" was read).
    std::string host, what, code_text;
    int task = 0, code = 0;
    if (contains(t, "srun: error:") && re2::RE2::PartialMatch(sp, srun_re, &host, &task, &code_text, &what)) {
      auto r = new_record("srun", line_no);
      r.rank = task;
      r.host = host;
      if (!code_text.empty() && code_text.size() < 10) code = std::stoi(code_text);
      if (what.empty()) r.exitcode = code;
      else r.signal = what == "Killed" ? "SIGKILL" : what == "Segmentation fault" ? "SIGSEGV" : what == "Aborted" ? "SIGABRT" : "SIGTERM";
      r.exitcode = what.empty() ? code : what == "Killed" ? -9 : what == "Segmentation fault" ? -11 : what == "Aborted" ? -6 : -15;
      exits.push_back(r);
    }
    // torch.distributed.launch (before torchelastic) / DeepSpeed's old launcher: CalledProcessError with the exit
    // status of the first worker, in spawn order, that failed. Its command is NOT that worker's: both build `cmd`
    // in the spawn loop and raise CalledProcessError(returncode=process.returncode, cmd=cmd) after it, so the
    // --local_rank printed is always the last one spawned (torch/distributed/launch.py of torch 1.x, main();
    // deepspeed/launcher/launch.py before 0.5). The record says a worker failed, and names no rank.
    static const re2::RE2& cpe_re = exit_report("called_process_error");
    int lr = 0;
    if (contains(t, "CalledProcessError") && re2::RE2::PartialMatch(sp, cpe_re, &lr, &code)) {
      auto r = new_record("launch", line_no);
      r.exitcode = code;
      r.from_agent_line = true;
      exits.push_back(r);
    }
    // A launcher that runs one Python worker and waits for it (accelerate's simple_launcher,
    // torch.distributed.launch, DeepSpeed's old launcher) raises CalledProcessError, whose text for a worker
    // killed by a signal is "Command '[...]' died with <Signals.SIGKILL: 9>." (CPython subprocess.py): an exit
    // record with the signal, no rank (the command names none).
    static const re2::RE2& cps_re = exit_report("called_process_signal");
    std::string cps_signal;
    int cps_number = 0;
    if (contains(t, "died with <Signals.") && re2::RE2::PartialMatch(sp, cps_re, &cps_signal, &cps_number)) {
      auto r = new_record("launch", line_no);
      r.exitcode = -cps_number;
      r.signal = cps_signal;
      r.from_agent_line = true;
      exits.push_back(r);
    }
    // horovodrun's Gloo launcher (horovod/runner/gloo_run.py, _exec_command): "Process {idx} exit with status code
    // {ec}." for each worker that exits non-zero, idx being its rank; each is printed as its process ends, so the
    // first printed is the first to fail (the launcher then terminates the others and says so).
    static const re2::RE2& hvd_re = exit_report("horovod_process_exit");
    int hvd_rank = 0, hvd_code = 0;
    if (contains(t, "exit with status code") && re2::RE2::PartialMatch(sp, hvd_re, &hvd_rank, &hvd_code)) {
      auto r = new_record("horovod", line_no);
      r.rank = hvd_rank;
      // The worker runs under a shell (safe_shell_exec: Popen(shell=True)), so a signal N shows as 128+N.
      r.exitcode = hvd_code;
      r.signal = hvd_code == 137 ? "SIGKILL" : hvd_code == 139 ? "SIGSEGV" : hvd_code == 134 ? "SIGABRT" : hvd_code == 135 ? "SIGBUS" : hvd_code == 143 ? "SIGTERM" : "";
      r.root_cause = std::none_of(exits.begin(), exits.end(), [](const exit_record& e) { return e.launcher == "horovod"; });
      exits.push_back(r);
    }
    // DeepSpeed's launcher once a worker failed (deepspeed/launcher/launch.py, sigkill_handler): "{cmd} exits with
    // return code = {code}", the failed worker's status (negative: the signal that ended it). `cmd` is again the
    // last worker spawned, so the record names no rank.
    static const re2::RE2& ds_re = exit_report("deepspeed_exit");
    int ds_code = 0;
    if (contains(t, "exits with return code") && re2::RE2::PartialMatch(sp, ds_re, &ds_code)) {
      auto r = new_record("deepspeed", line_no);
      r.exitcode = ds_code;
      r.signal = ds_code == -9 ? "SIGKILL" : ds_code == -11 ? "SIGSEGV" : ds_code == -6 ? "SIGABRT" : ds_code == -7 ? "SIGBUS" : ds_code == -15 ? "SIGTERM" : "";
      r.from_agent_line = true;
      exits.push_back(r);
    }
  }

  return false;
}

// torchelastic agent lines: a worker's failure, and the pids the agent sent a closing signal.
void extractor::feed_agent_line(std::string_view t, std::uint64_t line_no, std::vector<exit_record>& exits,
                                std::vector<terminated_pid>& terms) {
  {
    static const re2::RE2& failed_re = exit_report("torchelastic_worker_failed");
    static const re2::RE2& sigterm_re = exit_report("torchelastic_closing_signal");
    re2::StringPiece sp(t.data(), t.size());
    int ec = 0, lr = 0, pid = 0;
    if (re2::RE2::PartialMatch(sp, failed_re, &ec, &lr, &pid)) {
      auto r = new_record("torchelastic", line_no);
      r.exitcode = ec;
      r.local_rank = lr;
      r.pid = pid;
      r.from_agent_line = true;
      exits.push_back(r);
    } else if (re2::RE2::PartialMatch(sp, sigterm_re, &pid)) {
      terms.push_back({pid, source_, line_no});
    }
  }

}

// Stack dumps (py-spy dump, faulthandler): the top frame of each thread. True when the line was consumed.
bool extractor::feed_stack_dump(std::string_view t, line_note& note) {
  if (dump_header_ > 0 && !t.empty()) {
    static const re2::RE2 pyspy_frame(R"re(^([\w<>.]+) \(([^():]+):\d+\))re"), fh_frame(R"re(^File "([^"]+)", line \d+ in ([\w<>.]+))re");
    re2::StringPiece sp(t.data(), t.size());
    std::string fn, file;
    bool main = dump_header_ == 2;
    dump_header_ = 0;
    if (re2::RE2::PartialMatch(sp, pyspy_frame, &fn, &file) || re2::RE2::PartialMatch(sp, fh_frame, &file, &fn)) {
      note.top = stack_top{fn, file, main, std::string(t.substr(0, limits::kLastLineBytes))};
      return true;
    }
  }
  if (starts_with(t, "Thread ") || starts_with(t, "Current thread ")) {
    static const re2::RE2 header(R"re(^(?:Current thread|Thread) (?:0x[0-9a-fA-F]+|\d+) \((?:most recent call first|idle|active|active\+gil|gil)\)(?::? "([^"]*)"|:))re");
    std::string name;
    if (re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), header, &name)) {
      dump_header_ = (name == "MainThread" || starts_with(t, "Current thread ")) ? 2 : 1;
      return true;
    }
  }

  return false;
}

// C++ exception frames ("Exception raised from ...", "frame #N"). True when the line was consumed.
bool extractor::feed_cpp_frames(std::string_view t, line_note& note) {
  if (starts_with(t, "Exception raised from ") && contains(t, "(most recent call first)")) {
    in_frames_ = true;
    note.skip_match = true;
    return true;
  }
  if (in_frames_) {
    if (starts_with(t, "frame #") || t.empty()) {
      note.skip_match = true;
      return true;
    }
    in_frames_ = false;
  }

  return false;
}

// Python tracebacks and the exception line that ends one. True when the line was consumed.
bool extractor::feed_traceback(std::string_view t, std::string_view body, line_note& note) {
  // A DataLoader worker's exception re-raised in the main process prints the worker's own traceback after
  // it as "Original Traceback (most recent call last):" (torch/_utils.py, ExceptionWrapper.reraise): the same
  // record, chained. Inside an agent's failure block the entry parser reads the lines instead.
  bool original = block_ == block::none && starts_with(t, "Original Traceback (most recent call last):");
  if (original) chained_ = true;
  // A traceback pasted without its header (an excerpt that starts mid-stack, or two ranks' stacks interleaved
  // on one console) still has Python's frame lines, indented: 'File "PATH", line N, in FUNC' (traceback.py,
  // StackSummary.format). The first such frame opens the record as the header would.
  static const re2::RE2 frame_line(R"re(^File "[^"]+", line \d+, in \S)re");
  bool headless = !in_tb_ && block_ == block::none && !body.empty() && (body[0] == ' ' || body[0] == '\t') &&
                  starts_with(t, "File \"") && re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), frame_line);
  if (headless) {
    tb_record_ = next_record_++;
    chained_ = false;
    tb_collective_.clear();
    tb_calls_.clear();
    in_tb_ = true;
    after_exception_ = false;
  }
  if (starts_with(t, "Traceback (most recent call last):") || original) {
    if (!chained_ || tb_record_ < 0) tb_record_ = next_record_++;
    chained_ = false;
    tb_collective_.clear();
    tb_calls_.clear();
    in_tb_ = true;
    after_exception_ = false;
    note.record = tb_record_;
    note.skip_match = true;
    return true;
  }
  if (in_tb_) {
    note.record = tb_record_;
    bool indented = !body.empty() && (body[0] == ' ' || body[0] == '\t');
    if (indented || t.empty() || t == "^" || starts_with(t, "~~~") || starts_with(t, "^^^") ||
        starts_with(t, "...")) {
      note.skip_match = true;  // File "...", line N / source line / caret markers
      static const re2::RE2 c10d_frame(R"(torch/distributed/distributed_c10d\.py", line \d+, in (\w+))");
      std::string fn;
      if (contains(t, "distributed_c10d.py") && re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), c10d_frame, &fn) &&
          fn != "wrapper")
        tb_collective_ = fn;
      // The user's call site of a collective, as its source line shows it ("torch.distributed.barrier(group=g)",
      // "dist.all_reduce(t)"): the call, even when the frame inside torch.distributed was cut from the paste.
      static const re2::RE2 call_site(R"(^(?:[\w.\[\], ]+=\s*)?(?:torch\.distributed|dist)\.(\w+)\()");
      std::string site;
      if (fn.empty() && contains(t, "dist") && re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), call_site, &site)) fn = site;
      if (!fn.empty() && fn != "wrapper") {
        bool seen = false;
        for (std::string_view rest = tb_calls_; !rest.empty();) {
          auto comma = rest.find(',');
          if (rest.substr(0, comma) == fn) { seen = true; break; }
          rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        }
        if (!seen && tb_calls_.size() < 256) tb_calls_ += (tb_calls_.empty() ? "" : ",") + fn;
      }
      // Autograd's backward engine: under DistributedDataParallel the gradients are all-reduced by the
      // reducer's hooks while backward runs (https://pytorch.org/docs/stable/notes/ddp.html, "Backward Pass"),
      // so a collective error raised there was raised in DDP's gradient all-reduce. The innermost frame wins,
      // as for distributed_c10d (torch/autograd/__init__.py backward; torch/autograd/graph.py
      // _engine_run_backward since torch 2.3).
      static const re2::RE2 autograd_frame(R"(torch/autograd/(?:__init__|graph)\.py", line \d+, in (?:backward|_engine_run_backward)\b)");
      if (contains(t, "torch/autograd/") && re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), autograd_frame))
        tb_collective_ = "backward";
      return true;
    }
    if (looks_like_exception(t) || contains(t, "Error: ") || contains(t, "Exception: ")) {
      note.exception_line = true;
      note.collective = tb_collective_;
      note.calls = tb_calls_;
      in_tb_ = false;
      after_exception_ = true;
      return true;
    }
    // An unexpected unindented line: the traceback ended without a recognisable exception line.
    in_tb_ = false;
    note.record = -1;
    return true;
  }
  if (after_exception_) {
    if (starts_with(t, "During handling of the above exception") || starts_with(t, "The above exception was the direct cause")) {
      note.record = tb_record_;
      note.skip_match = true;
      chained_ = true;
      return true;
    }
    // The C++ runtime's last words right after the exception: the same process aborts (a c10::Error thrown
    // from a destructor while Python unwinds: torch.save's stream writer closing a file on a full disk).
    static const re2::RE2& terminate_re = exit_report("cxx_terminate");
    if (!t.empty() && re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), terminate_re)) note.aborted = true;
    if (!t.empty()) after_exception_ = false;
  }
  return false;
}

}  // namespace ff::extract
