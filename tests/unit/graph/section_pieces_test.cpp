// An engine section laid out as pieces: offsets, zeroed gaps, and each piece let go once it is in place.
#include "graph/section_pieces.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

namespace kiln {
namespace {

TEST(SectionPieces, PlacesTensorsOnTheirAlignmentAndStringsRightAfterWithZerosBetween) {
  auto a = Tensor::empty(DataType::kUInt8, Dims{5});
  ASSERT_TRUE(a.is_ok());
  std::iota(a->data<uint8_t>(), a->data<uint8_t>() + 5, uint8_t{1});
  SectionPieces pieces;
  EXPECT_EQ(pieces.add(std::string("xy")), 0u);
  EXPECT_EQ(pieces.add(*a, 8), 8u);
  EXPECT_EQ(pieces.add(std::string("z")), 13u);
  EXPECT_EQ(pieces.bytes(), 14u);
  const std::string joined = pieces.join();
  EXPECT_EQ(joined, std::string("xy\0\0\0\0\0\0\1\2\3\4\5z", 14));
  EXPECT_EQ(pieces.bytes(), 0u);  // written once: nothing is left to write
}

TEST(SectionPieces, CopiesLargeTensorsWholeAndReleasesThemOnceWritten) {
  // More than one slice of the parallel copy (256 KB), and a length that is not a multiple of it.
  const int64_t n = (int64_t{3} << 18) / 4 + 7;
  auto big = Tensor::empty(DataType::kFloat32, Dims{n});
  ASSERT_TRUE(big.is_ok());
  for (int64_t i = 0; i < n; ++i) big->data<float>()[i] = static_cast<float>(i) * 0.5f + 1.0f;
  bool released = false;
  auto owner = std::shared_ptr<void>(big->raw(), [&released, keep = *big](void*) { released = true; });
  Tensor view = Tensor::view(big->raw(), DataType::kFloat32, Dims{n}, owner);
  owner.reset();
  *big = Tensor();
  SectionPieces pieces;
  EXPECT_EQ(pieces.add(std::string(3, 'h')), 0u);
  EXPECT_EQ(pieces.add(std::move(view), 64), 64u);
  ASSERT_EQ(pieces.bytes(), 64u + static_cast<uint64_t>(n) * 4);
  std::vector<char> out(pieces.bytes(), 'q');
  EXPECT_FALSE(released);
  pieces.write_to(out.data());
  EXPECT_TRUE(released);  // the section held the last handle
  EXPECT_EQ(std::string(out.data(), 3), "hhh");
  for (int i = 3; i < 64; ++i) ASSERT_EQ(out[i], 0) << i;
  const auto* floats = reinterpret_cast<const float*>(out.data() + 64);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(floats[i], static_cast<float>(i) * 0.5f + 1.0f) << i;
}

}  // namespace
}  // namespace kiln
