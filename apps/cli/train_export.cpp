#include "train_export.h"

#include <cmath>
#include <filesystem>

#include "onnx/exporter.h"
#include "onnx/importer.h"
#include "runner/graph_runner.h"

namespace kiln::cli {

Result<ExportCheck> export_and_check(train::Trainer& trainer, const std::string& run_dir) {
  ExportCheck out;
  out.onnx_path = (std::filesystem::path(run_dir) / "model.onnx").string();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, trainer.inference_graph(kDynamicDim));
  KILN_RETURN_IF_ERROR(onnx_export::export_file(*graph, out.onnx_path));

  KILN_ASSIGN_OR_RETURN(Tensor images, trainer.sample_images(8));
  out.images = images.dims()[0];
  KILN_ASSIGN_OR_RETURN(onnx_import::ImportedModel model, onnx_import::import_file(out.onnx_path));
  BuildOptions build;
  build.backend = Backend::kCpu;
  build.optimization_level = 1;
  KILN_ASSIGN_OR_RETURN(GraphRunner exported, GraphRunner::compile(*model.graph, build));
  KILN_ASSIGN_OR_RETURN(GraphRunner direct, GraphRunner::compile(*graph, build));
  for (GraphRunner* r : {&exported, &direct}) {
    KILN_RETURN_IF_ERROR(r->set_input("image", images));
    KILN_RETURN_IF_ERROR(r->run());
  }
  KILN_ASSIGN_OR_RETURN(Tensor got, exported.output("probabilities"));
  KILN_ASSIGN_OR_RETURN(Tensor want, direct.output("probabilities"));
  if (got.dims() != want.dims())
    return internal_error("the exported model gives probabilities of shape ", got.dims().to_string(), " where ",
                          want.dims().to_string(), " are expected");
  for (int64_t i = 0; i < want.numel(); ++i)
    out.max_abs_diff = std::max(out.max_abs_diff, std::fabs(got.at(i) - want.at(i)));
  if (!(out.max_abs_diff <= 1e-4))
    return internal_error("the engine built from ", out.onnx_path, " differs from the trained model by ",
                          out.max_abs_diff, " (probabilities): please report this");
  return out;
}

}  // namespace kiln::cli
