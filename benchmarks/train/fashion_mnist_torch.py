"""PyTorch (CPU) peer of examples/fashion_mnist.yaml: the same CNN, Adam lr 1e-3, batch 64, inputs scaled to [0, 1]
and normalized with mean 0.2860 / std 0.3530. Prints one JSON line per epoch: seconds, loss, val accuracy.

usage: /usr/bin/python3 fashion_mnist_torch.py [--epochs N] [--threads T] [--limit N]
"""
import argparse
import gzip
import json
import time

import numpy as np
import torch
import torch.nn as nn

ROOT = "/usr/share/datasets/fashion-mnist"


def idx(path, header):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return np.frombuffer(data, dtype=np.uint8, offset=header)


def load(split, limit):
    x = idx(f"{ROOT}/{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
    y = idx(f"{ROOT}/{split}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    if limit:
        x, y = x[:limit], y[:limit]
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    return x, torch.from_numpy(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    xtr, ytr = load("train", args.limit)
    xte, yte = load("t10k", 0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    batch = 64
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr))
        t0 = time.perf_counter()
        total = 0.0
        steps = len(xtr) // batch  # drop_last, as kiln's training loader
        for s in range(steps):
            idx_ = perm[s * batch:(s + 1) * batch]
            opt.zero_grad()
            loss = loss_fn(model(xtr[idx_]), ytr[idx_])
            loss.backward()
            opt.step()
            total += loss.item()
        seconds = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            correct = sum((model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item() for i in range(0, len(xte), 500))
        print(json.dumps({"epoch": epoch + 1, "seconds": seconds, "loss": total / steps, "val_acc": correct / len(xte)}),
              flush=True)


if __name__ == "__main__":
    main()
