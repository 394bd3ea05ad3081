// Engine file v2: engines mapped from a file use their weights in place and compute what engines read
// from bytes compute; truncated, corrupt, other-version, other-device and non-engine files are refused in
// one sentence that ends "rebuild the engine from the model".
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builder/builder.h"
#include "graph/engine_format.h"
#include "kernels/libraries.h"
#include "kiln/version.h"
#include "ops/elementwise/elementwise.h"
#include "runtime/engine.h"

namespace kiln {
namespace {

constexpr int64_t kIn = 64, kOut = 33;  // 33 floats: the constants after the first need padding to 64 bytes

float w_at(int64_t i) { return std::sin(0.1f * static_cast<float>(i)); }

// y = (x @ W + b) * s with W [64, 33], b and s [33].
std::unique_ptr<Graph> small_graph() {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, Dims{2, kIn});
  Tensor w = *Tensor::empty(DataType::kFloat32, Dims{kIn, kOut});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = w_at(i);
  Tensor b = *Tensor::empty(DataType::kFloat32, Dims{kOut});
  Tensor s = *Tensor::empty(DataType::kFloat32, Dims{kOut});
  for (int64_t i = 0; i < kOut; ++i) {
    b.data<float>()[i] = 0.5f * static_cast<float>(i);
    s.data<float>()[i] = 1.f + 0.25f * static_cast<float>(i % 3);
  }
  Value* wv = *g->add_constant("W", w);
  Value* bv = *g->add_constant("b", b);
  Value* sv = *g->add_constant("s", s);
  Node* mm = *g->add_node("MatrixMultiply", "mm", nullptr, {x, wv, bv});
  auto prod = std::make_unique<ElementWiseAttrs>();
  prod->op = ElementWiseOp::kProd;
  Node* scale = *g->add_node("ElementWise", "scale", std::move(prod), {mm->outputs[0], sv}, {"y"});
  EXPECT_TRUE(g->mark_output(scale->outputs[0]).is_ok());
  return g;
}

// The MatMul on oneDNN, which reads W from the weights section (the packed GEMM would hold W only packed, in the
// prepared section, and tactic timing may choose either).
BuildOptions weights_read_in_place() {
  BuildOptions options;
  options.pinned["mm"] = KernelPin{"cpu.onednn.matrix_multiply", ""};
  return options;
}

const std::string& engine_bytes() {
  static const std::string bytes = [] {
    auto e = build_engine(*small_graph(), weights_read_in_place());
    EXPECT_TRUE(e.is_ok()) << e.status().to_string();
    return e.is_ok() ? *e : std::string();
  }();
  return bytes;
}

Tensor input() {
  Tensor x = *Tensor::empty(DataType::kFloat32, Dims{2, kIn});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::cos(0.3f * static_cast<float>(i));
  return x;
}

std::vector<float> reference_output() {
  const Tensor x = input();
  std::vector<float> y(2 * kOut);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t o = 0; o < kOut; ++o) {
      double acc = 0.5 * static_cast<double>(o);
      for (int64_t k = 0; k < kIn; ++k) acc += double{x.data<float>()[r * kIn + k]} * w_at(k * kOut + o);
      y[r * kOut + o] = static_cast<float>(acc * (1.0 + 0.25 * static_cast<double>(o % 3)));
    }
  return y;
}

Result<std::vector<float>> run(const EngineImpl& engine) {
  KILN_ASSIGN_OR_RETURN(auto ctx, engine.create_execution_context());
  KILN_RETURN_IF_ERROR(ctx->set_input("x", input()));
  KILN_RETURN_IF_ERROR(ctx->execute());
  KILN_ASSIGN_OR_RETURN(Tensor y, ctx->output("y"));
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

class TempFiles {
 public:
  ~TempFiles() {
    for (auto& p : paths_) std::filesystem::remove(p);
  }
  std::string write(const std::string& bytes) {
    const std::string p = path("kengine");
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
  /// A fresh path, removed at the end (whoever writes it).
  std::string path(const std::string& extension) {
    paths_.push_back((std::filesystem::temp_directory_path() /
                      str_cat("kiln_engine_file_test_", ::getpid(), "_", paths_.size(), ".", extension))
                         .string());
    return paths_.back();
  }

 private:
  std::vector<std::string> paths_;
};

// The address ranges of `path` in /proc/self/maps.
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const std::string& path) {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::ifstream maps("/proc/self/maps");
  const std::string real = std::filesystem::canonical(path).string();
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < real.size() || line.compare(line.size() - real.size(), real.size(), real) != 0) continue;
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream(line) >> std::hex >> begin >> dash >> end;
    out.emplace_back(begin, end);
  }
  return out;
}

