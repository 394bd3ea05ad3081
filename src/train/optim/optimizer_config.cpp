// The optimizer factory's config side: names, typed options from a config map, range checks.
#include <cmath>
#include <type_traits>

#include "train/optim/optimizer.h"
#include "train/optim/option_reader.h"

namespace kiln::train {
namespace {

// Keys every optimizer takes; `decoupled` says whether decoupled_weight_decay is among them.
std::vector<std::string_view> common_keys(bool decoupled) {
  std::vector<std::string_view> keys = {"lr", "weight_decay", "clip_grad_norm", "clip_grad_value"};
  if (decoupled) keys.push_back("decoupled_weight_decay");
  return keys;
}

std::vector<std::string_view> with(std::vector<std::string_view> keys, std::initializer_list<std::string_view> more) {
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

Status read_common(const OptionReader& r, OptimizerCommon& c) {
  KILN_RETURN_IF_ERROR(r.number("lr", c.lr));
  KILN_RETURN_IF_ERROR(r.number("weight_decay", c.weight_decay));
  KILN_RETURN_IF_ERROR(r.boolean("decoupled_weight_decay", c.decoupled_weight_decay));
  KILN_RETURN_IF_ERROR(r.number("clip_grad_norm", c.clip_grad_norm));
  return r.number("clip_grad_value", c.clip_grad_value);
}

std::string key(std::string_view where, std::string_view k) {
  return where.empty() ? std::string(k) : str_cat(where, ".", k);
}

Status non_negative(std::string_view where, std::string_view k, double v) {
  if (v >= 0) return Status::ok();
  return invalid_argument(key(where, k), ": ", v, " must be >= 0");
}

Status in_unit(std::string_view where, std::string_view k, double v, std::string_view label = "") {
  if (v >= 0 && v < 1) return Status::ok();
  return invalid_argument(key(where, k), ": ", label, label.empty() ? "" : " = ", v, " must be in [0, 1)");
}

Status validate_common(const OptimizerCommon& c, std::string_view where) {
  KILN_RETURN_IF_ERROR(non_negative(where, "lr", c.lr));
  KILN_RETURN_IF_ERROR(non_negative(where, "weight_decay", c.weight_decay));
  KILN_RETURN_IF_ERROR(non_negative(where, "clip_grad_norm", c.clip_grad_norm));
  return non_negative(where, "clip_grad_value", c.clip_grad_value);
}

}  // namespace

const std::vector<std::string_view>& optimizer_names() {
  static const std::vector<std::string_view> kNames = {"sgd",      "momentum", "nesterov", "adagrad", "rmsprop",
                                                       "adadelta", "adam",     "adamw",    "novograd"};
  return kNames;
}

Result<OptimizerOptions> parse_optimizer_options(const OptionMap& config, std::string_view where) {
  auto it = config.find("name");
  if (it == config.end()) {
    std::string list;
    for (std::string_view n : optimizer_names()) list += (list.empty() ? "" : ", ") + std::string(n);
    return invalid_argument(key(where, "name"), ": missing; say which optimizer to use (", list, ")");
  }
  std::optional<std::string> name = it->second.text();
  if (!name) return invalid_argument(key(where, "name"), ": expected an optimizer name, got ", it->second.to_string());
  return parse_optimizer_options(*name, config, where);
}

Result<OptimizerOptions> parse_optimizer_options(std::string_view name, const OptionMap& config,
                                                 std::string_view where) {
  OptionReader r(config, std::string(where), str_cat("optimizer '", name, "'"));
  OptimizerOptions result;
  if (name == "sgd" || name == "momentum" || name == "nesterov") {
    SgdOptions o;
    if (name != "sgd") o.momentum = 0.9;
    o.nesterov = name == "nesterov";
    auto keys = with(common_keys(true), {"momentum", "dampening"});
    if (name != "nesterov") keys.push_back("nesterov");
    KILN_RETURN_IF_ERROR(r.allow(keys));
    KILN_RETURN_IF_ERROR(read_common(r, o));
    KILN_RETURN_IF_ERROR(r.number("momentum", o.momentum));
    KILN_RETURN_IF_ERROR(r.number("dampening", o.dampening));
    KILN_RETURN_IF_ERROR(r.boolean("nesterov", o.nesterov));
    if (name != "sgd" && o.momentum == 0)
      return invalid_argument(r.key_path("momentum"), ": ", name, " needs momentum > 0 (or use sgd)");
    result = o;
  } else if (name == "adagrad") {
    AdagradOptions o;
    KILN_RETURN_IF_ERROR(r.allow(with(common_keys(true), {"lr_decay", "initial_accumulator_value", "eps"})));
    KILN_RETURN_IF_ERROR(read_common(r, o));
    KILN_RETURN_IF_ERROR(r.number("lr_decay", o.lr_decay));
    KILN_RETURN_IF_ERROR(r.number("initial_accumulator_value", o.initial_accumulator_value));
    KILN_RETURN_IF_ERROR(r.number("eps", o.eps));
    result = o;
  } else if (name == "rmsprop") {
    RmspropOptions o;
    KILN_RETURN_IF_ERROR(r.allow(with(common_keys(true), {"alpha", "eps", "momentum", "centered"})));
    KILN_RETURN_IF_ERROR(read_common(r, o));
    KILN_RETURN_IF_ERROR(r.number("alpha", o.alpha));
    KILN_RETURN_IF_ERROR(r.number("eps", o.eps));
    KILN_RETURN_IF_ERROR(r.number("momentum", o.momentum));
    KILN_RETURN_IF_ERROR(r.boolean("centered", o.centered));
    result = o;
  } else if (name == "adadelta") {
    AdadeltaOptions o;
    KILN_RETURN_IF_ERROR(r.allow(with(common_keys(true), {"rho", "eps"})));
    KILN_RETURN_IF_ERROR(read_common(r, o));
    KILN_RETURN_IF_ERROR(r.number("rho", o.rho));
    KILN_RETURN_IF_ERROR(r.number("eps", o.eps));
    result = o;
  } else if (name == "adam" || name == "adamw") {
    AdamOptions o;
    if (name == "adamw") o = AdamWOptions();
    KILN_RETURN_IF_ERROR(r.allow(with(common_keys(name == "adam"), {"betas", "eps", "amsgrad"})));
    KILN_RETURN_IF_ERROR(read_common(r, o));
    KILN_RETURN_IF_ERROR(r.pair("betas", o.beta1, o.beta2));
    KILN_RETURN_IF_ERROR(r.number("eps", o.eps));
    KILN_RETURN_IF_ERROR(r.boolean("amsgrad", o.amsgrad));
    if (name == "adamw") {
      AdamWOptions w;
      static_cast<AdamOptions&>(w) = o;
      result = w;
    } else {
      result = o;
    }
  } else if (name == "novograd") {
    NovogradOptions o;
    KILN_RETURN_IF_ERROR(r.allow(
        with(common_keys(false), {"betas", "eps", "grad_averaging", "amsgrad", "luc", "luc_trust", "luc_eps"})));
    KILN_RETURN_IF_ERROR(read_common(r, o));
    KILN_RETURN_IF_ERROR(r.pair("betas", o.beta1, o.beta2));
    KILN_RETURN_IF_ERROR(r.number("eps", o.eps));
    KILN_RETURN_IF_ERROR(r.boolean("grad_averaging", o.grad_averaging));
    KILN_RETURN_IF_ERROR(r.boolean("amsgrad", o.amsgrad));
    KILN_RETURN_IF_ERROR(r.boolean("luc", o.luc));
    KILN_RETURN_IF_ERROR(r.number("luc_trust", o.luc_trust));
    KILN_RETURN_IF_ERROR(r.number("luc_eps", o.luc_eps));
    result = o;
  } else {
    std::string list;
    for (std::string_view n : optimizer_names()) list += (list.empty() ? "" : ", ") + std::string(n);
    std::string hint = closest_match(name, optimizer_names());
    return invalid_argument(key(where, "name"), ": unknown optimizer '", name, "'",
                            hint.empty() ? "" : str_cat("; did you mean '", hint, "'?"), " (known: ", list, ")");
  }
  KILN_RETURN_IF_ERROR(validate(result, where));
  return result;
}

Status validate(const OptimizerOptions& options, std::string_view where) {
  return std::visit(
      [&](const auto& o) -> Status {
        using T = std::decay_t<decltype(o)>;
        KILN_RETURN_IF_ERROR(validate_common(o, where));
        if constexpr (std::is_same_v<T, SgdOptions>) {
          KILN_RETURN_IF_ERROR(non_negative(where, "momentum", o.momentum));
          KILN_RETURN_IF_ERROR(non_negative(where, "dampening", o.dampening));
          if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
            return invalid_argument(key(where, "nesterov"), ": Nesterov momentum needs momentum > 0 and dampening 0 (",
                                    "momentum is ", o.momentum, ", dampening ", o.dampening, ")");
        } else if constexpr (std::is_same_v<T, AdagradOptions>) {
          KILN_RETURN_IF_ERROR(non_negative(where, "lr_decay", o.lr_decay));
          KILN_RETURN_IF_ERROR(non_negative(where, "initial_accumulator_value", o.initial_accumulator_value));
          KILN_RETURN_IF_ERROR(non_negative(where, "eps", o.eps));
        } else if constexpr (std::is_same_v<T, RmspropOptions>) {
          KILN_RETURN_IF_ERROR(non_negative(where, "alpha", o.alpha));
          KILN_RETURN_IF_ERROR(non_negative(where, "eps", o.eps));
          KILN_RETURN_IF_ERROR(non_negative(where, "momentum", o.momentum));
        } else if constexpr (std::is_same_v<T, AdadeltaOptions>) {
          if (!(o.rho >= 0 && o.rho <= 1))
            return invalid_argument(key(where, "rho"), ": ", o.rho, " must be in [0, 1]");
          KILN_RETURN_IF_ERROR(non_negative(where, "eps", o.eps));
        } else {
          // Adam, AdamW, NovoGrad.
          KILN_RETURN_IF_ERROR(in_unit(where, "betas", o.beta1, "beta1"));
          KILN_RETURN_IF_ERROR(in_unit(where, "betas", o.beta2, "beta2"));
          KILN_RETURN_IF_ERROR(non_negative(where, "eps", o.eps));
          if constexpr (std::is_same_v<T, AdamWOptions>) {
            if (!o.decoupled_weight_decay)
              return invalid_argument(key(where, "decoupled_weight_decay"),
                                      ": AdamW's weight decay is always decoupled; use adam for L2 weight decay");
          }
          if constexpr (std::is_same_v<T, NovogradOptions>) {
            if (o.decoupled_weight_decay)
              return invalid_argument(key(where, "decoupled_weight_decay"),
                                      ": NovoGrad adds weight_decay * w to the normalized gradient (its own rule); "
                                      "decoupled weight decay does not apply");
            KILN_RETURN_IF_ERROR(non_negative(where, "luc_trust", o.luc_trust));
            KILN_RETURN_IF_ERROR(non_negative(where, "luc_eps", o.luc_eps));
          }
        }
        return Status::ok();
      },
      options);
}

}  // namespace kiln::train
