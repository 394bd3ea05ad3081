#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kiln::train {
namespace {

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_ckpt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

Checkpoint sample() {
  Checkpoint c;
  c.meta_json = R"({"epoch":3,"step":120})";
  Tensor w = Tensor::empty(DataType::kFloat32, Dims{2, 3}).value();
  for (int i = 0; i < 6; ++i) w.data<float>()[i] = 0.5f * i - 1;
  Tensor s = Tensor::empty(DataType::kInt64, Dims{}).value();
  s.data<int64_t>()[0] = 42;
  c.tensors["conv.weight"] = w;
  c.tensors["conv.weight.step"] = s;
  return c;
}

TEST(Checkpoint, RoundTripKeepsTensorsAndMetadata) {
  const std::string path = temp_path("round.ckpt");
  ASSERT_TRUE(save_checkpoint(path, sample()).is_ok());
  auto back = load_checkpoint(path);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->meta_json, R"({"epoch":3,"step":120})");
  ASSERT_EQ(back->tensors.size(), 2u);
  const Tensor& w = back->tensors["conv.weight"];
  EXPECT_EQ(w.dims(), (Dims{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w.data<float>()[i], 0.5f * i - 1);
  EXPECT_EQ(back->tensors["conv.weight.step"].data<int64_t>()[0], 42);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Checkpoint, TruncatedCorruptedAndForeignFilesAreErrors) {
  const std::string path = temp_path("bad.ckpt");
  ASSERT_TRUE(save_checkpoint(path, sample()).is_ok());
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto write = [&](const std::string& b) { std::ofstream(path, std::ios::binary | std::ios::trunc) << b; };
  write(bytes.substr(0, bytes.size() / 2));
  auto truncated = load_checkpoint(path);
  ASSERT_FALSE(truncated.is_ok());
  EXPECT_NE(truncated.status().message().find("checksum"), std::string::npos) << truncated.status().message();
  std::string flipped = bytes;
  flipped[flipped.size() - 20] ^= 0x40;
  write(flipped);
  EXPECT_FALSE(load_checkpoint(path).is_ok());
  write("this is not a checkpoint, just some text of a decent length");
  auto foreign = load_checkpoint(path);
  ASSERT_FALSE(foreign.is_ok());
  EXPECT_NE(foreign.status().message().find("not a kiln checkpoint"), std::string::npos);
  EXPECT_FALSE(load_checkpoint(temp_path("missing.ckpt")).is_ok());
}

}  // namespace
}  // namespace kiln::train
