// Gradient rule of ReverseSequence: the reversal is its own inverse (and transpose), so dy is reversed
// the same way.
#include <memory>

#include "ops/grad.h"
#include "ops/reverse_sequence/reverse_sequence.h"

namespace kiln {
namespace {

Status reverse_sequence_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(
      GradValue g, b.add1("ReverseSequence", std::make_unique<ReverseSequenceAttrs>(b.attrs_as<ReverseSequenceAttrs>()),
                          {dy, b.input(1)}));
  return b.set_grad(0, g);
}

KILN_REGISTER_GRAD("ReverseSequence", reverse_sequence_grad);

}  // namespace
}  // namespace kiln
