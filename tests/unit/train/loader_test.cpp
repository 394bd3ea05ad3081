// The loader (shuffling, batching, threads, resume) and the augmentations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "train/data/augment.h"
#include "train/data/loader.h"
#include "train/data/params.h"

namespace kiln::train {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::shared_ptr<InMemoryDataset> make_dataset(int64_t n, ImageShape shape, int64_t classes, uint64_t seed) {
  Rng rng(seed);
  std::vector<Sample> samples;
  for (int64_t i = 0; i < n; ++i) {
    Sample s;
    s.image = Image::zeros_u8(shape);
    for (auto& v : s.image.u8) v = static_cast<uint8_t>(rng.below(256));
    s.label = i % classes;
    samples.push_back(std::move(s));
  }
  std::vector<std::string> names;
  for (int64_t c = 0; c < classes; ++c) names.push_back(std::to_string(c));
  return *InMemoryDataset::create(std::move(samples), std::move(names));
}

AugmentList make_list(const std::vector<std::pair<std::string, AugmentParams>>& specs) {
  auto list = make_augmentations(specs);
  EXPECT_TRUE(list.is_ok()) << list.status().to_string();
  return list.is_ok() ? *list : AugmentList{};
}

// Every augmentation that draws random numbers, RGB.
AugmentList random_rgb_list() {
  return make_list({{"random_crop", {{"size", "6"}, {"padding", "2"}}},
                    {"hflip", {{"p", "0.5"}}},
                    {"vflip", {{"p", "0.3"}}},
                    {"rotate", {{"degrees", "15"}}},
                    {"hsv_shift", {{"hue", "20"}, {"saturation", "0.2"}, {"value", "0.2"}}},
                    {"noise", {{"std", "3"}}},
                    {"scale", {}},
                    {"normalize", {{"mean", "[0.5, 0.4, 0.3]"}, {"std", "0.25"}}}});
}

struct Taken {
  std::vector<std::vector<float>> images;
  std::vector<std::vector<int64_t>> labels;
  std::vector<std::pair<int64_t, int64_t>> where;  // (epoch, position)
};

void take(DataLoader& loader, int n, Taken& out) {
  for (int i = 0; i < n; ++i) {
    auto b = loader.next();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    const float* p = b->images.data<float>();
    out.images.emplace_back(p, p + b->images.numel());
    const int64_t* l = b->labels.data<int64_t>();
    out.labels.emplace_back(l, l + b->labels.numel());
    out.where.emplace_back(b->epoch, b->position);
  }
}

TEST(Rng, DeterministicAndRestorable) {
  Rng a(42), b(42), c(43);
  EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(a.next(), c.next());
  Rng d = Rng::from_state(a.state());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next(), d.next());
  double sum = 0, sq = 0;
  for (int i = 0; i < 20000; ++i) {
    double v = a.normal();
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / 20000, 0.0, 0.05);
  EXPECT_NEAR(sq / 20000, 1.0, 0.05);
  for (int i = 0; i < 1000; ++i) {
    int64_t v = a.uniform_int(-3, 3);
    EXPECT_GE(v, -3);
    EXPECT_LE(v, 3);
  }
}

