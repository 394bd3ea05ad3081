// Datasets: IDX (Fashion-MNIST from Debian's package, generated and corrupt files), image folders and
// lists (generated PNG/BMP files), LMDB stores.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "train/data/dataset.h"
#include "train/data/dataset_config.h"
#include "train/data/lmdb_store.h"
#include "train/data/loader.h"
#include "train/data/rng.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system's temp folder, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / str_cat("kiln_data_", info->test_suite_name(), "_", info->name(), "_", ::getpid());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// n images of h x w (pixel = (i * 7 + y * w + x) % 256) and labels i % classes.
void write_idx_pair(const std::string& images, const std::string& labels, int64_t n, int64_t h, int64_t w,
                    int64_t classes, bool gzip) {
  IdxArray img;
  img.dims = {n, h, w};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < h * w; ++p) img.data.push_back(static_cast<uint8_t>((i * 7 + p) % 256));
  ASSERT_TRUE(write_idx(images, img, gzip).is_ok());
  IdxArray lab;
  lab.dims = {n};
  for (int64_t i = 0; i < n; ++i) lab.data.push_back(static_cast<uint8_t>(i % classes));
  ASSERT_TRUE(write_idx(labels, lab, gzip).is_ok());
}

constexpr char kFashionDir[] = "/usr/share/datasets/fashion-mnist";

