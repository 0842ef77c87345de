#!/usr/bin/python3
"""ctest driver for the oracle gates (tests/cmake/oracle.cmake).

  oracle_test.py reference ARGS...   runs k3_reference.py ARGS
  oracle_test.py compare ARGS...     runs compare.py ARGS
  oracle_test.py identical A B       the two files are byte-identical (bit-identity gates)
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


def identical(a, b):
    for p in (a, b):
        if not os.path.isfile(p):
            print(f"FAIL: {p} does not exist")
            return 1
    with open(a, "rb") as fa, open(b, "rb") as fb:
        da, db = fa.read(), fb.read()
    if da == db:
        print(f"identical: {a} == {b} ({len(da)} bytes)")
        return 0
    first = next((i for i, (x, y) in enumerate(zip(da, db)) if x != y), min(len(da), len(db)))
    print(f"FAIL: {a} and {b} differ ({len(da)} vs {len(db)} bytes, first difference at byte {first})")
    return 1


def main(argv):
    if len(argv) < 1 or argv[0] not in ("reference", "compare", "identical", "selftest"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "identical":
        if len(rest) != 2:
            print("identical: needs two files", file=sys.stderr)
            return 2
        return identical(*rest)
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