TEST(DataLoader, BatchesAreNchwFloatWithLabels) {
  auto ds = make_dataset(10, {3, 2, 3}, 4, 1);
  LoaderOptions options;
  options.batch_size = 4;
  options.shuffle = false;
  auto loader = DataLoader::create(ds, {}, options);
  ASSERT_TRUE(loader.is_ok()) << loader.status().to_string();
  EXPECT_EQ((*loader)->batches_per_epoch(), 3);
  for (int b = 0; b < 3; ++b) {
    auto batch = (*loader)->next();
    ASSERT_TRUE(batch.is_ok());
    const int64_t n = b < 2 ? 4 : 2;
    EXPECT_EQ(batch->images.dims(), (Dims{n, 3, 3, 2}));
    EXPECT_EQ(batch->images.dtype(), DataType::kFloat32);
    EXPECT_EQ(batch->labels.dims(), (Dims{n}));
    EXPECT_EQ(batch->labels.dtype(), DataType::kInt64);
    EXPECT_EQ(batch->last_in_epoch, b == 2);
    for (int64_t i = 0; i < n; ++i) {
      const Sample s = *ds->sample(b * 4 + i);
      EXPECT_EQ(batch->labels.data<int64_t>()[i], s.label);
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t y = 0; y < 3; ++y)
          for (int64_t x = 0; x < 2; ++x)
            ASSERT_EQ(batch->images.data<float>()[((i * 3 + c) * 3 + y) * 2 + x], s.image.at(y, x, c));
    }
  }
  auto wrapped = (*loader)->next();  // the next epoch starts at once
  ASSERT_TRUE(wrapped.is_ok());
  EXPECT_EQ(wrapped->epoch, 1);
  EXPECT_EQ(wrapped->indices, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(DataLoader, ShufflesEveryEpochDifferentlyAndCoversTheDataset) {
  auto ds = make_dataset(50, {2, 2, 1}, 5, 2);
  LoaderOptions options;
  options.batch_size = 8;
  options.drop_last = true;
  options.seed = 7;
  auto loader = DataLoader::create(ds, {}, options);
  ASSERT_TRUE(loader.is_ok());
  EXPECT_EQ((*loader)->batches_per_epoch(), 6);
  std::vector<std::vector<int64_t>> epochs(2);
  for (int b = 0; b < 12; ++b) {
    auto batch = (*loader)->next();
    ASSERT_TRUE(batch.is_ok());
    EXPECT_EQ(batch->images.dims()[0], 8);
    EXPECT_EQ(batch->epoch, b / 6);
    epochs[static_cast<size_t>(b / 6)].insert(epochs[static_cast<size_t>(b / 6)].end(), batch->indices.begin(),
                                              batch->indices.end());
  }
  EXPECT_NE(epochs[0], epochs[1]);
  for (auto& e : epochs) {
    std::sort(e.begin(), e.end());
    EXPECT_EQ(std::adjacent_find(e.begin(), e.end()), e.end());  // no sample twice in an epoch
    EXPECT_EQ(e.size(), 48u);
  }
}

TEST(DataLoader, SameBatchesWhateverTheThreadCount) {
  auto ds = make_dataset(37, {8, 8, 3}, 3, 3);
  std::vector<Taken> runs;
  for (int threads : {0, 1, 2, 5}) {
    LoaderOptions options;
    options.batch_size = 5;
    options.seed = 99;
    options.threads = threads;
    options.prefetch = threads == 5 ? 7 : 2;
    auto loader = DataLoader::create(ds, random_rgb_list(), options);
    ASSERT_TRUE(loader.is_ok()) << loader.status().to_string();
    EXPECT_EQ((*loader)->output_shape(), (ImageShape{6, 6, 3}));
    Taken t;
    take(**loader, 20, t);  // about 2.5 epochs
    runs.push_back(std::move(t));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    EXPECT_EQ(runs[r].labels, runs[0].labels) << "run " << r;
    EXPECT_EQ(runs[r].where, runs[0].where) << "run " << r;
    ASSERT_EQ(runs[r].images.size(), runs[0].images.size());
    for (size_t b = 0; b < runs[0].images.size(); ++b)
      ASSERT_EQ(std::memcmp(runs[r].images[b].data(), runs[0].images[b].data(), runs[0].images[b].size() * 4), 0)
          << "run " << r << " batch " << b;
  }
  // Another seed: other batches.
  LoaderOptions options;
  options.batch_size = 5;
  options.seed = 100;
  auto other = DataLoader::create(ds, random_rgb_list(), options);
  ASSERT_TRUE(other.is_ok());
  Taken t;
  take(**other, 1, t);
  EXPECT_NE(t.images[0], runs[0].images[0]);
}

TEST(DataLoader, ShardsTogetherGiveTheWholeBatch) {
  auto ds = make_dataset(23, {8, 8, 3}, 4, 5);
  LoaderOptions options;
  options.batch_size = 6;
  options.seed = 7;
  auto whole = DataLoader::create(ds, random_rgb_list(), options);
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  std::vector<std::unique_ptr<DataLoader>> shards;
  for (int k = 0; k < 4; ++k) {  // 6 does not split evenly in 4: slices of 1 or 2 samples
    LoaderOptions o = options;
    o.shards = 4;
    o.shard = k;
    o.threads = k % 2;
    auto l = DataLoader::create(ds, random_rgb_list(), o);
    ASSERT_TRUE(l.is_ok()) << l.status().to_string();
    shards.push_back(std::move(*l));
  }
  for (int b = 0; b < 9; ++b) {  // over two epochs, with the short last batch (23 = 3 * 6 + 5)
    auto w = (*whole)->next();
    ASSERT_TRUE(w.is_ok());
    std::vector<float> images;
    std::vector<int64_t> labels;
    for (auto& l : shards) {
      auto part = l->next();
      ASSERT_TRUE(part.is_ok()) << part.status().to_string();
      images.insert(images.end(), part->images.data<float>(), part->images.data<float>() + part->images.numel());
      labels.insert(labels.end(), part->labels.data<int64_t>(), part->labels.data<int64_t>() + part->labels.numel());
      EXPECT_EQ(l->state(), (*whole)->state()) << "batch " << b;
    }
    ASSERT_EQ(images.size(), static_cast<size_t>(w->images.numel())) << "batch " << b;
    EXPECT_EQ(std::memcmp(images.data(), w->images.data<float>(), images.size() * 4), 0) << "batch " << b;
    EXPECT_EQ(labels, std::vector<int64_t>(w->labels.data<int64_t>(), w->labels.data<int64_t>() + w->labels.numel()));
  }
  LoaderOptions bad = options;
  bad.shards = 2;
  bad.shard = 2;
  EXPECT_FALSE(DataLoader::create(ds, {}, bad).is_ok());
}

TEST(DataLoader, ResumeGivesTheSameBatchesAsAnUninterruptedRun) {
  auto ds = make_dataset(23, {8, 8, 3}, 4, 4);
  for (bool drop_last : {false, true}) {
    LoaderOptions options;
    options.batch_size = 4;
    options.seed = 5;
    options.drop_last = drop_last;
    options.threads = 2;
    options.prefetch = 3;
    auto whole = DataLoader::create(ds, random_rgb_list(), options);
    ASSERT_TRUE(whole.is_ok());
    Taken expected;
    take(**whole, 17, expected);  // crosses two epoch boundaries

    auto first = DataLoader::create(ds, random_rgb_list(), options);
    ASSERT_TRUE(first.is_ok());
    Taken before;
    take(**first, 5, before);
    const std::string saved = (*first)->state().serialize();
    first->reset();  // the run dies; its prefetched batches are lost

    auto state = LoaderState::parse(saved);
    ASSERT_TRUE(state.is_ok()) << state.status().to_string();
    EXPECT_EQ(state->serialize(), saved);
    LoaderOptions other = options;
    other.threads = 0;   // a resumed run may use another thread count
    other.seed = 12345;  // the state's seed wins
    auto resumed = DataLoader::create(ds, random_rgb_list(), other);
    ASSERT_TRUE(resumed.is_ok());
    ASSERT_TRUE((*resumed)->restore(*state).is_ok());
    EXPECT_EQ((*resumed)->state(), *state);
    Taken after;
    take(**resumed, 12, after);
    for (size_t b = 0; b < 5; ++b) EXPECT_EQ(before.images[b], expected.images[b]) << "batch " << b;
    for (size_t b = 0; b < 12; ++b) {
      EXPECT_EQ(after.where[b], expected.where[b + 5]) << "batch " << b + 5 << " drop_last " << drop_last;
      EXPECT_EQ(after.labels[b], expected.labels[b + 5]) << "batch " << b + 5;
      EXPECT_EQ(after.images[b], expected.images[b + 5]) << "batch " << b + 5;
    }
    // Resuming from the end of an epoch.
    auto at_end = DataLoader::create(ds, {}, options);
    auto ref = DataLoader::create(ds, {}, options);
    ASSERT_TRUE(at_end.is_ok() && ref.is_ok());
    Taken e1, r1;
    take(**at_end, (*at_end)->batches_per_epoch(), e1);
    take(**ref, (*ref)->batches_per_epoch() + 2, r1);
    auto end_state = (*at_end)->state();
    auto again = DataLoader::create(ds, {}, options);
    ASSERT_TRUE(again.is_ok() && (*again)->restore(end_state).is_ok());
    Taken a1;
    take(**again, 2, a1);
    EXPECT_EQ(a1.labels[0], r1.labels[r1.labels.size() - 2]);
    EXPECT_EQ(a1.where[1], r1.where.back());
  }
}

TEST(DataLoader, BadOptionsAndStatesAreErrors) {
  auto ds = make_dataset(6, {4, 4, 1}, 2, 6);
  LoaderOptions options;
  options.batch_size = 0;
  EXPECT_TRUE(contains(DataLoader::create(ds, {}, options).status().message(), "batch_size 0"));
  options.batch_size = 8;
  options.drop_last = true;
  EXPECT_TRUE(contains(DataLoader::create(ds, {}, options).status().message(), "leaves no batch"));
  options.drop_last = false;
  // hsv_shift needs RGB; the error comes at creation and names the dataset.
  auto hsv = make_list({{"hsv_shift", {{"hue", "10"}}}});
  auto bad = DataLoader::create(ds, hsv, options);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad.status().message(), "takes RGB images")) << bad.status().message();
  auto crop = make_list({{"random_crop", {{"size", "9"}}}});
  EXPECT_TRUE(contains(DataLoader::create(ds, crop, options).status().message(), "smaller than the crop"));
  auto loader = DataLoader::create(ds, {}, options);
  ASSERT_TRUE(loader.is_ok());
  LoaderState s = (*loader)->state();
  EXPECT_EQ(s.dataset_size, 6);
  s.position = 7;
  EXPECT_FALSE((*loader)->restore(s).is_ok());
  s.position = 0;
  s.dataset_size = 60000;
  EXPECT_TRUE(contains((*loader)->restore(s).message(), "from a dataset of 60000 samples"));
  EXPECT_FALSE(LoaderState::parse("kiln-loader 2 seed=1").is_ok());
  EXPECT_FALSE(LoaderState::parse("kiln-loader 1 seed=1 size=6 epoch=0 position=0").is_ok());
  EXPECT_FALSE(LoaderState::parse("kiln-loader 1 seed=1 size=6 epoch=0 position=0 rng=1,2,3").is_ok());
  EXPECT_TRUE(LoaderState::parse("kiln-loader 1 seed=1 size=6 epoch=0 position=0 rng=1,2,3,4").is_ok());
  EXPECT_FALSE(LoaderState::parse("kiln-loader 1 seed=1 epoch=0 position=0 rng=1,2,3,4").is_ok());
  EXPECT_FALSE(LoaderState::parse("kiln-loader 1 seed=x size=6 epoch=0 position=0 rng=1,2,3,4").is_ok());
  EXPECT_FALSE(LoaderState::parse("kiln-loader 1 seed=1 size=6 epoch=-1 position=0 rng=1,2,3,4").is_ok());
}

