#!/usr/bin/python3
"""Checks the layering of libk3core (docs/architecture.md, "Layering rule"): the folders of
core/src are layers, bottom to top, and every public header of core/include/k3 belongs to
the layer that implements it. A file may include only from its own layer and the layers
below it, whether it names the folder ("io/uri.hpp") or reaches it through a public header
(<k3/checkpoint.hpp> is io's); a public header may include only headers of its own layer or
below. So no folder includes one that includes it back, and nothing reaches around the rule
through core/include. Standard library only, well under a second; the ctest tests
`architecture: ...` (tests/cmake/core_layers.cmake) run it.

    tools/check-layers.py [REPO]          check (default: the repository this script is in)
    tools/check-layers.py --table [REPO]  print the edge table docs/architecture.md holds
    tools/check-layers.py --write [REPO]  write that table into docs/architecture.md

It also checks that docs/architecture.md holds, between the markers
`<!-- layers: tools/check-layers.py --table -->` and `<!-- end layers -->`, exactly the
table --table prints, so the doc's edges are the code's. A new folder or public header must
be placed in LAYERS or HEADERS below to pass. Exit codes: 0 all hold, 1 a rule broken
(each one line naming the file), 2 usage.
"""
import os
import re
import sys

# The folders of core/src, bottom to top, in the bands docs/architecture.md draws.
LAYERS = [
    # base: tools, the machine, file formats, pipelines, plugins, the chat format
    ("base", ["util", "machine", "io", "trace", "plugin_host", "config", "chat"]),
    # the model: its definition, the memory plan, the arithmetic, the weights in memory
    ("model", ["model", "plan", "maths", "streaming", "engine"]),
    # runs: writing checkpoints, the job, measuring, conversations, the simulator
    ("run", ["synth", "job", "eval", "conversation", "sim"]),
    # front ends: long-lived servers and reports over a run
    ("front ends", ["serve", "bench", "doctor"]),
]

# Every header of core/include/k3 and the layer (folder of core/src) that implements it.
HEADERS = {
    "build_info.hpp": "util",
    "closest_name.hpp": "util",
    "data_dir.hpp": "util",
    "error.hpp": "util",
    "log.hpp": "util",
    "temporaries.hpp": "util",
    "units.hpp": "util",
    "user_files.hpp": "util",
    "machine.hpp": "machine",
    "checkpoint.hpp": "io",
    "packed_trunk.hpp": "io",
    "trace.hpp": "trace",
    "pipeline.hpp": "config",
    "plugin_host.hpp": "plugin_host",
    "chat.hpp": "chat",
    "model_config.hpp": "model",
    "geometry.hpp": "model",
    "plan.hpp": "plan",
    "sampler.hpp": "maths",
    "model.hpp": "engine",
    "batch.hpp": "engine",
    "make_model.hpp": "synth",
    "pack_trunk.hpp": "synth",
    "draft.hpp": "job",
    "pipeline_plugins.hpp": "job",
    "cluster.hpp": "job",
    "draft_model.hpp": "job",
    "generate.hpp": "job",
    "runtime.hpp": "job",
    "job.hpp": "job",
    "prompts.hpp": "job",
    "scheduler.hpp": "job",
    "perplexity.hpp": "eval",
    "conversation.hpp": "conversation",
    "sim.hpp": "sim",
    "serve.hpp": "serve",
    "bench.hpp": "bench",
    "doctor.hpp": "doctor",
}

BEGIN = "<!-- layers: tools/check-layers.py --table -->"
END = "<!-- end layers -->"

