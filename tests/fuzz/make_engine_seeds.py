#!/usr/bin/python3
"""Regenerates tests/fuzz/engine_seeds from engines kiln builds of a few models (control flow, strings, a detector):
<name>.kengine is the whole file (CPU ISA sse41, so that it loads on any x86 CPU), <name>.sections the graph, plan, weights (and prepared) sections as the fuzzer's section
mode takes them, and <name>.header the header JSON and the body for its header mode.
Usage: tests/fuzz/make_engine_seeds.py build/bin/kiln"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = "/usr/share/libonnx-testdata/data/node"
MODELS = {name: f"{NODE}/{name}/model.onnx" for name in [
    "test_conv_with_strides_padding", "test_gather_0", "test_if_seq", "test_loop11", "test_scan9_sum",
    "test_strnormalizer_export_monday_casesensintive_upper"]}
MODELS["tiny_detector"] = f"{ROOT}/tests/onnx/detection/models/detection/tiny_detector/model.onnx"
# A Gemm with constant weights: an engine whose packed GEMM stores them only packed (a prepared-only constant). Level
# 0 takes oneDNN's kernel, so this one is timed, and built again until the packed GEMM wins (PACKED_TRIES times).
MODELS["test_Linear"] = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Linear/model.onnx"
TIMED = {"test_Linear"}
PACKED_TRIES = 20


def parse(data):
    """The header JSON, the body and the sections of a format-2 engine (src/graph/engine_format.h)."""
    assert data[:8] == b"KILNENG\x1a", "not a format-2 engine"
    version, _, header_bytes, body_at, body_bytes = struct.unpack_from("<IIQQQ", data, 8)
    assert version == 2
    header = data[64:64 + header_bytes]
    body = data[body_at:body_at + body_bytes]
    sections = {name: body[s["offset"]:s["offset"] + s["bytes"]]
                for name, s in json.loads(header)["sections"].items()}
    return header, body, sections


def portable(data):
    """The engine with CPU ISA sse41 in its header (checksums redone), so that it loads on any x86 CPU."""
    header, body, _ = parse(data)
    h = json.loads(header)
    h["cpu_isa"] = "sse41"
    header = json.dumps(h, separators=(",", ":")).encode()
    body_at = (64 + len(header) + 63) // 64 * 64
    prelude = bytearray(64)
    prelude[:8] = b"KILNENG\x1a"
    struct.pack_into("<IIQQQI", prelude, 8, 2, 0, len(header), body_at, len(body), zlib.crc32(body))
    struct.pack_into("<I", prelude, 12, zlib.crc32(header, zlib.crc32(bytes(prelude[16:64]))))
    return bytes(prelude) + header + bytes(body_at - 64 - len(header)) + body


def main():
    kiln = sys.argv[1]
    out = f"{ROOT}/tests/fuzz/engine_seeds"
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in MODELS.items():
            engine = os.path.join(tmp, name + ".kengine")
            for _ in range(PACKED_TRIES if name in TIMED else 1):
                subprocess.run([kiln, "exec", "--onnx", model, "--saveEngine", engine, "--iterations", "1",
                                "--duration", "0", "--warmUp", "0",
                                "--builderOptimizationLevel", "1" if name in TIMED else "0"],
                               check=True, stdout=subprocess.DEVNULL)
                data = portable(open(engine, "rb").read())
                header, body, s = parse(data)
                if name not in TIMED or b"prepared_only" in s["graph"]:
                    break
            else:
                sys.exit(f"{name}: the packed GEMM lost every build; no seed with a prepared-only constant")
            open(f"{out}/{name}.kengine", "wb").write(data)
            open(f"{out}/{name}.sections", "wb").write(
                s["graph"] + b"\n#plan#\n" + s["plan"] + b"\n#weights#\n" + s["weights"] +
                (b"\n#prepared#\n" + s["prepared"] if "prepared" in s else b""))
            open(f"{out}/{name}.header", "wb").write(header + b"\n#body#\n" + body)
            print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
