#include "train.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "train/trainer.h"
#include "train_export.h"

namespace kiln::cli {
namespace {

std::string clock(double seconds) {
  const long s = std::lround(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

int fail(const Status& st) {
  std::fprintf(stderr, "kiln train: error: %s\n", st.to_string().c_str());
  return 1;
}

}  // namespace

int run_train(const TrainOptions& opt) {
  const bool resume = !opt.resume.empty();
  const std::string run_dir = resume ? opt.resume : opt.run_dir;
  if (run_dir.empty()) return fail(invalid_argument("name a run folder: --run-dir DIR (or --resume DIR)"));
  std::string config_path = opt.config;
  if (resume) {
    if (!opt.config.empty())
      return fail(invalid_argument("--resume continues with the run's own config.yaml; leave out --config"));
    config_path = (std::filesystem::path(run_dir) / "config.yaml").string();
    if (!std::filesystem::exists(config_path))
      return fail(invalid_argument("'", run_dir, "' is not a kiln run folder (no config.yaml)"));
  } else if (config_path.empty()) {
    return fail(invalid_argument("name a config: --config FILE (examples/fashion_mnist.yaml is one)"));
  } else if (std::filesystem::exists(std::filesystem::path(run_dir) / "snapshots") &&
             !train::Trainer::snapshots(run_dir).empty()) {
    return fail(invalid_argument("run folder '", run_dir,
                                 "' already holds a run; continue it with --resume, or choose another folder"));
  }
  auto config = train::load_train_config(config_path, opt.overrides);
  if (!config.is_ok()) return fail(config.status());
  auto trainer = train::Trainer::create(*config, run_dir, resume);
  if (!trainer.is_ok()) return fail(trainer.status());
  train::Trainer& t = **trainer;
  if (!t.is_root()) {  // data parallel: rank 0 reports, writes the run folder and exports
    auto result = t.fit();
    return result.is_ok() ? 0 : fail(std::move(result.take_status()).with_prefix(str_cat("rank ", t.rank())));
  }
  std::printf("%s\n", t.summary().c_str());
  if (t.world_size() > 1)
    std::printf("data parallel over %d processes: %lld images per process per step\n", t.world_size(),
                static_cast<long long>(config->data.batch_size / t.world_size()));
  if (resume) std::printf("resuming %s at step %lld\n", run_dir.c_str(), static_cast<long long>(t.step()));
  const bool bar = !opt.quiet && config->trainer.progress && isatty(fileno(stderr));
  auto on_event = [&](const train::TrainEvent& e) {
    const double frac = static_cast<double>(e.step_in_epoch) / e.steps_per_epoch;
    if (e.epoch_end) {
      if (bar) std::fputs("\r\033[K", stderr);
      std::printf("epoch %lld/%lld: loss %.4f, accuracy %.2f%%", static_cast<long long>(e.epoch),
                  static_cast<long long>(config->trainer.epochs), e.loss, 100 * e.accuracy);
      if (e.val_accuracy) std::printf(", val_loss %.4f, val_accuracy %.2f%%", *e.val_loss, 100 * *e.val_accuracy);
      std::printf(" (%s)%s%s\n", clock(e.elapsed_seconds).c_str(), e.snapshot.empty() ? "" : ", snapshot ",
                  e.snapshot.c_str());
      std::fflush(stdout);
      return;
    }
    if (!bar) return;
    const int width = 30, filled = static_cast<int>(frac * width);
    const double remaining_steps = static_cast<double>(config->trainer.epochs * e.steps_per_epoch - e.step);
    const double eta = e.images_per_second > 0 ? remaining_steps * config->data.batch_size / e.images_per_second : 0;
    std::fprintf(stderr, "\r\033[Kepoch %lld/%lld [%s%s] %lld/%lld loss %.4f acc %.1f%% %.0f img/s ETA %s",
                 static_cast<long long>(e.epoch), static_cast<long long>(config->trainer.epochs),
                 std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(),
                 static_cast<long long>(e.step_in_epoch), static_cast<long long>(e.steps_per_epoch), e.loss,
                 100 * e.accuracy, e.images_per_second, clock(eta).c_str());
  };
  auto result = t.fit(on_event);
  if (!result.is_ok()) return fail(result.status());
  std::printf("trained %lld steps in %.1f s%s", static_cast<long long>(result->steps), result->seconds,
              result->stopped_by_time ? " (stopped at trainer.max_seconds)" : "");
  if (result->skipped_steps)
    std::printf("; %lld steps skipped for float16 overflow (loss scale now %g)",
                static_cast<long long>(result->skipped_steps), result->loss_scale);
  if (result->val_accuracy) std::printf("; validation accuracy %.2f%%", 100 * *result->val_accuracy);
  std::printf("\n");
  auto exported = export_and_check(t, run_dir);
  if (!exported.is_ok()) return fail(std::move(exported.take_status()).with_prefix("export"));
  std::printf("exported %s: an engine built from it matches the trained model on %lld images (max difference %.1e)\n",
              exported->onnx_path.c_str(), static_cast<long long>(exported->images), exported->max_abs_diff);
  std::printf("run folder: %s (config.yaml, metrics.jsonl, snapshots/, model.onnx)\n", run_dir.c_str());
  return 0;
}

}  // namespace kiln::cli
