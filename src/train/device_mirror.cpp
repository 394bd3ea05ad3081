#include "train/device_mirror.h"

#include "core/cuda_runtime.h"

namespace kiln::train {

Result<DeviceMirror> DeviceMirror::create(const ParameterStore& store, Device device, Stream& stream) {
  if (!device.is_cuda()) return invalid_argument("a device mirror needs a CUDA device, not ", device.to_string());
  DeviceMirror m;
  for (const auto& [name, entry] : store.entries()) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(entry.value.dtype(), entry.value.dims(),
                                                  cuda::device_allocator(device.index), "parameter " + name));
    m.tensors_.emplace(name, std::move(t));
  }
  KILN_RETURN_IF_ERROR(m.upload(store, stream));
  return m;
}

Result<Tensor> DeviceMirror::at(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return invalid_argument("the model has no parameter or buffer '", name, "' on the GPU");
  return it->second;
}

Status DeviceMirror::upload(const ParameterStore& store, Stream& stream) {
  for (auto& [name, t] : tensors_) {
    const ParameterStore::Entry* e = store.find(name);
    if (!e) return invalid_argument("the model has no parameter or buffer '", name, "'");
    KILN_RETURN_IF_ERROR(cuda::copy(e->value, t, &stream));
  }
  // The store's host memory may change once this returns.
  return stream.synchronize();
}

Status DeviceMirror::download(ParameterStore& store, Stream& stream) const {
  for (const auto& [name, t] : tensors_) {
    ParameterStore::Entry* e = store.find(name);
    if (!e) return invalid_argument("the model has no parameter or buffer '", name, "'");
    KILN_RETURN_IF_ERROR(cuda::copy(t, e->value, &stream));
  }
  return stream.synchronize();
}

Status DeviceMirror::assign(const std::string& name, const Tensor& value, Stream& stream) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return invalid_argument("the model has no parameter or buffer '", name, "' on the GPU");
  return cuda::copy(value, it->second, &stream);
}

}  // namespace kiln::train