TEST(IdxDataset, FashionMnistFromTheDebianPackage) {
  if (!fs::exists(fs::path(kFashionDir) / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (" << kFashionDir << ")";
  auto train = IdxDataset::open_dir(kFashionDir, "train", fashion_mnist_class_names());
  ASSERT_TRUE(train.is_ok()) << train.status().to_string();
  EXPECT_EQ((*train)->size(), 60000);
  EXPECT_EQ((*train)->image_shape(), (ImageShape{28, 28, 1}));
  EXPECT_EQ((*train)->num_classes(), 10);
  EXPECT_EQ((*train)->class_names()[9], "Ankle boot");
  std::vector<int64_t> counts(10, 0);
  for (int64_t i = 0; i < (*train)->size(); i += 7) {
    auto s = (*train)->sample(i);
    ASSERT_TRUE(s.is_ok());
    ASSERT_GE(s->label, 0);
    ASSERT_LT(s->label, 10);
    ++counts[static_cast<size_t>(s->label)];
  }
  for (int64_t c : counts) EXPECT_GT(c, 500);
  // Fashion-MNIST's first training image is an ankle boot (label 9) with a dark border.
  auto first = (*train)->sample(0);
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->label, 9);
  EXPECT_EQ(first->image.u8.size(), 784u);
  EXPECT_EQ(first->image.u8[0], 0);
  int nonzero = 0;
  for (uint8_t v : first->image.u8) nonzero += v != 0;
  EXPECT_GT(nonzero, 100);
  auto test = IdxDataset::open_dir(kFashionDir, "t10k", fashion_mnist_class_names());
  ASSERT_TRUE(test.is_ok()) << test.status().to_string();
  EXPECT_EQ((*test)->size(), 10000);
  EXPECT_FALSE((*test)->sample(10000).is_ok());
  EXPECT_TRUE(contains((*test)->describe(), "10000 images 28x28x1"));
}

TEST(IdxDataset, PlainAndGzippedFilesReadTheSame) {
  TempDir dir;
  write_idx_pair(dir / "a-images", dir / "a-labels", 13, 5, 4, 3, false);
  write_idx_pair(dir / "b-images.gz", dir / "b-labels.gz", 13, 5, 4, 3, true);
  EXPECT_NE(read_bytes(dir / "b-images.gz").substr(0, 2), std::string("\0\0", 2));  // really gzipped
  auto a = IdxDataset::open(dir / "a-images", dir / "a-labels");
  auto b = IdxDataset::open(dir / "b-images.gz", dir / "b-labels.gz");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ((*a)->size(), 13);
  EXPECT_EQ((*a)->image_shape(), (ImageShape{5, 4, 1}));
  EXPECT_EQ((*a)->class_names(), (std::vector<std::string>{"0", "1", "2"}));
  for (int64_t i = 0; i < 13; ++i) {
    auto sa = (*a)->sample(i), sb = (*b)->sample(i);
    ASSERT_TRUE(sa.is_ok() && sb.is_ok());
    EXPECT_EQ(sa->image.u8, sb->image.u8);
    EXPECT_EQ(sa->label, i % 3);
    EXPECT_EQ(sa->image.u8[3], static_cast<uint8_t>((i * 7 + 3) % 256));
  }
  // int32 labels, big-endian in the file.
  IdxArray lab;
  lab.type = IdxArray::Type::kInt32;
  lab.dims = {13};
  for (int32_t i = 0; i < 13; ++i) {
    int32_t v = 12 - i;
    lab.data.insert(lab.data.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4);
  }
  ASSERT_TRUE(write_idx(dir / "int-labels", lab, false).is_ok());
  EXPECT_EQ(read_bytes(dir / "int-labels").substr(4, 4), std::string("\0\0\0\x0d", 4));
  auto c = IdxDataset::open(dir / "a-images", dir / "int-labels");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ((*c)->num_classes(), 13);
  EXPECT_EQ((*c)->sample(0)->label, 12);
}

TEST(IdxDataset, CorruptFilesAreErrorsThatNameTheFile) {
  TempDir dir;
  write_idx_pair(dir / "images", dir / "labels", 10, 6, 6, 10, false);
  write_idx_pair(dir / "images.gz", dir / "labels.gz", 10, 6, 6, 10, true);
  const std::string good = read_bytes(dir / "images");
  auto expect_error = [&](const std::string& images, const std::string& labels,
                          const std::string& part) -> std::string {
    auto ds = IdxDataset::open(images, labels);
    if (ds.is_ok()) {
      ADD_FAILURE() << images << ": expected an error with '" << part << "'";
      return "";
    }
    EXPECT_TRUE(contains(ds.status().message(), part)) << ds.status().message();
    return ds.status().message();
  };
  // Truncated, plain: the header promises more than the file holds.
  write_bytes(dir / "cut", good.substr(0, good.size() - 5));
  auto msg = expect_error(dir / "cut", dir / "labels", "truncated");
  EXPECT_TRUE(contains(msg, dir / "cut"));
  // Truncated inside the header.
  write_bytes(dir / "stub", good.substr(0, 6));
  expect_error(dir / "stub", dir / "labels", "truncated");
  // Truncated, gzipped: cut the compressed stream.
  const std::string gz = read_bytes(dir / "images.gz");
  write_bytes(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  msg = expect_error(dir / "cut.gz", dir / "labels", "cut.gz");
  // Bad magic.
  std::string bad = good;
  bad[0] = 'P';
  write_bytes(dir / "magic", bad);
  expect_error(dir / "magic", dir / "labels", "bad magic");
  bad = good;
  bad[2] = 0x42;  // no such element type
  write_bytes(dir / "type", bad);
  expect_error(dir / "type", dir / "labels", "element type");
  // A header claiming far more images than the file holds: refused before reading them.
  IdxArray liar;
  liar.dims = {5, 2, 2};
  liar.data.assign(20, 1);
  ASSERT_TRUE(write_idx(dir / "liar-src", liar, false).is_ok());
  std::string lie = read_bytes(dir / "liar-src");
  lie[4] = 0x7F;  // 5 -> 2^30-ish images
  write_bytes(dir / "liar", lie);
  expect_error(dir / "liar", dir / "labels", "truncated");
  // Extra bytes after the data.
  write_bytes(dir / "long", good + "xyz");
  expect_error(dir / "long", dir / "labels", "bytes after");
  // Label count and range.
  write_idx_pair(dir / "img9", dir / "lab9", 9, 6, 6, 10, false);
  expect_error(dir / "images", dir / "lab9", "9 labels for the 10 images");
  auto named = IdxDataset::open(dir / "images", dir / "labels", {"a", "b", "c"});
  ASSERT_FALSE(named.is_ok());
  EXPECT_TRUE(contains(named.status().message(), "out of range for the 3 classes")) << named.status().message();
  // Missing files.
  auto missing = IdxDataset::open(dir / "nope", dir / "labels");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto missing_dir = IdxDataset::open_dir(dir.path().string(), "train");
  ASSERT_FALSE(missing_dir.is_ok());
  EXPECT_TRUE(contains(missing_dir.status().message(), "train-images-idx3-ubyte"));
}

// Writes an RGB or gray image whose pixels encode (class, index, y, x).
std::vector<uint8_t> pattern(int w, int h, int c, int seed) {
  std::vector<uint8_t> px(static_cast<size_t>(w * h * c));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((seed * 31 + static_cast<int>(i) * 5) % 256);
  return px;
}

TEST(ImageFileDataset, FolderOfPngAndBmp) {
  TempDir dir;
  fs::create_directories(dir.path() / "images" / "cat");
  fs::create_directories(dir.path() / "images" / "dog");
  fs::create_directories(dir.path() / "images" / ".hidden");
  const std::string root = dir / "images";
  auto a = pattern(6, 5, 3, 1), b = pattern(6, 5, 3, 2), c = pattern(6, 5, 3, 3);
  ASSERT_TRUE(stbi_write_png((root + "/cat/a.png").c_str(), 6, 5, 3, a.data(), 6 * 3));
  ASSERT_TRUE(stbi_write_bmp((root + "/cat/b.BMP").c_str(), 6, 5, 3, b.data()));
  ASSERT_TRUE(stbi_write_png((root + "/dog/c.png").c_str(), 6, 5, 3, c.data(), 6 * 3));
  write_bytes(root + "/dog/notes.txt", "not an image");
  ASSERT_TRUE(stbi_write_png((root + "/.hidden/x.png").c_str(), 6, 5, 3, c.data(), 6 * 3));
  auto ds = ImageFileDataset::open_folder(root);
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  EXPECT_EQ((*ds)->size(), 3);
  EXPECT_EQ((*ds)->class_names(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ((*ds)->image_shape(), (ImageShape{0, 0, 3}));  // sizes are not known without resizing
  const std::vector<uint8_t>* expected[] = {&a, &b, &c};
  for (int64_t i = 0; i < 3; ++i) {
    auto s = (*ds)->sample(i);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    EXPECT_EQ(s->label, i < 2 ? 0 : 1);
    EXPECT_EQ(s->image.shape, (ImageShape{5, 6, 3}));
    EXPECT_EQ(s->image.u8, *expected[i]) << "image " << i;  // PNG and BMP are lossless
  }
  // Grayscale on request, and resized.
  auto gray = ImageFileDataset::open_folder(root, {.channels = 1, .height = 10, .width = 12});
  ASSERT_TRUE(gray.is_ok()) << gray.status().to_string();
  EXPECT_EQ((*gray)->image_shape(), (ImageShape{10, 12, 1}));
  auto g = (*gray)->sample(2);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->image.shape, (ImageShape{10, 12, 1}));
  EXPECT_EQ(g->image.u8.size(), 120u);
  // A gray PNG folder reads as one channel by default.
  fs::create_directories(dir.path() / "gray" / "x");
  auto gp = pattern(4, 4, 1, 9);
  ASSERT_TRUE(stbi_write_png((dir / "gray/x/0.png").c_str(), 4, 4, 1, gp.data(), 4));
  auto gds = ImageFileDataset::open_folder(dir / "gray");
  ASSERT_TRUE(gds.is_ok());
  EXPECT_EQ((*gds)->image_shape().channels, 1);
  EXPECT_EQ((*gds)->sample(0)->image.u8, gp);
}

TEST(ImageFileDataset, UnreadableImagesAndBadFoldersAreErrors) {
  TempDir dir;
  fs::create_directories(dir.path() / "f" / "a");
  auto px = pattern(4, 4, 3, 0);
  ASSERT_TRUE(stbi_write_png((dir / "f/a/0.png").c_str(), 4, 4, 3, px.data(), 12));
  write_bytes(dir / "f/a/1.png", "\x89PNG\r\n\x1a\ngarbage");
  // A truncated PNG.
  std::string png = read_bytes(dir / "f/a/0.png");
  write_bytes(dir / "f/a/2.png", png.substr(0, png.size() / 2));
  auto ds = ImageFileDataset::open_folder(dir / "f");
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  for (int64_t i : {1, 2}) {
    auto s = (*ds)->sample(i);
    ASSERT_FALSE(s.is_ok());
    EXPECT_TRUE(contains(s.status().message(), str_cat(i, ".png"))) << s.status().message();
    EXPECT_TRUE(contains(s.status().message(), "unreadable image")) << s.status().message();
  }
  // A JPEG whose Huffman table declares too many codes (stb_image 2.27 would write past its table).
  ASSERT_TRUE(stbi_write_jpg((dir / "f/a/3.jpg").c_str(), 4, 4, 3, px.data(), 90));
  std::string jpg = read_bytes(dir / "f/a/3.jpg");
  auto good_jpg = decode_image_memory(reinterpret_cast<const uint8_t*>(jpg.data()), jpg.size(), "good.jpg");
  ASSERT_TRUE(good_jpg.is_ok()) << good_jpg.status().to_string();
  EXPECT_EQ(good_jpg->shape, (ImageShape{4, 4, 3}));
  size_t dht = jpg.find("\xFF\xC4");
  ASSERT_NE(dht, std::string::npos);
  for (size_t k = 0; k < 16; ++k) jpg[dht + 5 + k] = '\x40';
  write_bytes(dir / "f/a/3.jpg", jpg);
  auto bad_jpg = (*ImageFileDataset::open_folder(dir / "f"))->sample(3);
  ASSERT_FALSE(bad_jpg.is_ok());
  EXPECT_TRUE(contains(bad_jpg.status().message(), "3.jpg: unreadable image (corrupt JPEG: a Huffman table"))
      << bad_jpg.status().message();
  EXPECT_EQ(ImageFileDataset::open_folder(dir / "missing").status().code(), StatusCode::kNotFound);
  fs::create_directories(dir.path() / "empty" / "a");
  EXPECT_TRUE(contains(ImageFileDataset::open_folder(dir / "empty").status().message(), "no images"));
  fs::create_directories(dir.path() / "flat");
  EXPECT_TRUE(contains(ImageFileDataset::open_folder(dir / "flat").status().message(), "no class subfolders"));
  EXPECT_FALSE(ImageFileDataset::open_folder(dir / "f", {.channels = 2}).is_ok());
  EXPECT_FALSE(ImageFileDataset::open_folder(dir / "f", {.height = 5}).is_ok());
}

TEST(ImageFileDataset, TextListWithLabelsFile) {
  TempDir dir;
  fs::create_directories(dir.path() / "pics");
  auto a = pattern(3, 3, 3, 4), b = pattern(3, 3, 3, 5);
  ASSERT_TRUE(stbi_write_png((dir / "pics/a.png").c_str(), 3, 3, 3, a.data(), 9));
  ASSERT_TRUE(stbi_write_bmp((dir / "pics/b b.bmp").c_str(), 3, 3, 3, b.data()));
  write_bytes(dir / "labels.txt", "zero\none\ntwo\n");
  write_bytes(dir / "list.txt", "# path label\npics/a.png 2\n\n" + (dir / "pics/b b.bmp") + "\t0\n");
  auto ds = ImageFileDataset::open_list(dir / "list.txt", dir / "labels.txt");
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  EXPECT_EQ((*ds)->size(), 2);
  EXPECT_EQ((*ds)->num_classes(), 3);
  EXPECT_EQ((*ds)->sample(0)->label, 2);
  EXPECT_EQ((*ds)->sample(0)->image.u8, a);
  EXPECT_EQ((*ds)->sample(1)->image.u8, b);
  write_bytes(dir / "bad1.txt", "pics/a.png 1\npics/a.png 3\n");
  auto bad = ImageFileDataset::open_list(dir / "bad1.txt", dir / "labels.txt");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad.status().message(), "bad1.txt:2: label 3 is out of range")) << bad.status().message();
  write_bytes(dir / "bad2.txt", "pics/a.png one\n");
  bad = ImageFileDataset::open_list(dir / "bad2.txt", dir / "labels.txt");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad.status().message(), "bad2.txt:1: the label 'one' is not an integer"))
      << bad.status().message();
  write_bytes(dir / "bad3.txt", "pics/missing.png 0\n");
  bad = ImageFileDataset::open_list(dir / "bad3.txt", dir / "labels.txt");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad.status().message(), "missing.png")) << bad.status().message();
}

