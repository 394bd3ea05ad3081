#include <gtest/gtest.h>

#include "kiln/allocator.h"
#include "kiln/logger.h"
#include "kiln/stream.h"
#include "kiln/tensor.h"

namespace kiln {

TEST(Dims, Basics) {
  Dims d{2, 3, 4};
  EXPECT_EQ(d.rank(), 3);
  EXPECT_EQ(d.numel(), 24);
  EXPECT_EQ(d.to_string(), "[2, 3, 4]");
  EXPECT_EQ(contiguous_strides(d), (Dims{12, 4, 1}));
  EXPECT_EQ(Dims{}.numel(), 1);
  EXPECT_EQ((Dims{2, kDynamicDim}).to_string(), "[2, ?]");
  EXPECT_FALSE((Dims{2, kDynamicDim}).is_static());
  std::vector<int64_t> nine(9, 1);
  EXPECT_FALSE(Dims::from(nine).is_ok());
  std::vector<int64_t> negative{2, -3};
  EXPECT_FALSE(Dims::from(negative).is_ok());
}

TEST(Dims, Broadcast) {
  EXPECT_EQ(*broadcast_dims({2, 1, 4}, {3, 1}), (Dims{2, 3, 4}));
  auto bad = broadcast_dims({2, 3}, {4, 3});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("[2, 3]"), std::string::npos);
  EXPECT_EQ(*normalize_axis(-1, 4), 3);
  EXPECT_FALSE(normalize_axis(4, 4).is_ok());
}

TEST(Tensor, EmptyReshapeClone) {
  auto t = Tensor::empty(DataType::kFloat32, {2, 3});
  ASSERT_TRUE(t.is_ok());
  for (int i = 0; i < 6; ++i) t->set(i, i);
  auto r = t->reshape({3, 2});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->at(5), 5.0);
  EXPECT_FALSE(t->reshape({4}).is_ok());
  // A transposed view made contiguous.
  Tensor tv = Tensor::view(t->raw(), DataType::kFloat32, {3, 2}, {1, 3}, Device::cpu());
  EXPECT_FALSE(tv.is_contiguous());
  auto c = tv.contiguous();
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->at(1), 3.0);  // element [0][1] of the transpose is t[1][0]
}

TEST(Tensor, AbsurdSizeIsAnErrorNotACrash) {
  auto t = Tensor::empty(DataType::kFloat32, {1 << 30, 1 << 30, 1 << 20});
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kOutOfMemory);
  EXPECT_FALSE(Tensor::empty(DataType::kFloat32, {kDynamicDim, 3}).is_ok());
}

TEST(TrackingAllocator, CountsAndLogs) {
  TrackingAllocator tracking(cpu_allocator());
  {
    auto a = Tensor::empty(DataType::kFloat32, {256}, tracking, "a");
    auto b = Tensor::empty(DataType::kInt8, {100}, tracking, "b");
    EXPECT_EQ(tracking.current_bytes(), 1024u + 100u);
    EXPECT_EQ(tracking.allocation_count(), 2u);
  }
  EXPECT_EQ(tracking.current_bytes(), 0u);
  EXPECT_EQ(tracking.peak_bytes(), 1124u);
  auto events = tracking.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].tag, "a");
  EXPECT_EQ(events[0].bytes, 1024);
  EXPECT_LT(events[2].bytes, 0);
}

TEST(CpuAllocator, LargeBlocksStartOnAHugePageAndHoldTheirBytes) {
  // Blocks of 2 MB and more start on a 2 MB boundary (their whole 2 MB pages may be huge pages); smaller ones keep
  // the 64-byte alignment; every byte is usable.
  Allocator& a = cpu_allocator();
  for (const size_t bytes : {size_t{3} << 20, (size_t{2} << 20) + 7, size_t{1000}}) {
    auto* p = static_cast<unsigned char*>(a.allocate(bytes, 64, "test"));
    ASSERT_NE(p, nullptr);
    const auto at = reinterpret_cast<uintptr_t>(p);
    EXPECT_EQ(at % 64, 0u);
    if (bytes >= (size_t{2} << 20)) EXPECT_EQ(at % (size_t{2} << 20), 0u) << bytes;
    for (size_t i = 0; i < bytes; i += 4096) p[i] = static_cast<unsigned char>(i);
    p[bytes - 1] = 1;
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[bytes - 1], 1);
    a.deallocate(p, bytes);
  }
}

TEST(Status, NodeContextInMessage) {
  Status s = invalid_argument("kernel must be 2-D").with_node({3, "conv1", "Convolution"});
  EXPECT_EQ(s.to_string(), "node 3 'conv1' (Convolution): kernel must be 2-D");
  Result<int> r = s;
  EXPECT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(Logger, ReplaceableSinkAndLevel) {
  std::vector<std::string> seen;
  Logger::global().set_sink([&](Severity, std::string_view m) { seen.emplace_back(m); });
  Logger::global().set_level(Severity::kInfo);
  log_info("hello ", 42);
  log_verbose("dropped");
  Logger::global().set_sink({});
  Logger::global().set_level(Severity::kWarning);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "hello 42");
}

TEST(Stream, CpuEventsMeasureTime) {
  auto s = create_stream(Device::cpu());
  ASSERT_TRUE(s.is_ok());
  auto e0 = create_event(Device::cpu());
  auto e1 = create_event(Device::cpu());
  ASSERT_TRUE((*e0)->record(**s).is_ok());
  ASSERT_TRUE((*e1)->record(**s).is_ok());
  auto ms = (*e1)->elapsed_ms_since(**e0);
  ASSERT_TRUE(ms.is_ok());
  EXPECT_GE(*ms, 0.f);
}

}  // namespace kiln
