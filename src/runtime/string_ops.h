#pragma once
// The host ops on strings: StringNormalizer and StringCast (see include/kiln/strings.h).
#include "kiln/tensor.h"
#include "ops/strings/strings.h"

namespace kiln {

/// ONNX StringNormalizer on a string tensor [C] or [1, C]: stop words removed (compared ignoring ASCII case
/// unless is_case_sensitive), then the case changed; all removed gives [1] (or [1, 1]) holding "".
Result<Tensor> normalize_strings(const Tensor& x, const StringNormalizerAttrs& a);
/// Numbers to their shortest round-trip text ("NaN", "INF", "-INF" for the special values), or text to
/// numbers (the whole string must be one number).
Result<Tensor> cast_strings(const Tensor& x, DataType to);

}  // namespace kiln
