"""Compares a run's outputs with a reference run's (JSON in the layout of `kiln exec --exportOutput`).

usage: /usr/bin/python3 compare_outputs.py CANDIDATE.json REFERENCE.json [--tolerance T]

For each output of the reference it prints the largest absolute error, the largest relative error
(|a - b| / |b| over elements with |b| > 1e-3 * max|b|) and the largest absolute error over max|b| ("scaled").
Exits 1 when an output is missing, has another shape, or its scaled error is above T (default 1e-3).
"""
import argparse
import json
import sys

import numpy as np


def load(path):
    with open(path) as f:
        return {o["name"]: np.asarray(o["values"], dtype=np.float64).reshape(o["dimensions"]) for o in json.load(f)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("candidate")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, default=1e-3)
    args = parser.parse_args()
    candidate, reference = load(args.candidate), load(args.reference)
    ok = True
    for name, ref in reference.items():
        got = candidate.get(name)
        if got is None or got.shape != ref.shape:
            print(f"  {name}: {'missing' if got is None else f'shape {list(got.shape)}'}, expected {list(ref.shape)}")
            ok = False
            continue
        err = np.abs(got - ref)
        scale = float(np.abs(ref).max()) or 1.0
        significant = np.abs(ref) > 1e-3 * scale
        rel = float((err[significant] / np.abs(ref[significant])).max()) if significant.any() else 0.0
        scaled = float(err.max()) / scale
        good = bool(np.isfinite(got).all()) and scaled <= args.tolerance
        ok &= good
        print(f"  {name}: max abs err {err.max():.3g}, max rel err {rel:.3g}, scaled {scaled:.3g} "
              f"({'ok' if good else f'ABOVE tolerance {args.tolerance:g}'})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