TEST(DataLoader, SampleErrorsNameTheSample) {
  // A dataset whose sample 3 fails.
  class Flaky final : public Dataset {
   public:
    int64_t size() const override { return 6; }
    Result<Sample> sample(int64_t index) const override {
      if (index == 3) return invalid_argument("flaky.bin: unreadable image (bad huffman code)");
      return Sample{Image::zeros_u8({2, 2, 1}), 0};
    }
    const std::vector<std::string>& class_names() const override { return names_; }
    ImageShape image_shape() const override { return {2, 2, 1}; }
    DataType pixel_type() const override { return DataType::kUInt8; }
    std::string describe() const override { return "flaky"; }

   private:
    std::vector<std::string> names_{"only"};
  };
  for (int threads : {0, 2}) {
    LoaderOptions options;
    options.batch_size = 2;
    options.shuffle = false;
    options.threads = threads;
    auto loader = DataLoader::create(std::make_shared<Flaky>(), {}, options);
    ASSERT_TRUE(loader.is_ok());
    EXPECT_TRUE((*loader)->next().is_ok());
    auto bad = (*loader)->next();
    ASSERT_FALSE(bad.is_ok());
    EXPECT_TRUE(contains(bad.status().message(), "sample 3 of flaky")) << bad.status().message();
    EXPECT_TRUE(contains(bad.status().message(), "flaky.bin: unreadable image")) << bad.status().message();
    EXPECT_EQ((*loader)->state().position, 2);  // the failed batch does not count
    EXPECT_TRUE((*loader)->next().is_ok());
  }
}

