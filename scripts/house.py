#!/usr/bin/env python3
"""The house's limits on the tree, checked by scripts/test.sh:

  - no C or CUDA file over 800 lines;
  - no function over 80 lines (from its opening brace at column 0 to the
    brace that closes it, as .clang-format lays functions out);
  - the tools reach the library through its public headers only: no
    file of tools/ includes a header of src/.

  scripts/house.py [ROOT]    exit 1 and a line per breach, else 0
"""
import os
import re
import subprocess
import sys

MAX_FILE = 800
MAX_FUNC = 80


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "*.c", "*.h", "*.cu"],
                         check=True, capture_output=True, text=True).stdout
    return [p for p in out.split("\n") if p]


def code_of(line):
    """The line without string and character literals and // comments."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def functions(lines):
    """(first line, length, name) of each function body in the file."""
    depth, start, name, in_comment = 0, None, "?", False
    for i, raw in enumerate(lines):
        line = code_of(raw)
        # Block comments: their braces do not count.
        text = ""
        pos = 0
        while pos < len(line):
            if in_comment:
                end = line.find("*/", pos)
                if end < 0:
                    pos = len(line)
                    break
                in_comment, pos = False, end + 2
            else:
                beg = line.find("/*", pos)
                if beg < 0:
                    text += line[pos:]
                    break
                text += line[pos:beg]
                in_comment, pos = True, beg + 2
        if depth == 0 and text.startswith("{") and i > 0:
            start = i
            j = i - 1
            while j > 0 and "(" not in lines[j]:
                j -= 1
            m = re.search(r"(\w+)\s*\(", lines[j])
            name = m.group(1) if m else "?"
        depth += text.count("{") - text.count("}")
        if depth == 0 and start is not None and "}" in text:
            yield start + 1, i - start + 1, name
            start = None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    bad = []
    for path in tracked(root):
        with open(os.path.join(root, path), errors="replace") as f:
            lines = f.read().split("\n")
        n = len(lines) - (lines[-1] == "")
        if n > MAX_FILE:
            bad.append(f"{path}: {n} lines (at most {MAX_FILE})")
        for first, length, name in functions(lines):
            if length > MAX_FUNC:
                bad.append(f"{path}:{first}: {name} is {length} lines "
                           f"(at most {MAX_FUNC})")
        if path.startswith("tools/"):
            for k, line in enumerate(lines):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and os.path.exists(os.path.join(root, "src", m.group(1))):
                    bad.append(f"{path}:{k + 1}: includes src/{m.group(1)} "
                               "(tools use the public headers of include/)")
    for b in bad:
        print(b)
    print(f"house: {len(bad)} breach(es)" if bad else
          "house: files, functions and the tools' headers within the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
