#include "train/config.h"

#include <gtest/gtest.h>

namespace kiln::train {
namespace {

TEST(TrainConfig, ReadsSectionsAndAppliesDottedOverrides) {
  const std::string text = R"(
model: {name: lenet}
data:
  train: /data/fmnist
  batch_size: 32
  mean: [0.5]
  augment: [{hflip: 0.5}, {random_crop: {size: 28, padding: 2}}]
optim: {name: sgd, lr: 0.1, momentum: 0.9}
trainer: {epochs: 3}
)";
  auto c = parse_train_config(text, "cfg.yaml", {"optim.lr=0.01", "trainer.epochs=5", "lr_policy.name=step"});
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->model.name, "lenet");
  EXPECT_EQ(c->data.train, "/data/fmnist");
  EXPECT_EQ(c->data.batch_size, 32);
  EXPECT_EQ(c->data.mean, std::vector<double>{0.5});
  ASSERT_EQ(c->data.augment.size(), 2u);
  EXPECT_EQ(c->data.augment[0].name, "hflip");
  EXPECT_EQ(c->data.augment[0].options.at("").to_string(), "0.5");
  EXPECT_EQ(c->data.augment[1].options.at("padding").to_string(), "2");
  EXPECT_EQ(c->optim.at("lr").number(), 0.01);
  EXPECT_EQ(c->optim.at("momentum").number(), 0.9);
  EXPECT_EQ(c->lr_policy.at("name").to_string(), "'step'");  // strings print quoted
  EXPECT_EQ(c->trainer.epochs, 5);
  // The resolved config reads back the same.
  auto again = parse_train_config(c->to_yaml(), "resolved.yaml");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string() << "\n" << c->to_yaml();
  EXPECT_EQ(again->trainer.epochs, 5);
  EXPECT_EQ(again->data.augment.size(), 2u);
  EXPECT_EQ(again->optim.at("lr").number(), 0.01);
}

void expect_error(const std::string& text, std::vector<std::string> overrides, const std::string& needle) {
  auto c = parse_train_config(text, "bad.yaml", overrides);
  ASSERT_FALSE(c.is_ok()) << "accepted: " << text;
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("bad.yaml"), std::string::npos) << c.status().message();
}

TEST(TrainConfig, ErrorsNameTheKeyAndTheFile) {
  expect_error("trainer:\n  epoch: 3\n", {}, "'trainer.epoch' is not a known key");
  expect_error("trainer:\n  epochs: three\n", {}, "bad.yaml:2: 'trainer.epochs' must be an integer");
  expect_error("trainer: {epochs: 2}\n", {"trainer.epochs=-1"}, "'trainer.epochs' must be positive");
  expect_error("modle: {name: lenet}\n", {}, "'modle' is not a known section");
  expect_error("data: {batch_size: [1, 2]}\n", {}, "'data.batch_size' must be a single value");
  expect_error("data: {shuffle: maybe}\n", {}, "'data.shuffle' must be true or false");
  expect_error("trainer: {backend: tpu}\n", {}, "'trainer.backend' must be cpu or cuda");
  expect_error("model: [1\n", {}, "not valid YAML");
  auto no_eq = parse_train_config("", "bad.yaml", {"optim.lr"});
  ASSERT_FALSE(no_eq.is_ok());
  EXPECT_NE(no_eq.status().message().find("must be key=value"), std::string::npos);
}

}  // namespace
}  // namespace kiln::train
