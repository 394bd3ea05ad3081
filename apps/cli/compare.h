#pragma once
// `kiln compare`: runs a model on kiln's CPU backend and on the reference kernels (and, with --test-dir,
// against an ONNX test directory's expected outputs) and reports each output's largest errors.
#include <string>
#include <vector>

namespace kiln::cli {

struct CompareOptions {
  std::string onnx;
  std::string test_dir;  ///< an ONNX backend-test folder holding input_<i>.pb and output_<i>.pb
  std::vector<std::string> shapes, load_inputs;
  double rtol = 1e-3, atol = 1e-5;
};

int run_compare(const CompareOptions& opt);

}  // namespace kiln::cli
