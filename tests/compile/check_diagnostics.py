#!/usr/bin/env python3
"""Compiles one source file and checks that a warning appears on exactly the lines marked for it.

A line marked `// expect: NAME` must get a [-WNAME] warning; a line marked `// not-caught: NAME` may or may not
(a misuse the compiler is known to miss); every other line must get none. Any error fails the check. Used by the
tests of tests/compile/: that a forgotten co_await is diagnosed (nodiscard), and which lifetime mistakes clang's
coroutine attributes catch.

usage: check_diagnostics.py --compiler CXX --warning NAME --source FILE [-- compiler flags...]
"""
import argparse
import re
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--compiler", required=True)
    parser.add_argument("--warning", required=True, help="warning group name, without -W")
    parser.add_argument("--source", required=True)
    parser.add_argument("flags", nargs="*")
    args = parser.parse_args()

    expected, tolerated = set(), set()
    with open(args.source, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            marker = re.search(r"//\s*(expect|not-caught):\s*([\w-]+)\s*$", line)
            if marker and marker.group(2) == args.warning:
                (expected if marker.group(1) == "expect" else tolerated).add(number)
    if not expected:
        print(f"{args.source}: no line is marked '// expect: {args.warning}'")
        return 1

    command = [args.compiler, "-fsyntax-only", f"-W{args.warning}", *args.flags, args.source]
    run = subprocess.run(command, capture_output=True, text=True)
    output = run.stdout + run.stderr
    source_name = re.escape(args.source)
    warned, errors = set(), []
    for line in output.splitlines():
        m = re.match(rf"^{source_name}:(\d+):\d+: (warning|error): (.*)$", line)
        if not m:
            if ": error:" in line:
                errors.append(line)
            continue
        if m.group(2) == "error":
            errors.append(line)
        elif f"[-W{args.warning}" in m.group(3):
            warned.add(int(m.group(1)))

    failures = []
    if errors or run.returncode != 0:
        failures.append("the compiler reported errors:\n  " + "\n  ".join(errors or [f"exit {run.returncode}"]))
    for number in sorted(expected - warned):
        failures.append(f"line {number}: no -W{args.warning} warning, but the line is marked to get one")
    for number in sorted(warned - expected - tolerated):
        failures.append(f"line {number}: unexpected -W{args.warning} warning")
    print(" ".join(command))
    if failures:
        print("\n".join(failures))
        print("---- compiler output ----")
        print(output)
        return 1
    print(f"{len(expected)} marked lines warned as expected, no other -W{args.warning} warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
