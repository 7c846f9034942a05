// SGD momentum / LARS update (see optimizer.h).
#include "trainer/optimizer.h"

namespace trainer {

MomentumOptimizer::MomentumOptimizer(std::vector<torch::Tensor> parameters, const OptimizerOptions& options)
    : parameters_(std::move(parameters)), options_(options) {
  for (const torch::Tensor& parameter : parameters_) {
    momentum_.push_back(torch::zeros_like(parameter));
    bool weight = parameter.dim() > 1;  // BN gamma/beta and biases are 1-D
    decays_.push_back(weight || options_.decay_bn_and_bias);
    adapts_.push_back(options_.lars && weight);
  }
}

// The plain momentum update of every parameter at once (torch's _foreach ops: a handful
// of multi-tensor kernels on a GPU instead of three or four kernels per parameter); the
// LARS weights one by one, as they need their norms.
void MomentumOptimizer::Step(double lr) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> weights, grads, moments, decayed_weights, decayed_moments;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor& w = parameters_[i];
    if (!w.grad().defined()) continue;
    const double wd = decays_[i] ? options_.weight_decay : 0.0;
    if (adapts_[i]) {
      StepLars(w, momentum_[i], wd, lr);
      continue;
    }
    weights.push_back(w);
    grads.push_back(w.grad());
    moments.push_back(momentum_[i]);
    if (wd > 0) {
      decayed_weights.push_back(w);
      decayed_moments.push_back(momentum_[i]);
    }
  }
  if (weights.empty()) return;
  // v = momentum * v + grad + wd * w, in place (no temporary of the weights' size).
  torch::_foreach_mul_(moments, options_.momentum);
  torch::_foreach_add_(moments, grads);
  if (!decayed_weights.empty()) torch::_foreach_add_(decayed_moments, decayed_weights, options_.weight_decay);
  torch::_foreach_add_(weights, moments, -lr);
}

void MomentumOptimizer::StepLars(torch::Tensor& w, torch::Tensor& v, double wd, double lr) {
  const torch::Tensor& grad = w.grad();
  torch::Tensor g = wd > 0 ? grad.add(w, wd) : grad.clone();
  double w_norm = w.norm().item<double>();
  double g_norm = grad.norm().item<double>();
  double denominator = g_norm + wd * w_norm;
  if (w_norm > 0 && denominator > 0) g.mul_(options_.lars_eta * w_norm / denominator);
  v.mul_(options_.momentum).add_(g);
  w.add_(v, -lr);
}

}  // namespace trainer
