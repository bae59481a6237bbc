#include "callgrind.hpp"

#include <cstdlib>
#include <fstream>
#include <string_view>
#include <unordered_map>

namespace tern_bench {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The value of a name line (ob=, fn=...) with string compression: "(id) name" defines id, "(id)" refers to it.
std::string resolve_name(std::string_view v, std::unordered_map<std::string, std::string>& names) {
    if (v.empty() || v.front() != '(') return std::string(v);
    auto close = v.find(')');
    if (close == std::string_view::npos) return std::string(v);
    std::string id(v.substr(1, close - 1));
    std::string_view rest = v.substr(close + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (!rest.empty()) names[id] = std::string(rest);
    auto it = names.find(id);
    return it == names.end() ? "(" + id + ")" : it->second;
}

// The tokens of a line separated by blanks.
std::size_t count_tokens(std::string_view s) {
    std::size_t n = 0;
    bool in = false;
    for (char c : s) {
        bool blank = c == ' ' || c == '\t';
        if (!blank && !in) ++n;
        in = !blank;
    }
    return n;
}

// The n-th token (0-based), or an empty view.
std::string_view token(std::string_view s, std::size_t n) {
    std::size_t i = 0;
    while (true) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
        if (i == s.size()) return {};
        std::size_t j = i;
        while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
        if (n-- == 0) return s.substr(i, j - i);
        i = j;
    }
}

}  // namespace

std::optional<callgrind_counts> read_callgrind(const std::string& path, std::string& error) {
    std::ifstream in(path);
    if (!in) {
        error = "cannot open " + path;
        return std::nullopt;
    }
    callgrind_counts out;
    std::unordered_map<std::string, std::string> objects;
    std::string object = "???";
    std::size_t positions = 1;  // "positions: line" unless the file says otherwise
    bool events_seen = false;
    bool after_calls = false;
    std::optional<std::uint64_t> totals;
    std::uint64_t self_sum = 0;
    std::string line;
    while (std::getline(in, line)) {
        std::string_view l = line;
        if (l.empty() || l.front() == '#') continue;
        const char c = l.front();
        if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '*') {
            if (after_calls) {  // the inclusive cost of the call above
                after_calls = false;
                continue;
            }
            std::string_view ir = token(l, positions);
            if (ir.empty()) continue;  // no event on this line: zero
            const std::uint64_t v = std::strtoull(std::string(ir).c_str(), nullptr, 10);
            out.by_object[object] += v;
            self_sum += v;
            continue;
        }
        after_calls = false;
        if (starts_with(l, "ob=")) {
            object = resolve_name(l.substr(3), objects);
        } else if (starts_with(l, "cob=")) {
            resolve_name(l.substr(4), objects);  // defines a name that later ob= lines may use
        } else if (starts_with(l, "calls=")) {
            after_calls = true;
        } else if (starts_with(l, "positions:")) {
            positions = count_tokens(l.substr(10));
        } else if (starts_with(l, "events:")) {
            if (token(l.substr(7), 0) != "Ir") {
                error = path + ": the first event is not Ir: " + line;
                return std::nullopt;
            }
            events_seen = true;
        } else if (starts_with(l, "totals:")) {
            totals = std::strtoull(std::string(token(l.substr(7), 0)).c_str(), nullptr, 10);
        }
    }
    if (!events_seen) {
        error = path + " is not a callgrind file (no events: line)";
        return std::nullopt;
    }
    out.total = totals.value_or(self_sum);
    if (totals && *totals != self_sum) {
        error = path + ": the cost lines sum to " + std::to_string(self_sum) + ", the file's total is " +
                std::to_string(*totals);
        return std::nullopt;
    }
    return out;
}

}  // namespace tern_bench
