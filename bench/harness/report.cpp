#include "report.hpp"

#include "allocations.hpp"
#include "json.hpp"

#include <algorithm>
#include <cctype>
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
        if (o.scenario != r.scenario || o.metric != r.metric || o.point != r.point ||
            !r.scenario->is_comparator(o.impl->id))
            continue;
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

namespace {

// The metrics whose tern figures are compared with the comparators': the scenario's own and its instruction
// counts (an optional metric has no comparator figure).
std::vector<const metric_def*> comparable_metrics(const scenario_def& s) {
    std::vector<const metric_def*> out;
    for (auto& m : s.metrics) out.push_back(&m);
    for (auto& m : s.instr_metrics) out.push_back(&m);
    return out;
}

}  // namespace

std::vector<comparison> tern_comparisons(const std::vector<record>& all) {
    std::vector<comparison> out;
    for (auto& s : scenarios()) {
        std::vector<const param_list*> points;
        for (auto& r : all)
            if (r.scenario == &s && std::none_of(points.begin(), points.end(), [&](auto* p) { return *p == r.point; }))
                points.push_back(&r.point);
        for (auto* p : points)
            for (auto* m : comparable_metrics(s))
                for (auto& r : all) {
                    if (r.scenario != &s || r.metric != m || r.point != *p || r.impl->id.rfind("tern/", 0) != 0)
                        continue;
                    const record* b = best_asio(all, r);
                    if (!b) continue;
                    bool known = r.stats.runs >= 2 && b->stats.runs >= 2;
                    bool overlap = known && r.stats.min <= b->stats.max && b->stats.min <= r.stats.max;
                    out.push_back({&r, b, ratio_to(r, *b), known, overlap});
                }
    }
    return out;
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

// Two decimals, or three just below 1 so that a trailing figure never reads "1.00x".
std::string ratio_text(double ratio) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ratio < 1 && ratio >= 0.995 ? "%.3fx" : "%.2fx", ratio);
    return buf;
}

std::string ratio_text(const std::vector<record>& all, const record& r) {
    const record* b = best_asio(all, r);
    return b ? ratio_text(ratio_to(r, *b)) : "n/a";
}

// Instruction counts: one decimal below 100 (a cut of a few instructions shows), whole numbers up to a million,
// then millions (the per-MiB figures).
std::string instr_text(double v) {
    char buf[32];
    if (v < 100)
        std::snprintf(buf, sizeof buf, "%.1f", v);
    else if (v < 1e6)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else
        std::snprintf(buf, sizeof buf, "%.3fM", v / 1e6);
    return buf;
}

// Allocations per operation are small fractions where the measured loop allocates nothing per operation (setup
// amortised over millions of operations): three decimals say "0.000" instead of a misleading "1.91e-06".
std::string value_text(const record& r, double v) {
    if (r.scenario->find_instr_metric(r.metric->name) == r.metric) return instr_text(v);
    if (r.metric->name != allocs_per_op_name && r.metric->name != syscalls_per_op_name &&
        r.metric->name != wakeups_per_op_name && r.metric->name != parks_per_op_name &&
        r.metric->name != spins_per_op_name)
        return format_value(v);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
}

bool optional_metric(const record& r) {
    return !r.scenario->find_metric(r.metric->name) && !r.scenario->find_instr_metric(r.metric->name);
}

// The line under a table's title: the scenario's definition, or what an optional metric counts.
std::string table_intro(const record& r) {
    if (!optional_metric(r)) return r.scenario->summary;
    if (r.metric->name == syscalls_per_op_name)
        return "system calls per operation over each measured phase, every loop of the tern worker together "
               "(its loops' own counters, tern/metrics.hpp: waits, submissions, speculative attempts; not the "
               "socket calls of setup); the other workers do not count";
    if (r.metric->name == wakeups_per_op_name)
        return "wake-ups of a parked loop by another thread per operation over each measured phase, every loop "
               "of the tern worker together; the other workers do not count";
    if (r.metric->name == parks_per_op_name)
        return "blocking waits in the kernel per operation over each measured phase, every loop of the tern worker "
               "together; the other workers do not count";
    if (r.metric->name == spins_per_op_name)
        return "spins before a park (io_context_options::spin_before_park, which backs off where its spins find "
               "nothing) per operation over each measured phase, every loop of the tern worker together; the "
               "other workers do not count";
    return "operator new calls per operation over each measured phase, counted by the tern worker (the other "
           "workers do not count)";
}

