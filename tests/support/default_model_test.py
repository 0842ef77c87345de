#!/usr/bin/env python3
"""The README's main command on the model the repository ships.

Runs `k3host --config laptop` from an empty folder (as a new user would, through the preset
name) and checks that it ran the trained fortune model, not the synthetic demo, and that what
it printed is English: most words of the continuation (60 %; names aside) are words of the held-out fortune text
(the synthetic demo's random weights give byte soup that fails this). Its stdout is the
README's first screen line for line: the prompt and the text exactly, the summary lines with
their numbers, kernel set and report path as they come. Then checks that
`-m demo` selects the synthetic checkpoint with its own geometry (--print-config: nothing is
generated).

usage: default_model_test.py K3HOST SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys


def fail(message, proc=None):
    if proc is not None:
        message += f"\n--- exit {proc.returncode}\n--- stdout:\n{proc.stdout}\n--- stderr:\n{proc.stderr}"
    sys.exit(message)


def readme_screen(source):
    """The README's block of what the main command prints: the one that starts with the prompt."""
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        blocks = re.findall(r"\n```\n(prompt \(.*?)\n```\n", f.read(), re.S)
    if len(blocks) != 1:
        sys.exit(f"README.md: expected one block of the main command's output, found {len(blocks)}")
    return blocks[0].split("\n")


# What varies in a summary line: the report's path, the kernel set, any number.
VARIES = re.compile(r"(?<=^report: ).+|(?<=kernels )[a-z0-9]+|[0-9]+(?:\.[0-9]+)?")


def summary_pattern(line):
    """A regex matching `line` with every part that VARIES replaced by what it may be."""
    pattern, at = "", 0
    for m in VARIES.finditer(line):
        pattern += re.escape(line[at:m.start()])
        text = m.group(0)
        pattern += ".+" if line.startswith("report: ") and m.start() == 8 else \
                   "[a-z0-9]+" if not text[0].isdigit() else r"[0-9]+(?:\.[0-9]+)?"
        at = m.end()
    return pattern + re.escape(line[at:])


def check_screen(source, run):
    """stdout line for line against the README: equal up to the summary, whose numbers, kernel
    set and report path vary with the machine and the run."""
    shown = readme_screen(source)
    got = run.stdout.rstrip("\n").split("\n")
    summary = next((i for i, line in enumerate(shown) if line.startswith("generated ")), len(shown))
    if len(got) != len(shown):
        fail(f"stdout has {len(got)} lines, the README's first screen {len(shown)}:\n" + "\n".join(shown), run)
    for i, (want, line) in enumerate(zip(shown, got)):
        if i < summary:
            ok = line == want
        else:
            pattern = summary_pattern(want)
            ok = re.fullmatch(pattern, line) is not None
        if not ok:
            fail(f"stdout line {i + 1} is not the README's:\n  README: {want!r}\n  stdout: {line!r}", run)


def main():
    exe, source, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    report = os.path.join(work, "run.json")
    run = subprocess.run([exe, "--config", "laptop", "--set", "threads=1", "--out", report],
                         cwd=work, capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        fail("k3host --config laptop failed", run)
    fortune = os.path.join(source, "data", "models", "fortune")
    if f"loading {fortune}" not in run.stderr:
        fail(f"the default pipeline did not load {fortune}", run)
    if "synthetic" in run.stderr:
        fail("the default pipeline ran a synthetic checkpoint", run)
    with open(report, encoding="utf-8") as f:
        r = json.load(f)
    text = r["generated_text"]
    if len(r["generated_ids"]) < 16:
        fail(f"only {len(r['generated_ids'])} ids generated: {r['generated_ids']}")

    with open(os.path.join(source, "data", "text", "heldout.txt"), encoding="utf-8") as f:
        known = set(re.findall(r"[a-z]+", f.read().lower()))
    words = re.findall(r"[a-z]+", text.lower())
    found = [w for w in words if w in known]
    print(f"continuation of {r['prompt_text']!r}: {text!r}")
    print(f"{len(found)} of {len(words)} words occur in the held-out text")
    if len(words) < 5 or len(found) < 0.6 * len(words):
        fail(f"not English enough: {len(found)} of {len(words)} words known in {text!r}")

    check_screen(source, run)

    shown = subprocess.run([exe, "--config", "laptop", "-m", "demo", "--print-config"],
                           cwd=work, capture_output=True, text=True, timeout=60)
    if shown.returncode != 0:
        fail("k3host --config laptop -m demo --print-config failed", shown)
    demo = os.path.join(source, "models", "demo")
    for line in (f"  path: {demo}  # --model demo", "  geometry: demo  # --model demo"):
        if line not in shown.stdout:
            fail(f"expected the line '{line}'", shown)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
