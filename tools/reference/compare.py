#!/usr/bin/python3
"""Compares an engine run (k3host) with the float64 reference (k3_reference.py).

Usage:
  compare.py REF.json --logits ENGINE_LOGITS [--logits-dtype float32|float64]
             [--report ENGINE_REPORT.json | --generated 1,2,3] [--tolerance 1e-4]
             [--rows N] [--tie-margin 0] [--out RESULT.json]

REF.json is a k3_reference.py report (it names its float64 logits file). ENGINE_LOGITS is a
raw little-endian [rows, vocab] array (float32 by default, what `k3host --dump-logits`
writes); row r holds the logits after the engine consumed the r-th token of
prompt + generated ids, exactly like the reference's rows.

Checks (all must hold):
  1. rows: the engine has at least the prompt's rows (or --rows N);
  2. argmax at every compared row equals the reference's (lowest index on ties);
  3. worst relative logits error <= --tolerance, where for one row
        rel = max_v |engine[v] - ref[v]| / max_v |ref[v]|
     and the worst row is reported;
  4. greedy ids: the engine's generated ids (from --report key generated_ids, or --generated)
     equal the reference's, when either is given.
A row whose reference top-2 gap is below --tie-margin is exempt from check 2 and reported as
a near tie (default 0: no exemption).
Exit: 0 all checks pass, 1 a check failed, 2 bad usage or unreadable input.
"""

import argparse
import json
import os
import sys

import numpy as np


class InputError(Exception):
    pass


def load_json(path, what):
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise InputError(f"{what} {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{what} {path}: not JSON ({e})") from None


def load_raw(path, dtype, vocab, what):
    np_dtype = {"float32": "<f4", "float64": "<f8"}[dtype]
    try:
        data = np.fromfile(path, dtype=np_dtype)
    except OSError as e:
        raise InputError(f"{what} {path}: {e.strerror}") from None
    if data.size == 0 or data.size % vocab:
        raise InputError(f"{what} {path}: {data.size} {dtype} values is not a whole number of rows of "
                         f"vocab {vocab}")
    return data.reshape(-1, vocab).astype(np.float64)


def load_reference(path):
    ref = load_json(path, "reference")
    if ref.get("format") != "k3-reference-v1" or "logits" not in ref:
        raise InputError(f"reference {path}: not a k3_reference.py report with logits")
    meta = ref["logits"]
    rows, vocab = meta["shape"]
    lpath = os.path.join(os.path.dirname(os.path.abspath(path)), meta["file"])
    logits = load_raw(lpath, meta["dtype"], vocab, "reference logits")
    if logits.shape[0] != rows:
        raise InputError(f"reference logits {lpath}: {logits.shape[0]} rows, report says {rows}")
    return ref, logits


def find_key(doc, key):
    """doc[key] at the top level or one object level down."""
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for v in doc.values():
            if isinstance(v, dict) and key in v:
                return v[key]
    return None


def first_argmax(row):
    return int(np.flatnonzero(row == row.max())[0])


def top2_gap(row):
    part = np.sort(row)[-2:]
    return float(part[1] - part[0])


