#!/usr/bin/python3
"""Checks that what the comments and the docs point at exists: every project path they
name, and every section they cite by name. Standard library only, well under a second; the
ctest tests `docs: every path ...` (tests/cmake/repo_paths.cmake) run it.

    tools/check-paths.py [REPO]        (default: the repository this script is in)

Read: the comments of the project's own sources (C++ `//` and `/* */`; `#` in CMake, shell,
Python and YAML; Python docstrings) and the whole of every Markdown file, under core/ sdk/
plugins/ tests/ tools/ docs/ configs/ presets/ packaging/, README.md and CMakeLists.txt.
Not read: what npm installs (node_modules) and the build folders.

Four rules; each stale reference is one line `file:line: what`, and the exit code is 1:
  path      a path from a top folder of the repository (core/src/streaming/..., docs/cache.md,
            tests/cmake/..., tools/bench/...) must exist;
  relative  a C++, CMake or shell file named by a relative path (streaming/expert_cache.cpp,
            k3/bench.hpp, common/row_prefetch.hpp) must exist under the repository, core/src,
            core/include, core, sdk, plugins or one of its kinds, tests, tests/unit, tools, a
            folder above the citing file, or /usr/include (a system header);
  file      a bare .hpp, .cmake or .sh name must be the name of a file in the repository;
  section   a Markdown file followed by a quoted name (docs/cache.md, "The evaluation") or a
            section number (docs/cache.md §6) must have that heading, or a bold run-in
            heading (**Name**): the heading, its number and backticks dropped, starts with
            the quoted name.
Placeholders are skipped: a segment in capitals (NAME, DIR, G.yaml) or with <>, *, {} or ...
Exit codes: 0 all found, 1 stale references, 2 usage.
"""
import bisect
import os
import re
import sys

TOP = ("core", "sdk", "plugins", "tests", "tools", "docs", "configs", "presets", "packaging", "data")
READ = ("core", "sdk", "plugins", "tests", "tools", "docs", "configs", "presets", "packaging")
TOP_FILES = ("README.md", "CMakeLists.txt")
NOT_OURS = {"node_modules", "__pycache__"}
RELATIVE_ROOTS = ("", "core/src", "core/include", "core", "sdk", "plugins", "tests", "tests/unit", "tools")
# Names the docs give that are no file of this repository: CMake writes k3sdkConfig.cmake
# into the build and install trees.
NOT_FILES = {"k3sdkConfig.cmake"}

# A path: starts a word (not inside a longer path, a URL, a $VARIABLE or ~), has a slash.
PATH = re.compile(r"(?<![\w./$~:@*%=-])([A-Za-z_][\w.+-]*/[\w.+<>*{}…/-]*)")
# A bare file name with an extension whose names this repository owns.
BARE = re.compile(r"(?<![\w./$~:@*%=<-])([A-Za-z_][\w+-]*\.(?:hpp|cmake|sh))\b(?![/\w])")
# A citation: a Markdown file, then (after a comma, a backtick or a parenthesis) a quoted
# name or a section number.
CITE = re.compile(r"(?<![\w./-])([\w./-]*\.md)`?\)?,?\s*\(?\s*(?:\"([^\"]{2,100})\"|“([^”]{2,100})”|§\s?(\d+))")

C_LIKE = (".cpp", ".hpp", ".h", ".c", ".cc", ".mjs")
HASH = (".cmake", ".sh", ".py", ".yaml", ".yml", ".txt")


C_COMMENT = re.compile(r"//([^\n]*)|/\*(.*?)\*/", re.S)
HASH_COMMENT = re.compile(r"(?:^|(?<=\s))#([^\n]*)", re.M)
DOCSTRING = re.compile(r"(\"\"\"|''')(.*?)\1", re.S)


def comment_lines(path, text):
    """The comment text of each line (whole lines for Markdown), same line numbers."""
    lines = text.split("\n")
    ext = os.path.splitext(path)[1]
    if ext == ".md":
        return lines
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    out = [""] * len(lines)

    def put(m, group):
        first = bisect.bisect_right(starts, m.start(group)) - 1
        for k, piece in enumerate(m.group(group).split("\n")):
            out[first + k] += " " + piece

    if ext in C_LIKE:
        for m in C_COMMENT.finditer(text):
            put(m, 1 if m.group(1) is not None else 2)
        return out
    if ext == ".py":
        for m in DOCSTRING.finditer(text):
            put(m, 2)
    for m in HASH_COMMENT.finditer(text):
        put(m, 1)
    return out


def placeholder(path):
    if any(c in path for c in "<>*{}…") or "..." in path:
        return True
    return any(re.fullmatch(r"[A-Z][A-Z0-9_]*", seg.split(".")[0]) for seg in path.strip("/").split("/"))


