#!/usr/bin/python3
"""Lists the functions of the project's own C++ that are longer than a limit (default 100
lines; docs/architecture.md, "Small files, comments that say why": a function over ~100
lines is a smell, split where a reader gains, tables may stay). Standard library only.

    tools/long-functions.py [--limit N] [REPO]

A function is a definition that opens at the start of a line (a free function or a member
defined outside its class) or indented inside a class body, and ends at the first `}` at
its own indentation. Lambdas and the bodies of namespaces, classes, structs and enums are
not functions. Prints `lines file:line name`, longest first, and exits 0: a list to read,
not a gate.
"""
import os
import re
import sys

ROOTS = ["core", "sdk", "plugins", "tools"]
HEAD = re.compile(r"^(\s*)(?!(?:namespace|class|struct|enum|union|extern|if|for|while|switch|do|else|try|catch)\b)"
                  r"[^;{}()#/]*?([~A-Za-z_][\w:~<>]*)\s*\([^;]*$")


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = HEAD.match(lines[i])
        if not m:
            i += 1
            continue
        indent, name = m.group(1), m.group(2)
        # The signature may run over a few lines; the body opens with `{` at its end.
        j = i
        while j < len(lines) and j < i + 8 and not lines[j].rstrip().endswith("{") and ";" not in lines[j]:
            j += 1
        if j >= len(lines) or not lines[j].rstrip().endswith("{") or lines[j].rstrip().endswith("= {"):
            i += 1
            continue
        close = re.compile("^" + re.escape(indent) + r"}")
        k = j + 1
        while k < len(lines) and not close.match(lines[k]):
            k += 1
        if k < len(lines):
            yield name, i + 1, k - i + 1
            i = k + 1
        else:
            i += 1


def main(argv):
    args = argv[1:]
    limit = 100
    if len(args) >= 2 and args[0] == "--limit":
        limit = int(args[1])
        args = args[2:]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for top in ROOTS:
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d not in ("node_modules", "build")]
            for name in files:
                if name.endswith((".cpp", ".hpp", ".h")):
                    path = os.path.join(dirpath, name)
                    for fn, line, n in functions(path):
                        if n > limit:
                            found.append((n, os.path.relpath(path, root), line, fn))
    for n, path, line, fn in sorted(found, key=lambda x: (-x[0], x[1], x[2])):
        print(f"{n:5d} {path}:{line} {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
