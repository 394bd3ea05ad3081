// The standard classifiers `model.name` names, written with the module API (torchvision's layouts for
// AlexNet, GoogLeNet and the ResNets, without auxiliary heads; DIGITS' LeNet).
#include "train/trainer.h"

namespace kiln::train {
namespace {

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p) { return (in + 2 * p - k) / s + 1; }

ModulePtr conv_bn_relu(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, double eps = 1e-5) {
  auto seq = std::make_shared<Sequential>();
  seq->add(conv2d(in, out, k, s, p, 1, false), "conv").add(batch_norm2d(out, eps), "bn").add(relu(), "relu");
  return seq;
}

// A small CNN for 28x28 images: two conv blocks and two linear layers.
Result<ModulePtr> fashion_cnn(const ImageShape& in, int64_t classes, int64_t width) {
  const int64_t w = width ? width : 32;
  if (in.height % 4 || in.width % 4)
    return invalid_argument("fashion_cnn needs image sides divisible by 4, not ", in.to_string());
  auto m = std::make_shared<Sequential>();
  m->add(conv2d(in.channels, w, 3, 1, 1), "conv1").add(relu(), "relu1").add(max_pool2d(2), "pool1");
  m->add(conv2d(w, 2 * w, 3, 1, 1), "conv2").add(relu(), "relu2").add(max_pool2d(2), "pool2");
  m->add(flatten(), "flatten").add(linear(2 * w * (in.height / 4) * (in.width / 4), 128), "fc1").add(relu(), "relu3");
  m->add(linear(128, classes), "fc2");
  return ModulePtr(m);
}

Result<ModulePtr> lenet(const ImageShape& in, int64_t classes) {
  const int64_t h = (conv_out(in.height, 5, 1, 0) / 2 - 4) / 2, w = (conv_out(in.width, 5, 1, 0) / 2 - 4) / 2;
  if (h < 1 || w < 1) return invalid_argument("lenet needs images of at least 16x16, not ", in.to_string());
  auto m = std::make_shared<Sequential>();
  m->add(conv2d(in.channels, 20, 5), "conv1").add(max_pool2d(2), "pool1");
  m->add(conv2d(20, 50, 5), "conv2").add(max_pool2d(2), "pool2").add(flatten(), "flatten");
  m->add(linear(50 * h * w, 500), "ip1").add(relu(), "relu1").add(linear(500, classes), "ip2");
  return ModulePtr(m);
}

Result<ModulePtr> alexnet(const ImageShape& in, int64_t classes) {
  auto side = [](int64_t x) {  // conv1 (11, stride 4, pad 2), then three 3x3 stride-2 poolings
    x = conv_out(x, 11, 4, 2);
    for (int i = 0; i < 3; ++i) x = conv_out(x, 3, 2, 0);
    return x;
  };
  const int64_t h = side(in.height), w = side(in.width);
  if (h < 1 || w < 1) return invalid_argument("alexnet needs images of at least 63x63, not ", in.to_string());
  auto f = std::make_shared<Sequential>();
  f->add(conv2d(in.channels, 64, 11, 4, 2)).add(relu()).add(max_pool2d(3, 2));
  f->add(conv2d(64, 192, 5, 1, 2)).add(relu()).add(max_pool2d(3, 2));
  f->add(conv2d(192, 384, 3, 1, 1)).add(relu()).add(conv2d(384, 256, 3, 1, 1)).add(relu());
  f->add(conv2d(256, 256, 3, 1, 1)).add(relu()).add(max_pool2d(3, 2));
  auto c = std::make_shared<Sequential>();
  c->add(flatten()).add(dropout(0.5)).add(linear(256 * h * w, 4096)).add(relu()).add(dropout(0.5));
  c->add(linear(4096, 4096)).add(relu()).add(linear(4096, classes));
  auto m = std::make_shared<Sequential>();
  m->add(f, "features").add(c, "classifier");
  return ModulePtr(m);
}

ModulePtr inception(int64_t in, int64_t c1, int64_t c3r, int64_t c3, int64_t c5r, int64_t c5, int64_t pool) {
  const double eps = 1e-3;
  auto b2 = std::make_shared<Sequential>();
  b2->add(conv_bn_relu(in, c3r, 1, 1, 0, eps)).add(conv_bn_relu(c3r, c3, 3, 1, 1, eps));
  auto b3 = std::make_shared<Sequential>();
  b3->add(conv_bn_relu(in, c5r, 1, 1, 0, eps)).add(conv_bn_relu(c5r, c5, 3, 1, 1, eps));
  auto b4 = std::make_shared<Sequential>();
  b4->add(max_pool2d(3, 1, 1, true)).add(conv_bn_relu(in, pool, 1, 1, 0, eps));
  return concat_branches({conv_bn_relu(in, c1, 1, 1, 0, eps), b2, b3, b4});
}

Result<ModulePtr> googlenet(const ImageShape& in, int64_t classes) {
  if (in.height < 32 || in.width < 32)
    return invalid_argument("googlenet needs images of at least 32x32, not ", in.to_string());
  const double eps = 1e-3;
  auto m = std::make_shared<Sequential>();
  m->add(conv_bn_relu(in.channels, 64, 7, 2, 3, eps), "conv1").add(max_pool2d(3, 2, 0, true), "maxpool1");
  m->add(conv_bn_relu(64, 64, 1, 1, 0, eps), "conv2").add(conv_bn_relu(64, 192, 3, 1, 1, eps), "conv3");
  m->add(max_pool2d(3, 2, 0, true), "maxpool2");
  m->add(inception(192, 64, 96, 128, 16, 32, 32), "inception3a")
      .add(inception(256, 128, 128, 192, 32, 96, 64), "inception3b");
  m->add(max_pool2d(3, 2, 0, true), "maxpool3");
  m->add(inception(480, 192, 96, 208, 16, 48, 64), "inception4a")
      .add(inception(512, 160, 112, 224, 24, 64, 64), "inception4b");
  m->add(inception(512, 128, 128, 256, 24, 64, 64), "inception4c")
      .add(inception(512, 112, 144, 288, 32, 64, 64), "inception4d");
  m->add(inception(528, 256, 160, 320, 32, 128, 128), "inception4e").add(max_pool2d(2, 2, 0, true), "maxpool4");
  m->add(inception(832, 256, 160, 320, 32, 128, 128), "inception5a")
      .add(inception(832, 384, 192, 384, 48, 128, 128), "inception5b");
  m->add(global_avg_pool(), "avgpool")
      .add(flatten(), "flatten")
      .add(dropout(0.2), "dropout")
      .add(linear(1024, classes), "fc");
  return ModulePtr(m);
}

ModulePtr basic_block(int64_t in, int64_t out, int64_t stride) {
  auto body = std::make_shared<Sequential>();
  body->add(conv2d(in, out, 3, stride, 1, 1, false), "conv1").add(batch_norm2d(out), "bn1").add(relu(), "relu");
  body->add(conv2d(out, out, 3, 1, 1, 1, false), "conv2").add(batch_norm2d(out), "bn2");
  ModulePtr shortcut;
  if (stride != 1 || in != out) {
    auto s = std::make_shared<Sequential>();
    s->add(conv2d(in, out, 1, stride, 0, 1, false), "0").add(batch_norm2d(out), "1");
    shortcut = s;
  }
  return residual(body, shortcut, relu());
}

ModulePtr bottleneck(int64_t in, int64_t mid, int64_t stride) {
  const int64_t out = mid * 4;
  auto body = std::make_shared<Sequential>();
  body->add(conv2d(in, mid, 1, 1, 0, 1, false), "conv1").add(batch_norm2d(mid), "bn1").add(relu(), "relu1");
  body->add(conv2d(mid, mid, 3, stride, 1, 1, false), "conv2").add(batch_norm2d(mid), "bn2").add(relu(), "relu2");
  body->add(conv2d(mid, out, 1, 1, 0, 1, false), "conv3").add(batch_norm2d(out), "bn3");
  ModulePtr shortcut;
  if (stride != 1 || in != out) {
    auto s = std::make_shared<Sequential>();
    s->add(conv2d(in, out, 1, stride, 0, 1, false), "0").add(batch_norm2d(out), "1");
    shortcut = s;
  }
  return residual(body, shortcut, relu());
}

Result<ModulePtr> resnet(const ImageShape& in, int64_t classes, bool deep) {
  if (in.height < 32 || in.width < 32)
    return invalid_argument("resnet needs images of at least 32x32, not ", in.to_string());
  auto m = std::make_shared<Sequential>();
  m->add(conv2d(in.channels, 64, 7, 2, 3, 1, false), "conv1").add(batch_norm2d(64), "bn1").add(relu(), "relu");
  m->add(max_pool2d(3, 2, 1), "maxpool");
  const int64_t blocks18[] = {2, 2, 2, 2}, blocks50[] = {3, 4, 6, 3};
  int64_t in_ch = 64;
  for (int stage = 0; stage < 4; ++stage) {
    auto layer = std::make_shared<Sequential>();
    const int64_t width = 64 << stage;
    for (int64_t b = 0; b < (deep ? blocks50 : blocks18)[stage]; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      if (deep) {
        layer->add(bottleneck(in_ch, width, stride));
        in_ch = width * 4;
      } else {
        layer->add(basic_block(in_ch, width, stride));
        in_ch = width;
      }
    }
    m->add(layer, "layer" + std::to_string(stage + 1));
  }
  m->add(global_avg_pool(), "avgpool").add(flatten(), "flatten").add(linear(in_ch, classes), "fc");
  return ModulePtr(m);
}

}  // namespace

Result<ModulePtr> make_model(const TrainConfig::Model& model, const ImageShape& input, int64_t classes) {
  if (classes < 2) return invalid_argument("a classifier needs at least 2 classes; the dataset has ", classes);
  const std::string& n = model.name;
  if (n == "fashion_cnn") return fashion_cnn(input, classes, model.width);
  if (n == "lenet") return lenet(input, classes);
  if (n == "alexnet") return alexnet(input, classes);
  if (n == "googlenet") return googlenet(input, classes);
  if (n == "resnet18") return resnet(input, classes, false);
  if (n == "resnet50") return resnet(input, classes, true);
  return invalid_argument("'model.name' ", n,
                          " is not a model kiln knows: fashion_cnn, lenet, alexnet, googlenet, resnet18, resnet50");
}

}  // namespace kiln::train
