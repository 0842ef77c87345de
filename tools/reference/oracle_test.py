#!/usr/bin/python3
"""ctest driver for the oracle gates (tests/cmake/oracle.cmake).

  oracle_test.py reference ARGS...   runs k3_reference.py ARGS
  oracle_test.py compare ARGS...     runs compare.py ARGS
  oracle_test.py identical A B [--tail] [--reports RA RB]
                                     engine logits files A and B are byte-identical (bit-identity
                                     gates); --tail: B equals the last len(B) bytes of A (a resumed
                                     run's rows); --reports: the two run reports' generated_ids agree
  oracle_test.py selftest            the reference's own unit tests (test_reference.py)

Exits 77 (ctest SKIP_RETURN_CODE) with a reason when this interpreter lacks torch or numpy,
so a machine without the reference reports SKIPPED, never passed. With torch present, a
missing reference output is a failure.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SKIP = 77


def need_reference_stack():
    """Finding the modules is enough here (importing torch costs seconds); users import them."""
    import importlib.util
    for name in ("numpy", "torch"):
        if importlib.util.find_spec(name) is None:
            print(f"SKIP: {sys.executable} has no {name} (install: tools/install-deps.sh --with-reference)")
            sys.exit(SKIP)


def identical(a, b, tail=False):
    for p in (a, b):
        if not os.path.isfile(p):
            print(f"FAIL: {p} does not exist")
            return 1
    with open(a, "rb") as fa, open(b, "rb") as fb:
        da, db = fa.read(), fb.read()
    if tail:
        if not db or len(db) > len(da):
            print(f"FAIL: {b} ({len(db)} bytes) cannot be the tail of {a} ({len(da)} bytes)")
            return 1
        da = da[len(da) - len(db):]
    what = "the tail of " if tail else ""
    if da == db:
        print(f"identical: {b} == {what}{a} ({len(db)} bytes)")
        return 0
    first = next((i for i, (x, y) in enumerate(zip(da, db)) if x != y), min(len(da), len(db)))
    print(f"FAIL: {b} and {what}{a} differ ({len(db)} vs {len(da)} bytes, first difference at byte {first})")
    return 1


def same_generated(ra, rb):
    import json
    ids = []
    for p in (ra, rb):
        try:
            with open(p, "r", encoding="utf-8") as f:
                ids.append(json.load(f).get("generated_ids"))
        except (OSError, ValueError) as e:
            print(f"FAIL: run report {p}: {e}")
            return 1
    if ids[0] != ids[1] or not isinstance(ids[0], list):
        print(f"FAIL: generated_ids differ: {ra}: {ids[0]}, {rb}: {ids[1]}")
        return 1
    print(f"identical: generated_ids {ids[0]}")
    return 0


def identical_cmd(args):
    import argparse
    ap = argparse.ArgumentParser(prog="oracle_test.py identical")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tail", action="store_true")
    ap.add_argument("--reports", nargs=2)
    ns = ap.parse_args(args)
    rc = identical(ns.a, ns.b, ns.tail)
    if ns.reports:
        rc = same_generated(*ns.reports) or rc
    return rc


def main(argv):
    if len(argv) < 1 or argv[0] not in ("reference", "compare", "identical", "selftest"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "identical":
        return identical_cmd(rest)
    need_reference_stack()
    if cmd == "reference":
        import k3_reference
        return k3_reference.main(rest)
    if cmd == "selftest":
        import unittest
        suite = unittest.defaultTestLoader.loadTestsFromName("test_reference")
        result = unittest.TextTestRunner(verbosity=1).run(suite)
        return 0 if result.wasSuccessful() else 1
    import compare
    return compare.main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
