// Gradient rule of CumSum: the transpose of a running sum is the running sum the other way
// (exclusive stays exclusive).
#include <memory>

#include "ops/cumsum/cumsum.h"
#include "ops/grad.h"

namespace kiln {
namespace {

Status cumsum_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  auto attrs = std::make_unique<CumSumAttrs>(b.attrs_as<CumSumAttrs>());
  attrs->reverse = !attrs->reverse;
  KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("CumSum", std::move(attrs), {dy, b.input(1)}));
  return b.set_grad(0, g);
}

KILN_REGISTER_GRAD("CumSum", cumsum_grad);

}  // namespace
}  // namespace kiln
