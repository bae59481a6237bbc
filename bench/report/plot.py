#!/usr/bin/env python3
"""Charts of a tern-bench run: one PNG per sweep, read from the JSON records (tern-bench --json).

usage: plot.py RECORDS.jsonl OUTDIR [--manifest]

A sweep is a numeric parameter that takes several values while the scenario's other parameters stay fixed: the
chart puts that parameter on x, the metric on y and draws one line per implementation (Asio once per
configuration), with the min..max of the repetitions as error bars. x is logarithmic when the values span a
factor of 8 or more (buffer sizes, counts, producers: the sweeps the reference reports drew on log axes), y when
the lines span a factor of 30 or more. A latency scenario gets one panel per statistic (mean, p50, p99, p99.9);
a latency scenario without a sweep gets grouped bars of its percentiles per point. Metrics measured by a single
implementation family (allocs_per_op, on tern only) are not charted.

OUTDIR's PNGs are replaced by each run. With --manifest, one JSON line per chart goes to stdout
({"scenario", "file", "title"}) for tern-bench to link from report.md; without it, one "wrote" line per chart.
Exit status 3 means matplotlib cannot be imported by this interpreter.
"""

import json
import math
import os
import sys
from collections import OrderedDict

NO_MATPLOTLIB = 3
DPI = 80

LATENCY_PANELS = ["mean_us", "p50_us", "p99_us", "p99_9_us"]
LATENCY_BARS = ["p50_us", "p90_us", "p99_us", "p99_9_us"]
STAT_LABEL = {"mean_us": "mean", "p50_us": "p50", "p90_us": "p90", "p99_us": "p99", "p99_9_us": "p99.9",
              "max_us": "max"}

# Fixed colours and styles per series, so a series looks the same in every chart.
STYLE = {
    "tern/io_uring": dict(color="#1f5fa8", linestyle="-", marker="o", linewidth=2.2),
    "tern/epoll": dict(color="#2e9d3a", linestyle="-", marker="s", linewidth=2.2),
    "asio/callbacks (epoll)": dict(color="#c0392b", linestyle="--", marker="v", linewidth=1.4),
    "asio/callbacks (io_uring)": dict(color="#e8897e", linestyle="--", marker="^", linewidth=1.4),
    "asio/coroutines (epoll)": dict(color="#7d3c98", linestyle="-.", marker="v", linewidth=1.4),
    "asio/coroutines (io_uring)": dict(color="#bb8fce", linestyle="-.", marker="^", linewidth=1.4),
    "raw/liburing": dict(color="#555555", linestyle=":", marker="D", linewidth=1.4),
}
FALLBACK_COLOURS = ["#d68910", "#17a589", "#a04000", "#5d6d7e", "#884ea0"]


def series_of(rec):
    config = rec["params"].get("config")
    return rec["impl"] + (f" ({config})" if config else "")


def point_of(rec):
    return tuple((k, v) for k, v in rec["params"].items() if k != "config")


def family_of(rec):
    return rec["impl"].split("/", 1)[0]


def human(v):
    """A parameter value as the reports write it: 1K, 128K, 1M for multiples of 1024; 10k, 1M for round decimals."""
    if isinstance(v, float) and not v.is_integer():
        return f"{v:g}"
    v = int(v)
    for base, suffixes in ((1024, "KMG"), (1000, "kMG")):
        if v == 0 or v % base != 0 or (base == 1000 and v < 10000):
            continue
        i = -1
        while v % base == 0 and i < len(suffixes) - 1:
            v //= base
            i += 1
        return f"{v}{suffixes[i]}"
    return str(v)


