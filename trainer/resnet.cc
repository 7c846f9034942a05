// torchvision's ResNet bottleneck architecture in libtorch (see resnet.h).
#include "trainer/resnet.h"

#include <string>

namespace trainer {
namespace {

constexpr int kExpansion = 4;  // a bottleneck's output has 4x its inner width

torch::nn::Conv2d Conv(int in, int out, int kernel, int stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

torch::nn::BatchNorm2d Norm(int channels, bool batch_norm) {
  return batch_norm ? torch::nn::BatchNorm2d(channels) : torch::nn::BatchNorm2d(nullptr);
}

torch::Tensor ApplyNorm(torch::nn::BatchNorm2d& norm, torch::Tensor x) { return norm ? norm(x) : x; }

}  // namespace

BottleneckImpl::BottleneckImpl(int in_channels, int planes, int stride, bool batch_norm) {
  conv1_ = register_module("conv1", Conv(in_channels, planes, 1, 1));
  bn1_ = Norm(planes, batch_norm);
  if (bn1_) register_module("bn1", bn1_);
  conv2_ = register_module("conv2", Conv(planes, planes, 3, stride));
  bn2_ = Norm(planes, batch_norm);
  if (bn2_) register_module("bn2", bn2_);
  conv3_ = register_module("conv3", Conv(planes, planes * kExpansion, 1, 1));
  bn3_ = Norm(planes * kExpansion, batch_norm);
  if (bn3_) register_module("bn3", bn3_);
  if (stride != 1 || in_channels != planes * kExpansion) {
    downsample_ = torch::nn::Sequential(Conv(in_channels, planes * kExpansion, 1, stride));
    if (batch_norm) downsample_->push_back(torch::nn::BatchNorm2d(planes * kExpansion));
    register_module("downsample", downsample_);
  }
}

// In-place ReLUs and residual add, where torchvision has them (saves a tensor each).
torch::Tensor BottleneckImpl::forward(torch::Tensor x) {
  torch::Tensor identity = downsample_ ? downsample_->forward(x) : x;
  torch::Tensor out = ApplyNorm(bn1_, conv1_(x)).relu_();
  out = ApplyNorm(bn2_, conv2_(out)).relu_();
  out = ApplyNorm(bn3_, conv3_(out));
  out += identity;
  return out.relu_();
}

ResNetImpl::ResNetImpl(const ResNetOptions& options) {
  const int width = options.width;
  conv1_ = register_module(
      "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, width, 7).stride(2).padding(3).bias(false)));
  bn1_ = Norm(width, options.batch_norm);
  if (bn1_) register_module("bn1", bn1_);
  int channels = width;
  layer1_ = register_module("layer1", MakeStage(&channels, width, options.blocks[0], 1, options.batch_norm));
  layer2_ = register_module("layer2", MakeStage(&channels, width * 2, options.blocks[1], 2, options.batch_norm));
  layer3_ = register_module("layer3", MakeStage(&channels, width * 4, options.blocks[2], 2, options.batch_norm));
  layer4_ = register_module("layer4", MakeStage(&channels, width * 8, options.blocks[3], 2, options.batch_norm));
  fc_ = register_module("fc", torch::nn::Linear(channels, options.num_classes));

  // torchvision's initialisation; Linear keeps libtorch's default (as torchvision does).
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* norm = module->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(norm->weight);
      torch::nn::init::zeros_(norm->bias);
    }
  }
  if (options.zero_init_residual && options.batch_norm) {
    for (auto& module : modules(false)) {
      if (auto* block = module->as<Bottleneck>()) torch::nn::init::zeros_(block->last_norm()->weight);
    }
  }
}

torch::nn::Sequential ResNetImpl::MakeStage(int* in_channels, int planes, int blocks, int stride, bool batch_norm) {
  torch::nn::Sequential stage;
  for (int i = 0; i < blocks; ++i) {
    stage->push_back(Bottleneck(*in_channels, planes, i == 0 ? stride : 1, batch_norm));
    *in_channels = planes * kExpansion;
  }
  return stage;
}

torch::Tensor ResNetImpl::forward(torch::Tensor x) {
  x = ApplyNorm(bn1_, conv1_(x)).relu_();
  x = torch::max_pool2d(x, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
  x = layer4_->forward(layer3_->forward(layer2_->forward(layer1_->forward(x))));
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc_(x);
}

int64_t ParameterCount(torch::nn::Module& module) {
  int64_t count = 0;
  for (const torch::Tensor& parameter : module.parameters()) count += parameter.numel();
  return count;
}

}  // namespace trainer
