// Gradient rules of the losses: each calls its backward op, once per input that needs a gradient. Class
// indices, lengths and CTC targets have none.
#include <type_traits>
#include <utility>

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
    auto attrs = std::make_unique<BCEWithLogitsLossBackwardAttrs>();
    attrs->reduction = b.attrs_as<LossAttrs>().reduction;
    attrs->wrt = static_cast<BceWrt>(i);
    KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("BCEWithLogitsLossBackward", std::move(attrs), backward_inputs(b, dy)));
    if (i >= 2) {
      KILN_ASSIGN_OR_RETURN(g, b.sum_to(g, b.desc(b.input(i)).dims));
    }
    KILN_RETURN_IF_ERROR(b.set_grad(i, g));
  }
  return Status::ok();
}

/// NLLLoss and CrossEntropyLoss: x, a class-probability target (CrossEntropyLoss), the class weights.
template <class A>
Status class_loss_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const char* op = std::is_same_v<A, NLLLossAttrs> ? "NLLLossBackward" : "CrossEntropyLossBackward";
  for (auto [i, wrt] : {std::pair{0, ClassLossWrt::kInput}, {1, ClassLossWrt::kTarget}, {2, ClassLossWrt::kWeight}}) {
    if (!b.input(i) || !b.needs_grad(i) || !is_floating(b.desc(b.input(i)).dtype)) continue;
    auto attrs = std::make_unique<decltype(backward_attrs(b.attrs_as<A>(), wrt))>(backward_attrs(b.attrs_as<A>(), wrt));
    KILN_ASSIGN_OR_RETURN(GradValue g, b.add1(op, std::move(attrs), backward_inputs(b, dy)));
    KILN_RETURN_IF_ERROR(b.set_grad(i, g));
  }
  return Status::ok();
}

/// CTCLoss: the gradient of log_probs.
Status ctc_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue dx, b.add1("CTCLossBackward", b.attrs().clone(), backward_inputs(b, dy)));
  return b.set_grad(0, dx);
}

KILN_REGISTER_GRAD("MSELoss", pointwise_loss_grad<kMseBackward>);
KILN_REGISTER_GRAD("L1Loss", pointwise_loss_grad<kL1Backward>);
KILN_REGISTER_GRAD("SmoothL1Loss", pointwise_loss_grad<kSmoothL1Backward>);
KILN_REGISTER_GRAD("BCEWithLogitsLoss", bce_grad);
KILN_REGISTER_GRAD("NLLLoss", class_loss_grad<NLLLossAttrs>);
KILN_REGISTER_GRAD("CrossEntropyLoss", class_loss_grad<CrossEntropyLossAttrs>);
KILN_REGISTER_GRAD("CTCLoss", ctc_grad);

}  // namespace
}  // namespace kiln
