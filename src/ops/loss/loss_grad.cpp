// Gradient rules of the losses: each calls its backward op. Class indices, lengths and CTC targets have
// no gradient; nor have NLLLoss's and CrossEntropyLoss's class weights and class-probability targets
// (PyTorch has none for the weights either).
#include "ops/grad.h"
#include "ops/loss/loss.h"
#include "ops/unary/unary.h"

namespace kiln {
namespace {

/// The forward node's inputs from 0 with trailing absent ones dropped, after `dy`.
std::vector<GradValue> backward_inputs(GradBuilder& b, GradValue dy) {
  std::vector<GradValue> in{dy};
  for (int i = 0; i < b.num_inputs(); ++i) in.push_back(b.input(i));
  while (!in.back()) in.pop_back();
  return in;
}

/// MSELoss, L1Loss, SmoothL1Loss: dx from the backward op; dtarget = -dx.
template <const char* kBackward>
Status pointwise_loss_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || (!b.needs_grad(0) && !b.needs_grad(1))) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue dx, b.add1(kBackward, b.attrs().clone(), backward_inputs(b, dy)));
  if (b.needs_grad(0)) KILN_RETURN_IF_ERROR(b.set_grad(0, dx));
  if (b.needs_grad(1)) {
    KILN_ASSIGN_OR_RETURN(GradValue dt,
                          b.add1("Unary", std::make_unique<UnaryAttrs>(unary_attrs(UnaryOp::kNeg)), {dx}));
    KILN_RETURN_IF_ERROR(b.set_grad(1, dt));
  }
  return Status::ok();
}

constexpr char kMseBackward[] = "MSELossBackward";
constexpr char kL1Backward[] = "L1LossBackward";
constexpr char kSmoothL1Backward[] = "SmoothL1LossBackward";

/// BCEWithLogitsLoss: one backward op per input that needs a gradient (per element of x, summed to the
/// shape of weight and pos_weight).
Status bce_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  for (int i = 0; i < b.num_inputs() && i < 4; ++i) {
    if (!b.input(i) || !b.needs_grad(i)) continue;
    auto attrs = std::make_unique<BCEWithLogitsLossAttrs>(b.attrs_as<BCEWithLogitsLossAttrs>());
    attrs->wrt = static_cast<BceWrt>(i);
    KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("BCEWithLogitsLossBackward", std::move(attrs), backward_inputs(b, dy)));
    if (i >= 2) {
      KILN_ASSIGN_OR_RETURN(g, b.sum_to(g, b.desc(b.input(i)).dims));
    }
    KILN_RETURN_IF_ERROR(b.set_grad(i, g));
  }
  return Status::ok();
}

/// NLLLoss, CrossEntropyLoss, CTCLoss: the gradient of input 0 only.
template <const char* kBackward>
Status first_input_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue dx, b.add1(kBackward, b.attrs().clone(), backward_inputs(b, dy)));
  return b.set_grad(0, dx);
}

constexpr char kNllBackward[] = "NLLLossBackward";
constexpr char kCrossEntropyBackward[] = "CrossEntropyLossBackward";
constexpr char kCtcBackward[] = "CTCLossBackward";

KILN_REGISTER_GRAD("MSELoss", pointwise_loss_grad<kMseBackward>);
KILN_REGISTER_GRAD("L1Loss", pointwise_loss_grad<kL1Backward>);
KILN_REGISTER_GRAD("SmoothL1Loss", pointwise_loss_grad<kSmoothL1Backward>);
KILN_REGISTER_GRAD("BCEWithLogitsLoss", bce_grad);
KILN_REGISTER_GRAD("NLLLoss", first_input_grad<kNllBackward>);
KILN_REGISTER_GRAD("CrossEntropyLoss", first_input_grad<kCrossEntropyBackward>);
KILN_REGISTER_GRAD("CTCLoss", first_input_grad<kCtcBackward>);

}  // namespace
}  // namespace kiln
