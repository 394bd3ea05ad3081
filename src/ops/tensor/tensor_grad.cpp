// Gradient of Identity: the output's gradient passes through.
#include "ops/grad.h"

namespace kiln {
namespace {

Status identity_grad(GradBuilder& b) {
  GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return {};
  return b.set_grad(0, dy);
}

KILN_REGISTER_GRAD("Identity", identity_grad);

}  // namespace
}  // namespace kiln