def plain_number(v):
    """A y-axis label: 0.5, 20, 500, 2k, 50M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"


def slug(text):
    return "".join(c if c.isalnum() or c in "_." else "-" for c in str(text))


def load(path):
    records = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"plot.py: {path}:{n}: not a JSON record: {e}")
    return records


def find_sweeps(points):
    """[(param, fixed, [points in x order])] for every numeric parameter that varies while the others are fixed."""
    sweeps = []
    names = []
    for p in points:
        for k, _ in p:
            if k not in names:
                names.append(k)
    for name in names:
        groups = OrderedDict()
        for p in points:
            d = dict(p)
            if not isinstance(d.get(name), (int, float)) or isinstance(d.get(name), bool):
                continue
            fixed = tuple((k, v) for k, v in p if k != name)
            groups.setdefault(fixed, []).append(p)
        for fixed, members in groups.items():
            xs = {dict(p)[name] for p in members}
            if len(xs) >= 2:
                members.sort(key=lambda p: dict(p)[name])
                sweeps.append((name, fixed, members))
    return sweeps


class Plotter:
    def __init__(self, plt, outdir, manifest):
        self.plt = plt
        self.outdir = outdir
        self.manifest = manifest
        self.fallback = {}
        self.count = 0

    def style(self, series):
        if series in STYLE:
            return dict(STYLE[series])
        colour = self.fallback.setdefault(series, FALLBACK_COLOURS[len(self.fallback) % len(FALLBACK_COLOURS)])
        return dict(color=colour, linestyle="-", marker="x", linewidth=1.4)

    def save(self, fig, scenario, name, title):
        path = os.path.join(self.outdir, name)
        try:
            # A 128-colour palette keeps a chart at a third of its RGBA size with no visible change.
            import io
            from PIL import Image

            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=DPI)
            buf.seek(0)
            Image.open(buf).convert("RGB").quantize(colors=128).save(path, optimize=True)
        except ImportError:
            fig.savefig(path, dpi=DPI)
        self.plt.close(fig)
        self.count += 1
        if self.manifest:
            print(json.dumps({"scenario": scenario, "file": name, "title": title}), flush=True)
        else:
            print(f"wrote {path}", flush=True)

    @staticmethod
    def set_x_axis(ax, name, xs):
        positive = [x for x in xs if x > 0]
        if len(positive) == len(xs) and max(xs) / min(xs) >= 8:
            ax.set_xscale("log")
        elif positive and len(positive) < len(xs) and max(positive) / min(positive) >= 8:
            ax.set_xscale("symlog", linthresh=min(positive))
        ax.set_xticks(xs)
        ax.set_xticklabels([human(x) for x in xs])
        ax.minorticks_off()
        ax.set_xlabel(name)

    @staticmethod
    def set_y_axis(ax, values, label):
        from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

        positive = [v for v in values if v > 0]
        if positive and max(positive) / min(positive) >= 30:
            ax.set_yscale("log")
            # Labels at 1, 2, 5 of every decade, in plain numbers: a log axis with one label per decade is hard to
            # read off.
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
            ax.yaxis.set_minor_locator(NullLocator())
        else:
            ax.set_ylim(bottom=0, top=max(values) * 1.12 if values and max(values) > 0 else 1)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)

    def sweep_chart(self, scenario, metrics, param, fixed, members, by_key):
        """One panel per metric; x = param, one line per series."""
        series_order = []
        for m in metrics:
            for p in members:
                for s in by_key.get((m, p), {}):
                    if s not in series_order:
                        series_order.append(s)
        panels = len(metrics)
        cols = 2 if panels > 1 else 1
        cols = 3 if panels in (5, 6) else cols
        rows = (panels + cols - 1) // cols
        fig, axes = self.plt.subplots(rows, cols, figsize=(5.6 if panels == 1 else 4.8 * cols, 3.4 if panels == 1 else 3.1 * rows + 0.6), squeeze=False)
        xs = [dict(p)[param] for p in members]
        handles = OrderedDict()
        for i, m in enumerate(metrics):
            ax = axes[i // cols][i % cols]
            plotted = []
            unit, better = "", ""
            for s in series_order:
                pts = [(dict(p)[param], by_key[(m, p)][s]) for p in members if s in by_key.get((m, p), {})]
                if not pts:
                    continue
                x = [a for a, _ in pts]
                med = [r["median"] for _, r in pts]
                err = [[r["median"] - r["min"] for _, r in pts], [r["max"] - r["median"] for _, r in pts]]
                unit, better = pts[0][1]["unit"], pts[0][1]["better"]
                h = ax.errorbar(x, med, yerr=err, label=s, capsize=2, markersize=4, **self.style(s))
                handles.setdefault(s, h)
                plotted.extend(r["min"] for _, r in pts)
                plotted.extend(r["max"] for _, r in pts)
            self.set_x_axis(ax, param, xs)
            name = STAT_LABEL.get(m, m)
            self.set_y_axis(ax, plotted, f"{name} ({unit})")
            if panels > 1:
                ax.set_title(f"{name}, {better} is better", fontsize=9)
        spare = [axes[j // cols][j % cols] for j in range(panels, rows * cols)]
        for ax in spare:
            ax.axis("off")
        fixed_text = ", ".join(f"{k}={human(v) if isinstance(v, (int, float)) else v}" for k, v in fixed)
        what = metrics[0] if panels == 1 else "latency" if all(m in STAT_LABEL for m in metrics) else None
        title = f"{scenario}" + (f": {what}" if what else "") + f" vs {param}" + (
            f" ({fixed_text})" if fixed_text else "")
        if panels > 1 and spare:  # the legend takes the first empty panel
            fig.suptitle(title, fontsize=10)
            spare[0].legend(list(handles.values()), list(handles.keys()), loc="center", fontsize=8, frameon=False)
            fig.tight_layout(rect=(0, 0, 1, 0.96))
        elif panels > 1:
            fig.suptitle(title, fontsize=10)
            fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(4, len(handles)),
                       fontsize=7.5, frameon=False)
            fig.tight_layout(rect=(0, 0.03 + 0.035 * math.ceil(len(handles) / 4), 1, 0.96))
        else:
            axes[0][0].set_title(f"{title}, {better} is better", fontsize=9)
            axes[0][0].legend(fontsize=7.5, frameon=False)
            fig.tight_layout()
        name = slug(scenario.replace("/", "-")) + "__" + slug(param)
        if fixed:
            name += "__" + "_".join(f"{slug(k)}-{slug(v)}" for k, v in fixed)
        self.save(fig, scenario, name + ".png", title)

    def percentile_bars(self, scenario, point, stats, by_key):
        """Grouped bars: one group per statistic, one bar per series."""
        series_order = []
        for m in stats:
            for s in by_key.get((m, point), {}):
                if s not in series_order:
                    series_order.append(s)
        if not series_order:
            return
        fig, ax = self.plt.subplots(figsize=(6.4, 3.8))
        width = 0.8 / len(series_order)
        values = []
        for i, s in enumerate(series_order):
            xs, med, lo, hi = [], [], [], []
            for j, m in enumerate(stats):
                r = by_key.get((m, point), {}).get(s)
                if r is None:
                    continue
                xs.append(j - 0.4 + width * (i + 0.5))
                med.append(r["median"])
                lo.append(r["median"] - r["min"])
                hi.append(r["max"] - r["median"])
                values.extend([r["min"], r["max"]])
            st = self.style(s)
            ax.bar(xs, med, width * 0.92, yerr=[lo, hi], capsize=1.5, label=s, color=st["color"],
                   error_kw={"elinewidth": 0.8})
        ax.set_xticks(range(len(stats)))
        ax.set_xticklabels([STAT_LABEL.get(m, m) for m in stats])
        self.set_y_axis(ax, values, "latency (us)")
        point_text = " ".join(f"{k}={v}" for k, v in point)
        title = f"{scenario}: latency percentiles" + (f" ({point_text})" if point_text else "")
        ax.set_title(title + ", lower is better", fontsize=10)
        ax.legend(fontsize=7.5, frameon=False)
        fig.tight_layout()
        name = slug(scenario.replace("/", "-")) + "__percentiles"
        if point:
            name += "__" + "_".join(f"{slug(k)}-{slug(v)}" for k, v in point)
        self.save(fig, scenario, name + ".png", title)


def chart_scenario(plotter, scenario, recs):
    # Only metrics that more than one implementation family measured: a chart is a comparison.
    metrics = []
    families = {}
    for r in recs:
        families.setdefault(r["metric"], set()).add(family_of(r))
        if r["metric"] not in metrics:
            metrics.append(r["metric"])
    metrics = [m for m in metrics if len(families[m]) > 1]
    if not metrics:
        return
    by_key = {}
    points = []
    for r in recs:
        p = point_of(r)
        if p not in points:
            points.append(p)
        by_key.setdefault((r["metric"], p), {})[series_of(r)] = r
    # One panel per metric; of the latency statistics, the mean and the percentiles up to p99.9 (p90 and max are
    # in the tables).
    panels = [m for m in metrics if m not in STAT_LABEL] + [m for m in LATENCY_PANELS if m in metrics]
    sweeps = find_sweeps(points)
    for param, fixed, members in sweeps:
        plotter.sweep_chart(scenario, panels, param, fixed, members, by_key)
    latency = [m for m in LATENCY_BARS if m in metrics]
    if len(latency) >= 3 and not sweeps:
        for p in points:
            plotter.percentile_bars(scenario, p, latency, by_key)


def main(argv):
    args = [a for a in argv[1:] if a != "--manifest"]
    if len(args) != 2 or any(a.startswith("-") for a in args):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    records_path, outdir = args
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot.py: {sys.executable} cannot import matplotlib ({e}); on Debian install python3-matplotlib "
              "(scripts/setup-deps.sh does) and run it with /usr/bin/python3", file=sys.stderr)
        return NO_MATPLOTLIB
    records = load(records_path)
    os.makedirs(outdir, exist_ok=True)
    for old in os.listdir(outdir):
        if old.endswith(".png"):
            os.remove(os.path.join(outdir, old))
    plt.rcParams.update({"font.size": 8.5, "axes.titlesize": 9, "figure.dpi": DPI})
    plotter = Plotter(plt, outdir, "--manifest" in argv)
    by_scenario = OrderedDict()
    for r in records:
        by_scenario.setdefault(r["scenario"], []).append(r)
    for scenario, recs in by_scenario.items():
        chart_scenario(plotter, scenario, recs)
    if "--manifest" not in argv:
        print(f"{plotter.count} charts in {outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
