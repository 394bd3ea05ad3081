#include "train/config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

namespace kiln::train {
namespace {

struct Reader {
  std::string source;

  Status error(const YAML::Node& node, const std::string& key, const std::string& what) const {
    std::string where = source;
    if (node.IsDefined() && node.Mark().line >= 0) where += ":" + std::to_string(node.Mark().line + 1);
    return invalid_argument(where, ": '", key, "' ", what);
  }
  Result<std::string> text(const YAML::Node& n, const std::string& key) const {
    if (n.IsNull()) return std::string();  // `key:` or `key=` with nothing: empty
    if (!n.IsScalar()) return error(n, key, "must be a single value");
    return n.Scalar();
  }
  Result<int64_t> integer(const YAML::Node& n, const std::string& key) const {
    KILN_ASSIGN_OR_RETURN(std::string s, text(n, key));
    try {
      size_t used = 0;
      long long v = std::stoll(s, &used);
      if (used == s.size()) return static_cast<int64_t>(v);
    } catch (...) {
    }
    return error(n, key, "must be an integer, not '" + s + "'");
  }
  Result<double> number(const YAML::Node& n, const std::string& key) const {
    KILN_ASSIGN_OR_RETURN(std::string s, text(n, key));
    try {
      size_t used = 0;
      double v = std::stod(s, &used);
      if (used == s.size()) return v;
    } catch (...) {
    }
    return error(n, key, "must be a number, not '" + s + "'");
  }
  Result<bool> boolean(const YAML::Node& n, const std::string& key) const {
    KILN_ASSIGN_OR_RETURN(std::string s, text(n, key));
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
    return error(n, key, "must be true or false, not '" + s + "'");
  }
  Result<std::vector<double>> numbers(const YAML::Node& n, const std::string& key) const {
    std::vector<double> out;
    if (n.IsScalar()) {
      KILN_ASSIGN_OR_RETURN(double v, number(n, key));
      out.push_back(v);
      return out;
    }
    if (!n.IsSequence()) return error(n, key, "must be a list of numbers");
    for (size_t i = 0; i < n.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(double v, number(n[i], key + "[" + std::to_string(i) + "]"));
      out.push_back(v);
    }
    return out;
  }
  Result<OptionValue> option(const YAML::Node& n, const std::string& key) const {
    if (n.IsSequence()) {
      KILN_ASSIGN_OR_RETURN(std::vector<double> v, numbers(n, key));
      return OptionValue(std::move(v));
    }
    KILN_ASSIGN_OR_RETURN(std::string s, text(n, key));
    // Typed where the text says so (numbers, booleans), so the resolved config writes them back plainly.
    try {
      size_t used = 0;
      double v = std::stod(s, &used);
      if (used == s.size()) return OptionValue(v);
    } catch (...) {
    }
    if (s == "true" || s == "false") return OptionValue(s == "true");
    return OptionValue(s);
  }
  Result<OptionMap> options(const YAML::Node& n, const std::string& key) const {
    if (!n.IsMap()) return error(n, key, "must be a map of keys and values");
    OptionMap out;
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      KILN_ASSIGN_OR_RETURN(OptionValue v, option(kv.second, str_cat(key, ".", k)));
      out.insert_or_assign(k, std::move(v));
    }
    return out;
  }
};

using Field = std::function<Status(const YAML::Node&, const std::string&)>;

Status read_section(const Reader& r, const YAML::Node& node, const std::string& section,
                    const std::map<std::string, Field>& fields) {
  if (!node.IsMap()) return r.error(node, section, "must be a map of keys and values");
  for (const auto& kv : node) {
    const std::string k = kv.first.Scalar();
    auto it = fields.find(k);
    if (it == fields.end()) {
      std::string known;
      for (const auto& [name, f] : fields) known += (known.empty() ? "" : ", ") + name;
      return r.error(kv.first, str_cat(section, ".", k), str_cat("is not a known key; ", section, " takes ", known));
    }
    KILN_RETURN_IF_ERROR(it->second(kv.second, str_cat(section, ".", k)));
  }
  return {};
}

template <class T, class Read>
Field set(T& target, Read read) {
  return [&target, read](const YAML::Node& n, const std::string& key) -> Status {
    auto v = read(n, key);
    if (!v.is_ok()) return v.status();
    target = *v;
    return {};
  };
}

Status apply_override(YAML::Node& root, const std::string& item, const std::string& source) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument("override '", item, "' must be key=value, e.g. optim.lr=0.01");
  const std::string key = item.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(item.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return invalid_argument("override '", item, "': the value is not valid YAML: ", e.msg);
  }
  std::vector<std::string> path;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) path.push_back(part);
  // yaml-cpp nodes are handles: walk down with fresh copies of each level.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    YAML::Node next = chain.back()[path[i]];
    if (next.IsDefined() && !next.IsMap() && !next.IsNull())
      return invalid_argument(source, ": override '", item, "': '", path[i], "' is not a section");
    chain.push_back(next);
  }
  chain.back()[path.back()] = value;
  return {};
}

}  // namespace

