"""Runs one benchmark case on PyTorch eager (CPU) and times it, like ort_run.js.

usage: /usr/bin/python3 torch_run.py CASE_DIR [--runs N] [--warmup-ms MS] [--threads T] [--output FILE]

Rebuilds the architecture, loads CASE_DIR/weights.pt (the exported weights) and the inputs' TensorProto files,
runs under torch.no_grad() with torch.set_num_threads(T): warm-up (at least one run, then until MS passed),
then N timed runs. Prints `torch: median_ms=... mean_ms=... runs=N`; --output writes the last outputs as JSON.
"""
import argparse
import json
import os
import statistics
import time

import torch
from onnx import load_tensor, numpy_helper

import models


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case_dir")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup-ms", type=float, default=500)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with open(os.path.join(args.case_dir, "inputs.json")) as f:
        manifest = json.load(f)
    model, input_names, output_names = models.build(manifest["model"], calibrate=False)
    model.load_state_dict(torch.load(os.path.join(args.case_dir, "weights.pt")))
    files = {i["name"]: os.path.join(args.case_dir, i["file"]) for i in manifest["inputs"]}
    inputs = [torch.from_numpy(numpy_helper.to_array(load_tensor(files[n])).copy()) for n in input_names]
    with torch.no_grad():
        start = time.perf_counter()
        out = model(*inputs)
        while (time.perf_counter() - start) * 1000 < args.warmup_ms:
            out = model(*inputs)
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            out = model(*inputs)
            times.append((time.perf_counter() - t0) * 1000)
    print(f"torch: torch {torch.__version__} median_ms={statistics.median(times):.3f} "
          f"mean_ms={statistics.mean(times):.3f} runs={len(times)}")
    if args.output:
        outs = out if isinstance(out, (tuple, list)) else [out]
        with open(args.output, "w") as f:
            json.dump([{"name": n, "dimensions": list(t.shape), "values": t.flatten().tolist()}
                       for n, t in zip(output_names, outs)], f)


if __name__ == "__main__":
    main()