Image ramp(ImageShape shape) {
  Image img = Image::zeros_f32(shape);
  for (size_t i = 0; i < img.f32.size(); ++i) img.f32[i] = static_cast<float>(i);
  return img;
}

TEST(Augment, FactoryErrorsNameTheKey) {
  auto unknown = make_augmentation("blur", {});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_TRUE(contains(unknown.status().message(), "unknown augmentation 'blur'"));
  EXPECT_TRUE(contains(unknown.status().message(), "random_crop"));
  auto key = make_augmentation("hflip", {{"prob", "0.5"}});
  ASSERT_FALSE(key.is_ok());
  EXPECT_TRUE(contains(key.status().message(), "unknown key 'prob' (keys: p)")) << key.status().message();
  auto typo = make_augmentation("random_crop", {{"size", "4"}, {"paddin", "1"}});
  EXPECT_TRUE(contains(typo.status().message(), "unknown key 'paddin' (did you mean 'padding'?"))
      << typo.status().message();
  EXPECT_TRUE(contains(make_augmentation("hflipp", {}).status().message(), "did you mean 'hflip'?"));
  // From a config's typed values.
  OptionMap typed{{"size", 4}, {"padding", 1}, {"fill", "0.5"}};
  auto params = params_from_options(typed);
  EXPECT_EQ(params["size"], "4");
  EXPECT_EQ(params["fill"], "0.5");
  EXPECT_TRUE(make_augmentation("random_crop", params).is_ok());
  auto lists = params_from_options({{"mean", std::vector<double>{0.5, 0.25}}, {"std", 2}});
  EXPECT_TRUE(make_augmentation("normalize", lists).is_ok()) << lists["mean"];
  auto value = make_augmentation("random_crop", {{"size", "big"}});
  ASSERT_FALSE(value.is_ok());
  EXPECT_TRUE(contains(value.status().message(), "key 'size' is 'big', not an integer")) << value.status().message();
  auto range = make_augmentation("hflip", {{"p", "1.5"}});
  ASSERT_FALSE(range.is_ok());
  EXPECT_TRUE(contains(range.status().message(), "key 'p' is 1.5, out of range")) << range.status().message();
  auto missing = make_augmentation("noise", {});
  EXPECT_TRUE(contains(missing.status().message(), "key 'std' is required"));
  auto no_mean = make_augmentation("mean_subtract", {});
  EXPECT_TRUE(contains(no_mean.status().message(), "mean image")) << no_mean.status().message();
  auto list = make_augmentations({{"hflip", {}}, {"rotate", {{"degrees", "x"}}}});
  ASSERT_FALSE(list.is_ok());
  EXPECT_TRUE(contains(list.status().message(), "augment[1] (rotate)")) << list.status().message();
  EXPECT_EQ(augmentation_primary_key("hflip"), "p");
  EXPECT_EQ(augmentation_primary_key("random_crop"), "size");
  for (const auto& name : augmentation_names()) {
    // Every name is known to the factory (an error, if any, is about keys, not the name).
    auto a = make_augmentation(name, {});
    if (!a.is_ok()) {
      EXPECT_FALSE(contains(a.status().message(), "unknown augmentation")) << name;
    }
  }
}

