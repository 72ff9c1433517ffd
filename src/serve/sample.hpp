// The sample log that the web page offers to try (examples/logs/oom_among_timeouts/pasted.log, compiled in by
// cmake/embed_file.cmake): an 8-GPU job whose loudest lines are NCCL timeouts, failed by a CUDA out-of-memory
// error on rank 2. The form asks for it with the field sample=1; no path ever comes from the client.
#pragma once

#include <string_view>

namespace ff::serve {

extern const std::string_view kSampleLog;
/// The name the sample has in the report (its file in the upload directory).
inline constexpr std::string_view kSampleName = "oom_among_timeouts.log";

}  // namespace ff::serve
