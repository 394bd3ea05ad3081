#include "kiln/strings.h"

#include <deque>
#include <mutex>
#include <unordered_map>

namespace kiln {
namespace {

struct Pool {
  std::mutex mutex;
  std::deque<std::string> texts{std::string()};  // id = index; a deque never moves its elements
  std::unordered_map<std::string_view, int64_t> ids{{std::string_view(), 0}};
  size_t bytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: string_of views stay valid through static destruction
  return *p;
}

}  // namespace

Result<int64_t> intern_string(std::string_view text) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (auto it = p.ids.find(text); it != p.ids.end()) return it->second;
  if (p.bytes + text.size() > kMaxInternedBytes)
    return Status(StatusCode::kOutOfMemory,
                  str_cat("the process holds ", p.bytes, " bytes of distinct strings; a string of ", text.size(),
                          " more would pass the limit of ", kMaxInternedBytes));
  p.texts.emplace_back(text);
  p.bytes += text.size();
  const auto id = static_cast<int64_t>(p.texts.size() - 1);
  p.ids.emplace(p.texts.back(), id);
  return id;
}

std::string_view string_of(int64_t id) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (id < 0 || static_cast<size_t>(id) >= p.texts.size()) return {};
  return p.texts[static_cast<size_t>(id)];
}

Result<Tensor> string_tensor(const Dims& dims, const std::vector<std::string>& items) {
  if (static_cast<int64_t>(items.size()) != dims.numel())
    return invalid_argument("a string tensor of shape ", dims.to_string(), " needs ", dims.numel(), " strings, got ",
                            items.size());
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(DataType::kString, dims));
  for (size_t i = 0; i < items.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(t.data<int64_t>()[i], intern_string(items[i]));
  }
  return t;
}

std::string_view string_at(const Tensor& t, int64_t i) {
  if (t.dtype() != DataType::kString || i < 0 || i >= t.numel()) return {};
  return string_of(t.data<int64_t>()[i]);
}

}  // namespace kiln