std::vector<Sample> random_samples(int64_t n, ImageShape shape, int64_t classes, uint64_t seed) {
  Rng rng(seed);
  std::vector<Sample> out;
  for (int64_t i = 0; i < n; ++i) {
    Sample s;
    s.image = Image::zeros_u8(shape);
    for (auto& v : s.image.u8) v = static_cast<uint8_t>(rng.below(256));
    s.label = static_cast<int64_t>(rng.below(static_cast<uint64_t>(classes)));
    out.push_back(std::move(s));
  }
  return out;
}

TEST(LmdbStore, RoundTripWithMeanImage) {
  TempDir dir;
  auto samples = random_samples(1300, {7, 5, 3}, 4, 11);
  auto mem = InMemoryDataset::create(samples, {"a", "b", "c", "d"});
  ASSERT_TRUE(mem.is_ok()) << mem.status().to_string();
  int64_t progress_calls = 0, last = 0;
  LmdbWriteOptions options;
  options.chunk = 500;
  options.progress = [&](int64_t done, int64_t total) {
    ++progress_calls;
    last = done;
    EXPECT_EQ(total, 1300);
  };
  auto info = write_lmdb(**mem, dir / "store", options);
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  EXPECT_EQ(progress_calls, 3);
  EXPECT_EQ(last, 1300);
  EXPECT_EQ(info->count, 1300);
  auto store = LmdbDataset::open(dir / "store");
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ((*store)->size(), 1300);
  EXPECT_EQ((*store)->image_shape(), (ImageShape{7, 5, 3}));
  EXPECT_EQ((*store)->class_names(), (*mem)->class_names());
  for (int64_t i = 0; i < 1300; i += 13) {
    auto s = (*store)->sample(i);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    EXPECT_EQ(s->label, samples[static_cast<size_t>(i)].label);
    EXPECT_EQ(s->image.u8, samples[static_cast<size_t>(i)].image.u8);
  }
  const Image* mean = (*store)->mean_image();
  ASSERT_NE(mean, nullptr);
  ASSERT_EQ(mean->f32.size(), 105u);
  for (size_t p = 0; p < 105; p += 17) {
    double sum = 0;
    for (const auto& s : samples) sum += s.image.u8[p];
    EXPECT_NEAR(mean->f32[p], sum / 1300, 1e-3);
    EXPECT_EQ(info->mean.f32[p], mean->f32[p]);
  }
  EXPECT_FALSE((*store)->sample(1300).is_ok());
  // An existing store is kept unless overwriting is asked for.
  auto again = write_lmdb(**mem, dir / "store");
  ASSERT_FALSE(again.is_ok());
  EXPECT_TRUE(contains(again.status().message(), "already there"));
  store->reset();
  auto small = InMemoryDataset::create(random_samples(3, {7, 5, 3}, 4, 12), {"a", "b", "c", "d"});
  ASSERT_TRUE(small.is_ok());
  LmdbWriteOptions overwrite;
  overwrite.overwrite = true;
  ASSERT_TRUE(write_lmdb(**small, dir / "store", overwrite).is_ok());
  EXPECT_EQ((*LmdbDataset::open(dir / "store"))->size(), 3);
}