bool inside(const void* p, const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return std::any_of(ranges.begin(), ranges.end(), [&](auto& r) { return a >= r.first && a < r.second; });
}

const Value* constant(const EngineImpl& engine, const std::string& name) {
  const Value* v = engine.graph().find_value(name);
  return v && v->is_constant() ? v : nullptr;
}

TEST(EngineFile, MappedEngineUsesWeightsInPlaceAndComputesTheSame) {
  TempFiles files;
  const std::string path = files.write(engine_bytes());
  auto mapped = EngineImpl::load_file(path);
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  auto copied = EngineImpl::deserialize(engine_bytes());
  ASSERT_TRUE(copied.is_ok()) << copied.status().to_string();

  const auto ranges = mappings_of(path);
  ASSERT_FALSE(ranges.empty()) << "the engine file is not mapped";
  // (The CPU builder stores the MatMul's weights W as [N, K]: W/nk.)
  for (const char* name : {"W/nk", "b", "s"}) {
    const Value* m = constant(**mapped, name);
    const Value* c = constant(**copied, name);
    ASSERT_TRUE(m && c) << name;
    EXPECT_TRUE(inside(m->constant.raw(), ranges)) << name << " is not in the mapping";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->constant.raw()) % 64, 0u) << name;
    EXPECT_FALSE(inside(c->constant.raw(), ranges)) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c->constant.raw()) % 64, 0u) << name;
    EXPECT_EQ(std::memcmp(m->constant.raw(), c->constant.raw(), m->constant.nbytes()), 0) << name;
  }

  const std::vector<float> want = reference_output();
  auto from_map = run(**mapped);
  auto from_bytes = run(**copied);
  ASSERT_TRUE(from_map.is_ok()) << from_map.status().to_string();
  ASSERT_TRUE(from_bytes.is_ok()) << from_bytes.status().to_string();
  EXPECT_EQ(*from_map, *from_bytes);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR((*from_map)[i], want[i], 1e-4f * (1 + std::fabs(want[i])));

  // A constant outlives the engine and keeps the mapping; the last owner unmaps it.
  const Value* wv = constant(**mapped, "W/nk");
  ASSERT_NE(wv, nullptr);
  Tensor w = wv->constant;
  mapped = Result<std::shared_ptr<const EngineImpl>>(invalid_argument("released"));
  ASSERT_TRUE(inside(w.raw(), mappings_of(path)));
  EXPECT_EQ(w.data<float>()[7], w_at(7 * kOut));  // W/nk [33, 64]: its [0][7] is W[7][0]
  w = Tensor();
  EXPECT_TRUE(mappings_of(path).empty());
}

// build_engine_aligned writes the same bytes as build_engine, into 64-byte aligned memory that the engine then uses
// in place (kiln exec --onnx: no second copy of the weights).
TEST(EngineFile, AlignedBuildIsTheSameEngineUsedInPlace) {
  // Both builds share one timing cache, so the second takes the first's tactics: timed on a busy machine, two
  // independent builds may choose different kernels (the packed GEMM adds a prepared section).
  TempFiles files;
  BuildOptions options = weights_read_in_place();
  options.timing_cache_path = files.path("timing");
  auto plain = build_engine(*small_graph(), options);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  auto aligned = build_engine_aligned(small_graph(), options);
  ASSERT_TRUE(aligned.is_ok()) << aligned.status().to_string();
  auto storage = std::make_shared<const Tensor>(std::move(*aligned));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(storage->raw()) % 64, 0u);
  const std::string_view bytes(static_cast<const char*>(storage->raw()), storage->nbytes());
  // The same sections, byte for byte, but the optimizer's report (it holds the passes' timings, so its length and the
  // file's size may differ by an alignment step); padding zeros: the checksums hold (deserialize checks them below).
  auto a = read_engine_header(bytes);
  auto b = read_engine_header(*plain);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  std::vector<std::string> names_a, names_b;
  for (const auto& [name, section] : a->sections) names_a.push_back(name);
  for (const auto& [name, section] : b->sections) names_b.push_back(name);
  EXPECT_EQ(names_a, names_b);
  for (const auto& [name, section] : b->sections) {
    if (name == "optimizer") continue;
    ASSERT_TRUE(a->sections.count(name)) << name;
    const EngineSection& sa = a->sections.at(name);
    const EngineSection& sb = section;
    EXPECT_EQ(bytes.substr(a->body_offset + sa.offset, sa.bytes),
              std::string_view(*plain).substr(b->body_offset + sb.offset, sb.bytes))
        << name;
  }
  auto engine = EngineImpl::deserialize(bytes, storage);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const Value* w = constant(**engine, "W/nk");
  ASSERT_NE(w, nullptr);
  const auto* begin = static_cast<const char*>(storage->raw());
  EXPECT_TRUE(static_cast<const char*>(w->constant.raw()) >= begin &&
              static_cast<const char*>(w->constant.raw()) < begin + storage->nbytes())
      << "the weights were copied out of the engine's memory";
  auto out = run(**engine);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const std::vector<float> want = reference_output();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR((*out)[i], want[i], 1e-4f * (1 + std::fabs(want[i])));
}

