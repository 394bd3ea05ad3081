#pragma once
// String tensors: DataType::kString elements are 8-byte ids of strings interned for the life of the process,
// so equal strings have equal ids and every kernel that moves elements (reshape, gather, concat, ...) moves
// strings. Ops that look inside strings (StringNormalizer, casts to and from string) run on the host.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

/// The id of `text`, interning it on first use; fails when the process's interned strings would pass
/// kMaxInternedBytes (untrusted models and inputs cannot grow it without bound).
Result<int64_t> intern_string(std::string_view text);
/// The text of an id that intern_string returned ("" for 0, the id of the empty string, and for unknown ids).
std::string_view string_of(int64_t id);
inline constexpr size_t kMaxInternedBytes = size_t{1} << 30;

/// A host tensor of DataType::kString holding `items` (numel(dims) of them).
Result<Tensor> string_tensor(const Dims& dims, const std::vector<std::string>& items);
/// Element `i` of a kString tensor.
std::string_view string_at(const Tensor& t, int64_t i);

}  // namespace kiln
