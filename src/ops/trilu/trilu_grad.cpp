// Gradient rule of Trilu: the same mask applied to dy.
#include <memory>
#include <vector>

#include "ops/grad.h"
#include "ops/trilu/trilu.h"

namespace kiln {
namespace {

Status trilu_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  std::vector<GradValue> ins = {dy};
  if (b.input(1)) ins.push_back(b.input(1));
  KILN_ASSIGN_OR_RETURN(GradValue g,
                        b.add1("Trilu", std::make_unique<TriluAttrs>(b.attrs_as<TriluAttrs>()), std::move(ins)));
  return b.set_grad(0, g);
}

KILN_REGISTER_GRAD("Trilu", trilu_grad);

}  // namespace
}  // namespace kiln
