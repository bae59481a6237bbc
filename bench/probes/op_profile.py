#!/usr/bin/env python3
"""Where the instructions of one tern operation go, function by function.

Runs tern-op-probe (op_probe.cpp) under callgrind with n and with 2n operations, reads both profiles with
callgrind_annotate (self cost per function, or inclusive with --inclusive), and prints per function
(cost(2n) - cost(n)) / n: the instructions one operation spends there. What the program does once (start-up, the
loop's creation, the phase's own entry and exit) is in both runs and cancels out.

    bench/probes/op_profile.py OP [--n N] [--backend epoll|io_uring] [--inclusive] [--probe PATH] [--base OP2]
    bench/probes/op_profile.py --file CALLGRIND_OUT --ops N [--inclusive]

--base OP2 also counts OP2 and prints OP's total, OP2's and their difference: OP2 is OP without the part under
study (timer_shell for timer: the post, the suspension and the resumption without the timer), so the difference is
that part's own cost.

The second form reads one callgrind file of a counted window (tern-bench --instructions --report DIR keeps them
in DIR/callgrind/) and divides by the operations it held, e.g. the 4000 requests of http/ping_json's server.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(?:\*\s+)?(.*)$")


def profile(path, inclusive):
    """{function: Ir} from callgrind_annotate, and the program total."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=" + ("yes" if inclusive else "no"),
                          path], check=True, capture_output=True, text=True).stdout
    funcs, total = {}, None
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        name = m.group(2).strip()
        if name == "PROGRAM TOTALS":
            total = ir
            continue
        # "file:function [object]": keep the function and the object's base name
        obj = ""
        om = re.search(r"\s\[([^\]]*)\]$", name)
        if om:
            obj = os.path.basename(om.group(1))
            name = name[:om.start()]
        name = name.split(":", 1)[1] if ":" in name and not name.startswith("???") else name.replace("???:", "")
        key = name + ("  [" + obj + "]" if obj else "")
        funcs[key] = funcs.get(key, 0) + ir
    return funcs, total


def run_probe(probe, op, n, backend, directory):
    path = os.path.join(directory, "callgrind.%s.%d" % (op, n))
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "-q", "--callgrind-out-file=" + path,
                    probe, op, str(n), backend], check=True, stdout=subprocess.DEVNULL)
    return path


def print_table(rows, total, title, limit):
    print(title)
    print("%10s  %6s  %s" % ("instr/op", "share", "function [object]"))
    shown = 0.0
    for name, v in rows[:limit]:
        print("%10.2f  %5.1f%%  %s" % (v, 100.0 * v / total if total else 0, name))
        shown += v
    rest = total - shown
    if len(rows) > limit:
        print("%10.2f  %5.1f%%  (%d more functions)" % (rest, 100.0 * rest / total if total else 0, len(rows) - limit))
    print("%10.2f  100.0%%  total per operation" % total)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("op", nargs="?")
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--backend", default="epoll")
    ap.add_argument("--inclusive", action="store_true")
    ap.add_argument("--probe", default=None)
    ap.add_argument("--file")
    ap.add_argument("--ops", type=float)
    ap.add_argument("--limit", type=int, default=25)
    ap.add_argument("--base")
    a = ap.parse_args()
    if a.file:
        if not a.ops:
            ap.error("--file needs --ops")
        funcs, total = profile(a.file, a.inclusive)
        rows = sorted(((k, v / a.ops) for k, v in funcs.items()), key=lambda kv: -kv[1])
        print_table(rows, total / a.ops, "%s: %s instructions over %g operations" % (a.file, total, a.ops), a.limit)
        return 0
    if not a.op:
        ap.error("name an operation, or --file")
    probe = a.probe or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "release",
                                    "bench", "tern-op-probe")
    with tempfile.TemporaryDirectory() as d:
        one, _ = profile(run_probe(probe, a.op, a.n, a.backend, d), a.inclusive)
        two, _ = profile(run_probe(probe, a.op, 2 * a.n, a.backend, d), a.inclusive)
        if a.base:
            b1, _ = profile(run_probe(probe, a.base, a.n, a.backend, d), False)
            b2, _ = profile(run_probe(probe, a.base, 2 * a.n, a.backend, d), False)
    keys = set(one) | set(two)
    rows = [(k, (two.get(k, 0) - one.get(k, 0)) / a.n) for k in keys]
    rows = [r for r in rows if abs(r[1]) >= 0.005]
    rows.sort(key=lambda kv: -kv[1])
    total = sum(v for _, v in rows) if not a.inclusive else max((v for _, v in rows), default=0)
    print_table(rows, total, "%s on %s: (cost(%d) - cost(%d)) / %d, %s cost" %
                (a.op, a.backend, 2 * a.n, a.n, a.n, "inclusive" if a.inclusive else "self"), a.limit)
    if a.base:
        whole = sum(two.values()) - sum(one.values()) if a.inclusive else total * a.n
        base = sum(b2.values()) - sum(b1.values())
        print("\n%10.2f  %s (whole)\n%10.2f  %s (the same without the part under study)\n%10.2f  %s - %s" %
              (whole / a.n, a.op, base / a.n, a.base, (whole - base) / a.n, a.op, a.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
