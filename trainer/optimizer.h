// SGD with momentum and, as an option, LARS (You et al. 2017), over float32 master
// weights, with the record runs' rule that batch-norm parameters and biases (the 1-D
// parameters) get no weight decay.
//
//   g = grad + wd * w                     (wd = 0 for BN parameters and biases by default)
//   LARS only, for weights (not BN, not bias):
//       g *= eta * |w| / (|grad| + wd * |w|)      (1 if a norm is 0)
//   v = momentum * v + g
//   w -= lr * v
//
// The momentum buffers are part of the state that a checkpoint saves.
#ifndef TESSERA_TRAINER_OPTIMIZER_H_
#define TESSERA_TRAINER_OPTIMIZER_H_

#include <torch/torch.h>

#include <vector>

namespace trainer {

struct OptimizerOptions {
  double momentum = 0.9;
  double weight_decay = 1e-4;
  bool decay_bn_and_bias = false;
  bool lars = false;
  double lars_eta = 0.001;
};

class MomentumOptimizer {
 public:
  MomentumOptimizer(std::vector<torch::Tensor> parameters, const OptimizerOptions& options);

  // Applies one update with learning rate lr, reading each parameter's .grad
  // (parameters without one are left alone).
  void Step(double lr);

  // Momentum buffers, one per parameter, for checkpoints.
  std::vector<torch::Tensor>& momentum_buffers() { return momentum_; }
  // Whether parameter i gets weight decay.
  bool decays(size_t i) const { return decays_[i]; }

 private:
  void StepLars(torch::Tensor& w, torch::Tensor& v, double wd, double lr);

  std::vector<torch::Tensor> parameters_;
  std::vector<torch::Tensor> momentum_;
  std::vector<bool> decays_;
  std::vector<bool> adapts_;  // LARS trust ratio applies
  OptimizerOptions options_;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_OPTIMIZER_H_
