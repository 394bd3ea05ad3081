// device.h without CUDA: kiln was built without it, so no parameter can be on a GPU; every call says so.
#include "train/optim/device.h"

namespace kiln::train::device {
namespace {
Status not_built() {
  return unsupported(
      "optimizer on a GPU: kiln was built without CUDA (rebuild with -DKILN_CUDA=ON on a machine with "
      "the CUDA toolkit)");
}
}  // namespace

Status apply(const rules::SgdScalars&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::AdagradScalars&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::RmspropScalars&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::AdadeltaScalars&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::AdamScalars&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::ClampGrad&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::ScaleGrad&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::AccumulateGrad&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status apply(const rules::FinishGrad&, const rules::Tensors&, int64_t, const Launch&) { return not_built(); }
Status fill(float*, int64_t, float, const Launch&) { return not_built(); }
Status reduce(const std::vector<Span>&, Reduction, double, double*, double*, const Launch&) { return not_built(); }
Status unscale(float*, int64_t, float, int*, const Launch&) { return not_built(); }
Status fill_int(int*, int, const Launch&) { return not_built(); }
Status novograd(const rules::NovogradScalars&, const rules::Tensors&, int64_t, double*, const Launch&) {
  return not_built();
}
Status copy_and_wait(void*, const void*, size_t, const Launch&) { return not_built(); }
Status synchronize(const Launch&) { return not_built(); }

}  // namespace kiln::train::device