def headings(md_text):
    """The headings of a Markdown file outside code blocks, as (names, numbers): each name
    without its number ("6. ") and backticks, with the bold run-in headings; the numbers."""
    names, numbers, fenced = [], set(), False
    for line in md_text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = re.match(r"#{1,6}\s+(?:(\d+)\.\s+)?(.*)", line)
        if m:
            numbers.add(m.group(1))
            names.append(m.group(2))
        names += re.findall(r"\*\*([^*]+)\*\*", line)
    return [n.replace("`", "").strip().lower() for n in names], numbers


def section_found(sections, quoted, number):
    names, numbers = sections
    if number:
        return number in numbers
    want = quoted.replace("`", "").strip().rstrip(".").lower()
    return any(n.startswith(want) for n in names)


def files_of(repo):
    found = [f for f in TOP_FILES if os.path.isfile(os.path.join(repo, f))]
    for top in READ:
        for folder, subfolders, names in os.walk(os.path.join(repo, top)):
            subfolders[:] = sorted(s for s in subfolders if s not in NOT_OURS)
            found += [os.path.relpath(os.path.join(folder, n), repo) for n in sorted(names)]
    return found


def check_paths(repo, rel, text, line_of, basenames, kinds):
    here = os.path.dirname(rel)
    above = [here]
    while above[-1]:
        above.append(os.path.dirname(above[-1]))
    roots = RELATIVE_ROOTS + kinds + tuple(above)
    stale = []
    for m in PATH.finditer(text):
        p = m.group(1).rstrip(".,:;)'`")
        if placeholder(p):
            continue
        if p.split("/")[0] in TOP:
            if not os.path.exists(os.path.join(repo, p)):
                stale.append(f"{rel}:{line_of(m)}: {p} does not exist")
        elif p.endswith((".cpp", ".hpp", ".h", ".cmake", ".sh")):
            if not any(os.path.exists(os.path.join(repo, r, p)) for r in roots) and \
                    not os.path.exists(os.path.join("/usr/include", p)):
                stale.append(f"{rel}:{line_of(m)}: {p} is under none of the folders it could be relative to")
    for m in BARE.finditer(text):
        if m.group(1) not in basenames and m.group(1) not in NOT_FILES:
            stale.append(f"{rel}:{line_of(m)}: no file of the repository is called {m.group(1)}")
    return stale


def check_citations(repo, rel, text, line_of, md_cache):
    stale = []
    for m in CITE.finditer(text) if ".md" in text else ():
        target, quoted, number = m.group(1), " ".join((m.group(2) or m.group(3) or "").split()), m.group(4)
        path = target
        if target.split("/")[0] not in TOP or not os.path.isfile(os.path.join(repo, path)):
            path = os.path.join(os.path.dirname(rel), target)
            if not os.path.isfile(os.path.join(repo, path)):
                continue  # another repository's file, or a path check_paths reports
        if path not in md_cache:
            with open(os.path.join(repo, path), encoding="utf-8") as f:
                md_cache[path] = headings(f.read())
        if not section_found(md_cache[path], quoted, number):
            what = f"§{number}" if number else f'"{quoted}"'
            stale.append(f"{rel}:{line_of(m)}: {target} has no section {what}")
    return stale


def check(repo):
    files = files_of(repo)
    plugins = os.path.join(repo, "plugins")
    kinds = tuple(f"plugins/{k}" for k in sorted(os.listdir(plugins))) if os.path.isdir(plugins) else ()
    basenames = {os.path.basename(f) for f in files}
    md_cache = {}
    stale = []
    for rel in files:
        if not rel.endswith((".md",) + C_LIKE + HASH):
            continue
        try:
            with open(os.path.join(repo, rel), encoding="utf-8") as f:
                lines = [line.strip() for line in comment_lines(rel, f.read())]
        except UnicodeDecodeError:
            continue
        # One text per file, so that a citation may wrap; line numbers from the offsets.
        text = "\n".join(lines)
        starts = [0]
        for line in lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)

        def line_of(m):
            return bisect.bisect_right(starts, m.start())

        stale += check_paths(repo, rel, text, line_of, basenames, kinds)
        stale += check_citations(repo, rel, text, line_of, md_cache)
    return stale


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        print("usage: tools/check-paths.py [REPO]", file=sys.stderr)
        return 2
    repo = sys.argv[1] if len(sys.argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(repo, "docs", "architecture.md")):
        print(f"check-paths: {repo} is not the k3host repository (no docs/architecture.md)", file=sys.stderr)
        return 2
    stale = check(repo)
    for line in stale:
        print(line)
    if stale:
        print(f"check-paths: {len(stale)} stale reference(s)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
