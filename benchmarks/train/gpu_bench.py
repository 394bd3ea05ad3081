"""GPU training benchmark: kiln train (trainer.backend=cuda) against PyTorch on the same GPU, same run.

ResNet-50 (or --model) on synthetic 224x224 images, batch --batch, SGD with momentum; images/s over the steps after
--warmup. kiln trains in each of --precisions (fp32; fp16: mixed precision with dynamic loss scaling). PyTorch
runs FP32 eager (NCHW) and FP16 AMP channels-last (the issue's target peer).
usage (on the GPU machine, from the repo root): python3 benchmarks/train/gpu_bench.py [--kiln build-gpu/bin/kiln]
  [--model resnet50] [--batch 64] [--steps 30] [--warmup 5] [--precisions fp32,fp16,fp16:layout-nhwc]
  (a precision, optionally with graph passes to leave out after a colon)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def kiln_run(args, tmp, variant):
    # "fp16" or "fp16:layout-nhwc" (a precision, then graph passes to leave out)
    precision, _, disabled = variant.partition(":")
    run_dir = os.path.join(tmp, "kiln-run-" + variant.replace(":", "-"))
    cmd = [args.kiln, "train", "--quiet", "--config", "examples/fashion_mnist.yaml", "--run-dir", run_dir,
           "trainer.backend=cuda", f"model.name={args.model}", "data.format=synthetic", "data.val=",
           "data.height=224", "data.width=224", "data.channels=3", "data.classes=1000", "data.mean=[0.5]",
           "data.std=[0.25]", f"data.batch_size={args.batch}", f"data.train_limit={args.batch * args.steps}",
           "data.workers=8", "optim.name=momentum", "optim.lr=0.01", "trainer.epochs=1", "trainer.log_every=1",
           "trainer.threads=16", f"trainer.precision={precision}", f"trainer.disable_passes={disabled}"]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=560)
    out = {"wall_s": time.time() - t0, "ok": p.returncode == 0}
    with open(os.path.join(tmp, f"kiln-{variant.replace(':', '-')}.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    if p.returncode != 0:
        out["error"] = (p.stderr.strip().splitlines() or ["failed"])[-1][:300]
        return out
    steps = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"type":"step"' in l]
    timed = steps[args.warmup:]
    out["images_per_s"] = sum(s["images_per_s"] for s in timed) / max(len(timed), 1)
    out["loss_first_last"] = [steps[0]["loss"], steps[-1]["loss"]]
    out["skipped_steps"] = steps[-1].get("skipped_steps", 0)
    return out


def torch_run(args, amp):
    import torch
    import torchvision
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = getattr(torchvision.models, args.model)(weights=None).cuda()
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (args.batch,), device="cuda")
    if amp:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(enabled=amp)
    loss_fn = torch.nn.CrossEntropyLoss()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            start.record()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    end.record()
    torch.cuda.synchronize()
    return {"images_per_s": args.batch * args.steps / (start.elapsed_time(end) / 1000.0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build-gpu/bin/kiln")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--peer", choices=["fp32", "amp"])
    ap.add_argument("--precisions", default="fp32,fp16")
    args = ap.parse_args()
    if args.peer:
        print(json.dumps(torch_run(args, args.peer == "amp")))
        return
    tmp = tempfile.mkdtemp()
    kiln = {}
    for precision in args.precisions.split(","):
        kiln[precision] = kiln_run(args, tmp, precision)
        print(f"kiln {precision}:", kiln[precision], flush=True)
    peers = {}
    for mode in ("fp32", "amp"):
        p = subprocess.run([sys.executable, __file__, "--peer", mode, "--model", args.model, "--batch", str(args.batch),
                            "--steps", str(args.steps), "--warmup", str(args.warmup)],
                           capture_output=True, text=True, timeout=300)
        peers[mode] = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {"error": p.stderr[-300:]}
        print(f"torch {mode}:", peers[mode], flush=True)
    f32, amp = peers["fp32"].get("images_per_s"), peers["amp"].get("images_per_s")
    fmt = lambda v: f"{v:.0f}" if v else "-"
    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
    print("| model | batch | kiln precision | kiln img/s | PyTorch FP32 img/s | PyTorch AMP channels-last img/s "
          "| kiln/FP32 | kiln/AMP |")
    print("|---|---|---|---|---|---|---|---|")
    for precision, k in kiln.items():
        v = k.get("images_per_s")
        print(f"| {args.model} | {args.batch} | {precision} | {fmt(v)} | {fmt(f32)} | {fmt(amp)} | {ratio(v, f32)} "
              f"| {ratio(v, amp)} |")


if __name__ == "__main__":
    main()