TEST(EngineFile, EngineFromBytesOutlivesTheBytes) {
  auto bytes = std::make_unique<std::string>(engine_bytes());
  auto engine = EngineImpl::deserialize(*bytes);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  std::fill(bytes->begin(), bytes->end(), '\0');
  bytes.reset();
  auto out = run(**engine);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const std::vector<float> want = reference_output();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR((*out)[i], want[i], 1e-4f * (1 + std::fabs(want[i])));
}

TEST(EngineFile, HeaderRecordsVersionsIsaAndSizes) {
  auto h = read_engine_header(engine_bytes());
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->format_version, kEngineFormatVersion);
  EXPECT_EQ(h->kiln_version, version_string());
  EXPECT_EQ(h->device, "cpu");
  EXPECT_EQ(h->cpu_isa, cpu_isa_name());
  EXPECT_NE(h->build_flags.find("build="), std::string::npos);
  EXPECT_EQ(h->body_offset % kEngineAlignment, 0u);
  EXPECT_EQ(h->body_offset + h->body_bytes, engine_bytes().size());
  ASSERT_TRUE(h->sections.count("weights"));
  EXPECT_EQ(h->sections.at("weights").offset % kEngineAlignment, 0u);
  EXPECT_GE(h->sections.at("weights").bytes, static_cast<uint64_t>((kIn * kOut + 2 * kOut) * 4));
}