TEST(Augment, DeterministicTransforms) {
  Rng rng(1);
  // Flips with p = 1.
  Image img = ramp({2, 3, 2});
  ASSERT_TRUE((*make_augmentation("hflip", {{"p", "1"}}))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7}));
  img = ramp({2, 3, 2});
  ASSERT_TRUE((*make_augmentation("vflip", {{"p", "1"}}))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5}));
  img = ramp({2, 3, 2});
  ASSERT_TRUE((*make_augmentation("hflip", {{"p", "0"}}))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, ramp({2, 3, 2}).f32);
  // Center crop.
  img = ramp({4, 4, 1});
  ASSERT_TRUE((*make_augmentation("center_crop", {{"size", "2"}}))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{5, 6, 9, 10}));
  // Random crop: a window of the padded image (fill -1), at offsets that cover every possibility.
  std::set<std::pair<int64_t, int64_t>> offsets;
  auto crop = *make_augmentation("random_crop", {{"height", "3"}, {"width", "4"}, {"padding", "1"}, {"fill", "-1"}});
  for (int trial = 0; trial < 200; ++trial) {
    img = ramp({4, 5, 2});
    ASSERT_TRUE(crop->apply(img, rng).is_ok());
    ASSERT_EQ(img.shape, (ImageShape{3, 4, 2}));
    bool matched = false;
    for (int64_t top = -1; top <= 2 && !matched; ++top) {
      for (int64_t left = -1; left <= 2 && !matched; ++left) {
        bool same = true;
        for (int64_t y = 0; y < 3; ++y)
          for (int64_t x = 0; x < 4; ++x)
            for (int64_t k = 0; k < 2; ++k) {
              const int64_t sy = y + top, sx = x + left;
              const float want =
                  (sy < 0 || sy >= 4 || sx < 0 || sx >= 5) ? -1.0f : static_cast<float>((sy * 5 + sx) * 2 + k);
              same = same && img.f32[static_cast<size_t>((y * 4 + x) * 2 + k)] == want;
            }
        if (same) {
          matched = true;
          offsets.insert({top, left});
        }
      }
    }
    ASSERT_TRUE(matched) << "trial " << trial;
  }
  EXPECT_EQ(offsets.size(), 16u);  // top in [-1, 2], left in [-1, 2]
  // Rotation by at most 0 degrees is the identity; a small one keeps the centre.
  img = ramp({5, 5, 1});
  ASSERT_TRUE((*make_augmentation("rotate", {{"degrees", "0"}}))->apply(img, rng).is_ok());
  for (size_t i = 0; i < 25; ++i) EXPECT_NEAR(img.f32[i], static_cast<float>(i), 1e-4);
  img = ramp({5, 5, 1});
  ASSERT_TRUE((*make_augmentation("rotate", {{"degrees", "10"}}))->apply(img, rng).is_ok());
  EXPECT_NEAR(img.f32[12], 12.0f, 1e-4);
  // Scale, normalize, mean subtraction (per channel and per pixel).
  img = ramp({1, 2, 2});
  ASSERT_TRUE((*make_augmentation("scale", {{"factor", "0.5"}}))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{0, 0.5f, 1, 1.5f}));
  img = ramp({1, 2, 2});
  ASSERT_TRUE((*make_augmentation("normalize", {{"mean", "1, 2"}, {"std", "[2, 4]"}}))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{-0.5f, -0.25f, 0.5f, 0.25f}));
  img = ramp({1, 2, 2});
  ASSERT_TRUE((*make_augmentation("mean_subtract", {{"values", "1 1"}}))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{-1, 0, 1, 2}));
  Image mean = ramp({1, 2, 2});
  AugmentContext ctx{&mean};
  img = ramp({1, 2, 2});
  ASSERT_TRUE((*make_augmentation("mean_subtract", {}, ctx))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{0, 0, 0, 0}));
  img = ramp({1, 2, 2});
  ASSERT_TRUE((*make_augmentation("mean_subtract", {{"mode", "pixel"}}, ctx))->apply(img, rng).is_ok());
  EXPECT_EQ(img.f32, (std::vector<float>{-1, -1, 1, 1}));  // channel means 1 and 2
  // HSV with no shift leaves RGB as it is; a hue shift keeps the value (max channel).
  Image rgb = Image::zeros_f32({1, 3, 3});
  rgb.f32 = {200, 30, 60, 10, 250, 90, 128, 128, 128};
  img = rgb;
  ASSERT_TRUE((*make_augmentation("hsv_shift", {}))->apply(img, rng).is_ok());
  for (size_t i = 0; i < 9; ++i) EXPECT_NEAR(img.f32[i], rgb.f32[i], 1e-3);
  img = rgb;
  ASSERT_TRUE((*make_augmentation("hsv_shift", {{"hue", "90"}}))->apply(img, rng).is_ok());
  EXPECT_NEAR(std::max({img.f32[0], img.f32[1], img.f32[2]}), 200.0f, 1e-3);
  EXPECT_NEAR(img.f32[6], 128.0f, 1e-3);  // gray has no hue
  // Noise: mean about 0, std about as asked.
  Image flat = Image::zeros_f32({64, 64, 1});
  ASSERT_TRUE((*make_augmentation("noise", {{"std", "2"}}))->apply(flat, rng).is_ok());
  double sq = 0;
  for (float v : flat.f32) sq += v * v;
  EXPECT_NEAR(std::sqrt(sq / 4096), 2.0, 0.15);
}

}  // namespace
}  // namespace kiln::train
