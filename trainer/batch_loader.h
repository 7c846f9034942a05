// The input pipeline: decoding threads that turn lists of image files into batches of
// normalised float tensors (N, 3, crop, crop), ahead of the training loop.
//
// Each of `decode_threads` threads (named "train-decode") claims whole batches in order and decodes them; at
// most `prefetch_batches` finished or in-flight batches run ahead of the consumer, which
// bounds memory. Batches are handed out strictly in order. An image that cannot be read
// or decoded is left out of its batch and reported in Batch::skipped (never fatal), so a
// batch may hold fewer images than asked for, even none.
//
// Augmentation (training): RandomResizedCrop + horizontal flip drawn from
// StreamSeed(seed, epoch, image position), so the result does not depend on threads,
// ranks or resumption. Validation: Resize(resize) + CenterCrop(crop).
#ifndef TESSERA_TRAINER_BATCH_LOADER_H_
#define TESSERA_TRAINER_BATCH_LOADER_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "trainer/dataset_index.h"
#include "trainer/epoch_shard.h"
#include "trainer/image_transforms.h"

namespace trainer {

struct PipelineOptions {
  bool train = true;           // random-resized-crop + flip; else resize + center crop
  int crop_size = 224;         // network input is crop_size x crop_size
  int resize_size = 256;       // validation: shorter side before the center crop
  double min_crop_area = 0.08; // RandomResizedCrop's smallest area fraction
  uint64_t seed = 0;
  int epoch = 0;
  int decode_threads = 2;
  int prefetch_batches = 2;
  Normalization normalization = kImageNetNormalization;
};

struct Batch {
  int64_t index = 0;                 // batch number within the epoch
  int count = 0;                     // images in the batch
  std::vector<float> pixels;         // count * 3 * crop * crop, (N, C, H, W)
  std::vector<int64_t> labels;       // count
  std::vector<std::string> skipped;  // "path: reason" of each file left out
};

// The region of a width x height image that becomes the network input, and whether it
// is mirrored: RandomResizedCrop + coin flip drawn from (seed, epoch, position) for
// training, Resize + CenterCrop (never flipped) for validation.
void ChooseCrop(int width, int height, int64_t position, const PipelineOptions& options, CropBox* box, bool* flip);

// Reads, decodes and transforms one image into 3 * crop * crop floats at `chw`.
// `position` is the image's position in the dataset list (it seeds the augmentation).
// The JPEG is decoded at a reduced DCT scale (1/8 .. 1) when the crop still keeps at
// least twice crop_size pixels per side; *decode_scale (if not null) receives it.
tessera::Status LoadImage(JpegDecoder* decoder, const std::string& path, int64_t position,
                          const PipelineOptions& options, float* chw, double* decode_scale = nullptr);

class BatchLoader {
 public:
  // Serves batches[first_batch ..] of positions into `items` (which must outlive the
  // loader). Threads start at once.
  BatchLoader(const std::vector<ImageItem>& items, Batches batches, int64_t first_batch,
              const PipelineOptions& options);
  ~BatchLoader();  // stops the threads (an unfinished epoch is abandoned)
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Waits for the next batch in order and moves it to *batch. Returns false once every
  // batch has been handed out.
  bool Next(Batch* batch);

 private:
  void DecodeLoop();
  Batch DecodeBatch(JpegDecoder* decoder, int64_t index) const;

  const std::vector<ImageItem>& items_;
  const Batches batches_;
  const PipelineOptions options_;

  std::mutex mutex_;
  std::condition_variable claimable_;  // a worker may claim the next batch, or stop
  std::condition_variable delivered_;  // a batch became ready
  int64_t next_to_claim_;
  int64_t next_to_deliver_;
  bool stopping_ = false;
  std::map<int64_t, Batch> ready_;
  std::vector<std::thread> threads_;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_BATCH_LOADER_H_
