"""Sums an ONNX Runtime profile (ort_run.js --profile PREFIX writes PREFIX_<date>.json) per operator and per node.

usage: /usr/bin/python3 ort_profile.py PROFILE.json [--top N]

Prints the milliseconds per run of each operator type and of the N costliest nodes (kernel time only; the profile
holds every run of the session, warm-up included, so totals are divided by the number of runs it recorded): the
peer's side of a per-layer comparison with kiln's `kiln exec --exportProfile` (profile_top.py).
"""
import argparse
import collections
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    with open(args.profile) as f:
        events = json.load(f)
    runs = max(1, sum(1 for e in events if e.get("name") == "model_run"))
    by_op = collections.defaultdict(float)
    by_node = collections.defaultdict(float)
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        ms = e.get("dur", 0) / 1000.0
        by_op[e.get("args", {}).get("op_name", "?")] += ms
        by_node[e["name"][: -len("_kernel_time")]] += ms
    total = sum(by_op.values()) or 1.0
    print(f"{runs} runs, {total / runs:.3f} ms of kernels per run")
    print(f"  {'ms/run':>9}  {'share':>6}  operator")
    for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1]):
        print(f"  {ms / runs:9.3f}  {100 * ms / total:5.1f}%  {op}")
    print(f"  {'ms/run':>9}  node (top {args.top})")
    for node, ms in sorted(by_node.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {ms / runs:9.3f}  {node}")


if __name__ == "__main__":
    main()
