#!/usr/bin/env bash
# make_dynamic_model.sh OUT.onnx: a one-node model (Relu) whose input x is [n, 4] with a dynamic batch n, for
# the optimization-profile tests of `kiln exec`. Needs protoc (protobuf-compiler).
set -euo pipefail
proto=/usr/include/onnx/onnx.proto
[ -f "$proto" ] || proto=$(ls /usr/include/onnx/onnx*.proto | head -1)
protoc --proto_path=/usr/include --encode=onnx.ModelProto "onnx/$(basename "$proto")" > "$1" <<'EOT'
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "dynamic_batch"
  node { input: "x" output: "y" op_type: "Relu" name: "relu" }
  input { name: "x" type { tensor_type { elem_type: 1 shape { dim { dim_param: "n" } dim { dim_value: 4 } } } } }
  output { name: "y" type { tensor_type { elem_type: 1 shape { dim { dim_param: "n" } dim { dim_value: 4 } } } } }
}
EOT
