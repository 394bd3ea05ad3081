#pragma once
// `kiln inspect`: what a model or engine file holds, or why it cannot be read.
#include <string>

namespace kiln::cli {

struct InspectOptions {
  std::string path;
  bool show_graph = false;
  bool build = false;  ///< also build a CPU engine and list each node's kernel
  // Limits for untrusted models (see ImportOptions); sizes as "512MiB", "8GiB" or bytes, "" for the default.
  std::string external_data_root;
  std::string max_import_memory;
  std::string large_tensor_warning;
  double fold_work_limit = 4e9;
  double fold_work_total = 4e10;
};

int run_inspect(const InspectOptions& options);

}  // namespace kiln::cli