// Refused from bytes and from a mapped file, in one sentence that names `says`.
void expect_refused(const std::string& bytes, const std::string& says) {
  TempFiles files;
  const std::string path = files.write(bytes);
  for (bool mapped : {false, true}) {
    auto e = mapped ? EngineImpl::load_file(path) : EngineImpl::deserialize(bytes);
    ASSERT_FALSE(e.is_ok()) << (mapped ? "mapped" : "bytes") << ": " << says;
    const std::string& m = e.status().message();
    EXPECT_NE(m.find(says), std::string::npos) << m;
    const std::string_view tail = "; rebuild the engine from the model";
    EXPECT_TRUE(m.size() >= tail.size() && m.compare(m.size() - tail.size(), tail.size(), tail) == 0) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// The engine's sections under an edited header.
std::string rewrap(const std::function<void(EngineHeader&)>& edit) {
  auto c = read_engine_container(engine_bytes());
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  EngineHeader h = c->header;
  edit(h);
  std::map<std::string, std::string> sections;
  for (const auto& [name, bytes] : c->sections) sections[name] = std::string(bytes);
  return write_engine_container(h, sections);
}

TEST(EngineFile, ForgedConstantShapesAreRefused) {
  // (2^62 + 1) * 4 elements wrap around to 4: the 16 bytes of data must not be viewed as that shape.
  auto c = read_engine_container(engine_bytes());
  ASSERT_TRUE(c.is_ok());
  auto graph = nlohmann::json::parse(c->sections.at("graph"));
  graph["constants"][0]["dims"] = {(int64_t{1} << 62) + 1, 4};
  graph["constants"][0]["bytes"] = 16;
  std::map<std::string, std::string> sections;
  for (const auto& [name, bytes] : c->sections) sections[name] = std::string(bytes);
  sections["graph"] = graph.dump();
  expect_refused(write_engine_container(c->header, sections), "has the wrong size");
}

TEST(EngineFile, TruncatedFilesAreRefused) {
  const std::string& good = engine_bytes();
  auto h = read_engine_header(good);
  ASSERT_TRUE(h.is_ok());
  const size_t body = h->body_offset;
  for (size_t cut : {size_t{8}, size_t{11}, size_t{40}, size_t{64}, size_t{64 + h->header_bytes / 2}, body,
                     body + h->body_bytes / 2, good.size() - 1})
    expect_refused(good.substr(0, cut), "the engine file is truncated");
}

TEST(EngineFile, CorruptFilesAreRefused) {
  const std::string& good = engine_bytes();
  auto h = read_engine_header(good);
  ASSERT_TRUE(h.is_ok());
  std::string weights = good;
  weights[h->body_offset + h->sections.at("weights").offset + 100] ^= 0x20;
  expect_refused(weights, "corrupt (body checksum mismatch)");
  std::string header = good;
  header[64 + h->header_bytes / 2] ^= 0x01;
  expect_refused(header, "corrupt (header checksum mismatch)");
  std::string sizes = good;
  sizes[32] ^= 0x40;  // the body's length in the prelude
  expect_refused(sizes, "corrupt (header checksum mismatch)");
  expect_refused(good + "trailing", "corrupt (8 bytes after the body)");
}

TEST(EngineFile, OtherFormatVersionsAreRefused) {
  std::string v3 = engine_bytes();
  v3[8] = 3;
  expect_refused(v3, "format version 3 but this kiln reads version 2");
  // Format 1: "KILNENG1" | u64 header length | header JSON | ...
  std::string v1 = "KILNENG1";
  v1 += std::string("\x02\0\0\0\0\0\0\0", 8) + "{}";
  expect_refused(v1, "format version 1 but this kiln reads version 2");
}

TEST(EngineFile, OtherKilnVersionsAreRefused) {
  expect_refused(rewrap([](EngineHeader& h) { h.kiln_version = "0.0.1-other"; }),
                 str_cat("built by kiln 0.0.1-other and this is kiln ", version_string()));
}

TEST(EngineFile, OtherCpuIsaIsRefusedNamingBoth) {
  // An ISA this CPU lacks: oneDNN's AMX level includes every other but avx2_vnni.
  const std::string lacking = cpu_isa_mismatch("avx512_core_amx").empty() ? "avx2_vnni" : "avx512_core_amx";
  ASSERT_FALSE(cpu_isa_mismatch(lacking).empty());
  expect_refused(rewrap([&](EngineHeader& h) { h.cpu_isa = lacking; }),
                 str_cat("built for CPU ISA ", lacking, " and this CPU has ", cpu_isa_name()));
  expect_refused(rewrap([](EngineHeader& h) { h.cpu_isa = "avx99"; }),
                 "CPU ISA 'avx99', which this kiln does not know");
  // An ISA this CPU includes is accepted (sse41 is below every x86 ISA oneDNN runs).
  auto ok = EngineImpl::deserialize(rewrap([](EngineHeader& h) { h.cpu_isa = "sse41"; }));
  EXPECT_TRUE(ok.is_ok()) << ok.status().to_string();
}

TEST(EngineFile, OtherDeviceIsRefused) {
  expect_refused(rewrap([](EngineHeader& h) {
                   h.device = "NVIDIA Z999";
                   h.compute_capability = "12.7";
                   h.cpu_isa.clear();
                 }),
                 "the engine was built for GPU NVIDIA Z999 (compute capability 12.7) and this ");
}

TEST(EngineFile, FilesThatAreNotEnginesAreRefused) {
  expect_refused("", "not a kiln engine file");
  expect_refused("KILN", "not a kiln engine file");
  expect_refused("\x08\x07\x12\x04kiln:\x00\x00 an ONNX model", "not a kiln engine file");
  expect_refused(std::string(4096, 'K'), "not a kiln engine file");
}

TEST(EngineFile, LoadFileRefusesFoldersPipesAndMissingFilesWithoutWaiting) {
  const auto dir = std::filesystem::temp_directory_path() / str_cat("kiln_engine_file_test_dir_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {dir.string(), fifo, (dir / "missing.kengine").string()}) {
    auto e = EngineImpl::load_file(path);
    ASSERT_FALSE(e.is_ok()) << path;
    EXPECT_NE(e.status().message().find(path), std::string::npos) << e.status().message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
