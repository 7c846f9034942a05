// Decoding threads with bounded prefetch (see batch_loader.h).
#include "trainer/batch_loader.h"

#include <pthread.h>

#include <algorithm>

#include "trainer/random.h"

namespace trainer {

void ChooseCrop(int width, int height, int64_t position, const PipelineOptions& options, CropBox* box, bool* flip) {
  if (options.train) {
    Rng rng(StreamSeed(options.seed, static_cast<uint64_t>(options.epoch), static_cast<uint64_t>(position)));
    *box = RandomResizedCropBox(width, height, &rng, options.min_crop_area, 1.0);
    *flip = rng.Coin();
  } else {
    *box = ResizeCenterCropBox(width, height, options.resize_size, options.crop_size);
    *flip = false;
  }
}

tessera::Status LoadImage(JpegDecoder* decoder, const std::string& path, int64_t position,
                          const PipelineOptions& options, float* chw, double* decode_scale) {
  std::vector<uint8_t> bytes;
  TESSERA_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  int width = 0, height = 0;
  TESSERA_RETURN_IF_ERROR(decoder->ReadSize(bytes, &width, &height));

  CropBox box;
  bool flip = false;
  ChooseCrop(width, height, position, options, &box, &flip);
  // The reduced DCT scale keeps at least kDecodeOversampling x the network input's pixels
  // per side in the crop, so that the antialiased resampling, as in torchvision, and not
  // the DCT scaling shapes the result (pipeline_torchvision_test measures the difference).
  const int kDecodeOversampling = 2;
  const int keep = kDecodeOversampling * options.crop_size;
  RgbImage image;
  double scale = 1.0;
  TESSERA_RETURN_IF_ERROR(decoder->Decode(bytes, box.width, box.height, keep, keep, &image, &scale));
  if (decode_scale != nullptr) *decode_scale = scale;
  CropBox scaled = ScaleBox(box, scale, scale);
  ResampleNormalize(image, scaled, options.crop_size, flip, /*crop_first=*/options.train, options.normalization, chw);
  return tessera::Status::Ok();
}

BatchLoader::BatchLoader(const std::vector<ImageItem>& items, Batches batches, int64_t first_batch,
                         const PipelineOptions& options)
    : items_(items),
      batches_(std::move(batches)),
      options_(options),
      next_to_claim_(std::max<int64_t>(first_batch, 0)),
      next_to_deliver_(next_to_claim_) {
  int threads = std::max(options_.decode_threads, 1);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { DecodeLoop(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  claimable_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

bool BatchLoader::Next(Batch* batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (next_to_deliver_ >= static_cast<int64_t>(batches_.size())) return false;
  // A batch is decoded by a live thread of ours; it always arrives.
  delivered_.wait(lock, [this] { return ready_.count(next_to_deliver_) != 0; });
  auto found = ready_.find(next_to_deliver_);
  *batch = std::move(found->second);
  ready_.erase(found);
  ++next_to_deliver_;
  lock.unlock();
  claimable_.notify_all();
  return true;
}

void BatchLoader::DecodeLoop() {
  // Named so that top -H, ps -L and /proc/PID/task/*/comm tell the data loading apart from
  // the training (the straggler suite slows one rank's loader by this name).
  pthread_setname_np(pthread_self(), "train-decode");
  JpegDecoder decoder;
  const int64_t prefetch = std::max(options_.prefetch_batches, 1);
  while (true) {
    int64_t index;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      claimable_.wait(lock, [&] {
        return stopping_ || next_to_claim_ >= static_cast<int64_t>(batches_.size()) ||
               next_to_claim_ < next_to_deliver_ + prefetch;
      });
      if (stopping_ || next_to_claim_ >= static_cast<int64_t>(batches_.size())) return;
      index = next_to_claim_++;
    }
    Batch batch = DecodeBatch(&decoder, index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(index, std::move(batch));
    }
    delivered_.notify_all();
  }
}

Batch BatchLoader::DecodeBatch(JpegDecoder* decoder, int64_t index) const {
  const std::vector<int64_t>& positions = batches_[static_cast<size_t>(index)];
  const size_t image_floats = static_cast<size_t>(3) * options_.crop_size * options_.crop_size;
  Batch batch;
  batch.index = index;
  batch.pixels.resize(positions.size() * image_floats);
  for (int64_t position : positions) {
    const ImageItem& item = items_[static_cast<size_t>(position)];
    float* slot = batch.pixels.data() + static_cast<size_t>(batch.count) * image_floats;
    tessera::Status status = LoadImage(decoder, item.path, position, options_, slot);
    if (!status.ok()) {
      batch.skipped.push_back(item.path + ": " + status.message());
      continue;
    }
    batch.labels.push_back(item.label);
    ++batch.count;
  }
  batch.pixels.resize(static_cast<size_t>(batch.count) * image_floats);
  return batch;
}

}  // namespace trainer
