// The engine container: what a reader says about files that are not this kiln's engines.
#include <gtest/gtest.h>

#include "graph/engine_format.h"
#include "kiln/version.h"

namespace kiln {
namespace {

std::string container(const std::string& version) {
  EngineHeader h;
  h.kiln_version = version;
  h.device = "cpu";
  return write_engine_container(h, {{"graph", "{}"}, {"weights", std::string(100, 'w')}});
}

TEST(EngineFormat, ReadsWhatItWrites) {
  auto c = read_engine_container(container(version_string()));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->header.device, "cpu");
  EXPECT_EQ(c->sections.at("weights").size(), 100u);
}

TEST(EngineFormat, OtherVersionsTruncationAndCorruptionAreOneClearSentence) {
  auto other = read_engine_container(container("0.0.1-other"));
  ASSERT_FALSE(other.is_ok());
  EXPECT_EQ(other.status().code(), StatusCode::kVersionMismatch);
  EXPECT_NE(other.status().message().find("built by kiln 0.0.1-other"), std::string::npos);
  EXPECT_NE(other.status().message().find("rebuild the engine from the model"), std::string::npos);
  const std::string good = container(version_string());
  for (size_t cut : {size_t{0}, size_t{5}, size_t{20}, good.size() / 2, good.size() - 1}) {
    auto r = read_engine_container(std::string_view(good).substr(0, cut));
    ASSERT_FALSE(r.is_ok()) << "cut at " << cut;
    EXPECT_NE(r.status().message().find("engine"), std::string::npos) << r.status().message();
  }
  std::string flipped = good;
  flipped[flipped.size() - 20] ^= 0x5a;  // inside the weights
  auto corrupt = read_engine_container(flipped);
  ASSERT_FALSE(corrupt.is_ok());
  EXPECT_NE(corrupt.status().message().find("checksum"), std::string::npos) << corrupt.status().message();
}

}  // namespace
}  // namespace kiln