Result<TrainConfig> parse_train_config(const std::string& text, const std::string& source,
                                       const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = text.empty() ? YAML::Node(YAML::NodeType::Map) : YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return invalid_argument(source, ":", e.mark.line + 1, ": not valid YAML: ", e.msg);
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    return invalid_argument(source, ": the config must be a map with model, data, optim, ... sections");
  for (const std::string& o : overrides) KILN_RETURN_IF_ERROR(apply_override(root, o, source));

  TrainConfig c;
  c.file = source;
  Reader r{source};
  auto str = [&r](const YAML::Node& n, const std::string& k) { return r.text(n, k); };
  auto i64 = [&r](const YAML::Node& n, const std::string& k) { return r.integer(n, k); };
  auto f64 = [&r](const YAML::Node& n, const std::string& k) { return r.number(n, k); };
  auto flag = [&r](const YAML::Node& n, const std::string& k) { return r.boolean(n, k); };
  auto list = [&r](const YAML::Node& n, const std::string& k) { return r.numbers(n, k); };
  auto opts = [&r](const YAML::Node& n, const std::string& k) { return r.options(n, k); };
  auto augment = [&r](const YAML::Node& n, const std::string& k) -> Result<std::vector<AugmentSpec>> {
    std::vector<AugmentSpec> out;
    if (n.IsNull()) return out;
    if (!n.IsSequence()) return r.error(n, k, "must be a list like [{hflip: 0.5}, {random_crop: {size: 28}}]");
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string where = k + "[" + std::to_string(i) + "]";
      const YAML::Node& item = n[i];
      if (!item.IsMap() || item.size() != 1) return r.error(item, where, "must be one augmentation: {name: options}");
      AugmentSpec spec;
      // Copies: the pair lives in the iterator, which dies at the end of the statement.
      const YAML::Node first = item.begin()->first;
      const YAML::Node v = item.begin()->second;
      spec.name = first.Scalar();
      if (v.IsMap()) {
        KILN_ASSIGN_OR_RETURN(spec.options, r.options(v, where + "." + spec.name));
      } else if (!v.IsNull()) {
        KILN_ASSIGN_OR_RETURN(OptionValue p, r.option(v, where + "." + spec.name));
        spec.options.insert_or_assign("", p);
      }
      out.push_back(std::move(spec));
    }
    return out;
  };

  const std::map<std::string, Field> model = {
      {"name", set(c.model.name, str)},
      {"width", set(c.model.width, i64)},
  };
  auto& d = c.data;
  const std::map<std::string, Field> data = {
      {"format", set(d.format, str)},
      {"train", set(d.train, str)},
      {"val", set(d.val, str)},
      {"train_split", set(d.train_split, str)},
      {"val_split", set(d.val_split, str)},
      {"labels", set(d.labels, str)},
      {"batch_size", set(d.batch_size, i64)},
      {"val_batch_size", set(d.val_batch_size, i64)},
      {"shuffle", set(d.shuffle, flag)},
      {"drop_last", set(d.drop_last, flag)},
      {"workers", set(d.workers, i64)},
      {"prefetch", set(d.prefetch, i64)},
      {"height", set(d.height, i64)},
      {"width", set(d.width, i64)},
      {"channels", set(d.channels, i64)},
      {"classes", set(d.classes, i64)},
      {"scale", set(d.scale, f64)},
      {"mean", set(d.mean, list)},
      {"std", set(d.std, list)},
      {"augment", set(d.augment, augment)},
      {"train_limit", set(d.train_limit, i64)},
      {"val_limit", set(d.val_limit, i64)},
  };
  const std::map<std::string, Field> loss = {
      {"name", set(c.loss.name, str)},
      {"label_smoothing", set(c.loss.label_smoothing, f64)},
  };
  auto& t = c.trainer;
  const std::map<std::string, Field> trainer = {
      {"epochs", set(t.epochs, i64)},
      {"seed", set(t.seed, i64)},
      {"threads", set(t.threads, i64)},
      {"log_every", set(t.log_every, i64)},
      {"val_every", set(t.val_every, i64)},
      {"snapshot_every", set(t.snapshot_every, i64)},
      {"snapshot_steps", set(t.snapshot_steps, i64)},
      {"max_seconds", set(t.max_seconds, f64)},
      {"backend", set(t.backend, str)},
      {"precision", set(t.precision, str)},
      {"loss_scale", set(t.loss_scale, f64)},
      {"loss_scale_dynamic", set(t.loss_scale_dynamic, flag)},
      {"loss_scale_window", set(t.loss_scale_window, i64)},
      {"grad_accumulation", set(t.grad_accumulation, i64)},
      {"disable_passes", set(t.disable_passes, str)},
      {"progress", set(t.progress, flag)},
      {"profile", set(t.profile, flag)},
  };
  for (const auto& kv : root) {
    const std::string section = kv.first.Scalar();
    const YAML::Node& node = kv.second;
    Status st;
    if (section == "model")
      st = read_section(r, node, section, model);
    else if (section == "data")
      st = read_section(r, node, section, data);
    else if (section == "loss")
      st = read_section(r, node, section, loss);
    else if (section == "trainer")
      st = read_section(r, node, section, trainer);
    else if (section == "optim")
      st = set(c.optim, opts)(node, section);
    else if (section == "lr_policy")
      st = set(c.lr_policy, opts)(node, section);
    else
      st = r.error(kv.first, section,
                   "is not a known section; a config has model, data, optim, lr_policy, loss and trainer");
    KILN_RETURN_IF_ERROR(st);
  }
  auto positive = [&](int64_t v, const char* key) -> Status {
    if (v <= 0) return invalid_argument(source, ": '", key, "' must be positive, not ", v);
    return {};
  };
  KILN_RETURN_IF_ERROR(positive(d.batch_size, "data.batch_size"));
  KILN_RETURN_IF_ERROR(positive(t.epochs, "trainer.epochs"));
  KILN_RETURN_IF_ERROR(positive(t.log_every, "trainer.log_every"));
  KILN_RETURN_IF_ERROR(positive(t.loss_scale_window, "trainer.loss_scale_window"));
  KILN_RETURN_IF_ERROR(positive(t.grad_accumulation, "trainer.grad_accumulation"));
  if (t.loss_scale < 0 || !std::isfinite(t.loss_scale))
    return invalid_argument(source, ": 'trainer.loss_scale' must be 0 (2^16) or a positive initial scale, not ",
                            t.loss_scale);
  if (d.train_limit < 0 || d.val_limit < 0)
    return invalid_argument(source, ": data.train_limit and data.val_limit cannot be negative");
  if (d.workers < 0 || d.prefetch < 0 || t.threads < 0 || t.val_every < 0 || t.snapshot_every < 0 ||
      t.snapshot_steps < 0)
    return invalid_argument(source, ": workers, prefetch, threads, val_every and snapshot_every cannot be negative");
  if (t.backend != "cpu" && t.backend != "cuda")
    return invalid_argument(source, ": 'trainer.backend' must be cpu or cuda, not '", t.backend, "'");
  if (t.precision != "fp32" && t.precision != "fp16" && t.precision != "bf16")
    return invalid_argument(source, ": 'trainer.precision' must be fp32, fp16 or bf16, not '", t.precision, "'");
  if (!c.optim.count("name")) return invalid_argument(source, ": 'optim.name' is missing (e.g. adam, sgd, momentum)");
  return c;
}

