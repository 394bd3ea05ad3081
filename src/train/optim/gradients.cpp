#include "train/optim/gradients.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "train/optim/loops.h"

namespace kiln::train {
namespace {

double sum_abs_pow(const float* x, int64_t n, double p) {
  std::vector<double> partial(static_cast<size_t>(loops::chunk_count(n)), 0.0);
  loops::for_chunks(n, [&](int64_t b, int64_t e) {
    double s = 0;
    for (int64_t i = b; i < e; ++i) s += std::pow(std::abs(static_cast<double>(x[i])), p);
    partial[static_cast<size_t>(b / loops::kChunk)] = s;
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

Result<double> grad_norm(const std::vector<Parameter>& params, double norm_type) {
  KILN_RETURN_IF_ERROR(check_parameters(params));
  if (!(norm_type > 0))
    return invalid_argument("gradient norm type ", norm_type, " must be > 0 (2 for L2, inf for the largest magnitude)");
  const bool inf = std::isinf(norm_type);
  double total = 0;
  for (const Parameter& p : params) {
    if (!p.grad.defined()) continue;
    const float* g = p.grad.data<float>();
    const int64_t n = p.grad.numel();
    if (inf) {
      double m = loops::max_abs(g, n);
      total = std::isnan(m) ? m : std::max(total, m);
      if (std::isnan(total)) break;
    } else if (norm_type == 2) {
      total += loops::sum_squares(g, n);
    } else {
      total += sum_abs_pow(g, n, norm_type);
    }
  }
  if (inf) return total;
  return norm_type == 2 ? std::sqrt(total) : std::pow(total, 1.0 / norm_type);
}

Result<double> clip_grad_norm(std::vector<Parameter>& params, double max_norm, double norm_type) {
  if (!(max_norm > 0)) return invalid_argument("clip_grad_norm: the largest norm (", max_norm, ") must be > 0");
  KILN_ASSIGN_OR_RETURN(double total, grad_norm(params, norm_type));
  if (!std::isfinite(total))
    return invalid_argument("the gradients' norm is ", total,
                            ": training diverged (lower the learning rate) or, with mixed precision, the loss scale "
                            "overflowed and this step should have been skipped");
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1) return total;
  const auto scale = static_cast<float>(coef);
  for (Parameter& p : params) {
    if (!p.grad.defined()) continue;
    float* g = p.grad.data<float>();
    loops::for_chunks(p.grad.numel(), [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) g[i] = g[i] * scale;
    });
  }
  return total;
}

Status clip_grad_value(std::vector<Parameter>& params, double clip_value) {
  if (!(clip_value > 0)) return invalid_argument("clip_grad_value: the bound (", clip_value, ") must be > 0");
  KILN_RETURN_IF_ERROR(check_parameters(params));
  const auto hi = static_cast<float>(clip_value), lo = -hi;
  for (Parameter& p : params) {
    if (!p.grad.defined()) continue;
    float* g = p.grad.data<float>();
    loops::for_chunks(p.grad.numel(), [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) g[i] = g[i] < lo ? lo : (g[i] > hi ? hi : g[i]);
    });
  }
  return Status::ok();
}

Result<GradAccumulator> GradAccumulator::create(const std::vector<Parameter>& params, int micro_batches, Mode mode) {
  if (micro_batches < 1)
    return invalid_argument("gradient accumulation over ", micro_batches, " micro-batches: the count must be >= 1");
  KILN_RETURN_IF_ERROR(check_parameters(params));
  GradAccumulator acc;
  acc.micro_batches_ = micro_batches;
  acc.mode_ = mode;
  for (const Parameter& p : params) {
    KILN_ASSIGN_OR_RETURN(Tensor total, Tensor::zeros(DataType::kFloat32, p.value.dims()));
    acc.entries_.push_back({p.name, std::move(total), false});
  }
  return acc;
}

Status GradAccumulator::match(const std::vector<Parameter>& params) const {
  KILN_RETURN_IF_ERROR(check_parameters(params));
  if (params.size() != entries_.size())
    return invalid_argument("gradient accumulation was set up for ", entries_.size(), " parameters but got ",
                            params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name != entries_[i].name)
      return invalid_argument("gradient accumulation expected parameter '", entries_[i].name, "' at position ", i,
                              " but got '", params[i].name, "'");
    if (params[i].value.dims() != entries_[i].total.dims())
      return invalid_argument("parameter '", params[i].name, "' has dims ", params[i].value.dims().to_string(),
                              " but gradient accumulation was set up for ", entries_[i].total.dims().to_string());
  }
  return Status::ok();
}

Status GradAccumulator::add(const std::vector<Parameter>& params) {
  KILN_RETURN_IF_ERROR(match(params));
  if (count_ == 0)
    for (Entry& entry : entries_) entry.touched = false;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad.defined()) continue;
    Entry& entry = entries_[i];
    const float* g = params[i].grad.data<float>();
    float* total = entry.total.data<float>();
    const bool first = !entry.touched;
    loops::for_chunks(entry.total.numel(), [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t j = b; j < e; ++j) total[j] = first ? g[j] : total[j] + g[j];
    });
    entry.touched = true;
  }
  ++count_;
  return Status::ok();
}

