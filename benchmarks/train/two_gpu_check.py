"""Data-parallel check on a two-GPU machine: `kiln train` on one GPU against two processes (one per GPU, NCCL
all-reduce, launched with RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT as mpirun or a cluster
launcher would set them) with the same global batch; prints both loss curves and their largest difference.

A model without batch norm (fashion_cnn) must give the same curve up to summation order; with batch norm
(resnet18) each GPU normalizes its half of the batch, as PyTorch's DistributedDataParallel does without SyncBN,
so that curve is close, not equal.
usage (from the repo root): python3 benchmarks/train/two_gpu_check.py [--kiln build-gpu/bin/kiln] [--steps 20]
"""
import argparse
import json
import os
import socket
import subprocess
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(args, run_dir, model, side, channels, precision):
    return [args.kiln, "train", "--quiet", "--config", "examples/fashion_mnist.yaml", "--run-dir", run_dir,
            "trainer.backend=cuda", f"model.name={model}", "model.width=0", "data.format=synthetic", "data.val=",
            f"data.height={side}", f"data.width={side}", f"data.channels={channels}", "data.classes=10",
            "data.mean=[0.5]", "data.std=[0.25]", f"data.batch_size={args.batch}",
            f"data.train_limit={args.batch * args.steps}", "data.workers=4", "optim.name=momentum", "optim.lr=0.02",
            "trainer.epochs=1", "trainer.log_every=1", "trainer.threads=8", f"trainer.precision={precision}"]


def losses(run_dir):
    steps = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"type":"step"' in l]
    return [s["loss"] for s in steps], [s["images_per_s"] for s in steps]


def check(args, tmp, model, side, channels, precision):
    name = f"{model}-{precision}"
    one = os.path.join(tmp, name + "-one")
    p = subprocess.run(command(args, one, model, side, channels, precision), capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        return {"model": name, "error": "one GPU: " + (p.stderr.strip().splitlines() or ["failed"])[-1][:300]}
    two = os.path.join(tmp, name + "-two")
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port)
        procs.append(subprocess.Popen(command(args, two, model, side, channels, precision), env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [pr.communicate(timeout=300)[0] for pr in procs]
    if any(pr.returncode != 0 for pr in procs):
        return {"model": name, "error": "two GPUs: " + " | ".join(o.strip()[-300:] for o in outs)}
    a, ips_a = losses(one)
    b, ips_b = losses(two)
    diff = max(abs(x - y) / (1 + abs(x)) for x, y in zip(a, b)) if len(a) == len(b) and a else None
    mean = lambda v: sum(v[3:]) / max(len(v[3:]), 1)
    return {"model": name, "steps": len(a), "one": a, "two": b, "max_rel_diff": diff,
            "img_s_one": mean(ips_a), "img_s_two": mean(ips_b)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build-gpu/bin/kiln")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    results = [check(args, tmp, "fashion_cnn", 28, 1, "fp32"), check(args, tmp, "resnet18", 32, 3, "fp32")]
    for r in results:
        print(json.dumps(r), flush=True)
    print("| model | steps | loss first/last, 1 GPU | loss first/last, 2 GPUs | max rel. diff | img/s 1 GPU | img/s 2 GPUs |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['model']} | error: {r['error'][:200]} |")
            continue
        print(f"| {r['model']} | {r['steps']} | {r['one'][0]:.4f} / {r['one'][-1]:.4f} | {r['two'][0]:.4f} / "
              f"{r['two'][-1]:.4f} | {r['max_rel_diff']:.2e} | {r['img_s_one']:.0f} | {r['img_s_two']:.0f} |")


if __name__ == "__main__":
    main()
