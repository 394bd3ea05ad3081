#pragma once
// `kiln train --config FILE --run-dir DIR [key=value ...]` and `kiln train --resume DIR`.
#include <string>
#include <vector>

namespace kiln::cli {

struct TrainOptions {
  std::string config;
  std::string run_dir;
  std::string resume;  ///< a run folder to continue
  std::vector<std::string> overrides;
  bool quiet = false;  ///< no progress bar (the log lines stay)
};

int run_train(const TrainOptions& options);

}  // namespace kiln::cli
