// firstfault/extract.hpp: group multi-line records and pull structured facts out of them.
//
// Stage 3. Runs per stream, after normalisation, on line bodies. It recognises:
//  - Python tracebacks ("Traceback (most recent call last):" ... "XxxError: msg", with chained
//    "During handling of the above exception" / "The above exception was the direct cause" parts);
//  - C++ "Exception raised from ... (most recent call first):" followed by "frame #N:" lines;
//  - the torchelastic ChildFailedError block (each failure: time, host, rank, local_rank, exit code,
//    signal, and whether it is the "Root Cause (first observed failure)");
//  - torchelastic agent lines "failed (exitcode: N) local_rank: L (pid: P)" and
//    "Sending process P closing signal SIGTERM".
// Frame and source lines inside a record are marked so that the matcher skips them: a stack that
// passes through a function called "oom_handler" is not an OOM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ff::extract {

/// One failed worker as its launcher reported it: torchelastic's ChildFailedError block and agent lines
/// (https://pytorch.org/docs/stable/elastic/errors.html; ../shared/reference/log_formats.md §4), mpirun's
/// "The first process to do so was" block (Open MPI orte/tools/orterun help-orterun.txt), srun's
/// "error: NODE: task N: Exited with exit code C" (https://slurm.schedmd.com/srun.html), and the
/// `CalledProcessError: Command '[..., '--local_rank=L', ...]' returned non-zero exit status C` of
/// torch.distributed.launch and DeepSpeed's launcher.
struct exit_record {
  std::optional<int> rank, local_rank, exitcode, pid;
  std::string host, time, signal;  ///< time as printed (YYYY-MM-DD_HH:MM:SS, local); signal e.g. "SIGKILL"
  bool root_cause = false;         ///< listed under "Root Cause (first observed failure)"
  bool from_agent_line = false;    ///< from "failed (exitcode: ...)" rather than the block
  std::string launcher = "torchelastic";  ///< torchelastic | mpirun | srun | launch (CalledProcessError) | deepspeed
  std::string source;
  std::uint64_t line_no = 0;
  std::optional<int> attempt;  ///< torchrun restart attempt of the file it came from (attempt_N), if known
  /// The worker ended with an error or a signal (any exit code but 0).
  bool failed() const { return exitcode && *exitcode != 0; }
};

/// A pid that torchelastic sent SIGTERM while tearing the job down (the worker was still alive).
struct terminated_pid {
  int pid = 0;
  std::string source;
  std::uint64_t line_no = 0;
};

/// What the extractor says about one line.
/// The innermost frame of one thread in a stack dump: py-spy's `Thread N (idle): "MainThread"` followed by
/// `    func (file.py:line)` (https://github.com/benfred/py-spy#how-does-py-spy-work, `py-spy dump`), or
/// faulthandler's `Thread 0x... (most recent call first):` / `Current thread 0x...` followed by
/// `  File "file.py", line N in func` (https://docs.python.org/3/library/faulthandler.html).
struct stack_top {
  std::string function, file;
  bool main_thread = false;  ///< py-spy's "MainThread", or faulthandler's "Current thread"
  std::string text;          ///< the frame line as printed
};