TEST(LmdbStore, FloatPixelsAndIdxSource) {
  TempDir dir;
  std::vector<Sample> samples(5);
  for (int i = 0; i < 5; ++i) {
    samples[i].image = Image::zeros_f32({2, 3, 1});
    for (int p = 0; p < 6; ++p) samples[i].image.f32[p] = 0.25f * static_cast<float>(i * p) - 1.5f;
    samples[i].label = i % 2;
  }
  auto mem = InMemoryDataset::create(samples, {"x", "y"});
  ASSERT_TRUE(mem.is_ok());
  ASSERT_TRUE(write_lmdb(**mem, dir / "f").is_ok());
  auto store = LmdbDataset::open(dir / "f");
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ((*store)->pixel_type(), DataType::kFloat32);
  EXPECT_EQ((*store)->sample(4)->image.f32, samples[4].image.f32);
  // From IDX files (what the studio does with MNIST-style uploads).
  write_idx_pair(dir / "img", dir / "lab", 20, 4, 4, 5, true);
  auto idx = IdxDataset::open(dir / "img", dir / "lab");
  ASSERT_TRUE(idx.is_ok());
  ASSERT_TRUE(write_lmdb(**idx, dir / "idx").is_ok());
  auto back = LmdbDataset::open(dir / "idx");
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ((*back)->sample(19)->image.u8, (*idx)->sample(19)->image.u8);
  EXPECT_TRUE(contains((*back)->describe(), "20 images 4x4x1"));
}

