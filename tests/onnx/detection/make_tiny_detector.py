#!/usr/bin/env python3
"""Makes tests/onnx/detection/models/detection/tiny_detector: a small detector exported by PyTorch whose
post-processing is TorchScript, so that the ONNX file holds what detection exports hold (a Loop over classes
with a data-dependent If and the per-class candidates as sequences, NonZero, TopK, NonMaxSuppression), with PyTorch's
outputs as the expected ones. Run where PyTorch and torchvision are (the GPU machine):

    make_tiny_detector.py OUT_DIR     (writes OUT_DIR/detection/tiny_detector/...)
"""
import os
import sys
from typing import List

import onnx
import torch
import torchvision
from onnx import numpy_helper

CLASSES, ANCHORS, CELLS = 3, 2, 8


@torch.jit.script
def candidates(boxes: torch.Tensor, scores: torch.Tensor, score_thresh: float):
    kept_boxes: List[torch.Tensor] = []
    kept_scores: List[torch.Tensor] = []
    kept_labels: List[torch.Tensor] = []
    for c in range(scores.size(1)):
        s = scores[:, c]
        keep = torch.nonzero(s > score_thresh).reshape(-1)
        if keep.numel() > 0:
            b = boxes[keep]
            sc = s[keep]
            k = torch.topk(sc, min(6, sc.size(0))).indices
            kept_boxes.append(b[k])
            kept_scores.append(sc[k])
            kept_labels.append(torch.full_like(k, c))
        else:
            kept_boxes.append(torch.zeros(0, 4))
            kept_scores.append(torch.zeros(0))
            kept_labels.append(torch.zeros(0, dtype=torch.long))
    return torch.cat(kept_boxes), torch.cat(kept_scores), torch.cat(kept_labels)


class TinyDetector(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU())
        self.cls = torch.nn.Conv2d(16, ANCHORS * CLASSES, 1)
        self.box = torch.nn.Conv2d(16, ANCHORS * 4, 1)
        centers = (torch.arange(CELLS, dtype=torch.float32) + 0.5) * (32 / CELLS)
        cy, cx = torch.meshgrid(centers, centers, indexing="ij")
        anchors = []
        for size in (6.0, 12.0):
            anchors.append(torch.stack([cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2], -1))
        self.register_buffer("anchors", torch.stack(anchors, 2).reshape(-1, 4))

    def forward(self, image):
        f = self.backbone(image)
        scores = self.cls(f).permute(0, 2, 3, 1).reshape(-1, CLASSES).sigmoid()
        deltas = self.box(f).permute(0, 2, 3, 1).reshape(-1, 4)
        boxes = (self.anchors + deltas * 2.0).clamp(0.0, 32.0)
        boxes, scores, labels = candidates(boxes, scores, 0.5)
        keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.5)[:20]
        return boxes[keep], scores[keep], labels[keep]


def subgraph_ops(graph, nested=False):
    ops = {node.op_type for node in graph.node} if nested else set()
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                ops |= subgraph_ops(attr.g, True)
    return ops


def main(root):
    torch.manual_seed(0)
    model = TinyDetector().eval()
    image = torch.rand(1, 3, 32, 32)
    with torch.no_grad():
        expected = model(image)
    folder = os.path.join(root, "detection", "tiny_detector")
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    torch.onnx.export(model, (image,), path, opset_version=17, input_names=["image"],
                      output_names=["boxes", "scores", "labels"], **kwargs)
    graph = onnx.load(path).graph
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(image.numpy(), graph.input[0].name).SerializeToString())
    for i, value in enumerate(expected):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value.numpy(), graph.output[i].name).SerializeToString())
    ops = sorted({n.op_type for n in graph.node})
    inner = sorted(subgraph_ops(graph))
    print(f"tiny_detector: {len(graph.node)} nodes, {len(expected[0])} boxes, {os.path.getsize(path)} bytes")
    print(f"tiny_detector: ops {' '.join(ops)}; in subgraphs {' '.join(inner)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
