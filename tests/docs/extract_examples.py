#!/usr/bin/env python3
"""Writes every C++ code block of the given Markdown files to its own source file, so the tests compile them.

Each ```cpp block must be a whole program whose first line names it: `// NAME.cpp`, followed by
` (run by the tests)` when the program finishes by itself and the tests should run it too. A block without that
line, or a name used twice, is an error: no code shown to a reader escapes the compiler.

usage: extract_examples.py --out DIR FILE.md...
Prints one line per block: NAME;run or NAME;compile (a CMake list).
"""
import argparse
import pathlib
import re
import sys

BLOCK = re.compile(r"^```cpp\n(.*?)^```", re.S | re.M)
HEADER = re.compile(r"^// ([A-Za-z0-9_]+)\.cpp( \(run by the tests\))?\s*$")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seen = {}
    entries = []
    for name in args.files:
        text = pathlib.Path(name).read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            code = match.group(1)
            line = text.count("\n", 0, match.start()) + 1
            header = HEADER.match(code.split("\n", 1)[0])
            if not header:
                print(f"{name}:{line}: a cpp block must start with '// NAME.cpp'", file=sys.stderr)
                return 1
            program = header.group(1)
            if program in seen:
                print(f"{name}:{line}: '{program}.cpp' is also the name of a block at {seen[program]}", file=sys.stderr)
                return 1
            seen[program] = f"{name}:{line}"
            if "int main(" not in code:
                print(f"{name}:{line}: '{program}.cpp' is not a whole program (no main)", file=sys.stderr)
                return 1
            target = out / f"{program}.cpp"
            content = f'#line {line + 1} "{pathlib.Path(name).resolve()}"\n{code}'
            if not target.exists() or target.read_text(encoding="utf-8") != content:
                target.write_text(content, encoding="utf-8")
            entries.append(f"{program};{'run' if header.group(2) else 'compile'}")
    print("\n".join(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
