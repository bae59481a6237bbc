// Runs a worker as a child process: fork/exec, its stdout read line by line as it comes, its stderr kept for the
// error message, a hard time limit, and its peak RSS from wait4's rusage.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tern_bench {

struct child_result {
    bool started = false;        // false when fork/exec failed; `error` says why
    int exit_code = -1;          // valid when exited
    int term_signal = 0;         // non-zero when killed by a signal
    bool timed_out = false;      // killed by us after the time limit
    long peak_rss_bytes = 0;     // ru_maxrss of the child
    double wall_seconds = 0;
    std::string stderr_text;
    std::string error;

    bool ok() const { return started && !timed_out && term_signal == 0 && exit_code == 0; }
    std::string describe() const;  // one line: how it ended
};

child_result run_child(const std::string& exe, const std::vector<std::string>& args,
                       const std::function<void(std::string_view line)>& on_line, double time_limit_s);

// The directory holding the running executable (from /proc/self/exe), where the workers are installed.
std::string self_directory();

}  // namespace tern_bench
