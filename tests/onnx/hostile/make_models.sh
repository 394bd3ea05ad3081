#!/usr/bin/env bash
# make_models.sh OUT: writes the hostile models of expected.txt into OUT (symlinks, sparse files and
# generated node lists that should not live in git). Needs protoc (protobuf-compiler).
set -euo pipefail
out=$1
rm -rf "$out"
mkdir -p "$out"
cd "$out"
proto=/usr/include/onnx/onnx.proto
[ -f "$proto" ] || proto=$(ls /usr/include/onnx/onnx*.proto | head -1)
enc() { protoc --proto_path=/usr/include --encode=onnx.ModelProto "onnx/$(basename "$proto")" > "$1"; }
x_input='input { name: "x" type { tensor_type { elem_type: 1 shape { dim { dim_value: 2 } } } } }'
y_output='output { name: "y" type { tensor_type { elem_type: 1 } } }'
# A model whose output shape comes from an int64[2] external initializer named by $2.
shape_from_external() {
  enc "$1" <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g"
  initializer { name: "s" data_type: 7 dims: 2 data_location: EXTERNAL external_data { key: "location" value: "$2" } $3 }
  node { input: "s" output: "y" op_type: "ConstantOfShape" name: "c" }
  $y_output }
EOT
}

# --- the external-data sandbox ---
mkdir outside blobs
printf 'root:x:0:0:root:' > outside/secret.bin  # 16 bytes: an int64[2] shape if it were read
printf '\002\0\0\0\0\0\0\0\003\0\0\0\0\0\0\0' > blobs/sha256-abc  # int64 {2, 3}
mkdir symlink_file && ln -s ../outside/secret.bin symlink_file/weights.bin
shape_from_external symlink_file/model.onnx weights.bin ""
mkdir symlink_folder && ln -s / symlink_folder/root
shape_from_external symlink_folder/model.onnx root/etc/passwd ""
mkdir symlink_constant && ln -s ../outside/secret.bin symlink_constant/weights.bin
enc symlink_constant/model.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g"
  node { output: "s" op_type: "Constant" name: "k" attribute { name: "value" type: TENSOR t { data_type: 7 dims: 2
    data_location: EXTERNAL external_data { key: "location" value: "weights.bin" } } } }
  node { input: "s" output: "y" op_type: "ConstantOfShape" name: "c" }
  $y_output }
EOT
mkdir hub_cache && ln -s ../blobs/sha256-abc hub_cache/weights.bin
shape_from_external hub_cache/model.onnx weights.bin ""
mkdir loose && printf '\002\0\0\0\0\0\0\0\003\0\0\0\0\0\0\0' > loose/w.bin && mkdir loose/sub && mkfifo loose/fifo
shape_from_external loose/negative_length.onnx w.bin 'external_data { key: "length" value: "-5" }'
shape_from_external loose/hex_offset.onnx w.bin 'external_data { key: "offset" value: "0x" }'
shape_from_external loose/suffix_length.onnx w.bin 'external_data { key: "length" value: "24abc" }'
shape_from_external loose/nul_location.onnx 'w.bin\000../../../etc/passwd' ""
shape_from_external loose/overflow.onnx w.bin \
  'external_data { key: "offset" value: "8" } external_data { key: "length" value: "9223372036854775807" }'
shape_from_external loose/directory.onnx sub ""
shape_from_external loose/fifo.onnx fifo ""

# --- memory budget ---
# 2000 ConstantOfShape nodes of 16 MiB - 4 bytes each: used (graph outputs), then unused.
many_folds() {
  {
    echo 'ir_version: 8 opset_import { domain: "" version: 13 } graph { name: "g"'
    echo '  initializer { name: "s" data_type: 7 dims: 1 int64_data: 4194303 }'
    for i in $(seq 0 1999); do echo "  node { input: \"s\" output: \"c$i\" op_type: \"ConstantOfShape\" name: \"c$i\" }"; done
    if [ "$2" = used ]; then
      for i in $(seq 0 1999); do echo "  output { name: \"c$i\" type { tensor_type { elem_type: 1 } } }"; done
    else
      echo "  node { input: \"x\" output: \"y\" op_type: \"Relu\" name: \"r\" } $x_input $y_output"
    fi
    echo '}'
  } | enc "$1"
}
many_folds many_folds_used.onnx used
many_folds many_folds_unused.onnx unused
# One 16 MiB external file (sparse) behind 600 initializers.
mkdir shared_external && truncate -s 16M shared_external/big.bin
{
  echo 'ir_version: 8 opset_import { domain: "" version: 13 } graph { name: "g"'
  for i in $(seq 0 599); do
    echo "  initializer { name: \"w$i\" data_type: 1 dims: 4194304 data_location: EXTERNAL external_data { key: \"location\" value: \"big.bin\" } }"
  done
  echo "  node { input: \"x\" output: \"y\" op_type: \"Relu\" name: \"r\" } $x_input $y_output }"
} | enc shared_external/model.onnx
# A model file over protobuf's 2 GiB (sparse).
truncate -s 2200M too_big.onnx

# --- work budget ---
big_const='initializer { name: "n" data_type: 7 dims: 1 int64_data: 4194304 }'
enc einsum.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" $big_const
  node { input: "n" output: "a" op_type: "ConstantOfShape" name: "a" }
  node { input: "n" output: "b" op_type: "ConstantOfShape" name: "b" }
  node { input: "a" input: "b" output: "y" op_type: "Einsum" name: "e" attribute { name: "equation" s: "i,j->" type: STRING } }
  $y_output }