std::string impl_label(const record& r) { return r.impl->id + (r.config.empty() ? "" : " (" + r.config + ")"); }

using row = std::vector<std::string>;

// The records grouped as printed: one table per scenario and metric, in catalogue and measurement order.
std::vector<std::vector<const record*>> tables_of(const std::vector<record>& all) {
    std::vector<std::vector<const record*>> tables;
    std::map<std::pair<const scenario_def*, const metric_def*>, std::size_t> index;
    auto add = [&](const scenario_def& s, const metric_def& m) {
        for (auto& r : all)
            if (r.scenario == &s && r.metric == &m) {
                auto key = std::make_pair(&s, &m);
                auto [it, fresh] = index.emplace(key, tables.size());
                if (fresh) tables.emplace_back();
                tables[it->second].push_back(&r);
            }
    };
    for (auto& s : scenarios()) {
        for (auto& m : s.metrics) add(s, m);
        for (auto& m : optional_metrics()) add(s, m);
    }
    return tables;
}

std::string title_of(const record& r) {
    bool named = r.scenario->metrics.size() > 1 || optional_metric(r);
    return r.scenario->name + (named ? " - " + r.metric->name : "") + " (" + r.metric->unit + ", " +
           to_string(r.metric->direction) + " is better)";
}

// The ratio column names what it compares with: "vs best asio", or the scenario's own comparators.
row header(const scenario_def& s) {
    return {"params", "impl", "median", "min", "max", "unit", "vs best " + s.comparator_name(), "peak RSS MiB"};
}

row row_of(const std::vector<record>& all, const record& r) {
    return {to_display(r.point), impl_label(r), value_text(r, r.stats.median), value_text(r, r.stats.min),
            value_text(r, r.stats.max), r.metric->unit, ratio_text(all, r), mib(r.peak_rss_bytes)};
}

std::string best_note(const std::vector<record>& all, const std::vector<const record*>& t) {
    std::string out;
    std::vector<param_list> seen;
    for (auto* r : t) {
        if (std::find(seen.begin(), seen.end(), r->point) != seen.end()) continue;
        seen.push_back(r->point);
        if (const record* b = best_asio(all, *r)) {
            out += out.empty() ? "best " + r->scenario->comparator_name() + ": " : "; ";
            out += to_display(r->point) + " -> " + impl_label(*b);
        }
    }
    return out;
}

}  // namespace

