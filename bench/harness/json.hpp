// Minimal JSON for tern-bench: writing records and reading the workers' result lines.
//
// Workers talk to the orchestrator in JSON lines, and --json writes one record per line. Both shapes are small
// flat objects, so this is a deliberately small value type and a strict recursive-descent parser, not a
// general-purpose library.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tern_bench::json {

class value;
using array = std::vector<value>;
// Keys stay sorted; record writing does not go through this type, so order never matters for output.
using object = std::map<std::string, value, std::less<>>;

class value {
public:
    value() = default;
    value(std::nullptr_t) {}
    value(bool b) : v_(b) {}
    value(double d) : v_(d) {}
    value(std::string s) : v_(std::move(s)) {}
    value(const char* s) : v_(std::string(s)) {}  // without it a string literal would silently become a bool
    value(array a) : v_(std::move(a)) {}
    value(object o) : v_(std::move(o)) {}

    bool is_null() const { return std::holds_alternative<std::nullptr_t>(v_); }
    bool is_number() const { return std::holds_alternative<double>(v_); }
    bool is_string() const { return std::holds_alternative<std::string>(v_); }
    bool is_object() const { return std::holds_alternative<object>(v_); }
    bool is_array() const { return std::holds_alternative<array>(v_); }

    double as_number() const { return std::get<double>(v_); }
    bool as_bool() const { return std::get<bool>(v_); }
    const std::string& as_string() const { return std::get<std::string>(v_); }
    const object& as_object() const { return std::get<object>(v_); }
    const array& as_array() const { return std::get<array>(v_); }

    // The member `key` of an object, or nullptr when absent or when this is not an object.
    const value* find(std::string_view key) const;

private:
    std::variant<std::nullptr_t, bool, double, std::string, array, object> v_;
};

// Parses one JSON document; on failure returns nullopt and describes the problem in *error.
std::optional<value> parse(std::string_view text, std::string* error = nullptr);

// `s` as a JSON string literal, quotes included.
std::string quote(std::string_view s);

// A number in the shortest form that reads back to the same double; non-finite values become null.
std::string number(double d);

// Builds one JSON object in insertion order: {"a": 1, "b": "x"}.
class object_writer {
public:
    object_writer& field(std::string_view key, std::string_view text);  // a string value
    object_writer& field(std::string_view key, const char* text) { return field(key, std::string_view(text)); }
    object_writer& field(std::string_view key, double d);
    object_writer& field(std::string_view key, std::int64_t i);
    object_writer& field(std::string_view key, int i) { return field(key, static_cast<std::int64_t>(i)); }
    object_writer& raw(std::string_view key, std::string_view json);  // an already-encoded value
    std::string str() const { return out_ + "}"; }

private:
    void key(std::string_view k);
    std::string out_ = "{";
};

}  // namespace tern_bench::json