struct line_note {
  bool skip_match = false;     ///< a frame/source line inside a record; not matched
  bool exception_line = false; ///< the "XxxError: msg" line that ends a Python traceback
  int record = -1;             ///< record id within this stream, -1 for a plain line
  std::optional<int> rank;     ///< rank of the ChildFailedError entry this line belongs to
  std::string collective;      ///< on an exception line: the torch.distributed call the stack was in (all_reduce, barrier, ...; "backward" for autograd's engine, where DDP all-reduces gradients)
  /// On an exception line: every torch.distributed call its traceback went through, in order of first sight,
  /// comma-separated: distributed_c10d.py frames ("in broadcast") and call sites ("torch.distributed.barrier(",
  /// "dist.all_reduce("). One rank's stack names one collective (the call and its own helpers); two ranks'
  /// tracebacks interleaved on one console name each rank's own.
  std::string calls;
  /// On the first frame of a thread in a stack dump (py-spy dump, faulthandler): that innermost frame.
  std::optional<struct stack_top> top;
  /// On a line that looks like a Python exception ("KeyError: 'label'") after traceback frames: the deepest
  /// frame of the user's own code above it ("train.py:39 in __getitem__: return ..., rec["label"]"), not a
  /// frame of an installed library (site-packages, dist-packages, the standard library). Empty when none.
  std::string user_frame;
  /// With user_frame: the path of the script the job ran, as the traceback prints it (the user's frame "in
  /// <module>", or "in main" under a wrapper), for commands that rerun it. Empty when no such frame was seen.
  std::string entry_script;
  /// A traceback chained to the exception this stream printed last follows. `original`: a DataLoader worker's
  /// exception re-raised in the main process ("Original Traceback"), whose own exception explains the one
  /// printed; `context`: "During handling of the above exception" or "The above exception was the direct
  /// cause", where the first exception stays the cause and only the user's frame may be new.
  enum class chain_kind { none, context, original } chain = chain_kind::none;
  /// libstdc++'s "terminate called after throwing an instance of 'T'" right after this stream's exception line
  /// (blank lines between allowed): the process that printed that traceback then called abort(), so it ended
  /// by SIGABRT (row cxx_terminate of kb/_tables/exit_reports.tsv).
  bool aborted = false;
};

class extractor {
 public:
  explicit extractor(std::string source) : source_(std::move(source)) {}
  /// Feeds one line body (prefixes peeled). Facts found are appended to the vectors.
  void feed(std::string_view body, std::uint64_t line_no, line_note& note, std::vector<exit_record>& exits,
            std::vector<terminated_pid>& terms);
  /// True when no record is open: a line that none of gate_patterns() hits changes nothing here.
  bool idle() const {
    return !in_tb_ && !after_exception_ && !in_frames_ && dump_header_ == 0 && !mpi_first_ && block_ == block::none &&
           !entry_ && !mpi_entry_;
  }

 private:
  void flush_entry(std::vector<exit_record>& exits);
  // The steps of feed(), one kind of record each; a bool one returns true when it consumed the line.
  void feed_user_frame(std::string_view t, line_note& note);
  bool feed_failure_block(std::string_view t, std::uint64_t line_no, line_note& note, std::vector<exit_record>& exits);
  bool feed_launcher_exit(std::string_view t, std::uint64_t line_no, std::vector<exit_record>& exits);
  void feed_agent_line(std::string_view t, std::uint64_t line_no, std::vector<exit_record>& exits,
                       std::vector<terminated_pid>& terms);
  bool feed_stack_dump(std::string_view t, line_note& note);
  bool feed_cpp_frames(std::string_view t, line_note& note);
  bool feed_traceback(std::string_view t, std::string_view body, line_note& note);
  exit_record new_record(const char* launcher, std::uint64_t line_no) const;
  std::string source_;
  int next_record_ = 0;
  // Python traceback state
  bool in_tb_ = false;
  int tb_record_ = -1;
  bool after_exception_ = false;
  bool chained_ = false;
  // the deepest user frame seen since the last exception line (see line_note::user_frame)
  std::string user_frame_;
  std::string entry_script_;  // the first user frame at module level or in main() (line_note::entry_script)
  bool want_code_ = false;
  std::string tb_calls_;       // every torch.distributed call of the current traceback (line_note::calls)
  std::string tb_collective_;  // innermost distributed_c10d.py frame of the current traceback  // a "During handling..."/"direct cause" line joined the next traceback
  // C++ frames
  bool in_frames_ = false;
  // a stack dump's thread header was the previous line: the next frame is that thread's innermost
  int dump_header_ = 0;  // 0 none, 1 other thread, 2 main thread
  // mpirun's "The first process to do so was:" block
  bool mpi_first_ = false;
  std::optional<exit_record> mpi_entry_;
  // ChildFailedError block
  enum class block { none, header, failures, root_cause } block_ = block::none;
  std::optional<exit_record> entry_;
};

}  // namespace ff::extract

