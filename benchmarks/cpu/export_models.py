"""Exports the benchmark's models to ONNX (opset 17, fixed shapes) with their inputs, once.

usage: /usr/bin/python3 export_models.py CACHE_DIR MODEL:BATCH...

For each case it writes CACHE_DIR/MODEL-bBATCH/ with model.onnx, weights.pt (its state dict), one ONNX TensorProto file per input
(inputs/NAME.pb, read by kiln, ONNX Runtime and PyTorch alike) and inputs.json listing them. A case whose
folder is complete is left alone; a case is written to a temporary folder and renamed when done.
"""
import json
import os
import shutil
import sys

import onnx
import torch
from onnx import numpy_helper

import models

OPSET = 17


def export_case(cache, name, batch):
    final = os.path.join(cache, f"{name}-b{batch}")
    if os.path.exists(os.path.join(final, "inputs.json")):
        return
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "inputs"))
    print(f"export: {name} batch {batch}", flush=True)
    model, input_names, output_names = models.build(name)
    inputs = models.make_inputs(name, batch)
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs[n] for n in input_names), os.path.join(tmp, "model.onnx"),
                          input_names=input_names, output_names=output_names, opset_version=OPSET,
                          do_constant_folding=True)
    onnx.checker.check_model(os.path.join(tmp, "model.onnx"))
    torch.save(model.state_dict(), os.path.join(tmp, "weights.pt"))  # the same weights for the PyTorch peer
    manifest = []
    for n in input_names:
        path = os.path.join("inputs", f"{n}.pb")
        tensor = numpy_helper.from_array(inputs[n].numpy(), name=n)
        with open(os.path.join(tmp, path), "wb") as f:
            f.write(tensor.SerializeToString())
        manifest.append({"name": n, "file": path, "dims": list(inputs[n].shape), "dtype": str(inputs[n].dtype)})
    with open(os.path.join(tmp, "inputs.json"), "w") as f:
        json.dump({"model": name, "batch": batch, "inputs": manifest, "outputs": output_names}, f, indent=1)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    cache = argv[1]
    torch.set_num_threads(2)
    for case in argv[2:]:
        name, batch = case.split(":")
        export_case(cache, name, int(batch))


if __name__ == "__main__":
    main(sys.argv)
