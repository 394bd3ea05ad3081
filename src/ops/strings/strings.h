#pragma once
// Ops that look inside strings; they run on the host (see include/kiln/strings.h).
#include <string>
#include <vector>

#include "ops/attrs.h"
#include "ops/schema.h"

namespace kiln {

enum class CaseChange { kNone, kLower, kUpper };
const char* enum_name(CaseChange c);

struct StringNormalizerAttrs : AttrsOf<StringNormalizerAttrs> {
  CaseChange case_change_action = CaseChange::kNone;
  bool is_case_sensitive = false;
  std::string locale;
  std::string stopwords;  ///< the stop words joined by '\n' (a word holds no newline)

  template <class V>
  void visit(V& v) {
    v("case_change_action", case_change_action);
    v("is_case_sensitive", is_case_sensitive);
    v("locale", locale);
    v("stopwords", stopwords);
  }
  std::vector<std::string> stopword_list() const;
};

struct StringCastAttrs : AttrsOf<StringCastAttrs> {
  DataType to = DataType::kFloat32;

  template <class V>
  void visit(V& v) {
    v("to", to);
  }
};

}  // namespace kiln