Result<TrainConfig> load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_train_config("", "(defaults)", overrides);
  std::ifstream f(path);
  if (!f) return Status(StatusCode::kNotFound, "cannot read config '" + path + "': check the path");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_train_config(ss.str(), path, overrides);
}

std::string TrainConfig::to_yaml() const {
  YAML::Emitter out;
  out.SetDoublePrecision(17);  // a resumed run reads back exactly the numbers it ran with
  auto value = [&out](const OptionValue& v) {
    if (auto s = v.text()) {
      out << *s;
    } else if (auto b = v.boolean(); b && !v.number()) {
      out << *b;
    } else if (auto n = v.number()) {
      out << *n;
    } else {
      out << YAML::Flow << v.list().value_or(std::vector<double>{});
    }
  };
  auto opts = [&out, &value](const OptionMap& m) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : m) {
      out << YAML::Key << k << YAML::Value;
      value(v);
    }
    out << YAML::EndMap;
  };
  out << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap << YAML::Key << "name" << YAML::Value << model.name
      << YAML::Key << "width" << YAML::Value << model.width << YAML::EndMap;
  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << data.format << YAML::Key << "train" << YAML::Value << data.train
      << YAML::Key << "val" << YAML::Value << data.val << YAML::Key << "train_split" << YAML::Value << data.train_split
      << YAML::Key << "val_split" << YAML::Value << data.val_split << YAML::Key << "labels" << YAML::Value
      << data.labels << YAML::Key << "train_limit" << YAML::Value << data.train_limit << YAML::Key << "val_limit"
      << YAML::Value << data.val_limit << YAML::Key << "batch_size" << YAML::Value << data.batch_size << YAML::Key
      << "val_batch_size" << YAML::Value << data.val_batch_size << YAML::Key << "shuffle" << YAML::Value << data.shuffle
      << YAML::Key << "drop_last" << YAML::Value << data.drop_last << YAML::Key << "workers" << YAML::Value
      << data.workers << YAML::Key << "prefetch" << YAML::Value << data.prefetch << YAML::Key << "height" << YAML::Value
      << data.height << YAML::Key << "width" << YAML::Value << data.width << YAML::Key << "channels" << YAML::Value
      << data.channels << YAML::Key << "classes" << YAML::Value << data.classes << YAML::Key << "scale" << YAML::Value
      << data.scale << YAML::Key << "mean" << YAML::Value << YAML::Flow << data.mean << YAML::Key << "std"
      << YAML::Value << YAML::Flow << data.std;
  out << YAML::Key << "augment" << YAML::Value << YAML::BeginSeq;
  for (const AugmentSpec& a : data.augment) {
    out << YAML::BeginMap << YAML::Key << a.name << YAML::Value;
    if (a.options.size() == 1 && a.options.count(""))
      value(a.options.at(""));
    else
      opts(a.options);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  out << YAML::Key << "optim" << YAML::Value;
  opts(optim);
  out << YAML::Key << "lr_policy" << YAML::Value;
  opts(lr_policy);
  out << YAML::Key << "loss" << YAML::Value << YAML::BeginMap << YAML::Key << "name" << YAML::Value << loss.name
      << YAML::Key << "label_smoothing" << YAML::Value << loss.label_smoothing << YAML::EndMap;
  out << YAML::Key << "trainer" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "epochs" << YAML::Value << trainer.epochs << YAML::Key << "seed" << YAML::Value << trainer.seed
      << YAML::Key << "threads" << YAML::Value << trainer.threads << YAML::Key << "log_every" << YAML::Value
      << trainer.log_every << YAML::Key << "val_every" << YAML::Value << trainer.val_every << YAML::Key
      << "snapshot_every" << YAML::Value << trainer.snapshot_every << YAML::Key << "snapshot_steps" << YAML::Value
      << trainer.snapshot_steps << YAML::Key << "max_seconds" << YAML::Value << trainer.max_seconds << YAML::Key
      << "backend" << YAML::Value << trainer.backend << YAML::Key << "precision" << YAML::Value << trainer.precision
      << YAML::Key << "loss_scale" << YAML::Value << trainer.loss_scale << YAML::Key << "loss_scale_dynamic"
      << YAML::Value << trainer.loss_scale_dynamic << YAML::Key << "loss_scale_window" << YAML::Value
      << trainer.loss_scale_window << YAML::Key << "grad_accumulation" << YAML::Value << trainer.grad_accumulation
      << YAML::Key << "disable_passes" << YAML::Value << trainer.disable_passes << YAML::Key << "progress"
      << YAML::Value << trainer.progress;
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace kiln::train
