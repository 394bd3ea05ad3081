// Gradient rule of Einsum: the gradient of operand i is another einsum, of dy and the other operands,
// whose output term is operand i's term ("ij,jk->ik": da = einsum("ik,jk->ij", dy, b)). Ellipses become
// fresh letters; labels only operand i has (summed inside it) are broadcast back with Expand. Broadcast
// ellipsis axes are stretched (Expand) and summed back; a diagonal ("ii") gets an identity matrix.
#include <memory>
#include <string>
#include <vector>

#include "ops/einsum/einsum.h"
#include "ops/grad.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

constexpr int kLetters = 52;  // einsum_plan's label ids: 'A'..'Z', 'a'..'z', then ellipsis axes

char letter(int id) { return static_cast<char>(id < 26 ? 'A' + id : 'a' + (id - 26)); }

Status einsum_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const std::string& equation = b.attrs_as<EinsumAttrs>().equation;
  const int n = b.num_inputs();
  std::vector<Dims> dims;
  for (int i = 0; i < n; ++i) {
    KILN_RETURN_IF_ERROR(grad_util::require_static(b, b.input(i), str_cat("input ", i)));
    dims.push_back(b.desc(b.input(i)).dims);
  }
  KILN_ASSIGN_OR_RETURN(EinsumPlan plan, einsum_plan(equation, dims));
  std::string eq;
  for (char c : equation)
    if (c != ' ' && c != '\t') eq += c;
  const std::string lhs = eq.substr(0, eq.find("->"));
  // Letters for the ellipsis axes: ones the equation does not use.
  std::string fresh;
  for (int id = 0; id < kLetters; ++id)
    if (eq.find(letter(id)) == std::string::npos) fresh += letter(id);
  const int ell_total = static_cast<int>(plan.sizes.size()) - kLetters;
  if (ell_total > static_cast<int>(fresh.size()))
    return unsupported("Einsum '", equation, "' leaves too few unused letters for its ellipsis in the gradient");
  // Each input's term as letters, the ellipsis written out right-aligned (as einsum_plan aligns it).
  std::vector<std::string> terms;
  std::vector<Dims> full = dims;  // the dims with broadcast ellipsis axes stretched
  size_t start = 0;
  for (int i = 0; i < n; ++i) {
    const size_t comma = lhs.find(',', start);
    const std::string text = lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? lhs.size() : comma + 1;
    const size_t ell = text.find("...");
    std::string term = text;
    if (ell != std::string::npos) {
      const int e = dims[static_cast<size_t>(i)].rank() - static_cast<int>(text.size() - 3);
      const std::string axes = fresh.substr(static_cast<size_t>(ell_total - e), static_cast<size_t>(e));
      term = text.substr(0, ell) + axes + text.substr(ell + 3);
      for (int k = 0; k < e; ++k)  // a broadcast (size-1) ellipsis axis takes the full size
        full[static_cast<size_t>(i)][static_cast<int>(ell) + k] =
            plan.sizes[static_cast<size_t>(kLetters) + static_cast<size_t>(ell_total - e + k)];
    }
    terms.push_back(term);
  }
  std::string out;
  for (int id : plan.output_labels) out += id < kLetters ? letter(id) : fresh[static_cast<size_t>(id - kLetters)];
  for (int i = 0; i < n; ++i) {
    if (!b.needs_grad(i)) continue;
    std::string mine = terms[static_cast<size_t>(i)];
    std::string rhs_terms = out;
    std::vector<GradValue> ins = {dy};
    std::string seen = out;
    // A repeated label (a diagonal, "ii->i") cannot repeat in an output: each later occurrence gets a
    // fresh letter F and an identity matrix "LF" joins it to the first, zeroing the off-diagonal.
    size_t next_fresh = static_cast<size_t>(ell_total);
    for (size_t k = 1; k < mine.size(); ++k) {
      const char label = terms[static_cast<size_t>(i)][k];
      if (terms[static_cast<size_t>(i)].find(label) == k) continue;
      if (next_fresh >= fresh.size())
        return unsupported("Einsum '", equation, "' leaves too few unused letters for its diagonal in the gradient");
      const char f = fresh[next_fresh++];
      mine[k] = f;
      const int64_t size = full[static_cast<size_t>(i)][static_cast<int>(k)];
      KILN_ASSIGN_OR_RETURN(Tensor eye, Tensor::zeros(b.desc(dy).dtype, Dims{size, size}));
      for (int64_t d = 0; d < size; ++d) eye.set(d * size + d, 1.0);
      KILN_ASSIGN_OR_RETURN(GradValue ev, b.constant(std::move(eye)));
      rhs_terms += ',';
      rhs_terms += label;
      rhs_terms += f;
      seen += label;
      seen += f;
      ins.push_back(ev);
    }
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      rhs_terms += "," + terms[static_cast<size_t>(j)];
      seen += terms[static_cast<size_t>(j)];
      KILN_ASSIGN_OR_RETURN(GradValue other, grad_util::expand(b, b.input(j), full[static_cast<size_t>(j)]));
      ins.push_back(other);
    }
    std::string kept;
    Dims kept_dims = full[static_cast<size_t>(i)];
    for (size_t k = 0; k < mine.size(); ++k) {
      if (seen.find(mine[k]) != std::string::npos)
        kept += mine[k];
      else
        kept_dims[static_cast<int>(k)] = 1;  // summed inside this operand only: dy does not vary along it
    }
    auto attrs = std::make_unique<EinsumAttrs>();
    attrs->equation = rhs_terms;
    attrs->equation += "->";
    attrs->equation += kept;
    KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("Einsum", std::move(attrs), std::move(ins)));
    KILN_ASSIGN_OR_RETURN(g, grad_util::reshape(b, g, kept_dims));
    KILN_ASSIGN_OR_RETURN(g, grad_util::expand(b, g, full[static_cast<size_t>(i)]));
    KILN_ASSIGN_OR_RETURN(g, b.sum_to(g, dims[static_cast<size_t>(i)]));  // broadcast ellipsis axes
    KILN_RETURN_IF_ERROR(b.set_grad(i, g));
  }
  return Status::ok();
}

KILN_REGISTER_GRAD("Einsum", einsum_grad);

}  // namespace
}  // namespace kiln