TEST(LmdbStore, LoaderThreadsReadOneStore) {
  TempDir dir;
  auto mem = InMemoryDataset::create(random_samples(90, {6, 6, 1}, 3, 21), {"a", "b", "c"});
  ASSERT_TRUE(mem.is_ok());
  ASSERT_TRUE(write_lmdb(**mem, dir / "s").is_ok());
  auto store = LmdbDataset::open(dir / "s");
  ASSERT_TRUE(store.is_ok());
  std::vector<std::vector<float>> runs[2];
  for (int threads : {0, 3}) {
    LoaderOptions options;
    options.batch_size = 8;
    options.threads = threads;
    auto loader = DataLoader::create(*store, {}, options);
    ASSERT_TRUE(loader.is_ok());
    for (int b = 0; b < 15; ++b) {
      auto batch = (*loader)->next();
      ASSERT_TRUE(batch.is_ok()) << batch.status().to_string();
      const float* p = batch->images.data<float>();
      runs[threads ? 1 : 0].emplace_back(p, p + batch->images.numel());
    }
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(LmdbStore, ErrorsNameThePath) {
  TempDir dir;
  auto none = LmdbDataset::open(dir / "nothing");
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  fs::create_directories(dir.path() / "garbage");
  write_bytes(dir / "garbage/data.mdb", std::string(8192, 'x'));
  auto garbage = LmdbDataset::open(dir / "garbage");
  ASSERT_FALSE(garbage.is_ok());
  EXPECT_TRUE(contains(garbage.status().message(), dir / "garbage")) << garbage.status().message();
  // Images of varying size cannot go into a store.
  std::vector<Sample> mixed(2);
  mixed[0].image = Image::zeros_u8({2, 2, 1});
  mixed[1].image = Image::zeros_u8({3, 2, 1});
  auto mem = InMemoryDataset::create(mixed, {"a"});
  ASSERT_TRUE(mem.is_ok());
  auto bad = write_lmdb(**mem, dir / "mixed");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad.status().message(), "vary in size")) << bad.status().message();
}

