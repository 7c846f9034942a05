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

void MomentumOptimizer::Step(double lr) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor& w = parameters_[i];
    const torch::Tensor& grad = w.grad();
    if (!grad.defined()) continue;
    const double wd = decays_[i] ? options_.weight_decay : 0.0;
    torch::Tensor& v = momentum_[i];
    if (!adapts_[i]) {
      // v = momentum * v + grad + wd * w, in place (no temporary of the weight's size).
      v.mul_(options_.momentum).add_(grad);
      if (wd > 0) v.add_(w, wd);
    } else {
      torch::Tensor g = wd > 0 ? grad.add(w, wd) : grad.clone();
      double w_norm = w.norm().item<double>();
      double g_norm = grad.norm().item<double>();
      double denominator = g_norm + wd * w_norm;
      if (w_norm > 0 && denominator > 0) g.mul_(options_.lars_eta * w_norm / denominator);
      v.mul_(options_.momentum).add_(g);
    }
    w.add_(v, -lr);
  }
}

}  // namespace trainer