FOLDER_INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)
PUBLIC_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]k3/([A-Za-z0-9_]+\.hpp)[>"]', re.M)


def order():
    return [folder for _, folders in LAYERS for folder in folders]


def sources(root):
    """(folder, path relative to core/src) of every .hpp and .cpp, sorted."""
    src = os.path.join(root, "core", "src")
    out = []
    for dirpath, _, files in os.walk(src):
        for name in files:
            if name.endswith((".hpp", ".cpp")):
                rel = os.path.relpath(os.path.join(dirpath, name), src)
                out.append((rel.split(os.sep)[0], rel))
    return sorted(out)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def analyse(root):
    """The edges folder -> folders it includes from, and every broken rule."""
    rank = {folder: i for i, folder in enumerate(order())}
    errors = []
    src = os.path.join(root, "core", "src")
    include = os.path.join(root, "core", "include", "k3")

    for folder in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, folder)) and folder not in rank:
            errors.append(f"core/src/{folder}: not a layer of tools/check-layers.py (LAYERS) "
                          "and docs/architecture.md")
    public = sorted(h for h in os.listdir(include) if h.endswith(".hpp"))
    for header in public:
        if header not in HEADERS:
            errors.append(f"core/include/k3/{header}: has no layer in tools/check-layers.py (HEADERS)")
    for header, layer in sorted(HEADERS.items()):
        if header not in public:
            errors.append(f"tools/check-layers.py: HEADERS names core/include/k3/{header}, which does not exist")
        if layer not in rank:
            errors.append(f"tools/check-layers.py: HEADERS puts {header} in '{layer}', which is not a layer")
    if errors:
        return {}, errors

    # A public header includes only public headers of its layer or below (SDK headers,
    # <k3/storage.hpp> and the like, are below every layer).
    for header in public:
        for target in PUBLIC_INCLUDE.findall(read(os.path.join(include, header))):
            if target in HEADERS and rank[HEADERS[target]] > rank[HEADERS[header]]:
                errors.append(f"core/include/k3/{header}: a header of {HEADERS[header]}/ includes "
                              f"k3/{target}, a header of {HEADERS[target]}/, a layer above it")

    # What including a public header brings in: its layer and, through the public headers it
    # includes, theirs.
    direct = {h: [t for t in PUBLIC_INCLUDE.findall(read(os.path.join(include, h))) if t in HEADERS]
              for h in public}
    closure = {}
    for header in public:
        seen, todo = set(), [header]
        while todo:
            h = todo.pop()
            if h not in seen:
                seen.add(h)
                todo.extend(direct[h])
        closure[header] = seen

    edges = {folder: set() for folder in rank}
    for folder, rel in sources(root):
        if folder not in rank:
            continue
        text = read(os.path.join(src, rel))
        reached = [(target, f'"{target}/..."') for target in FOLDER_INCLUDE.findall(text)]
        for h in PUBLIC_INCLUDE.findall(text):
            if h in HEADERS:
                reached += [(HEADERS[c], f"k3/{h}" if c == h else f"k3/{h} (through k3/{c})")
                            for c in sorted(closure[h])]
        for target, how in reached:
            if target == folder:
                continue
            if target not in rank:
                errors.append(f"core/src/{rel}: includes from '{target}/', which is not a layer of core/src")
            elif rank[target] > rank[folder]:
                errors.append(f"core/src/{rel}: {folder}/ includes {how}, of {target}/, a layer above it")
            else:
                edges[folder].add(target)
    return edges, errors


def table(edges):
    rank = {folder: i for i, folder in enumerate(order())}
    lines = ["| band | folder | its public headers (`core/include/k3/`) | includes from |",
             "|---|---|---|---|"]
    for band, folders in LAYERS:
        for folder in folders:
            headers = ", ".join(f"`{h}`" for h in sorted(HEADERS) if HEADERS[h] == folder) or "—"
            below = ", ".join(f"`{t}/`" for t in sorted(edges[folder], key=rank.get)) or "nothing"
            lines.append(f"| {band} | `{folder}/` | {headers} | {below} |")
    return "\n".join(lines) + "\n"


def doc_table(root):
    path = os.path.join(root, "docs", "architecture.md")
    text = read(path)
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main(argv):
    args = argv[1:]
    mode = "check"
    if args and args[0] in ("--table", "--write"):
        mode = args[0][2:]
        args = args[1:]
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: tools/check-layers.py [--table | --write] [REPO]", file=sys.stderr)
        return 2
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    edges, errors = analyse(root)
    if mode != "check":
        if errors:
            print("\n".join(errors), file=sys.stderr)
            return 1
        if mode == "table":
            sys.stdout.write(table(edges))
            return 0
        path = os.path.join(root, "docs", "architecture.md")
        text = read(path)
        if doc_table(root) is None:
            print(f"docs/architecture.md: no '{BEGIN}' ... '{END}' to write the table between", file=sys.stderr)
            return 1
        head, rest = text.split(BEGIN, 1)
        with open(path, "w", encoding="utf-8") as f:
            f.write(head + BEGIN + "\n" + table(edges) + END + rest.split(END, 1)[1])
        return 0
    if not errors:
        documented = doc_table(root)
        if documented is None:
            errors.append(f"docs/architecture.md: no edge table between '{BEGIN}' and '{END}'")
        elif documented != table(edges):
            errors.append("docs/architecture.md: the layer table is not the code's; replace it with "
                          "the output of tools/check-layers.py --table (--write does it)")
    if errors:
        print("layering of core/src broken:\n" + "\n".join(errors), file=sys.stderr)
        return 1
    print("core/src layers ok: " + " < ".join(order()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