TEST(OpenDataset, FromConfigKeys) {
  TempDir dir;
  write_idx_pair(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 12, 4, 4, 10, true);
  auto idx = open_dataset({{"type", "idx"}, {"dir", dir.path().string()}, {"classes", "fashion-mnist"}});
  ASSERT_TRUE(idx.is_ok()) << idx.status().to_string();
  EXPECT_EQ((*idx)->size(), 12);
  EXPECT_EQ((*idx)->class_names()[0], "T-shirt/top");
  auto named = open_dataset({{"type", "idx"},
                             {"images", dir / "train-images-idx3-ubyte.gz"},
                             {"labels", dir / "train-labels-idx1-ubyte.gz"},
                             {"classes", "[a, b, c, d, e, f, g, h, i, 'j']"}});
  ASSERT_TRUE(named.is_ok()) << named.status().to_string();
  EXPECT_EQ((*named)->class_names()[9], "j");
  ASSERT_TRUE(write_lmdb(**idx, dir / "store").is_ok());
  auto lmdb = open_dataset({{"type", "lmdb"}, {"path", dir / "store"}});
  ASSERT_TRUE(lmdb.is_ok()) << lmdb.status().to_string();
  EXPECT_NE((*lmdb)->mean_image(), nullptr);
  fs::create_directories(dir.path() / "f" / "c");
  auto px = pattern(4, 4, 3, 0);
  ASSERT_TRUE(stbi_write_png((dir / "f/c/0.png").c_str(), 4, 4, 3, px.data(), 12));
  auto folder = open_dataset({{"type", "folder"}, {"path", dir / "f"}, {"height", "8"}, {"width", "8"}});
  ASSERT_TRUE(folder.is_ok()) << folder.status().to_string();
  EXPECT_EQ((*folder)->image_shape(), (ImageShape{8, 8, 3}));
  auto error = [](const DatasetParams& p) { return open_dataset(p).status().message(); };
  EXPECT_TRUE(contains(error({}), "key 'type' is required"));
  EXPECT_TRUE(contains(error({{"type", "csv"}}), "key 'type' is 'csv'"));
  EXPECT_TRUE(contains(error({{"type", "idx"}}), "dataset (type idx): key 'dir' or images and labels are required"));
  EXPECT_TRUE(contains(error({{"type", "lmdb"}, {"path", "x"}, {"shuffle", "1"}}), "unknown key 'shuffle'"));
  EXPECT_TRUE(contains(error({{"type", "folder"}, {"path", dir / "f"}, {"height", "8"}}), "key 'width' is missing"));
  EXPECT_TRUE(contains(error({{"type", "folder"}, {"path", dir / "f"}, {"channels", "rgb"}}),
                       "key 'channels' is 'rgb', not an integer"));
  EXPECT_TRUE(contains(error({{"type", "lmdb"}, {"path", dir / "none"}}), "no LMDB store"));
}

