// Reads the file callgrind writes (its "callgrind format", valgrind's docs: Callgrind Format Specification): the
// total of the first event (Ir, instructions executed) and the same total per ELF object, for tern-bench
// --instructions.
//
// Per object: each cost line belongs to the function named by the last fn= line and to the object named by the
// last ob= line; a cost line right after a calls= line is the inclusive cost of a call (counted again in the
// callee's own lines), so it is skipped. Summed, the self costs are the file's total, which the reader checks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tern_bench {

struct callgrind_counts {
    std::uint64_t total = 0;                           // instructions in the dump
    std::map<std::string, std::uint64_t> by_object;   // the same by ELF object (full path), self cost
};

// Nullopt with `error` set when the file cannot be read or is not what callgrind writes.
std::optional<callgrind_counts> read_callgrind(const std::string& path, std::string& error);

}  // namespace tern_bench
