// run_engine ENGINE [--shape name:1x3x224x224]...
// Loads an engine, fills every input with a fixed pattern, runs it and prints each output's shape and
// first values. It uses only the runtime API (kiln::runtime).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/runtime.h"

namespace {

int fail(const kiln::Status& status) {
  std::fprintf(stderr, "run_engine: %s\n", status.to_string().c_str());
  return 1;
}

// Keeps each output in a vector sized when the run knows the output's size (data-dependent shapes).
class VectorOutputs final : public kiln::OutputAllocator {
 public:
  void* reallocate_output(const char* /*name*/, void* /*current*/, uint64_t bytes,
                          uint64_t /*alignment*/) noexcept override {
    // std::vector<double> storage is aligned for every element type.
    data_.assign((bytes + sizeof(double) - 1) / sizeof(double) + 1, 0.0);
    return data_.data();
  }
  void notify_shape(const char* /*name*/, const kiln::Dims& dims) noexcept override { dims_ = dims; }

  const void* data() const { return data_.data(); }
  const kiln::Dims& dims() const { return dims_; }

 private:
  std::vector<double> data_;
  kiln::Dims dims_;
};

kiln::Result<kiln::Dims> parse_dims(const std::string& text) {
  kiln::Dims dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('x', pos), text.size());
    const std::string part = text.substr(pos, end - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 12)
      return kiln::invalid_argument("'", text, "': '", part, "' is not a dimension");
    if (dims.rank() == kiln::kMaxRank) return kiln::invalid_argument("'", text, "' has too many dims");
    dims.push_back(std::stoll(part));
    pos = end + 1;
  }
  return dims;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: run_engine ENGINE [--shape name:1x3x224x224]...\n");
    return 2;
  }
  kiln::Runtime runtime;
  auto engine = runtime.load_engine_file(argv[1]);
  if (!engine) return fail(engine.status());
  auto context = (*engine)->create_execution_context();
  if (!context) return fail(context.status());
  kiln::ExecutionContext& ctx = **context;

  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string arg = argv[i + 1];
    const auto colon = arg.rfind(':');
    if (std::string(argv[i]) != "--shape" || colon == std::string::npos)
      return fail(kiln::invalid_argument("expected --shape name:dims, got '", argv[i], " ", arg, "'"));
    auto dims = parse_dims(arg.substr(colon + 1));
    if (!dims) return fail(dims.status());
    if (kiln::Status s = ctx.set_input_shape(arg.substr(0, colon), *dims); !s.is_ok()) return fail(s);
  }

  // Inputs: a deterministic pattern, element i = ((i * 7) % 11) / 10 - 0.5 (integers: i % 3).
  std::vector<std::vector<double>> input_storage;
  std::vector<VectorOutputs> outputs((*engine)->num_io_tensors());
  for (int i = 0; i < (*engine)->num_io_tensors(); ++i) {
    const std::string name((*engine)->io_tensor_name(i));
    if ((*engine)->tensor_io_mode(name) == kiln::TensorIOMode::kOutput) {
      if (kiln::Status s = ctx.set_output_allocator(name, &outputs[i]); !s.is_ok()) return fail(s);
      continue;
    }
    auto dims = ctx.tensor_shape(name);
    if (!dims) return fail(dims.status());
    const kiln::DataType dtype = *(*engine)->tensor_dtype(name);
    const int64_t count = dims->numel();
    auto& storage = input_storage.emplace_back((count * kiln::dtype_size(dtype)) / sizeof(double) + 1, 0.0);
    for (int64_t e = 0; e < count; ++e) {
      const double v =
          kiln::is_floating(dtype) ? static_cast<double>((e * 7) % 11) / 10.0 - 0.5 : static_cast<double>(e % 3);
      kiln::store_element(storage.data(), dtype, e, v);
    }
    std::printf("input  %s: %s %s\n", name.c_str(), std::string(kiln::dtype_name(dtype)).c_str(),
                dims->to_string().c_str());
    if (kiln::Status s = ctx.set_tensor_address(name, storage.data(), storage.size() * sizeof(double)); !s.is_ok())
      return fail(s);
  }

  if (kiln::Status s = ctx.enqueue(kiln::cpu_stream()); !s.is_ok()) return fail(s);

  for (int i = 0; i < (*engine)->num_io_tensors(); ++i) {
    const std::string name((*engine)->io_tensor_name(i));
    if ((*engine)->tensor_io_mode(name) != kiln::TensorIOMode::kOutput) continue;
    const kiln::DataType dtype = *(*engine)->tensor_dtype(name);
    const kiln::Dims& dims = outputs[i].dims();
    std::printf("output %s: %s %s:", name.c_str(), std::string(kiln::dtype_name(dtype)).c_str(),
                dims.to_string().c_str());
    for (int64_t e = 0; e < std::min<int64_t>(dims.numel(), 6); ++e)
      std::printf(" %g", kiln::load_element(outputs[i].data(), dtype, e));
    std::printf("\n");
  }
  return 0;
}