std::string format_tables(const std::vector<record>& all) {
    std::string out;
    for (auto& t : tables_of(all)) {
        // An optional metric has no Asio figure to compare with: value and spread only.
        const row head = header(*t.front()->scenario);
        std::size_t columns = optional_metric(*t.front()) ? 5 : head.size();
        auto cut = [&](row rw) {
            rw.resize(columns);
            return rw;
        };
        std::vector<row> rows{cut(head)};
        for (auto* r : t) rows.push_back(cut(row_of(all, *r)));
        std::vector<std::size_t> w(rows[0].size(), 0);
        for (auto& rw : rows)
            for (std::size_t c = 0; c < rw.size(); ++c) w[c] = std::max(w[c], rw[c].size());
        out += "\n" + title_of(*t.front()) + "\n" + table_intro(*t.front()) + "\n";
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

namespace {

std::string md_row(const row& cells) {
    std::string out = "|";
    for (auto& c : cells) out += " " + c + " |";
    return out + "\n";
}

// `left` holds the indexes of the text columns; the others are numbers, right-aligned.
std::string md_header(const row& cells, std::initializer_list<std::size_t> left) {
    std::string out = md_row(cells) + "|";
    for (std::size_t c = 0; c < cells.size(); ++c)
        out += std::find(left.begin(), left.end(), c) != left.end() ? "---|" : "---:|";
    return out + "\n";
}

std::string count_of(std::size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

double median_of(std::vector<double> v) { return summarize(std::move(v)).median; }

// Whether some of tern's figures come from scenarios that name their own comparators instead of Asio.
bool own_comparators(const std::vector<comparison>& cmp) {
    return std::any_of(cmp.begin(), cmp.end(), [](auto& c) { return !c.tern->scenario->comparators.empty(); });
}

// What tern's figures were compared with.
std::string reference_of(const std::vector<comparison>& cmp) {
    if (!own_comparators(cmp)) return "the best Asio configuration";
    return "the best comparator (Asio's best configuration, or the best of the comparators a scenario names when it "
           "has no Asio implementation)";
}

std::string trailing_section(const std::vector<comparison>& cmp, const std::vector<failure>& failures) {
    std::string out = "\n## Where tern trails\n\n";
    std::size_t tern_failed = std::count_if(failures.begin(), failures.end(), [](auto& f) { return f.tern; });
    if (!failures.empty())
        out += "**" + count_of(failures.size(), "point", "points") + " failed or did not run (" +
               std::to_string(tern_failed) + " of them on tern alone) and could not be compared**: see \"Failed "
               "points\" at the end.\n\n";
    std::vector<const comparison*> behind;
    for (auto& c : cmp)
        if (c.ratio < 1) behind.push_back(&c);
    if (cmp.empty())
        return out + "Nothing to compare: this run has no tern figure with an Asio figure of the same point.\n";
    if (behind.empty())
        return out + "None: each of the " + count_of(cmp.size(), "tern figure", "tern figures") +
               " compared is at or ahead of " + reference_of(cmp) + " of its point.\n";
    std::size_t overlapping = std::count_if(behind.begin(), behind.end(), [](auto* c) { return c->overlap; });
    std::size_t unknown = std::count_if(behind.begin(), behind.end(), [](auto* c) { return !c->spread_known; });
    out += count_of(behind.size(), "figure", "figures") + " of tern, out of " + std::to_string(cmp.size()) +
           " compared, " + (behind.size() == 1 ? "is" : "are") +
           " behind " + reference_of(cmp) + " of the same point (ratio below 1.00x; the ratio is tern's "
           "throughput over the comparator's, or the comparator's time (or instruction count) over tern's). " +
           count_of(overlapping, "of them is", "of them are") +
           " within the run-to-run spread: the min..max ranges of the two overlap" +
           (unknown ? " (" + std::to_string(unknown) + " from a single run, where the spread is unknown)" : "") +
           ".\n\n";
    const bool own = own_comparators(cmp);
    out += md_header({"scenario", "params", "metric", "impl", "tern", own ? "best comparator" : "best asio",
                      own ? "comparator" : "asio", "ratio", "ranges overlap"},
                     {0, 1, 2, 3, 5, 8});
    for (auto* c : behind) {
        const record& t = *c->tern;
        const record& a = *c->asio;
        out += md_row({t.scenario->name, to_display(t.point), t.metric->name, t.impl->id,
                       value_text(t, t.stats.median) + " " + t.metric->unit, impl_label(a),
                       value_text(a, a.stats.median) + " " + a.metric->unit, ratio_text(c->ratio),
                       !c->spread_known ? "n/a (1 run)" : c->overlap ? "yes" : "no"});
    }
    return out;
}

std::string leading_section(const std::vector<comparison>& cmp) {
    std::string out = "\n## Where tern leads\n\n";
    if (cmp.empty()) return out + "Nothing to compare.\n";
    std::vector<double> all_ratios;
    double log_sum = 0;
    for (auto& c : cmp) {
        all_ratios.push_back(c.ratio);
        log_sum += std::log(std::max(c.ratio, 1e-9));
    }
    std::size_t ahead = std::count_if(cmp.begin(), cmp.end(), [](auto& c) { return c.ratio >= 1; });
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "Over the whole run tern is at or ahead of %s in %zu of %zu figures; the median ratio is %.2fx, "
                  "the geometric mean %.2fx. Per scenario and implementation, over every point and metric:\n\n",
                  reference_of(cmp).c_str(), ahead, cmp.size(), median_of(all_ratios),
                  std::exp(log_sum / static_cast<double>(cmp.size())));
    out += buf;
    out += md_header({"scenario", "impl", "figures", "at or ahead", "lowest ratio", "median ratio", "highest ratio"},
                     {0, 1});
    std::vector<std::pair<const scenario_def*, const impl_def*>> groups;
    for (auto& c : cmp) {
        auto key = std::make_pair(c.tern->scenario, c.tern->impl);
        if (std::find(groups.begin(), groups.end(), key) == groups.end()) groups.push_back(key);
    }
    for (auto [s, i] : groups) {
        std::vector<double> ratios;
        for (auto& c : cmp)
            if (c.tern->scenario == s && c.tern->impl == i) ratios.push_back(c.ratio);
        std::size_t n_ahead = std::count_if(ratios.begin(), ratios.end(), [](double r) { return r >= 1; });
        auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
        out += md_row({s->name, i->id, std::to_string(ratios.size()), std::to_string(n_ahead), ratio_text(*lo),
                       ratio_text(median_of(ratios)), ratio_text(*hi)});
    }
    return out;
}

// ---- instructions per operation ----

bool is_instr(const record& r) { return r.metric->name == instr_per_op_name; }

// The share of a library shown apart (OpenSSL, libpq) in the count r, if its scenario shows one.
const record* library_share_of(const std::vector<record>& all, const record& r) {
    for (auto& o : all)
        if (o.scenario == r.scenario && o.point == r.point && o.impl == r.impl && o.config == r.config &&
            library_of_metric(o.metric->name) != instruction_plan::library::none)
            return &o;
    return nullptr;
}

// How the runs of a count agree: one run, several equal, or how far apart (max - min over the median, which is
// below 0.001% where only a time-driven sampler, such as tern's loop-lag probe, ran a different number of times).
std::string runs_text(const record& r) {
    if (r.stats.runs < 2) return "1";
    const std::string n = std::to_string(r.stats.runs);
    if (r.stats.min == r.stats.max) return n + ", equal";
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2g%%", 100 * (r.stats.max - r.stats.min) / r.stats.median);
    return n + ", within " + buf;
}

// The instruction counts of the run, one row per scenario, point and implementation, in catalogue order.
std::vector<row> instruction_rows(const std::vector<record>& all, bool with_library) {
    std::vector<row> rows;
    for (auto& s : scenarios())
        for (auto& r : all) {
            if (r.scenario != &s || !is_instr(r)) continue;
            const record* b = best_asio(all, r);
            row rw{s.name, to_display(r.point), impl_label(r), instr_text(r.stats.median), r.metric->unit};
            if (with_library) {
                const record* lib = library_share_of(all, r);
                rw.push_back(lib ? instr_text(lib->stats.median) : "");
            }
            rw.push_back(b ? ratio_text(ratio_to(r, *b)) + " " + b->scenario->comparator_name() : "n/a");
            rw.push_back(runs_text(r));
            rows.push_back(std::move(rw));
        }
    return rows;
}

// The libraries shown apart in the run ("OpenSSL", "OpenSSL or libpq"); empty when none is.
std::string libraries_apart(const std::vector<record>& all) {
    std::string names;
    for (auto l : {instruction_plan::library::openssl, instruction_plan::library::libpq})
        if (std::any_of(all.begin(), all.end(), [&](auto& r) { return library_of_metric(r.metric->name) == l; }))
            names += (names.empty() ? "" : " or ") + std::string(library_label(l));
    return names;
}

row instruction_header(const std::string& libraries) {
    row h{"scenario", "params", "impl", "instructions", "per"};
    if (!libraries.empty()) h.push_back("of which " + libraries);
    h.push_back("vs best comparator");
    h.push_back("runs");
    return h;
}

std::string instruction_section(const std::vector<record>& all) {
    const std::string libs = libraries_apart(all);
    std::string out =
        "\n## Instructions per operation\n\nUser-space instructions per operation counted by callgrind in the "
        "measured window (the method above), for every implementation; \"vs best comparator\" is the best "
        "comparator's count over this row's (> 1: fewer instructions than the best comparator of the point, which "
        "is named: asio, or the scenario's own comparators); \"runs\" says whether repeated runs counted the same.\n\n";
    out += md_header(instruction_header(libs), {0, 1, 2, 4});
    for (auto& rw : instruction_rows(all, !libs.empty())) out += md_row(rw);
    return out;
}

}  // namespace

std::string format_trailing_text(const std::vector<record>& all) {
    auto cmp = tern_comparisons(all);
    if (cmp.empty()) return {};
    std::string out;
    std::size_t behind = 0;
    for (auto& c : cmp) {
        if (c.ratio >= 1) continue;
        ++behind;
        const record& t = *c.tern;
        out += "  " + t.scenario->name + " " + to_display(t.point) + " " + t.metric->name + " " + t.impl->id + ": " +
               value_text(t, t.stats.median) + " vs " + value_text(*c.asio, c.asio->stats.median) + " " +
               t.metric->unit + " " + impl_label(*c.asio) + ", " + ratio_text(c.ratio) +
               (c.overlap ? " (within the spread)" : "") + "\n";
    }
    if (behind == 0)
        return "\ntern is at or ahead of " + reference_of(cmp) + " in all " + std::to_string(cmp.size()) +
               " figures compared\n";
    return "\ntern trails " + reference_of(cmp) + " in " + std::to_string(behind) + " of " +
           std::to_string(cmp.size()) + " figures:\n" + out;
}

std::string format_instruction_table(const std::vector<record>& all) {
    const std::string libs = libraries_apart(all);
    std::vector<row> rows{instruction_header(libs)};
    for (auto& rw : instruction_rows(all, !libs.empty())) rows.push_back(std::move(rw));
    if (rows.size() == 1) return {};
    std::vector<std::size_t> w(rows[0].size(), 0);
    for (auto& rw : rows)
        for (std::size_t c = 0; c < rw.size(); ++c) w[c] = std::max(w[c], rw[c].size());
    std::string out = "\nInstructions per operation (user-space, callgrind)\n";
    for (auto& rw : rows) {
        std::string line;
        for (std::size_t c = 0; c < rw.size(); ++c) {
            bool left = c < 3 || c == 4 || c + 1 == rw.size();
            std::string pad(w[c] - rw[c].size(), ' ');
            line += (c ? "  " : "") + (left ? rw[c] + pad : pad + rw[c]);
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

std::string format_report_md(const environment& env, const report_inputs& in, const std::vector<record>& all,
                             const std::vector<failure>& failures) {
    auto cmp = tern_comparisons(all);
    std::string out = "# tern-bench report\n\n## Environment\n\n" + format_markdown(env);
    out += trailing_section(cmp, failures);
    out += leading_section(cmp);
    out += "\n## Method\n\n" + in.method;
    if (std::any_of(all.begin(), all.end(), [](auto& r) { return is_instr(r); })) out += instruction_section(all);
    if (!in.plots_note.empty()) out += "\nCharts: " + in.plots_note + "\n";

    auto tables = tables_of(all);
    auto charts_of = [&](const scenario_def* s) {
        std::string text;
        for (auto& p : in.plots)
            if (p.scenario == s->name) text += "\n![" + p.title + "](" + p.file + ")\n";
        return text;
    };
    std::string category;
    for (std::size_t i = 0; i < tables.size(); ++i) {
        const record& first = *tables[i].front();
        if (first.scenario->category != category) {
            category = first.scenario->category;
            out += "\n## " + category + "\n";
        }
        out += "\n### " + title_of(first) + "\n\n";
        std::string intro = table_intro(first);
        intro[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(intro[0])));
        out += intro + ".\n\n";
        if (optional_metric(first)) {  // no Asio figure to compare with: value and spread only
            row h = header(*first.scenario);
            h.resize(5);
            out += md_header(h, {0, 1});
            for (auto* r : tables[i]) {
                row full = row_of(all, *r);
                full.resize(5);
                out += md_row(full);
            }
        } else {
            out += md_header(header(*first.scenario), {0, 1, 5});
            for (auto* r : tables[i]) out += md_row(row_of(all, *r));
        }
        if (!optional_metric(first))
            if (auto note = best_note(all, tables[i]); !note.empty()) out += "\n" + note + ".\n";
        bool last_of_scenario = i + 1 == tables.size() || tables[i + 1].front()->scenario != first.scenario;
        if (last_of_scenario) out += charts_of(first.scenario);
    }
    if (!failures.empty()) {
        out += "\n## Failed points\n\n";
        for (auto& f : failures) out += "- " + f.what + ": " + f.why + "\n";
    }
    return out;
}

}  // namespace tern_bench
