// Tests of the model and the optimizer. ResNet-50 has torchvision's 25,557,032
// parameters; reduced variants run; the residual zero-init and the batch-norm-free
// variant do what they say. With TORCHVISION_LAYOUT=<file> (written by
// resnet_torchvision_test.sh from torchvision's resnet50().state_dict()), every parameter
// and buffer name and shape is compared with torchvision's. The SGD/LARS update is
// checked against hand-computed numbers, with no weight decay on BN parameters and biases.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "trainer/optimizer.h"
#include "trainer/resnet.h"

namespace trainer {
namespace {

std::string Shape(const torch::Tensor& tensor) {
  std::string text;
  for (int64_t size : tensor.sizes()) text += (text.empty() ? "" : "x") + std::to_string(size);
  return text;
}

TEST(ResNet, ResNet50HasTorchvisionsParameterCount) {
  ResNet model(ResNetOptions{});
  EXPECT_EQ(ParameterCount(*model), 25557032);
  EXPECT_EQ(model->parameters().size(), 161u);
  EXPECT_EQ(model->buffers().size(), 159u);  // 53 batch norms: mean, var, batches tracked
}

TEST(ResNet, ReducedModelRunsForwardAndBackward) {
  ResNetOptions options;
  options.blocks = {1, 1, 1, 1};
  options.width = 8;
  options.num_classes = 10;
  ResNet model(options);
  torch::Tensor logits = model->forward(torch::randn({2, 3, 64, 64}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 10}));
  logits.sum().backward();
  for (const auto& item : model->named_parameters()) EXPECT_TRUE(item.value().grad().defined()) << item.key();
}

TEST(ResNet, ZeroInitResidualZeroesEachBlocksLastNorm) {
  ResNetOptions options;
  options.zero_init_residual = true;
  ResNet model(options);
  int zeroed = 0;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (name.find(".bn3.weight") != std::string::npos) {
      EXPECT_EQ(item.value().abs().sum().item<double>(), 0.0) << name;
      ++zeroed;
    } else if (name.find("bn") != std::string::npos && name.find(".weight") != std::string::npos) {
      EXPECT_EQ(item.value().min().item<double>(), 1.0) << name;
    }
  }
  EXPECT_EQ(zeroed, 16);  // 3 + 4 + 6 + 3 blocks
}

TEST(ResNet, BatchNormFreeVariantHasNoBuffers) {
  ResNetOptions options;
  options.batch_norm = false;
  ResNet model(options);
  EXPECT_TRUE(model->buffers().empty());
  // Only the 53 batch norms' gamma and beta are gone.
  EXPECT_EQ(ParameterCount(*model), 25557032 - 2 * 26560);
}

TEST(ResNet, MatchesTorchvisionLayout) {
  const char* path = std::getenv("TORCHVISION_LAYOUT");
  if (path == nullptr) GTEST_SKIP() << "TORCHVISION_LAYOUT not set (resnet_torchvision_test sets it)";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::map<std::string, std::string> expected;
  std::string line;
  while (std::getline(in, line)) {
    size_t space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    expected[line.substr(0, space)] = line.substr(space + 1);
  }
  ASSERT_EQ(expected.size(), 320u);  // 161 parameters + 159 buffers
  ResNet model(ResNetOptions{});
  std::map<std::string, std::string> ours;
  for (const auto& item : model->named_parameters()) ours[item.key()] = Shape(item.value());
  for (const auto& item : model->named_buffers()) ours[item.key()] = Shape(item.value());
  EXPECT_EQ(ours, expected);
}

TEST(MomentumOptimizer, NoWeightDecayOnBatchNormAndBiases) {
  ResNet model(ResNetOptions{});
  MomentumOptimizer optimizer(model->parameters(), OptimizerOptions{});
  int decayed = 0;
  auto parameters = model->named_parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    const std::string& name = parameters[i].key();
    bool weight = name.find("conv") != std::string::npos || name == "fc.weight" ||
                  name.find("downsample.0") != std::string::npos;
    EXPECT_EQ(optimizer.decays(i), weight) << name;
    decayed += optimizer.decays(i);
  }
  EXPECT_EQ(decayed, 54);  // 53 convolutions and the fc weight
}

TEST(MomentumOptimizer, SgdMomentumWithWeightDecay) {
  torch::Tensor w = torch::tensor({{1.0f, 2.0f}}).requires_grad_();
  torch::Tensor bias = torch::tensor({1.0f}).requires_grad_();
  OptimizerOptions options;
  options.momentum = 0.9;
  options.weight_decay = 0.1;
  MomentumOptimizer optimizer({w, bias}, options);
  w.mutable_grad() = torch::tensor({{0.5f, -1.0f}});
  bias.mutable_grad() = torch::tensor({0.0f});
  optimizer.Step(0.1);  // v = g + 0.1 w = (0.6, -0.8)
  EXPECT_NEAR(w[0][0].item<double>(), 0.94, 1e-6);
  EXPECT_NEAR(w[0][1].item<double>(), 2.08, 1e-6);
  EXPECT_EQ(bias.item<double>(), 1.0);  // a bias: no weight decay, zero gradient, no change
  optimizer.Step(0.1);  // v = 0.9 v + g + 0.1 w = (1.134, -1.512)
  EXPECT_NEAR(w[0][0].item<double>(), 0.94 - 0.1134, 1e-6);
  EXPECT_NEAR(w[0][1].item<double>(), 2.08 + 0.1512, 1e-6);
}

TEST(MomentumOptimizer, LarsScalesByTheTrustRatio) {
  torch::Tensor w = torch::tensor({{3.0f, 4.0f}}).requires_grad_();  // |w| = 5
  torch::Tensor gamma = torch::tensor({2.0f}).requires_grad_();       // BN-like: no LARS
  OptimizerOptions options;
  options.momentum = 0.0;
  options.weight_decay = 0.0;
  options.lars = true;
  options.lars_eta = 0.001;
  MomentumOptimizer optimizer({w, gamma}, options);
  w.mutable_grad() = torch::tensor({{0.0f, 1.0f}});  // |g| = 1: ratio 0.001 * 5 / 1
  gamma.mutable_grad() = torch::tensor({1.0f});
  optimizer.Step(1.0);
  EXPECT_NEAR(w[0][1].item<double>(), 4.0 - 0.005, 1e-6);
  EXPECT_NEAR(gamma.item<double>(), 1.0, 1e-6);  // plain SGD step
}

}  // namespace
}  // namespace trainer