namespace ff::extract {

/// How strongly an unmatched line looks like a failure to an on-call engineer reading it cold.
enum class suspicion {
  none,    ///< informational, progress, or a warning (warnings do not page anyone)
  weak,    ///< an error word or an error level, a failed state or a non-zero exit
  strong,  ///< an exception line, a crash (segfault, abort, core dump, Fatal), an NCCL WARN
};

/// Classifies one line body (prefixes peeled). `level` is the header's level letter ('I','W','E','F')
/// or 0. Zero counts ("0 errors", "failed=0") and warnings are not failures; NCCL's "NCCL WARN" is
/// its error level (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-debug).
suspicion classify_line(std::string_view body, char level);

/// A Python exception line after any prefix: "...: KeyError: 'x'", "[1,0]<stderr>:ValueError: bad".
/// Returns the exception type (e.g. "KeyError") or an empty view. Source lines (`raise KeyError(`)
/// and warning categories (`UserWarning:`) are not exception lines.
std::string_view exception_type(std::string_view body);

/// Drain-style line template (He et al., "Drain: An Online Log Parsing Approach with Fixed Depth
/// Tree", ICWS 2017): numbers, hex ids, paths, addresses and quoted values become "<*>", so the
/// same message from many ranks groups into one template.
/// `body` is valid UTF-8 (sanitized text): a quoted value counts characters, as the regexp does.
std::string line_template(std::string_view body);
namespace detail {
/// line_template() by the regexp it implements (RE2::GlobalReplace), for the tests that compare the two.
std::string line_template_by_regex(std::string_view body);
}  // namespace detail

/// Progress a line reports: the step reached ("step 79", "iteration: 12", "global_step=300") and the steps
/// planned ("step 79/5000", "Epoch 0: 12/100", "5 batches"). The rules are regexps (progress.cpp); on
/// printable-ASCII lines an equivalent hand scan gives the same answer without running them.
struct progress {
  std::optional<long> step, planned;
};
/// `plain`: the caller knows the body is printable ASCII (text::is_plain), so it is not checked again.
progress read_progress(std::string_view body, bool plain = false);
/// read_progress()'s two halves, for a caller that needs the planned count of every line but the step of
/// only the last line that has one (the pipeline's light path: it looks for the step walking back from a
/// rank's last line). read_step(b).step and read_planned(b) are read_progress(b)'s step and planned.
std::optional<long> read_step(std::string_view body, bool plain = false);
std::optional<long> read_planned(std::string_view body);
/// Where read_step(body, true) reads its number in a printable-ASCII body: `found` false when it finds no
/// step, else the digits at [at, at + len), whose value step_value() gives (read_step(body, true) ==
/// step_value(body.substr(at, len)) when found). Digit-blind: which digits stand in the body does not move
/// the span (the words, spaces and separators decide it), so a caller may keep it per line shape.
struct step_span {
  bool found = false;
  std::size_t at = 0, len = 0;
};
step_span find_step(std::string_view ascii_body);
/// The value of a run of ASCII digits as read_step() reads it: empty when it does not fit a long.
std::optional<long> step_value(std::string_view digits);
/// False when read_planned(body) is empty for certain: no '/' with a digit on each side (spaces between) and
/// no " batches", or none of the words its rules start from (step, iter, batch; a tqdm bar's "450/1000"
/// alone plans nothing). Digit-blind (which digits stand there does not matter), and a text that contains `body`
/// answers true whenever `body` does: the light path asks it once per line shape of the catalogue's body.
bool may_plan(std::string_view body);
namespace detail {
progress read_progress_by_regex(std::string_view body);  ///< the regexps alone (tests compare the two)
}

/// The scan gate's patterns for this stage (Vectorscan regexps, see gate.hpp): every literal a record of
/// extractor::feed() starts with, and every word classify_line() and exception_type() need. A line none of
/// them hits neither opens a record nor looks like a failure (unless its prefix gives an error level).
std::vector<std::string> gate_patterns();

}  // namespace ff::extract
