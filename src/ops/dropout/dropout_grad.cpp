// Gradient rule of Dropout: the kept elements' dy scaled by 1 / (1 - ratio); dy itself outside training.
#include "ops/dropout/dropout.h"
#include "ops/grad.h"

namespace kiln {
namespace {

Status dropout_grad(GradBuilder& b) {
  const auto& a = b.attrs_as<DropoutAttrs>();
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  if (!b.training() || !a.training) return b.set_grad(0, dy);
  KILN_ASSIGN_OR_RETURN(GradValue dx, b.add1("DropoutBackward", std::make_unique<DropoutAttrs>(a), {dy, b.output(1)}));
  return b.set_grad(0, dx);
}

KILN_REGISTER_GRAD("Dropout", dropout_grad);

}  // namespace
}  // namespace kiln