TEST(SubsetDataset, SeededSplit) {
  auto mem = InMemoryDataset::create(random_samples(50, {2, 2, 1}, 5, 3), {"a", "b", "c", "d", "e"});
  ASSERT_TRUE(mem.is_ok());
  auto split = split_dataset(*mem, 0.2, 9);
  ASSERT_TRUE(split.is_ok()) << split.status().to_string();
  auto [train, val] = *split;
  EXPECT_EQ(train->size(), 40);
  EXPECT_EQ(val->size(), 10);
  std::set<int64_t> all(train->indices().begin(), train->indices().end());
  all.insert(val->indices().begin(), val->indices().end());
  EXPECT_EQ(all.size(), 50u);
  EXPECT_EQ(val->sample(3)->image.u8, (*mem)->sample(val->indices()[3])->image.u8);
  EXPECT_EQ((*split_dataset(*mem, 0.2, 9)).second->indices(), val->indices());
  EXPECT_NE((*split_dataset(*mem, 0.2, 10)).second->indices(), val->indices());
  EXPECT_TRUE(contains(val->describe(), "10 samples of in-memory"));
  EXPECT_FALSE(split_dataset(*mem, 1.5, 0).is_ok());
  EXPECT_FALSE(SubsetDataset::create(*mem, {50}).is_ok());
}

}  // namespace
}  // namespace kiln::train
