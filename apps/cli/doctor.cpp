#include "doctor.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "core/cuda_runtime.h"
#include "kernels/cpu/threads.h"
#include "kernels/libraries.h"
#include "kernels/registry.h"
#include "kiln/version.h"
#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/matmul/matmul.h"
#include "ops/pooling/pooling.h"
#include "ops/softmax/softmax.h"
#include "runner/graph_runner.h"
#include "system_info.h"

namespace kiln::cli {
namespace {

// One layer of the doctor's network: an op, its attributes and its weight tensors (host).
struct Layer {
  std::string name;
  const OpSchema* schema;
  std::shared_ptr<Attrs> attrs;
  std::vector<Tensor> weights;
};

Tensor random_tensor(const Dims& dims, float bound, std::mt19937& rng) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  std::uniform_real_distribution<float> dist(-bound, bound);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// A 28x28 image of a "7": a top bar and a diagonal stroke.
Tensor digit_image() {
  Tensor t = *Tensor::zeros(DataType::kFloat32, {1, 1, 28, 28});
  float* p = t.data<float>();
  for (int x = 6; x < 22; ++x) p[6 * 28 + x] = p[7 * 28 + x] = 1.f;
  for (int y = 8; y < 24; ++y) {
    const int x = 21 - (y - 8) / 2;
    p[y * 28 + x] = p[y * 28 + x - 1] = 1.f;
  }
  return t;
}

std::vector<Layer> mnist_network() {
  std::mt19937 rng(1234);
  auto& ops = OpRegistry::global();
  ConvolutionAttrs conv;
  PoolingAttrs pool;
  pool.mode = PoolingMode::kMax;
  pool.kernel_shape = {2, 2};
  pool.strides = {2, 2};
  FullyConnectedAttrs fc;
  SoftmaxAttrs softmax;
  auto a = [](auto v) { return std::shared_ptr<Attrs>(std::make_shared<decltype(v)>(v)); };
  return {
      {"conv1",
       ops.find("Convolution"),
       a(conv),
       {random_tensor({20, 1, 5, 5}, 0.2f, rng), random_tensor({20}, 0.1f, rng)}},
      {"pool1", ops.find("Pooling"), a(pool), {}},
      {"conv2",
       ops.find("Convolution"),
       a(conv),
       {random_tensor({50, 20, 5, 5}, 0.045f, rng), random_tensor({50}, 0.1f, rng)}},
      {"pool2", ops.find("Pooling"), a(pool), {}},
      {"ip1",
       ops.find("FullyConnected"),
       a(fc),
       {random_tensor({500, 800}, 0.035f, rng), random_tensor({500}, 0.1f, rng)}},
      {"relu1", ops.find("Activation"), a(activation_defaults(ActivationKind::kRelu)), {}},
      {"ip2",
       ops.find("FullyConnected"),
       a(fc),
       {random_tensor({10, 500}, 0.045f, rng), random_tensor({10}, 0.1f, rng)}},
      {"prob", ops.find("Softmax"), a(softmax), {}},
  };
}

// The network as a graph: the image an input, the weights constants, every layer's output (named after the
// layer) a graph output so that each layer can be compared with the reference.
Result<std::unique_ptr<Graph>> network_graph(const std::vector<Layer>& net) {
  auto g = std::make_unique<Graph>();
  KILN_ASSIGN_OR_RETURN(Value * x, g->add_input("data", DataType::kFloat32, {1, 1, 28, 28}));
  for (const Layer& layer : net) {
    std::vector<Value*> inputs{x};
    for (size_t k = 0; k < layer.weights.size(); ++k) {
      KILN_ASSIGN_OR_RETURN(inputs.emplace_back(), g->add_constant(str_cat(layer.name, ".w", k), layer.weights[k]));
    }
    KILN_ASSIGN_OR_RETURN(Node * node,
                          g->add_node(layer.schema->name, layer.name, layer.attrs->clone(), inputs, {layer.name}));
    x = node->outputs.front();
    KILN_RETURN_IF_ERROR(g->mark_output(x));
  }
  return g;
}

struct RunResult {
  std::vector<Tensor> layer_outputs;  // host tensors
  std::vector<std::string> kernels;
};

// Runs the network on one backend as every engine runs: built by the builder (no optimizer, so each layer keeps
// its own kernel; the first kernel of the backend that accepts it, no reference fallback) and run by the runtime.
Result<RunResult> run_network(const Graph& graph, const std::vector<Layer>& net, const Tensor& image, Backend backend) {
  BuildOptions options;
  options.backend = backend;
  options.optimization_level = 0;
  options.passes.enabled = false;
  options.reference_fallback = false;
  KILN_ASSIGN_OR_RETURN(GraphRunner runner, GraphRunner::compile(graph, options));
  KILN_RETURN_IF_ERROR(runner.set_input("data", image));
  KILN_RETURN_IF_ERROR(runner.run());
  RunResult out;
  for (const Layer& layer : net) {
    KILN_ASSIGN_OR_RETURN(out.layer_outputs.emplace_back(), runner.output(layer.name));
    std::string kernel = "?";
    for (const PlanStep& step : runner.engine().plan().steps)
      if (step.node->name == layer.name && step.impl) kernel = step.impl->name;
    out.kernels.push_back(kernel);
  }
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(a.at(i) - b.at(i));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

int argmax(const Tensor& t) {
  int best = 0;
  for (int i = 1; i < t.numel(); ++i)
    if (t.at(i) > t.at(best)) best = i;
  return best;
}

void print_system() {
  std::printf("kiln %s doctor\n", version_string());
  std::string flags;
  for (auto& f : build_flags()) flags += (flags.empty() ? "" : " ") + f;
  std::printf("  build      %s\n", flags.c_str());
  std::string backends;
  for (auto& b : compiled_backends()) backends += (backends.empty() ? "" : " ") + b;
  std::printf("  backends   %s\n", backends.c_str());
  const CpuInfo cpu = query_cpu();
  std::string features;
  for (auto& f : cpu.features) features += " " + f;
  std::printf("  cpu        %s, %d threads, oneDNN ISA %s\n  features  %s\n", cpu.model.c_str(), cpu.threads,
              cpu.onednn_isa.c_str(), features.c_str());
  std::printf("  openmp     idle threads wait: %s\n", openmp_wait_description());
  for (const LibraryVersion& lib : kernel_libraries())
    std::printf("  %-10s %s%s\n", lib.name.c_str(), lib.version.c_str(),
                lib.note.empty() ? "" : (" (" + lib.note + ")").c_str());
  const cuda::RuntimeInfo rt = cuda::query_runtime();
  if (rt.compiled) {
    const std::string driver =
        rt.driver_version ? str_cat(rt.driver_version / 1000, ".", rt.driver_version % 1000 / 10) : "none";
    std::printf("  cuda       driver %s, runtime %d.%d\n", driver.c_str(), rt.runtime_version / 1000,
                rt.runtime_version % 1000 / 10);
  }
  for (const cuda::GpuInfo& g : rt.gpus)
    std::printf("  gpu %-6d %s, compute capability %d.%d, %.1f GiB, %d SMs\n", g.index, g.name.c_str(), g.cc_major,
                g.cc_minor, static_cast<double>(g.total_memory) / (1 << 30), g.multiprocessors);
  if (rt.gpus.empty()) std::printf("  gpu        none: %s; checking the CPU backend only\n", rt.problem.c_str());
}

}  // namespace

int run_doctor(const DoctorOptions& options) {
  print_system();
  const std::vector<Layer> net = mnist_network();
  const Tensor image = digit_image();
  std::printf("\nMNIST-class network (conv-pool-conv-pool-fc-relu-fc-softmax, weights from seed 1234):\n");
  auto graph = network_graph(net);
  if (!graph) {
    std::printf("Test failed: the network cannot be made: %s\n", graph.status().to_string().c_str());
    return 1;
  }
  auto ref = run_network(**graph, net, image, Backend::kRef);
  if (!ref) {
    std::printf("Test failed: the reference backend cannot run the network: %s\n", ref.status().to_string().c_str());
    return 1;
  }
  const Tensor& ref_prob = ref->layer_outputs.back();
  std::printf("  %-5s class %d, p = %.4f\n", "ref", argmax(ref_prob), ref_prob.at(argmax(ref_prob)));
  std::vector<Backend> backends{Backend::kCpu};
  if (cuda::gpu_available()) backends.insert(backends.begin(), Backend::kCuda);
  std::vector<std::string> failures;
  for (Backend b : backends) {
    const char* name = backend_name(b).data();
    auto got = run_network(**graph, net, image, b);
    if (!got) {
      std::printf("  %-5s FAILED: %s\n", name, got.status().to_string().c_str());
      failures.push_back(str_cat(name, ": ", got.status().to_string()));
      continue;
    }
    double worst_rel = 0;
    std::string worst_layer;
    for (size_t i = 0; i < net.size(); ++i) {
      const Tensor& want = ref->layer_outputs[i];
      double scale = 1e-6;
      for (int64_t k = 0; k < want.numel(); ++k) scale = std::max(scale, std::fabs(want.at(k)));
      const double rel = max_abs_diff(got->layer_outputs[i], want) / scale;
      if (options.verbose)
        std::printf("        %-6s %-28s max |diff| / max |ref| = %.2e\n", net[i].name.c_str(), got->kernels[i].c_str(),
                    rel);
      if (!(rel <= worst_rel)) {
        worst_rel = rel;
        worst_layer = net[i].name;
      }
    }
    const Tensor& prob = got->layer_outputs.back();
    const bool ok = worst_rel <= 1e-4 && argmax(prob) == argmax(ref_prob);
    std::printf("  %-5s class %d, p = %.4f, largest relative difference %.1e (%s)  %s\n", name, argmax(prob),
                prob.at(argmax(prob)), worst_rel, worst_layer.c_str(), ok ? "ok" : "MISMATCH");
    if (!ok) failures.push_back(str_cat(name, " differs from the reference by ", worst_rel, " at layer ", worst_layer));
  }
  if (!failures.empty()) {
    std::string all;
    for (auto& f : failures) all += (all.empty() ? "" : "; ") + f;
    std::printf("Test failed: %s\n", all.c_str());
    return 1;
  }
  std::printf("Test passed!\n");
  return 0;
}

}  // namespace kiln::cli