Status GradAccumulator::finish(std::vector<Parameter>& params) {
  KILN_RETURN_IF_ERROR(match(params));
  if (count_ == 0) return invalid_argument("gradient accumulation: finish() before any add()");
  for (size_t i = 0; i < params.size(); ++i) {
    Entry& entry = entries_[i];
    if (!entry.touched) continue;
    if (!params[i].grad.defined())
      return invalid_argument("parameter '", params[i].name,
                              "' has accumulated gradients but no grad tensor to write them to; bind one");
    float* g = params[i].grad.data<float>();
    const float* total = entry.total.data<float>();
    const bool mean = mode_ == Mode::kMean;
    const auto count = static_cast<float>(count_);
    loops::for_chunks(entry.total.numel(), [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t j = b; j < e; ++j) g[j] = mean ? total[j] / count : total[j];
    });
  }
  for (Entry& entry : entries_) entry.touched = false;
  count_ = 0;
  return Status::ok();
}

Result<std::map<std::string, Tensor>> GradAccumulator::export_state() const {
  std::map<std::string, Tensor> out;
  KILN_ASSIGN_OR_RETURN(Tensor count, Tensor::empty(DataType::kInt64, Dims{}));
  *count.data<int64_t>() = count_;
  out["grad_accum.count"] = std::move(count);
  for (const Entry& entry : entries_) {
    // An untouched total holds stale numbers: export zeros, which import reads back as untouched.
    KILN_ASSIGN_OR_RETURN(Tensor copy,
                          entry.touched ? entry.total.clone() : Tensor::zeros(DataType::kFloat32, entry.total.dims()));
    out[entry.name + ".grad_accum"] = std::move(copy);
    KILN_ASSIGN_OR_RETURN(Tensor touched, Tensor::empty(DataType::kBool, Dims{}));
    *touched.data<bool>() = entry.touched;
    out[entry.name + ".grad_accum_touched"] = std::move(touched);
  }
  return out;
}

Status GradAccumulator::import_state(const std::map<std::string, Tensor>& state) {
  auto find = [&](const std::string& key, DataType dtype, const Dims& dims) -> Result<const Tensor*> {
    auto it = state.find(key);
    if (it == state.end()) return invalid_argument("gradient accumulation state has no '", key, "'");
    const Tensor& t = it->second;
    if (t.dtype() != dtype || t.dims() != dims || !t.device().is_cpu() || !t.is_contiguous())
      return invalid_argument("gradient accumulation state '", key, "' is ", t.describe(), "; expected ",
                              dtype_name(dtype), dims.to_string(), " on the host");
    return &t;
  };
  KILN_ASSIGN_OR_RETURN(const Tensor* count, find("grad_accum.count", DataType::kInt64, Dims{}));
  const int64_t c = *count->data<int64_t>();
  if (c < 0 || c > micro_batches_)
    return invalid_argument("gradient accumulation state has count ", c, " outside [0, ", micro_batches_, "]");
  std::vector<const Tensor*> totals, touched;
  for (const Entry& entry : entries_) {
    KILN_ASSIGN_OR_RETURN(const Tensor* t, find(entry.name + ".grad_accum", DataType::kFloat32, entry.total.dims()));
    KILN_ASSIGN_OR_RETURN(const Tensor* u, find(entry.name + ".grad_accum_touched", DataType::kBool, Dims{}));
    totals.push_back(t);
    touched.push_back(u);
  }
  count_ = static_cast<int>(c);
  for (size_t i = 0; i < entries_.size(); ++i) {
    std::memcpy(entries_[i].total.raw(), totals[i]->raw(), totals[i]->nbytes());
    entries_[i].touched = *touched[i]->data<bool>();
  }
  return Status::ok();
}

}  // namespace kiln::train
