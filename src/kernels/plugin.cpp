#include <map>
#include <memory>
#include <mutex>

// Plugins: user ops registered at run time become an op schema plus CPU and reference kernels.
#include "kernels/registry.h"
#include "ops/plugin/plugin_attrs.h"

namespace kiln {
namespace {

struct PluginTable {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<PluginDef>, std::less<>> defs;
};

PluginTable& table() {
  static PluginTable t;
  return t;
}

OpSchema plugin_schema(const PluginDef& def) {
  OpSchema s = make_schema<PluginAttrs>(def.name, kPluginFamily, def.summary.empty() ? "a user plugin" : def.summary);
  s.min_inputs = def.min_inputs;
  s.max_inputs = def.max_inputs;
  s.input_names = {"inputs"};
  s.infer = [infer = def.infer, name = def.name](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    std::vector<PluginTensorDesc> ins;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return invalid_argument("plugin ", name, " input ", i, " is missing");
      ins.push_back({ctx.input(i).dtype, ctx.input(i).dims});
    }
    KILN_ASSIGN_OR_RETURN(std::vector<PluginTensorDesc> outs, infer(ins, ctx.attrs_as<PluginAttrs>().fields()));
    if (outs.empty()) return invalid_argument("plugin ", name, " infers no outputs");
    std::vector<TensorDesc> descs;
    descs.reserve(outs.size());
    for (const PluginTensorDesc& d : outs) descs.push_back({d.dtype, d.dims, true});
    return descs;
  };
  return s;
}

void install_kernels(const PluginDef& def) {
  auto run = [run_cpu = def.run_cpu](KernelContext& ctx) -> Status {
    if (!ctx.stream.device().is_cpu()) return unsupported("plugins run on the CPU only");
    return run_cpu(ctx.src, ctx.dst, ctx.attrs<PluginAttrs>().fields());
  };
  for (Backend b : {Backend::kCpu, Backend::kRef}) {
    KernelImpl impl;
    impl.name = std::string(backend_name(b)) + ".plugin." + def.name;
    impl.op = def.name;
    impl.backend = b;
    impl.supports = [](const OpCall&) { return Status::ok(); };
    impl.create = stateless(run);
    KernelRegistry::global().add(std::move(impl));
  }
}

}  // namespace

Status register_plugin(PluginDef def) {
  if (def.name.empty()) return invalid_argument("register_plugin: the plugin has no name");
  if (!def.infer) return invalid_argument("register_plugin: plugin '", def.name, "' has no infer function");
  if (!def.run_cpu) return invalid_argument("register_plugin: plugin '", def.name, "' has no CPU run function");
  if (def.min_inputs < 0 || (def.max_inputs >= 0 && def.max_inputs < def.min_inputs))
    return invalid_argument("register_plugin: plugin '", def.name, "' takes ", def.min_inputs, " to ", def.max_inputs,
                            " inputs, which is no valid range");
  PluginTable& t = table();
  std::lock_guard lock(t.mutex);
  if (OpRegistry::global().find(def.name))
    return invalid_argument("register_plugin: an op named '", def.name, "' already exists; choose another name");
  if (!OpRegistry::global().add(plugin_schema(def)))
    return internal_error("register_plugin: the op registry refused '", def.name, "'");
  auto owned = std::make_unique<PluginDef>(std::move(def));
  const PluginDef& ref = *owned;
  t.defs.emplace(ref.name, std::move(owned));
  install_kernels(ref);
  return Status::ok();
}

bool has_plugin(std::string_view name) {
  PluginTable& t = table();
  std::lock_guard lock(t.mutex);
  return t.defs.count(name) > 0;
}

}  // namespace kiln
