// ResNet with bottleneck blocks, laid out exactly as torchvision's resnet50 (v1.5: the
// stride of a downsampling block sits on its 3x3 convolution): the same modules, the
// same parameter names (conv1.weight, layer1.0.bn1.running_mean, ..., fc.bias), the
// same shapes and the same initialisation (Kaiming-normal fan-out convolutions, BN
// gamma 1 / beta 0, and optionally gamma 0 on each block's last BN, Goyal et al.).
// With the defaults it has 25,557,032 parameters.
//
// For quick runs the stage depths (`blocks`) and the base `width` can be reduced, and
// batch norm can be left out (the gradient-equality test needs a model whose gradient
// on 2B images is the sum of its gradients on two halves).
#ifndef TESSERA_TRAINER_RESNET_H_
#define TESSERA_TRAINER_RESNET_H_

#include <torch/torch.h>

#include <vector>

namespace trainer {

struct ResNetOptions {
  std::vector<int> blocks = {3, 4, 6, 3};  // ResNet-50
  int width = 64;
  int num_classes = 1000;
  bool batch_norm = true;
  bool zero_init_residual = false;  // torchvision's default; the trainer turns it on
};

class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int in_channels, int planes, int stride, bool batch_norm);
  torch::Tensor forward(torch::Tensor x);
  // The last BN of the block (empty without batch norm): zero_init_residual zeroes it.
  torch::nn::BatchNorm2d last_norm() { return bn3_; }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Bottleneck);

class ResNetImpl : public torch::nn::Module {
 public:
  explicit ResNetImpl(const ResNetOptions& options);
  torch::Tensor forward(torch::Tensor x);  // (N, 3, H, W) -> (N, num_classes) logits

 private:
  torch::nn::Sequential MakeStage(int* in_channels, int planes, int blocks, int stride, bool batch_norm);

  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr}, layer4_{nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(ResNet);

// Number of elements of all parameters (not buffers).
int64_t ParameterCount(torch::nn::Module& module);

}  // namespace trainer

#endif  // TESSERA_TRAINER_RESNET_H_
