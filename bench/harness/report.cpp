#include "report.hpp"

#include "json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace tern_bench {

param_list record::params() const {
    param_list p = point;
    if (!config.empty()) p.emplace_back("config", config);
    return p;
}

const record* best_asio(const std::vector<record>& all, const record& r) {
    const record* best = nullptr;
    for (auto& o : all) {
        if (o.scenario != r.scenario || o.metric != r.metric || o.point != r.point || !o.impl->is_asio()) continue;
        bool better_one = !best || (r.metric->direction == better::higher ? o.stats.median > best->stats.median
                                                                            : o.stats.median < best->stats.median);
        if (better_one) best = &o;
    }
    return best;
}

double ratio_to(const record& r, const record& asio) {
    if (r.metric->direction == better::higher) return asio.stats.median > 0 ? r.stats.median / asio.stats.median : 0;
    return r.stats.median > 0 ? asio.stats.median / r.stats.median : 0;
}

std::string format_value(double v) {
    char buf[32];
    double a = std::fabs(v);
    if (a >= 1e9)
        std::snprintf(buf, sizeof buf, "%.3gG", v / 1e9);
    else if (a >= 1e6)
        std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
    else if (a >= 1e4)
        std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
    else if (a >= 100)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else
        std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

namespace {

std::string mib(long bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}

std::string ratio_text(const std::vector<record>& all, const record& r) {
    const record* b = best_asio(all, r);
    if (!b) return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", ratio_to(r, *b));
    return buf;
}

std::string impl_label(const record& r) { return r.impl->id + (r.config.empty() ? "" : " (" + r.config + ")"); }

using row = std::vector<std::string>;

// The records grouped as printed: one table per scenario and metric, in catalogue and measurement order.
std::vector<std::vector<const record*>> tables_of(const std::vector<record>& all) {
    std::vector<std::vector<const record*>> tables;
    std::map<std::pair<const scenario_def*, const metric_def*>, std::size_t> index;
    for (auto& s : scenarios())
        for (auto& m : s.metrics)
            for (auto& r : all)
                if (r.scenario == &s && r.metric == &m) {
                    auto key = std::make_pair(&s, &m);
                    auto [it, fresh] = index.emplace(key, tables.size());
                    if (fresh) tables.emplace_back();
                    tables[it->second].push_back(&r);
                }
    return tables;
}

std::string title_of(const record& r) {
    return r.scenario->name + (r.scenario->metrics.size() > 1 ? " - " + r.metric->name : "") + " (" +
           r.metric->unit + ", " + to_string(r.metric->direction) + " is better)";
}

row header() { return {"params", "impl", "median", "min", "max", "unit", "vs best asio", "peak RSS MiB"}; }

row row_of(const std::vector<record>& all, const record& r) {
    return {to_display(r.point), impl_label(r), format_value(r.stats.median), format_value(r.stats.min),
            format_value(r.stats.max), r.metric->unit, ratio_text(all, r), mib(r.peak_rss_bytes)};
}

std::string best_note(const std::vector<record>& all, const std::vector<const record*>& t) {
    std::string out;
    std::vector<param_list> seen;
    for (auto* r : t) {
        if (std::find(seen.begin(), seen.end(), r->point) != seen.end()) continue;
        seen.push_back(r->point);
        if (const record* b = best_asio(all, *r)) {
            out += out.empty() ? "best asio: " : "; ";
            out += to_display(r->point) + " -> " + impl_label(*b);
        }
    }
    return out;
}

}  // namespace

std::string format_tables(const std::vector<record>& all) {
    std::string out;
    for (auto& t : tables_of(all)) {
        std::vector<row> rows{header()};
        for (auto* r : t) rows.push_back(row_of(all, *r));
        std::vector<std::size_t> w(rows[0].size(), 0);
        for (auto& rw : rows)
            for (std::size_t c = 0; c < rw.size(); ++c) w[c] = std::max(w[c], rw[c].size());
        out += "\n" + title_of(*t.front()) + "\n" + t.front()->scenario->summary + "\n";
        for (auto& rw : rows) {
            std::string line;
            for (std::size_t c = 0; c < rw.size(); ++c) {
                // Text columns left-aligned, numbers right-aligned.
                bool left = c < 2 || c == 5;
                std::string pad(w[c] - rw[c].size(), ' ');
                line += (c ? "  " : "") + (left ? rw[c] + pad : pad + rw[c]);
            }
            while (!line.empty() && line.back() == ' ') line.pop_back();
            out += line + "\n";
        }
        if (auto note = best_note(all, t); !note.empty()) out += note + "\n";
    }
    return out;
}

std::string format_json_lines(const std::vector<record>& all) {
    std::string out;
    for (auto& r : all) {
        json::object_writer w;
        w.field("scenario", r.scenario->name)
            .raw("params", to_json(r.params()))
            .field("impl", r.impl->id)
            .field("metric", r.metric->name)
            .field("unit", r.metric->unit)
            .field("better", to_string(r.metric->direction))
            .field("median", r.stats.median)
            .field("min", r.stats.min)
            .field("max", r.stats.max)
            .field("runs", static_cast<std::int64_t>(r.stats.runs))
            .field("peak_rss_bytes", static_cast<std::int64_t>(r.peak_rss_bytes));
        out += w.str() + "\n";
    }
    return out;
}

std::string format_report_md(const environment& env, const std::string& method, const std::vector<record>& all,
                             const std::vector<failure>& failures) {
    std::string out = "# tern-bench report\n\n## Environment\n\n" + format_markdown(env) + "\n## Method\n\n" + method +
                      "\n";
    std::string category;
    for (auto& t : tables_of(all)) {
        const record& first = *t.front();
        if (first.scenario->category != category) {
            category = first.scenario->category;
            out += "\n## " + category + "\n";
        }
        out += "\n### " + title_of(first) + "\n\n" + first.scenario->summary + ".\n\n";
        row h = header();
        out += "|";
        for (auto& c : h) out += " " + c + " |";
        out += "\n|";
        for (std::size_t c = 0; c < h.size(); ++c) out += c < 2 || c == 5 ? "---|" : "---:|";
        out += "\n";
        for (auto* r : t) {
            out += "|";
            for (auto& c : row_of(all, *r)) out += " " + c + " |";
            out += "\n";
        }
        if (auto note = best_note(all, t); !note.empty()) out += "\n" + note + ".\n";
    }
    if (!failures.empty()) {
        out += "\n## Failed points\n\n";
        for (auto& f : failures) out += "- " + f.what + ": " + f.why + "\n";
    }
    return out;
}

}  // namespace tern_bench
