// Reference BatchNormalizationTraining, BatchNormalizationBackward, LayerNormalizationBackward,
// InstanceNormalizationBackward and LRNBackward
// (serial loops).
#include "kernels/ref/normalization_train_run.h"

namespace kiln {
namespace {

constexpr auto kSerial = [](int64_t n, auto&& f) {
  for (int64_t i = 0; i < n; ++i) f(i);
};

Status float32_only(const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); }

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.batch_normalization_training",
    .op = "BatchNormalizationTraining",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = float32_only,
    .create = stateless([](KernelContext& ctx) { return ref::batch_norm_training(ctx, kSerial); }),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.batch_normalization_backward",
    .op = "BatchNormalizationBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = float32_only,
    .create = stateless([](KernelContext& ctx) { return ref::batch_norm_backward(ctx, kSerial); }),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.layer_normalization_backward",
    .op = "LayerNormalizationBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = float32_only,
    .create = stateless([](KernelContext& ctx) { return ref::layer_norm_backward(ctx, kSerial); }),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.instance_normalization_backward",
    .op = "InstanceNormalizationBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = float32_only,
    .create = stateless([](KernelContext& ctx) { return ref::instance_norm_backward(ctx, kSerial); }),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.lrn_backward",
    .op = "LRNBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = float32_only,
    .create = stateless([](KernelContext& ctx) { return ref::lrn_backward(ctx, kSerial); }),
}));

}  // namespace
}  // namespace kiln
