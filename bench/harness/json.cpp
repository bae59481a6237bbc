#include "json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace tern_bench::json {

const value* value::find(std::string_view key) const {
    if (!is_object()) return nullptr;
    const auto& o = as_object();
    auto it = o.find(key);
    return it == o.end() ? nullptr : &it->second;
}

namespace {

// Each parse_* fills `out` and returns true, or records an error and returns false. (Returning
// std::optional<value> instead trips g++ 12's -Wmaybe-uninitialized false positive on variants in optionals.)
class parser {
public:
    explicit parser(std::string_view text) : s_(text) {}

    std::optional<value> document(std::string* error) {
        value v;
        bool ok = parse_value(0, v);
        skip_space();
        if (ok && pos_ != s_.size()) fail("trailing characters");
        if (!error_.empty()) {
            if (error) *error = error_ + " at offset " + std::to_string(pos_);
            return std::nullopt;
        }
        return v;
    }

private:
    // Deep nesting never occurs in tern-bench's own lines; the bound keeps a corrupt line from exhausting the stack.
    static constexpr int max_depth = 32;

    bool fail(const char* what) {
        if (error_.empty()) error_ = what;
        return false;
    }
    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }
    bool consume(std::string_view word) {
        if (s_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    bool parse_value(int depth, value& out) {
        if (depth > max_depth) return fail("nesting too deep");
        skip_space();
        if (pos_ >= s_.size()) return fail("unexpected end");
        char c = s_[pos_];
        if (c == '{') return parse_object(depth, out);
        if (c == '[') return parse_array(depth, out);
        if (c == '"') {
            std::string str;
            if (!parse_string(str)) return false;
            out = value(std::move(str));
            return true;
        }
        if (consume("true")) {
            out = value(true);
            return true;
        }
        if (consume("false")) {
            out = value(false);
            return true;
        }
        if (consume("null")) {
            out = value(nullptr);
            return true;
        }
        return parse_number(out);
    }

    bool parse_number(value& out) {
        double d = 0;
        auto [end, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), d);
        if (ec != std::errc() || end == s_.data() + pos_) return fail("bad value");
        pos_ = static_cast<std::size_t>(end - s_.data());
        out = value(d);
        return true;
    }

    bool parse_string(std::string& out) {
        ++pos_;  // opening quote
        while (pos_ < s_.size()) {
            char c = s_[pos_++];
            if (c == '"') return true;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) break;
            char e = s_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    // Only the BMP is needed here (our own writer never emits surrogate pairs).
                    if (pos_ + 4 > s_.size()) return fail("bad escape");
                    unsigned cp = 0;
                    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, cp, 16);
                    if (ec != std::errc() || p != s_.data() + pos_ + 4) return fail("bad escape");
                    pos_ += 4;
                    if (cp < 0x80) {
                        out += static_cast<char>(cp);
                    } else if (cp < 0x800) {
                        out += static_cast<char>(0xC0 | (cp >> 6));
                        out += static_cast<char>(0x80 | (cp & 0x3F));
                    } else {
                        out += static_cast<char>(0xE0 | (cp >> 12));
                        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                        out += static_cast<char>(0x80 | (cp & 0x3F));
                    }
                    break;
                }
                default: return fail("bad escape");
            }
        }
        return fail("unterminated string");
    }

    bool parse_array(int depth, value& out) {
        ++pos_;
        array a;
        skip_space();
        if (!consume("]")) {
            for (;;) {
                value v;
                if (!parse_value(depth + 1, v)) return false;
                a.push_back(std::move(v));
                skip_space();
                if (consume(",")) continue;
                if (consume("]")) break;
                return fail("expected , or ]");
            }
        }
        out = value(std::move(a));
        return true;
    }

    bool parse_object(int depth, value& out) {
        ++pos_;
        object o;
        skip_space();
        if (!consume("}")) {
            for (;;) {
                skip_space();
                if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected key");
                std::string k;
                if (!parse_string(k)) return false;
                skip_space();
                if (!consume(":")) return fail("expected :");
                value v;
                if (!parse_value(depth + 1, v)) return false;
                o.insert_or_assign(std::move(k), std::move(v));
                skip_space();
                if (consume(",")) continue;
                if (consume("}")) break;
                return fail("expected , or }");
            }
        }
        out = value(std::move(o));
        return true;
    }

    std::string_view s_;
    std::size_t pos_ = 0;
    std::string error_;
};

}  // namespace

std::optional<value> parse(std::string_view text, std::string* error) { return parser(text).document(error); }

std::string quote(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    out += '"';
    return out;
}

std::string number(double d) {
    if (!std::isfinite(d)) return "null";
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
    return std::string(buf, ec == std::errc() ? end : buf);
}

void object_writer::key(std::string_view k) {
    if (out_.size() > 1) out_ += ", ";
    out_ += quote(k);
    out_ += ": ";
}

object_writer& object_writer::field(std::string_view k, std::string_view text) {
    key(k);
    out_ += quote(text);
    return *this;
}

object_writer& object_writer::field(std::string_view k, double d) {
    key(k);
    out_ += number(d);
    return *this;
}

object_writer& object_writer::field(std::string_view k, std::int64_t i) {
    key(k);
    out_ += std::to_string(i);
    return *this;
}

object_writer& object_writer::raw(std::string_view k, std::string_view json_text) {
    key(k);
    out_ += json_text;
    return *this;
}

}  // namespace tern_bench::json