def compare(ref, ref_logits, eng_logits, eng_generated, tolerance, rows, tie_margin):
    prompt = ref["prompt_ids"]
    need = rows if rows is not None else len(prompt)
    failures, notes = [], []
    if eng_logits.shape[1] != ref_logits.shape[1]:
        failures.append(f"vocab differs: engine {eng_logits.shape[1]}, reference {ref_logits.shape[1]}")
        return failures, notes, {}
    if eng_logits.shape[0] < need:
        failures.append(f"engine logits have {eng_logits.shape[0]} rows, need at least {need}")
    if ref_logits.shape[0] < need:
        failures.append(f"reference logits have {ref_logits.shape[0]} rows, need at least {need}")
    n = min(eng_logits.shape[0], ref_logits.shape[0])
    if rows is not None:
        n = min(n, rows)
    worst_rel, worst_row = 0.0, -1
    mismatches, near_ties = [], []
    for r in range(n):
        e, f = eng_logits[r], ref_logits[r]
        if not np.isfinite(e).all():
            failures.append(f"row {r}: engine logits are not finite")
            continue
        rel = float(np.abs(e - f).max() / max(np.abs(f).max(), np.finfo(np.float64).tiny))
        if rel > worst_rel:
            worst_rel, worst_row = rel, r
        ea, fa = first_argmax(e), first_argmax(f)
        if ea != fa:
            gap = top2_gap(f)
            item = {"row": r, "engine": ea, "reference": fa, "reference_top2_gap": gap}
            (near_ties if gap < tie_margin else mismatches).append(item)
    for m in mismatches:
        failures.append(f"row {m['row']}: argmax {m['engine']} != reference {m['reference']} "
                        f"(reference top-2 gap {m['reference_top2_gap']:.3g})")
    for m in near_ties:
        notes.append(f"row {m['row']}: argmax differs inside the near-tie margin "
                     f"(gap {m['reference_top2_gap']:.3g} < {tie_margin})")
    if worst_rel > tolerance:
        failures.append(f"worst relative logits error {worst_rel:.3e} at row {worst_row} > tolerance {tolerance:.1e}")
    ref_gen = ref.get("generated_ids", [])
    if eng_generated is not None and list(eng_generated) != list(ref_gen):
        k = next((i for i, (a, b) in enumerate(zip(eng_generated, ref_gen)) if a != b),
                 min(len(eng_generated), len(ref_gen)))
        failures.append(f"greedy ids differ from position {k}: engine {list(eng_generated)}, reference {ref_gen}")
    margins = [(l["margin"], p["position"], l["layer"]) for p in ref.get("routing", [])[:n]
               for l in p["layers"] if l.get("margin") is not None]
    if margins and (failures or notes):
        m, pos, layer = min(margins)
        notes.append(f"smallest reference routing margin {m:.3g} at row {pos}, layer {layer} "
                     "(a near-tie in expert selection can explain a divergence from there on)")
    summary = {"rows_compared": n, "worst_relative_error": worst_rel, "worst_row": worst_row,
               "tolerance": tolerance, "argmax_mismatches": mismatches, "near_ties": near_ties,
               "generated_reference": ref_gen,
               "generated_engine": list(eng_generated) if eng_generated is not None else None}
    return failures, notes, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare k3host logits and greedy ids with the float64 reference.")
    ap.add_argument("reference", help="k3_reference.py report JSON")
    ap.add_argument("--logits", required=True, help="engine logits, raw little-endian [rows, vocab]")
    ap.add_argument("--logits-dtype", choices=("float32", "float64"), default="float32")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--report", help="engine run report JSON holding generated_ids")
    src.add_argument("--generated", help="engine generated ids, comma separated")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="max relative logits error (default 1e-4)")
    ap.add_argument("--rows", type=int, help="compare exactly the first N rows (default: all common rows, "
                                             "at least the prompt's)")
    ap.add_argument("--tie-margin", type=float, default=0.0,
                    help="exempt rows whose reference top-2 gap is below this from the argmax check")
    ap.add_argument("--out", help="write the comparison as JSON")
    args = ap.parse_args(argv)
    try:
        ref, ref_logits = load_reference(args.reference)
        eng_logits = load_raw(args.logits, args.logits_dtype, ref_logits.shape[1], "engine logits")
        eng_generated = None
        if args.report:
            rep = load_json(args.report, "engine report")
            eng_generated = find_key(rep, "generated_ids")
            if not isinstance(eng_generated, list):
                raise InputError(f"engine report {args.report}: no generated_ids list")
            prompt = find_key(rep, "prompt_ids")
            if isinstance(prompt, list) and prompt != ref["prompt_ids"]:
                raise InputError(f"engine report {args.report}: prompt_ids differ from the reference's")
        elif args.generated is not None:
            try:
                eng_generated = [int(t) for t in args.generated.split(",") if t.strip()]
            except ValueError:
                raise InputError(f"--generated: not a comma-separated list of integers: {args.generated!r}") from None
    except InputError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    failures, notes, summary = compare(ref, ref_logits, eng_logits, eng_generated, args.tolerance, args.rows,
                                       args.tie_margin)
    print(f"compare: {summary.get('rows_compared', 0)} rows, worst relative logits error "
          f"{summary.get('worst_relative_error', float('nan')):.3e} (row {summary.get('worst_row')}, "
          f"tolerance {args.tolerance:.1e}), argmax mismatches {len(summary.get('argmax_mismatches', []))}, "
          f"greedy {'not checked' if eng_generated is None else ('equal' if eng_generated == ref.get('generated_ids') else 'DIFFERENT')}")
    for n in notes:
        print(f"compare: note: {n}")
    for f in failures:
        print(f"compare: FAIL: {f}")
    if args.out:
        doc = dict(summary, passed=not failures, failures=failures, notes=notes)
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
