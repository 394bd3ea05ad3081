// String tensors (interned ids) and the host ops on them: StringNormalizer and StringCast.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/serialization.h"
#include "kiln/strings.h"
#include "runtime/string_ops.h"

namespace kiln {
namespace {

TEST(Strings, EqualTextsShareAnId) {
  const int64_t a = *intern_string("monday"), b = *intern_string(std::string("mon") + "day");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, *intern_string("Monday"));
  EXPECT_EQ(string_of(a), "monday");
  EXPECT_EQ(*intern_string(""), 0);
  EXPECT_EQ(string_of(-5), "");
  auto t = string_tensor(Dims{2}, {"x", "y"});
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(string_at(*t, 1), "y");
  EXPECT_FALSE(string_tensor(Dims{3}, {"x"}).is_ok());
}

TEST(Strings, NormalizerRemovesStopWordsThenChangesCase) {
  StringNormalizerAttrs a;
  a.stopwords = "monday\ntuesday";
  a.case_change_action = CaseChange::kUpper;
  Tensor x = *string_tensor(Dims{1, 4}, {"Monday", "wednesday", "TUESDAY", "thursday"});
  auto y = normalize_strings(x, a);  // not case-sensitive: "Monday" and "TUESDAY" are stop words
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  EXPECT_EQ(y->dims(), (Dims{1, 2}));
  EXPECT_EQ(string_at(*y, 0), "WEDNESDAY");
  EXPECT_EQ(string_at(*y, 1), "THURSDAY");
  a.is_case_sensitive = true;
  EXPECT_EQ(normalize_strings(x, a)->dims(), (Dims{1, 4}));
  Tensor all = *string_tensor(Dims{2}, {"monday", "monday"});
  StringNormalizerAttrs only_monday;
  only_monday.stopwords = "monday";
  auto empty = normalize_strings(all, only_monday);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->dims(), (Dims{1}));
  EXPECT_EQ(string_at(*empty, 0), "");
  EXPECT_FALSE(normalize_strings(*string_tensor(Dims{2, 2}, {"a", "b", "c", "d"}), a).is_ok());
}

TEST(Strings, CastsNumbersToShortestTextAndBack) {
  Tensor f = *Tensor::empty(DataType::kFloat32, Dims{4});
  f.data<float>()[0] = 0.1f;
  f.data<float>()[1] = NAN;
  f.data<float>()[2] = -INFINITY;
  f.data<float>()[3] = 1e-5f;
  auto s = cast_strings(f, DataType::kString);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(string_at(*s, 0), "0.1");
  EXPECT_EQ(string_at(*s, 1), "NaN");
  EXPECT_EQ(string_at(*s, 2), "-INF");
  EXPECT_EQ(string_at(*s, 3), "1e-05");
  auto back = cast_strings(*s, DataType::kFloat32);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_FLOAT_EQ(back->data<float>()[0], 0.1f);
  EXPECT_TRUE(std::isnan(back->data<float>()[1]));
  EXPECT_EQ(back->data<float>()[2], -INFINITY);
  auto ints = cast_strings(*string_tensor(Dims{3}, {"-42", "+7", "9007199254740993"}), DataType::kInt64);
  ASSERT_TRUE(ints.is_ok()) << ints.status().to_string();
  EXPECT_EQ(ints->data<int64_t>()[0], -42);
  EXPECT_EQ(ints->data<int64_t>()[1], 7);
  EXPECT_EQ(ints->data<int64_t>()[2], 9007199254740993);  // 2^53 + 1: exact, not through a double
  auto bad = cast_strings(*string_tensor(Dims{1}, {"12abc"}), DataType::kFloat32);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'12abc' is not a number"), std::string::npos) << bad.status().message();
}

TEST(Strings, EngineGraphsKeepTheTextsOfStringConstants) {
  Graph g;
  Value* words = *g.add_constant("words", *string_tensor(Dims{2}, {"tuesday", "a longer word"}));
  ASSERT_TRUE(g.mark_output(words).is_ok());
  const std::string bytes = serialize_graph(g);
  EXPECT_NE(bytes.find("a longer word"), std::string::npos);  // the text, not a process-local id
  auto back = deserialize_graph(bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const Tensor& t = (*back)->find_value("words")->constant;
  EXPECT_EQ(string_at(t, 0), "tuesday");
  EXPECT_EQ(string_at(t, 1), "a longer word");
}

}  // namespace
}  // namespace kiln
