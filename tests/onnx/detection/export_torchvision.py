#!/usr/bin/env python3
"""Exports torchvision detection models (random weights, fixed seed) to ONNX in the ONNX backend-test layout.

    export_torchvision.py OUT_DIR [MODEL...]

writes OUT_DIR/detection/<model>/model.onnx and test_data_set_0/{input_0,output_*}.pb, with PyTorch's own
outputs as the expected ones, so that `kiln_onnx_conformance --data OUT_DIR -v` checks kiln against PyTorch
(rtol 1e-3). Default models: ssdlite320_mobilenet_v3_large, fasterrcnn_mobilenet_v3_large_320_fpn.
"""
import os
import sys

import onnx
import torch
import torchvision
from onnx import numpy_helper

MODELS = ["ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn"]


def export(name, root):
    torch.manual_seed(0)
    # random weights give every class about the same score: keep all boxes (Faster R-CNN's default threshold of
    # 0.05 would keep none) so that the comparison covers the whole post-processing
    extra = {"box_score_thresh": 0.0} if name.startswith("fasterrcnn") else {}
    model = torchvision.models.detection.__dict__[name](weights=None, weights_backbone=None, **extra).eval()
    # torchvision's initialization leaves the heads' outputs near-constant on random images (every score 1/91),
    # so that the ranking of boxes is decided by rounding: give every layer He-initialized weights and small
    # random biases instead, which spreads the scores far beyond float32 rounding
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
                torch.nn.init.kaiming_normal_(module.weight)
                if module.bias is not None:
                    torch.nn.init.uniform_(module.bias, -0.1, 0.1)
    image = torch.rand(3, 320, 320)
    if hasattr(model, "roi_heads"):
        # He-initialized features are large: scale the prediction layers to outputs of a set standard deviation
        # (class logits 2, box deltas 0.2), so that scores spread over (0, 1) and boxes stay near their anchors
        # rather than hinging on exp() of large deltas, which no two float32 implementations agree on
        for layer, std in [(model.rpn.head.cls_logits, 2.0), (model.rpn.head.bbox_pred, 0.2),
                           (model.roi_heads.box_predictor.cls_score, 2.0), (model.roi_heads.box_predictor.bbox_pred, 0.2)]:
            seen = []
            hook = layer.register_forward_hook(lambda module, args, result: seen.append(result.std().item()))
            with torch.no_grad():
                model([image])
                layer.weight.mul_(std / seen[0])
                layer.bias.zero_()
            hook.remove()
    with torch.no_grad():
        expected = model([image])[0]
    folder = os.path.join(root, "detection", name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    torch.onnx.export(model, ([image],), path, opset_version=17, input_names=["images"],
                      output_names=list(expected.keys()), **kwargs)
    graph = onnx.load(path).graph
    data = os.path.join(folder, "test_data_set_0")
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(image.numpy(), graph.input[0].name).SerializeToString())
    for i, key in enumerate(expected.keys()):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(expected[key].numpy(), graph.output[i].name).SerializeToString())
    try:  # ONNX Runtime on the same file, to tell export differences from kiln's
        import onnxruntime
        got = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {graph.input[0].name: image.numpy()})
        for key, value in zip(expected.keys(), got):
            want = expected[key].numpy()
            diff = abs(value.astype("float64") - want).max() if value.shape == want.shape and want.size else 0
            scale = abs(want).max() if want.size else 0
            print(f"{name}: onnxruntime {key} {list(value.shape)} vs torch {list(want.shape)}, max diff {diff:.3g}"
                  f" (of {scale:.3g}, {diff / scale if scale else 0:.2g} relative)")
    except ImportError:
        pass
    ops = sorted({n.op_type for n in graph.node})
    scores = expected["scores"]
    gaps = (scores[:-1] - scores[1:]).abs() if len(scores) > 1 else scores
    print(f"{name}: scores {scores.min():.4g}..{scores.max():.4g}, smallest gap {gaps.min():.3g}")
    print(f"{name}: {len(graph.node)} nodes, {len(expected['boxes'])} boxes; ops: {' '.join(ops)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[2:] or MODELS:
        export(name, sys.argv[1])
