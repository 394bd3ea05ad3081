#include "ops/attention/attention.h"
#include "harness.h"

namespace kiln::harness {
namespace {

AttentionAttrs scaled(float scale) {
  AttentionAttrs a;
  a.scale = scale;
  return a;
}

}  // namespace

KILN_OP_CASES(attention) {
  std::vector<OpCase> cases;
  struct Shapes {
    const char* name;
    Dims q, k, v;
    std::optional<Dims> mask;
  };
  const Shapes shapes[] = {
      {"heads S 5 Sk 7", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 6}, std::nullopt},
      {"padding mask [B,1,1,Sk]", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 6}, Dims{2, 1, 1, 7}},
      {"full mask", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 6}, Dims{2, 3, 5, 7}},
      {"column mask [S,1]", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, Dims{5, 1}},
      {"rank 2 S 9 Sk 3", {9, 8}, {3, 8}, {3, 5}, std::nullopt},
      {"broadcast batch", {2, 3, 5, 4}, {3, 6, 4}, {1, 3, 6, 2}, Dims{1}},
      {"S 70 over row blocks", {2, 70, 16}, {2, 33, 16}, {2, 33, 16}, Dims{2, 1, 33}},
      {"no keys", {2, 3, 4}, {2, 0, 4}, {2, 0, 5}, std::nullopt},
      // Batch layouts of the CUDA gemm tactic: k and v shared by every batch entry (batch stride 0), q shared, and v
      // broadcast over the inner batch dim while complete over the outer one (one strided batch per outer entry).
      {"k v shared over the batch", {2, 3, 5, 8}, {7, 8}, {7, 4}, Dims{3, 1, 7}},
      {"q shared over the batch", {5, 8}, {2, 3, 7, 8}, {2, 3, 7, 4}, Dims{2, 1, 5, 7}},
      {"v broadcast over heads", {2, 3, 4, 8}, {2, 3, 6, 8}, {2, 1, 6, 8}, Dims{1, 3, 1, 6}},
      // The same broadcasts with head dims the tensor-core tactics take.
      {"broadcast batch D 16 Dv 32", {2, 3, 20, 16}, {3, 37, 16}, {1, 3, 37, 32}, Dims{1, 3, 1, 37}},
  };
  for (const Shapes& s : shapes) {
    std::vector<InputSpec> inputs{uniform(s.q), uniform(s.k), uniform(s.v)};
    if (s.mask) inputs.push_back(uniform(*s.mask, -4, 0));
    cases.push_back({"Attention", s.name, attrs(scaled(0.5f)), inputs});
  }
  cases.push_back({"Attention",
                   "scale 1 absent mask",
                   attrs(AttentionAttrs{}),
                   {uniform({1, 4, 6, 8}), uniform({1, 4, 6, 8}), uniform({1, 4, 6, 8}), absent()}});
  // Sequence lengths that are not multiples of the CUDA kernel's tiles (16 queries, 32 keys), head dims 64 and 128,
  // masks broadcast over the heads.
  struct Tiled {
    const char* name;
    Dims q, k, v, mask;
    float scale;
  };
  const Tiled tiled[] = {
      {"S 37 Sk 45 D 64 mask over heads", {2, 4, 37, 64}, {2, 4, 45, 64}, {2, 4, 45, 64}, {2, 1, 37, 45}, 0.125f},
      {"S 50 Sk 100 D 128 padding mask", {1, 2, 50, 128}, {1, 2, 100, 128}, {1, 2, 100, 128}, {1, 1, 1, 100}, 0.088f},
      {"S 19 Sk 70 D 128 Dv 64 mask [S,Sk]", {2, 19, 128}, {2, 70, 128}, {2, 70, 64}, {19, 70}, 0.088f},
      {"S 1 Sk 33 D 40 Dv 96", {3, 1, 40}, {3, 33, 40}, {3, 33, 96}, {3, 1, 33}, 0.25f},
      // The CUDA rows tactic: a partial query tile and keys not a multiple of 16; keys in chunks of 128 (the last
      // one partial); the longest score rows it takes.
      {"S 20 Sk 37 D 32 padding mask", {3, 20, 32}, {3, 37, 32}, {3, 37, 32}, {3, 1, 37}, 0.177f},
      {"S 33 Sk 300 D 64 Dv 32 mask [S,Sk]", {2, 33, 64}, {2, 300, 64}, {2, 300, 32}, {33, 300}, 0.125f},
      {"S 17 Sk 512 D 128 padding mask", {1, 2, 17, 128}, {1, 2, 512, 128}, {1, 2, 512, 128}, {1, 1, 1, 512}, 0.088f},
      // The CUDA mma tactic: partial tiles of 64 queries and 64 keys, k shared over the batch, a full mask.
      {"S 130 Sk 150 D 32 k shared full mask",
       {2, 3, 130, 32},
       {3, 150, 32},
       {2, 3, 150, 32},
       {2, 3, 130, 150},
       0.177f},
      {"BERT-like 2x12x128x64 padding mask",
       {2, 12, 128, 64},
       {2, 12, 128, 64},
       {2, 12, 128, 64},
       {2, 1, 1, 128},
       0.125f},
  };
  for (const Tiled& t : tiled)
    cases.push_back({"Attention",
                     t.name,
                     attrs(scaled(t.scale)),
                     {uniform(t.q), uniform(t.k), uniform(t.v), uniform(t.mask, -4, 0)}});
  OpCase bert{"Attention",
              "BERT base head 1x12x128x64 masked",
              attrs(scaled(0.125f)),
              {uniform({1, 12, 128, 64}), uniform({1, 12, 128, 64}), uniform({1, 12, 128, 64}),
               uniform({1, 1, 1, 128}, -10000, 0)}};
  bert.dtypes = {DataType::kFloat32};
  cases.push_back(bert);
  // Heads interleaved in the features (the projections' own rows): q [B, S, H*D], output [B, S, H*Dv].
  struct Heads {
    const char* name;
    Dims q, k, v;
    std::optional<Dims> mask;
    int64_t heads;
  };
  const Heads with_heads[] = {
      {"heads 3 D 16 Dv 32 full mask", {2, 20, 48}, {2, 37, 48}, {2, 37, 96}, Dims{2, 3, 20, 37}, 3},
      {"heads 2 D 32 k v shared S 70", {2, 70, 64}, {70, 64}, {70, 64}, Dims{2, 1, 1, 70}, 2},
      {"heads 12 BERT layout", {2, 128, 768}, {2, 128, 768}, {2, 128, 768}, Dims{2, 1, 1, 128}, 12},
      {"heads 4 D 8 no mask", {3, 5, 32}, {3, 6, 32}, {3, 6, 32}, std::nullopt, 4},
  };
  for (const Heads& h : with_heads) {
    AttentionAttrs a = scaled(0.25f);
    a.heads = h.heads;
    std::vector<InputSpec> inputs{uniform(h.q), uniform(h.k), uniform(h.v)};
    if (h.mask) inputs.push_back(uniform(*h.mask, -4, 0));
    cases.push_back({"Attention", h.name, attrs(a), inputs});
  }
  return cases;
}

}  // namespace kiln::harness
