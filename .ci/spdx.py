#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Every source file carries the project's SPDX line near its top.

  .ci/spdx.py          list the tracked source files without it; exit 1 if any
  .ci/spdx.py --fix    add it (after a shebang line where there is one)

Source files are found by name, so a new kind of file is checked as soon as its
pattern is listed here; data, images and Markdown are not source."""
import os
import subprocess
import sys

LINE = "SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception"
SLASH = (".hpp", ".cpp", ".cu", ".cuh", ".hpp.in", ".cu.in")
BLOCK = (".h", ".c")  # C headers stay C89-clean
HASH = (".py", ".sh", ".cmake", ".cmake.in", ".yaml", "CMakeLists.txt", ".gitignore")
HASH_NAMES = (".ci/run",)
HEAD_LINES = 5


def comment_for(path):
    if path.endswith(SLASH):
        return "// " + LINE
    if path.endswith(BLOCK):
        return "/* " + LINE + " */"
    if path.endswith(HASH) or path in HASH_NAMES:
        return "# " + LINE
    return None


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], check=True, capture_output=True, text=True)
        return out.stdout.split()
    except (OSError, subprocess.CalledProcessError):
        # Not a git checkout (a source tarball): walk it, skipping build trees.
        found = []
        for d, subdirs, files in os.walk(root):
            subdirs[:] = [s for s in subdirs if not s.startswith((".git", "build", ".gpu", ".deps"))]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files]
        return found


def has_line(text):
    return any(LINE in l for l in text.splitlines()[:HEAD_LINES])


def add_line(text, comment):
    lines = text.splitlines(keepends=True)
    at = 1 if lines and lines[0].startswith("#!") else 0
    return "".join(lines[:at] + [comment + "\n"] + lines[at:])


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fix = "--fix" in sys.argv[1:]
    missing = []
    for rel in tracked_files(root):
        comment = comment_for(rel)
        path = os.path.join(root, rel)
        if comment is None or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if has_line(text):
            continue
        if fix:
            with open(path, "w", encoding="utf-8") as f:
                f.write(add_line(text, comment))
        else:
            missing.append(rel)
    for rel in missing:
        print(f"{rel}: no '{LINE}' in its first {HEAD_LINES} lines", file=sys.stderr)
    if missing:
        print(f"spdx: {len(missing)} source file(s) without the license line; run .ci/spdx.py --fix", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
