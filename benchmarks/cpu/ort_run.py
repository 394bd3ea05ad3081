"""ONNX Runtime's CPU provider from Python (pip onnxruntime), for machines without Node.js: the same case folder,
options and output line as ort_run.js (2 intra-op threads, 1 inter-op thread, sequential, all optimizations).

usage: python3 ort_run.py CASE_DIR --runs N --warmup-ms MS --threads T
"""
import argparse
import json
import os
import statistics
import time

import onnx
import onnxruntime as ort
from onnx import numpy_helper


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case_dir")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup-ms", type=float, default=500)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    with open(os.path.join(a.case_dir, "inputs.json")) as f:
        manifest = json.load(f)
    feeds = {}
    for inp in manifest["inputs"]:
        t = onnx.TensorProto()
        with open(os.path.join(a.case_dir, inp["file"]), "rb") as f:
            t.ParseFromString(f.read())
        feeds[inp["name"]] = numpy_helper.to_array(t)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(os.path.join(a.case_dir, "model.onnx"), so, providers=["CPUExecutionProvider"])
    start = time.perf_counter()
    while True:
        session.run(None, feeds)
        if (time.perf_counter() - start) * 1000 >= a.warmup_ms:
            break
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1000)
    print(f"ort: onnxruntime {ort.__version__} median_ms={statistics.median(times):.3f} "
          f"mean_ms={statistics.mean(times):.3f} runs={len(times)}")


if __name__ == "__main__":
    main()