EOT
enc dft_prime.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 17 }
graph { name: "g" initializer { name: "n" data_type: 7 dims: 3 int64_data: [1, 2097143, 1] }
  node { input: "n" output: "a" op_type: "ConstantOfShape" name: "a" }
  node { input: "a" output: "y" op_type: "DFT" name: "dft" attribute { name: "axis" i: 1 type: INT } }
  $y_output }
EOT
enc matmul_chain.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" initializer { name: "n" data_type: 7 dims: 2 int64_data: [2048, 2048] }
  node { input: "n" output: "a" op_type: "ConstantOfShape" name: "a" }
  node { input: "a" input: "a" output: "b" op_type: "MatMul" name: "m1" }
  node { input: "b" input: "b" output: "c" op_type: "MatMul" name: "m2" }
  node { input: "c" input: "c" output: "y" op_type: "MatMul" name: "m3" }
  $y_output }
EOT
# 200 MatMuls, each under the per-node limit: the import's total fold work bounds them.
{
  echo 'ir_version: 8 opset_import { domain: "" version: 13 } graph { name: "g"'
  echo '  initializer { name: "n" data_type: 7 dims: 2 int64_data: [512, 512] }'
  echo '  node { input: "n" output: "m0" op_type: "ConstantOfShape" name: "a" }'
  for i in $(seq 1 200); do echo "  node { input: \"m$((i - 1))\" input: \"m$((i - 1))\" output: \"m$i\" op_type: \"MatMul\" name: \"mm$i\" }"; done
  echo '  node { input: "m200" output: "y" op_type: "Relu" name: "r" } output { name: "y" type { tensor_type { elem_type: 1 } } } }'
} | enc matmul_many.onnx
roi_align() {
  enc "$1" <<EOT
ir_version: 8 opset_import { domain: "" version: 16 }
graph { name: "g" initializer { name: "n" data_type: 7 dims: 4 int64_data: [1, 1, 2, 2] }
  initializer { name: "rois" data_type: 1 dims: [1, 4] float_data: [$2] }
  initializer { name: "idx" data_type: 7 dims: 1 int64_data: 0 }
  node { input: "n" output: "x" op_type: "ConstantOfShape" name: "x" }
  node { input: "x" input: "rois" input: "idx" output: "y" op_type: "RoiAlign" name: "roi" }
  $y_output }
EOT
}
roi_align roi_grid.onnx "0, 0, 5e8, 5e8"
roi_align roi_nan.onnx "nan, nan, nan, nan"

# --- limits and messages ---
enc opset_huge.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 4294967297 }
graph { name: "g" node { input: "x" output: "y" op_type: "Relu" name: "r" } $x_input $y_output }
EOT
{
  echo "ir_version: 8 opset_import { domain: \"\" version: 13 } graph { name: \"g\" $x_input $y_output"
  for i in $(seq 1 40); do echo "node { input: \"c\" output: \"y\" op_type: \"If\" attribute { name: \"then_branch\" type: GRAPH g { name: \"n$i\""; done
  for i in $(seq 1 40); do echo "} } }"; done
  echo "}"
} | enc nested.onnx
enc huge_shape.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" initializer { name: "n" data_type: 7 dims: 1 int64_data: 1099511627776 }
  node { input: "n" output: "y" op_type: "ConstantOfShape" name: "c" } $y_output }
EOT
enc huge_input.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" node { input: "x" output: "y" op_type: "Relu" name: "r" }
  input { name: "x" type { tensor_type { elem_type: 1 shape { dim { dim_value: 1000000 } dim { dim_value: 1000000 } } } } }
  $y_output }
EOT
enc gather_oob.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" initializer { name: "d" data_type: 1 dims: 3 float_data: [1, 2, 3] }
  initializer { name: "i" data_type: 7 dims: 1 int64_data: 7 }
  node { input: "d" input: "i" output: "y" op_type: "Gather" name: "gather" } $y_output }
EOT
enc scatter_oob.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" initializer { name: "d" data_type: 1 dims: 3 float_data: [1, 2, 3] }
  initializer { name: "i" data_type: 7 dims: 1 int64_data: 5 }
  initializer { name: "u" data_type: 1 dims: 1 float_data: 9 }
  node { input: "d" input: "i" input: "u" output: "y" op_type: "ScatterElements" name: "scatter" } $y_output }
EOT
enc reverse_sequence_oob.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" initializer { name: "d" data_type: 1 dims: [2, 2] float_data: [1, 2, 3, 4] }
  initializer { name: "l" data_type: 7 dims: 2 int64_data: [5, 1] }
  node { input: "d" input: "l" output: "y" op_type: "ReverseSequence" name: "rev"
    attribute { name: "time_axis" i: 0 type: INT } attribute { name: "batch_axis" i: 1 type: INT } } $y_output }
EOT
enc max_unpool_oob.onnx <<EOT
ir_version: 8 opset_import { domain: "" version: 13 }
graph { name: "g" initializer { name: "d" data_type: 1 dims: [1, 1, 1, 1] float_data: 1 }
  initializer { name: "i" data_type: 7 dims: [1, 1, 1, 1] int64_data: 100 }
  node { input: "d" input: "i" output: "y" op_type: "MaxUnpool" name: "unpool"
    attribute { name: "kernel_shape" ints: [2, 2] type: INTS } } $y_output }
EOT
echo "hostile models written to $out"
