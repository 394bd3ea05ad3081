"""Prints the 10 costliest layers of a kiln profile.

usage: /usr/bin/python3 profile_top.py (--json PROFILE.json | --log EXEC_LOG.txt) [--top N]

--json reads `kiln exec --exportProfile` (trtexec's layout: a list of {name, timeMs, averageMs, percentage, ...},
possibly led by a {count} entry). --log reads the text `kiln exec --dumpProfile` printed: the lines after the
section's title ("=== Profile ... ===", else the first line that mentions "profile") that start with a number
are ranked by that number (the time column); a "Total" row is printed last.
"""
import argparse
import json
import re

NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s")


def from_json(path, top):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("layers", [])
    layers = [d for d in data if isinstance(d, dict) and "name" in d]
    key = next((k for k in ("averageMs", "medianMs", "timeMs", "time_ms", "ms") if layers and k in layers[0]), None)
    if key is None:
        print("  (profile JSON has no per-layer time field this script knows)")
        return
    total = sum(float(d[key]) for d in layers) or 1.0
    print(f"  {key:>12}  {'share':>6}  layer")
    for d in sorted(layers, key=lambda d: -float(d[key]))[:top]:
        print(f"  {float(d[key]):12.3f}  {100 * float(d[key]) / total:5.1f}%  {d['name']}")


def from_log(path, top):
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    # The section's title (trtexec: "=== Profile (N iterations ) ==="), else the first line naming a profile.
    titles = [i for i, line in enumerate(lines) if re.search(r"=+\s*profile", line, re.IGNORECASE)]
    start = titles[-1] if titles else next((i for i, line in enumerate(lines) if "profile" in line.lower()), None)
    if start is None:
        print("  (no profile section in kiln's output)")
        return
    rows = [line for line in lines[start + 1 :] if NUMBER.match(line)]
    totals = [line for line in rows if line.split()[-1].lower() == "total"]
    rows = [line for line in rows if line not in totals]
    header = next((line for line in lines[start + 1 : start + 4] if not NUMBER.match(line)), "")
    if header:
        print(f"  {header.strip()}")
    for line in sorted(rows, key=lambda line: -float(NUMBER.match(line).group(1)))[:top] + totals[:1]:
        print(f"  {line.strip()}")


def main():
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--json")
    group.add_argument("--log")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    if args.json:
        from_json(args.json, args.top)
    else:
        from_log(args.log, args.top)


if __name__ == "__main__":
    main()
