"""GPU benchmark: kiln against PyTorch FP16 eager and torch.compile(mode="max-autotune"), same GPU, same run.

usage (on the GPU machine, from the repo root, after building kiln): python3 benchmarks/gpu/bench.py OUT_DIR
  [--kiln build-gpu/bin/kiln] [--cases resnet50:1,resnet50:128,bert:1,bert:64] [--iters 100] [--no-compile]
  [--compile-timeout 240] [--kiln-flags "--disable-pass layout-nhwc"]

Per case it builds the model with random weights (ResNet-50 from torchvision; BERT-base from transformers,
sequence 128), exports it to ONNX (opset 17, fixed shapes), and measures with CUDA events after a warm-up, the
median over --iters runs, inputs already on the GPU for every contender:
  - kiln: `kiln exec --fp16 --useCudaGraph --noDataTransfers` (its "GPU Compute Time" median); its engine build
    time with a cold and a warm timing cache; its outputs (a run with transfers) against PyTorch FP32
    (relative L2 error, must be <= 1e-2);
  - PyTorch FP16 eager (ResNet-50 in channels-last), and torch.compile(mode="max-autotune") of the same, each in
    its own process with a time limit (a compile that runs out of time is reported as such, not hidden).
It prints a table (throughput, latency, kiln/peer ratios: > 1 means kiln is faster) and writes OUT_DIR/results.json
and OUT_DIR/table.md.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEQUENCE = 128


def build_model(name):
    import torch
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50(weights=None)
        # A few training-mode passes give BatchNorm statistics that keep activations at a sane scale.
        model.train()
        with torch.no_grad():
            for _ in range(3):
                model(torch.randn(8, 3, 224, 224))
        return model.eval(), ["image"], ["logits"]
    if name == "bert":
        from transformers import BertConfig, BertModel
        config = BertConfig(attn_implementation="eager")  # bert-base: 12 layers, hidden 768, 12 heads
        bert = BertModel(config, add_pooling_layer=False).eval()

        class Encoder(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask):
                return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        return Encoder(bert).eval(), ["input_ids", "attention_mask"], ["hidden"]
    raise SystemExit(f"unknown model {name}")


def make_inputs(name, batch):
    import torch
    g = torch.Generator().manual_seed(1)
    if name == "resnet50":
        return {"image": torch.randn(batch, 3, 224, 224, generator=g)}
    ids = torch.randint(0, 30522, (batch, SEQUENCE), generator=g, dtype=torch.int64)
    mask = torch.ones(batch, SEQUENCE, dtype=torch.int64)
    mask[:, SEQUENCE - 16:] = 0  # padded tail: the mask matters
    return {"input_ids": ids, "attention_mask": mask}


def export(name, batch, folder):
    """Writes model.onnx, inputs/*.pb and reference.npy (PyTorch FP32 on the GPU) into folder."""
    import onnx
    import torch
    from onnx import numpy_helper
    os.makedirs(os.path.join(folder, "inputs"), exist_ok=True)
    model, input_names, output_names = build_model(name)
    inputs = make_inputs(name, batch)
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs[n] for n in input_names), os.path.join(folder, "model.onnx"),
                          input_names=input_names, output_names=output_names, opset_version=17,
                          do_constant_folding=True, **kwargs)
        ref = model.cuda()(*[inputs[n].cuda() for n in input_names]).float().cpu().numpy()
    for n in input_names:
        with open(os.path.join(folder, "inputs", f"{n}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(inputs[n].numpy(), name=n).SerializeToString())
    np.save(os.path.join(folder, "reference.npy"), ref)
    torch.save({"state": model.state_dict()}, os.path.join(folder, "weights.pt"))
    onnx.checker.check_model(os.path.join(folder, "model.onnx"))


def time_torch(name, batch, folder, mode, iters):
    """Runs in a child process: FP16 eager or compiled; prints one JSON line."""
    import torch
    model, input_names, _ = build_model(name)
    model.load_state_dict(torch.load(os.path.join(folder, "weights.pt"))["state"])
    model = model.cuda().half().eval()
    inputs = make_inputs(name, batch)
    args = [inputs[n].cuda() for n in input_names]
    if name == "resnet50":
        model = model.to(memory_format=torch.channels_last)
        args = [args[0].half().to(memory_format=torch.channels_last)]
    t0 = time.time()
    if mode == "compile":
        model = torch.compile(model, mode="max-autotune")
    with torch.inference_mode():
        for _ in range(5 if mode == "eager" else 10):
            model(*args)
        torch.cuda.synchronize()
        compile_s = time.time() - t0
        times = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = model(*args)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    ref = np.load(os.path.join(folder, "reference.npy"))
    err = rel_l2(out.float().cpu().numpy(), ref)
    print(json.dumps({"median_ms": float(np.median(times)), "compile_s": compile_s, "rel_l2": err}))


def rel_l2(got, want):
    got, want = np.asarray(got, np.float64).reshape(-1), np.asarray(want, np.float64).reshape(-1)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def run_peer(args, name, batch, folder, mode):
    cmd = [sys.executable, os.path.abspath(__file__), "--peer", mode, "--case", f"{name}:{batch}", "--folder", folder,
           "--iters", str(args.iters)]
    limit = args.compile_timeout if mode == "compile" else 300
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {limit} s"}
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(lines[-1])


def kiln_run(args, folder, extra, log):
    load = []
    for f in sorted(os.listdir(os.path.join(folder, "inputs"))):
        load += ["--loadInputs", f"{f[:-3]}:{os.path.join(folder, 'inputs', f)}"]
    cmd = [args.kiln, "exec", "--onnx", os.path.join(folder, "model.onnx"), "--device", "cuda", "--fp16",
           "--timingCacheFile", os.path.join(folder, "timing.cache")] + load + args.kiln_flags.split() + extra
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    text = p.stdout + p.stderr
    built = re.search(r"Engine built in ([0-9.]+) ms", text)
    gpu = re.search(r"GPU Compute Time: .*?median = ([0-9.e+-]+) ms", text)
    fallbacks = len(re.findall(r"runs on the host|host-fallback|HostFallback", text))
    return {"ok": p.returncode == 0 and "&&&& PASSED" in text, "build_ms": float(built.group(1)) if built else None,
            "gpu_median_ms": float(gpu.group(1)) if gpu else None, "wall_s": time.time() - t0,
            "fallback_lines": fallbacks}


def kiln_case(args, name, batch, folder):
    out = {}
    iters = ["--iterations", str(args.iters), "--duration", "0", "--warmUp", "200"]
    cold = kiln_run(args, folder, ["--useCudaGraph", "--noDataTransfers"] + iters, os.path.join(folder, "kiln_cold.log"))
    warm = kiln_run(args, folder, ["--useCudaGraph", "--noDataTransfers"] + iters, os.path.join(folder, "kiln_warm.log"))
    check = kiln_run(args, folder, ["--iterations", "1", "--duration", "0", "--warmUp", "0", "--exportOutput",
                                    os.path.join(folder, "kiln_out.json")], os.path.join(folder, "kiln_check.log"))
    profile = os.path.join(folder, "profile.json")
    kiln_run(args, folder, ["--useCudaGraph", "--noDataTransfers", "--iterations", "20", "--duration", "0",
                            "--separateProfileRun", "--exportProfile", profile], os.path.join(folder, "kiln_prof.log"))
    try:
        with open(profile) as f:
            layers = [l for l in json.load(f) if "name" in l]
        layers.sort(key=lambda l: -l.get("averageMs", 0))
        out["top_layers"] = [(l["name"][:60], l.get("kernel", ""), round(l["averageMs"], 4)) for l in layers[:8]]
        out["layers"] = len(layers)
    except (OSError, ValueError) as e:
        out["top_layers"] = str(e)[:100]
    out.update(ok=cold["ok"] and warm["ok"] and check["ok"], build_cold_ms=cold["build_ms"],
               build_warm_ms=warm["build_ms"], median_ms=warm["gpu_median_ms"] or cold["gpu_median_ms"],
               fallback_lines=cold["fallback_lines"])
    try:
        with open(os.path.join(folder, "kiln_out.json")) as f:
            got = json.load(f)[0]["values"]
        out["rel_l2"] = rel_l2(got, np.load(os.path.join(folder, "reference.npy")))
    except (OSError, ValueError, KeyError, IndexError) as e:
        out["rel_l2"] = None
        out["check_error"] = str(e)[:200]
    return out


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--kiln", default="build-gpu/bin/kiln")
    ap.add_argument("--kiln-flags", default="", help="more `kiln exec` flags, e.g. '--disable-pass layout-nhwc'")
    ap.add_argument("--cases", default="resnet50:1,resnet50:128,bert:1,bert:64")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--compile-timeout", type=int, default=240)
    ap.add_argument("--peer")
    ap.add_argument("--case")
    ap.add_argument("--folder")
    args = ap.parse_args()
    if args.peer:
        name, batch = args.case.split(":")
        time_torch(name, int(batch), args.folder, args.peer, args.iters)
        return
    if not args.out:
        sys.exit(__doc__)
    os.makedirs(args.out, exist_ok=True)
    results = []
    for case in args.cases.split(","):
        name, batch = case.split(":")
        batch = int(batch)
        folder = os.path.join(args.out, f"{name}-b{batch}")
        print(f"== {name} batch {batch}", flush=True)
        if not os.path.exists(os.path.join(folder, "reference.npy")):
            export(name, batch, folder)
        r = {"model": name, "batch": batch, "kiln": kiln_case(args, name, batch, folder)}
        print("  kiln:", r["kiln"], flush=True)
        r["eager"] = run_peer(args, name, batch, folder, "eager")
        print("  eager:", r["eager"], flush=True)
        if not args.no_compile:
            r["compile"] = run_peer(args, name, batch, folder, "compile")
            print("  compile:", r["compile"], flush=True)
        results.append(r)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    rows = ["| model | batch | kiln ms | kiln/s | eager ms | compile ms | vs eager | vs compile | kiln rel L2 | "
            "build cold / warm s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        k, e, c = r["kiln"], r["eager"], r.get("compile", {})
        km, em, cm = k.get("median_ms"), e.get("median_ms"), c.get("median_ms")
        per_s = r["batch"] * 1000 / km if km else None
        ratio = lambda peer: None if not (km and peer) else peer / km
        build = f"{fmt(k['build_cold_ms'] and k['build_cold_ms'] / 1000, '.1f')} / " \
                f"{fmt(k['build_warm_ms'] and k['build_warm_ms'] / 1000, '.1f')}"
        rows.append(f"| {r['model']} | {r['batch']} | {fmt(km)} | {fmt(per_s, '.0f')} | {fmt(em)} | "
                    f"{fmt(cm) if cm else c.get('error', '-')[:40]} | {fmt(ratio(em), '.2f')} | "
                    f"{fmt(ratio(cm), '.2f')} | {fmt(k.get('rel_l2'), '.1e')} | {build} |")
    table = "\n".join(rows)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    bad = [r for r in results if not r["kiln"]["ok"] or r["kiln"].get("rel_l2") is None or r["kiln"]["rel_l2"] > 1e-2]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
