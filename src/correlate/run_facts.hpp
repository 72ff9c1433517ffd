// Facts of one run that make a fix, a verify command or a report sentence concrete: the script the job ran,
// the ranks per node, the checkpoint directory, where training stood at the end and how fast it went.
// Internal to the correlate stage (correlator.cpp fills templates with them).
#pragma once
#include <optional>
#include <string>

#include "firstfault/correlate_rules.hpp"

namespace ff::correlate {

/// The value of one run fact by its placeholder name, or "" when the run's lines do not establish it (the
/// template that needs it is then shown with its fallback, or left out; never a guess):
///  - `script`: the script the job ran, as a traceback printed it (extract::line_note::entry_script);
///  - `nproc`: processes per node: none yet (the ranks an excerpt shows are not the job's; see run_facts.cpp);
///  - `ckpt_dir`: the directory of the last checkpoint path a line named (an errno message's file, a
///    "saving checkpoint to" or "saved checkpoint" line), the initiating rank's when it named one;
///  - `progress.step`, `progress.planned`: the last progress line's step and the steps planned;
///  - `progress.step_time`: the time per step it states ("127.8 s"), `progress.needed`: planned steps times
///    that ("35.5 h"), `progress.left`: the steps still to go times that.
/// `rank` is the initiating rank, when known.
std::string run_value(const rules::context& ctx, std::optional<int> rank, const std::string& name);

/// "42 s", "7.5 min", "35.5 h", "3.2 days": a duration in seconds as an engineer says it.
std::string human_duration(double seconds);

/// The directory part of a path as a command takes it: "ckpt/epoch_001.pt" -> "ckpt", "/ckpt/a.pt" ->
/// "/ckpt", "a.pt" -> ".".
std::string dir_of(const std::string& path);

}  // namespace ff::correlate
