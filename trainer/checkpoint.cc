// Saving and loading the complete training state (see checkpoint.h).
#include "trainer/checkpoint.h"

#include <cerrno>
#include <cstdio>

namespace trainer {
namespace {

// Model tensors in a fixed order: parameters then buffers, with their names.
void ModelTensors(torch::nn::Module& model, std::vector<torch::Tensor>* tensors, std::string* names) {
  for (const auto& item : model.named_parameters()) {
    tensors->push_back(item.value());
    *names += item.key() + ";";
  }
  for (const auto& item : model.named_buffers()) {
    tensors->push_back(item.value());
    *names += item.key() + ";";
  }
}

}  // namespace

tessera::Status SaveCheckpoint(const std::string& path, torch::nn::Module& model,
                               const std::vector<torch::Tensor>& momentum, const torch::Tensor& pending,
                               const TrainProgress& progress) {
  std::vector<torch::Tensor> tensors;
  std::string names;
  ModelTensors(model, &tensors, &names);
  const std::string temporary = path + ".tmp";
  try {
    torch::serialize::OutputArchive archive;
    archive.write("names", c10::IValue(names));
    for (size_t i = 0; i < tensors.size(); ++i) archive.write("model_" + std::to_string(i), tensors[i].detach().cpu());
    for (size_t i = 0; i < momentum.size(); ++i) archive.write("momentum_" + std::to_string(i), momentum[i].cpu());
    archive.write("momentum_count", c10::IValue(static_cast<int64_t>(momentum.size())));
    archive.write("epoch", c10::IValue(static_cast<int64_t>(progress.epoch)));
    archive.write("step_in_epoch", c10::IValue(progress.step_in_epoch));
    archive.write("global_step", c10::IValue(progress.global_step));
    archive.write("loss_scale", c10::IValue(progress.loss_scale));
    archive.write("clean_steps", c10::IValue(progress.clean_steps));
    archive.write("epoch_loss_sum", c10::IValue(progress.epoch_loss_sum));
    archive.write("epoch_images", c10::IValue(progress.epoch_images));
    archive.write("epoch_seconds", c10::IValue(progress.epoch_seconds));
    archive.write("skipped_total", c10::IValue(progress.skipped_total));
    archive.write("world", c10::IValue(static_cast<int64_t>(progress.world)));
    archive.write("settings", c10::IValue(progress.settings));
    archive.write("epoch_position", c10::IValue(progress.epoch_position));
    archive.write("epoch_span", c10::IValue(progress.epoch_span));
    archive.write("pending", c10::IValue(progress.pending));
    archive.write("pending_scale", c10::IValue(progress.pending_scale));
    archive.write("pending_images", c10::IValue(progress.pending_images));
    if (progress.pending) archive.write("pending_gradient", pending.cpu());
    archive.save_to(temporary);
  } catch (const std::exception& error) {
    return tessera::SystemError("cannot write checkpoint " + temporary + ": " + error.what());
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return tessera::ErrnoError("cannot rename " + temporary + " to " + path, errno);
  }
  return tessera::Status::Ok();
}

tessera::Status LoadCheckpoint(const std::string& path, torch::nn::Module& model,
                               std::vector<torch::Tensor>* momentum, torch::Tensor* pending, TrainProgress* progress) {
  std::vector<torch::Tensor> tensors;
  std::string names;
  ModelTensors(model, &tensors, &names);
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    c10::IValue value;
    archive.read("names", value);
    if (value.toStringRef() != names) {
      return tessera::InvalidArgument("checkpoint " + path + " holds another architecture than --blocks/--width ask for");
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < tensors.size(); ++i) {
      torch::Tensor saved;
      archive.read("model_" + std::to_string(i), saved);
      tensors[i].copy_(saved);
    }
    archive.read("momentum_count", value);
    if (value.toInt() != static_cast<int64_t>(momentum->size())) {
      return tessera::InvalidArgument("checkpoint " + path + " has another number of momentum buffers");
    }
    for (size_t i = 0; i < momentum->size(); ++i) {
      torch::Tensor saved;
      archive.read("momentum_" + std::to_string(i), saved);
      (*momentum)[i].copy_(saved);
    }
    auto read_int = [&](const char* key) {
      archive.read(key, value);
      return value.toInt();
    };
    auto read_double = [&](const char* key) {
      archive.read(key, value);
      return value.toDouble();
    };
    progress->epoch = static_cast<int>(read_int("epoch"));
    progress->step_in_epoch = read_int("step_in_epoch");
    progress->global_step = read_int("global_step");
    progress->loss_scale = read_double("loss_scale");
    progress->clean_steps = read_int("clean_steps");
    progress->epoch_loss_sum = read_double("epoch_loss_sum");
    progress->epoch_images = read_int("epoch_images");
    progress->epoch_seconds = read_double("epoch_seconds");
    progress->skipped_total = read_int("skipped_total");
    progress->world = static_cast<int>(read_int("world"));
    archive.read("settings", value);
    progress->settings = value.toStringRef();
    progress->epoch_position = archive.try_read("epoch_position", value) ? value.toInt() : -1;
    progress->epoch_span = archive.try_read("epoch_span", value) ? value.toInt() : 0;
    progress->pending = archive.try_read("pending", value) && value.toBool();
    if (progress->pending) {
      progress->pending_scale = read_double("pending_scale");
      progress->pending_images = read_int("pending_images");
      archive.read("pending_gradient", *pending);
    }
  } catch (const std::exception& error) {
    return tessera::InvalidArgument("cannot load checkpoint " + path + ": " + error.what());
  }
  return tessera::Status::Ok();
}

}  // namespace trainer
