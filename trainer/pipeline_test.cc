// Tests of the input pipeline: JPEG decoding (and refusal of broken files), crop boxes,
// resampling and normalisation, batch shapes with corrupt files skipped and counted,
// the per-epoch shuffle and per-rank sharding (no image twice in an epoch), and the
// dataset index's errors for malformed paths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "trainer/batch_loader.h"
#include "trainer/dataset_index.h"
#include "trainer/epoch_shard.h"
#include "trainer/image_transforms.h"
#include "trainer/jpeg_decoder.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;

RgbImage SolidImage(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  RgbImage image;
  image.width = width;
  image.height = height;
  for (int i = 0; i < width * height; ++i) image.pixels.insert(image.pixels.end(), {r, g, b});
  return image;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base != nullptr ? base : "/tmp") / ("pipeline_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
}

void WriteJpeg(const std::string& path, const RgbImage& image) {
  std::vector<uint8_t> jpeg;
  ASSERT_TRUE(EncodeJpeg(image, 95, &jpeg).ok());
  WriteFile(path, jpeg);
}

// --- JPEG ------------------------------------------------------------------------------

TEST(Jpeg, RoundTripKeepsSizeAndColour) {
  std::vector<uint8_t> jpeg;
  ASSERT_TRUE(EncodeJpeg(SolidImage(64, 48, 200, 100, 50), 95, &jpeg).ok());
  JpegDecoder decoder;
  int width = 0, height = 0;
  ASSERT_TRUE(decoder.ReadSize(jpeg, &width, &height).ok());
  EXPECT_EQ(width, 64);
  EXPECT_EQ(height, 48);
  RgbImage image;
  ASSERT_TRUE(decoder.Decode(jpeg, 64, 48, 64, 48, &image).ok());
  ASSERT_EQ(image.width, 64);
  ASSERT_EQ(image.height, 48);
  EXPECT_NEAR(image.pixels[0], 200, 4);
  EXPECT_NEAR(image.pixels[1], 100, 4);
  EXPECT_NEAR(image.pixels[2], 50, 4);
}

TEST(Jpeg, DecodesAtTheSmallestScaleThatKeepsTheCrop) {
  std::vector<uint8_t> jpeg;
  ASSERT_TRUE(EncodeJpeg(SolidImage(400, 300, 10, 20, 30), 90, &jpeg).ok());
  JpegDecoder decoder;
  RgbImage image;
  // A 400x300 region must keep at least 100 pixels per side: scale 3/8 is the smallest.
  // The size is rounded up (300 * 3/8 = 112.5 -> 113); the scale is exact.
  double scale = 0;
  ASSERT_TRUE(decoder.Decode(jpeg, 400, 300, 100, 100, &image, &scale).ok());
  EXPECT_EQ(scale, 0.375);
  EXPECT_EQ(image.width, 150);
  EXPECT_EQ(image.height, 113);
  // A region that must stay full size forces scale 1.
  ASSERT_TRUE(decoder.Decode(jpeg, 200, 200, 200, 200, &image).ok());
  EXPECT_EQ(image.width, 400);
}

TEST(Jpeg, BrokenFilesAreErrorsNotCrashes) {
  std::vector<uint8_t> jpeg;
  ASSERT_TRUE(EncodeJpeg(SolidImage(120, 90, 1, 2, 3), 90, &jpeg).ok());
  JpegDecoder decoder;
  RgbImage image;
  std::vector<uint8_t> truncated(jpeg.begin(), jpeg.begin() + jpeg.size() * 2 / 5);
  EXPECT_FALSE(decoder.Decode(truncated, 120, 90, 8, 8, &image).ok());
  std::vector<uint8_t> text = {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'};
  tessera::Status status = decoder.Decode(text, 120, 90, 8, 8, &image);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("not a JPEG"), std::string::npos) << status.message();
  EXPECT_FALSE(decoder.Decode(std::vector<uint8_t>(), 1, 1, 1, 1, &image).ok());
  std::vector<uint8_t> bytes;
  EXPECT_FALSE(ReadFileBytes("/nonexistent/file.JPEG", &bytes).ok());
}

// --- Crop boxes and resampling -----------------------------------------------------------

TEST(Transforms, RandomResizedCropStaysInsideWithTorchvisionBounds) {
  Rng rng(7);
  int fallbacks = 0;
  for (int i = 0; i < 2000; ++i) {
    int width = 50 + static_cast<int>(rng.Below(500)), height = 50 + static_cast<int>(rng.Below(500));
    CropBox box = RandomResizedCropBox(width, height, &rng);
    ASSERT_GE(box.x, 0);
    ASSERT_GE(box.y, 0);
    ASSERT_LE(box.x + box.width, width);
    ASSERT_LE(box.y + box.height, height);
    ASSERT_GT(box.width, 0);
    ASSERT_GT(box.height, 0);
    double area = box.width * box.height / (static_cast<double>(width) * height);
    double aspect = box.width / box.height;
    if (area > 1.0 - 1e-9 || aspect < 0.74 || aspect > 1.34) {
      ++fallbacks;
      continue;
    }
    // Rounding of the sides moves area and aspect slightly beyond the drawn values.
    EXPECT_GE(area, 0.08 * 0.8);
    EXPECT_GE(aspect, 0.75 * 0.85);
    EXPECT_LE(aspect, 4.0 / 3.0 / 0.85);
  }
  EXPECT_LT(fallbacks, 200);
}

TEST(Transforms, ResizeCenterCropMatchesTorchvisionArithmetic) {
  // 500x375 -> Resize(256) = 341x256 -> CenterCrop(224): left round(58.5) = 58 (half to
  // even, as Python), top 16.
  CropBox box = ResizeCenterCropBox(500, 375, 256, 224);
  const double scale = 500.0 / 341.0;
  EXPECT_DOUBLE_EQ(box.x, 58 * scale);
  EXPECT_DOUBLE_EQ(box.width, 224 * scale);
  EXPECT_DOUBLE_EQ(box.y, 16 * (375.0 / 256.0));
  EXPECT_DOUBLE_EQ(box.height, 224 * (375.0 / 256.0));
}

TEST(Transforms, SolidColourNormalisesToKnownValues) {
  RgbImage image = SolidImage(37, 29, 255, 128, 0);
  const int size = 16;
  std::vector<float> chw(3 * size * size);
  ResampleNormalize(image, CropBox{3, 2, 20, 17}, size, false, true, kImageNetNormalization, chw.data());
  const float expected[3] = {(1.0f - 0.485f) / 0.229f, (128 / 255.0f - 0.456f) / 0.224f, (0.0f - 0.406f) / 0.225f};
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < size * size; ++i) ASSERT_NEAR(chw[c * size * size + i], expected[c], 1e-4) << c;
  }
}

TEST(Transforms, FlipMirrorsAndDownscalingAverages) {
  // Left half black, right half white, 64 wide, shrunk to 8.
  RgbImage image = SolidImage(64, 8, 0, 0, 0);
  for (int y = 0; y < 8; ++y) {
    for (int x = 32; x < 64; ++x) {
      for (int c = 0; c < 3; ++c) image.pixels[(y * 64 + x) * 3 + c] = 255;
    }
  }
  const Normalization identity = {{0, 0, 0}, {1, 1, 1}};
  std::vector<float> plain(3 * 64), flipped(3 * 64);
  ResampleNormalize(image, CropBox{0, 0, 64, 8}, 8, false, false, identity, plain.data());
  ResampleNormalize(image, CropBox{0, 0, 64, 8}, 8, true, false, identity, flipped.data());
  EXPECT_NEAR(plain[0], 0.0, 1e-6);        // far left: black
  EXPECT_NEAR(plain[7], 1.0, 1e-6);        // far right: white
  for (int x = 0; x < 8; ++x) EXPECT_FLOAT_EQ(flipped[x], plain[7 - x]);
  // Antialiasing: the pixels next to the edge mix both sides.
  EXPECT_GT(plain[3], 0.0);
  EXPECT_LT(plain[3], 0.5);
}

// --- Batches ----------------------------------------------------------------------------

TEST(BatchLoader, ShapesLabelsAndCorruptFilesSkippedAndCounted) {
  std::string dir = TempDir("loader");
  std::vector<ImageItem> items;
  for (int i = 0; i < 10; ++i) {
    std::string path = dir + "/img" + std::to_string(i) + ".JPEG";
    WriteJpeg(path, SolidImage(40 + 7 * i, 90 - 3 * i, static_cast<uint8_t>(20 * i), 50, 200));
    items.push_back({path, i % 3});
  }
  WriteFile(dir + "/bad.JPEG", {'x', 'y', 'z'});
  items.push_back({dir + "/bad.JPEG", 2});
  items.push_back({dir + "/missing.JPEG", 1});

  Batches batches = {{0, 1, 2, 3}, {4, 10, 5, 11}, {6, 7, 8, 9}};
  for (bool train : {true, false}) {
    PipelineOptions options;
    options.train = train;
    options.crop_size = 32;
    options.resize_size = 36;
    options.decode_threads = 3;
    options.prefetch_batches = 1;
    BatchLoader loader(items, batches, 0, options);
    Batch batch;
    std::vector<int> counts;
    size_t skipped = 0;
    while (loader.Next(&batch)) {
      EXPECT_EQ(batch.index, static_cast<int64_t>(counts.size()));
      EXPECT_EQ(batch.pixels.size(), static_cast<size_t>(batch.count) * 3 * 32 * 32);
      ASSERT_EQ(batch.labels.size(), static_cast<size_t>(batch.count));
      skipped += batch.skipped.size();
      counts.push_back(batch.count);
      if (batch.index == 1) {
        EXPECT_EQ(batch.labels, (std::vector<int64_t>{1, 2}));
        ASSERT_EQ(batch.skipped.size(), 2u);
        EXPECT_NE(batch.skipped[0].find("bad.JPEG"), std::string::npos) << batch.skipped[0];
        EXPECT_NE(batch.skipped[1].find("missing.JPEG"), std::string::npos) << batch.skipped[1];
      }
    }
    EXPECT_EQ(counts, (std::vector<int>{4, 2, 4}));
    EXPECT_EQ(skipped, 2u);
  }
}

TEST(BatchLoader, StartsMidEpochAndAugmentsDeterministically) {
  std::string dir = TempDir("determinism");
  std::vector<ImageItem> items;
  for (int i = 0; i < 6; ++i) {
    RgbImage image = SolidImage(80, 60, 0, 0, 0);
    for (size_t p = 0; p < image.pixels.size(); ++p) image.pixels[p] = static_cast<uint8_t>((p * 37 + i * 11) % 251);
    std::string path = dir + "/img" + std::to_string(i) + ".JPEG";
    WriteJpeg(path, image);
    items.push_back({path, i});
  }
  Batches batches = {{0, 1}, {2, 3}, {4, 5}};
  PipelineOptions options;
  options.crop_size = 24;
  options.seed = 5;
  options.epoch = 3;
  auto batch_at = [&](int64_t first, int threads, int epoch) {
    PipelineOptions o = options;
    o.decode_threads = threads;
    o.epoch = epoch;
    BatchLoader loader(items, batches, first, o);
    Batch batch;
    EXPECT_TRUE(loader.Next(&batch));
    return batch;
  };
  Batch from_start_skipping;
  {
    BatchLoader loader(items, batches, 0, options);
    Batch batch;
    ASSERT_TRUE(loader.Next(&batch));
    ASSERT_TRUE(loader.Next(&from_start_skipping));
  }
  Batch resumed = batch_at(1, 2, 3);
  EXPECT_EQ(resumed.index, 1);
  EXPECT_EQ(resumed.pixels, from_start_skipping.pixels);  // bit for bit
  EXPECT_EQ(batch_at(1, 1, 3).pixels, resumed.pixels);    // thread count does not matter
  EXPECT_NE(batch_at(1, 2, 4).pixels, resumed.pixels);    // another epoch, other crops
}

// --- Shuffle and shards -----------------------------------------------------------------

TEST(EpochShard, PermutationDependsOnlyOnSeedAndEpoch) {
  std::vector<int64_t> a = EpochPermutation(1000, 9, 0);
  std::set<int64_t> unique(a.begin(), a.end());
  EXPECT_EQ(unique.size(), 1000u);
  EXPECT_EQ(*unique.begin(), 0);
  EXPECT_EQ(*unique.rbegin(), 999);
  EXPECT_EQ(a, EpochPermutation(1000, 9, 0));
  EXPECT_NE(a, EpochPermutation(1000, 9, 1));
  EXPECT_NE(a, EpochPermutation(1000, 10, 0));
}

TEST(EpochShard, NoImageTwiceAcrossRanksAndSameGlobalBatches) {
  const int64_t count = 1003, global_batch = 24;
  std::vector<int64_t> permutation = EpochPermutation(count, 3, 2);
  const int64_t span = EpochSpan(count, global_batch, 0);
  ASSERT_EQ(span, count / global_batch * global_batch);
  Batches single = TrainBatchesForRank(permutation, 0, span, global_batch, 1, 0);
  ASSERT_EQ(single.size(), static_cast<size_t>(count / global_batch));
  for (int world : {2, 3, 4, 5, 8}) {  // 5 does not divide 24: slices of 4 and 5
    std::set<int64_t> seen;
    std::vector<Batches> ranks;
    for (int rank = 0; rank < world; ++rank) {
      ranks.push_back(TrainBatchesForRank(permutation, 0, span, global_batch, world, rank));
    }
    for (size_t step = 0; step < single.size(); ++step) {
      std::vector<int64_t> global;
      for (int rank = 0; rank < world; ++rank) {
        ASSERT_EQ(ranks[rank].size(), single.size()) << "world " << world;
        const size_t share = ranks[rank][step].size();
        EXPECT_TRUE(share == global_batch / world || share == global_batch / world + 1) << "world " << world;
        for (int64_t position : ranks[rank][step]) {
          EXPECT_TRUE(seen.insert(position).second) << "image " << position << " read twice, world " << world;
          global.push_back(position);
        }
      }
      EXPECT_EQ(global, single[step]) << "the images of a global step depend on the number of ranks";
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(span));
  }
  EXPECT_EQ(EpochSpan(count, global_batch, 5), 5 * global_batch);  // --max_steps_per_epoch
}

// Ranks lost mid-epoch: 4 ranks read 7 steps of 24, then 3 survivors read the rest of the
// epoch at 24 (the global batch kept) or 18 (the per-rank batch kept; the last step reads
// what is left). Every position of the epoch is read exactly once.
TEST(EpochShard, ChangeOfWorldMidEpochReadsTheRestOnce) {
  const int64_t count = 1003, global_batch = 24;
  std::vector<int64_t> permutation = EpochPermutation(count, 3, 2);
  const int64_t span = EpochSpan(count, global_batch, 0), position = 7 * global_batch;
  for (int64_t after : {int64_t{24}, int64_t{18}}) {
    std::vector<int> reads(static_cast<size_t>(count), 0);
    for (int rank = 0; rank < 4; ++rank) {
      Batches before = TrainBatchesForRank(permutation, 0, span, global_batch, 4, rank);
      for (size_t step = 0; step < 7; ++step) {
        for (int64_t image : before[step]) ++reads[static_cast<size_t>(image)];
      }
    }
    const int64_t left = StepsLeft(span, position, after);
    EXPECT_EQ(left, (span - position + after - 1) / after);
    for (int rank = 0; rank < 3; ++rank) {
      Batches rest = TrainBatchesForRank(permutation, position, span, after, 3, rank);
      ASSERT_EQ(static_cast<int64_t>(rest.size()), left) << "global batch " << after;
      for (const auto& batch : rest) {
        for (int64_t image : batch) ++reads[static_cast<size_t>(image)];
      }
    }
    for (int64_t i = 0; i < span; ++i) {
      EXPECT_EQ(reads[static_cast<size_t>(permutation[i])], 1) << "position " << i << ", global batch " << after;
    }
    for (int64_t i = span; i < count; ++i) EXPECT_EQ(reads[static_cast<size_t>(permutation[i])], 0);
  }
  EXPECT_EQ(StepsLeft(span, span, 24), 0);
}

TEST(EpochShard, ValidationCoversEveryImageOnce) {
  for (int world : {1, 2, 3, 7}) {
    std::vector<int> hits(103, 0);
    for (int rank = 0; rank < world; ++rank) {
      for (const auto& batch : ValBatchesForRank(103, 10, world, rank)) {
        EXPECT_LE(batch.size(), 10u);
        EXPECT_FALSE(batch.empty());
        for (int64_t position : batch) ++hits[position];
      }
    }
    for (int h : hits) EXPECT_EQ(h, 1) << "world " << world;
  }
}

// --- Dataset index ------------------------------------------------------------------------

TEST(DatasetIndex, ReadsTheImageNetLayoutInSortedOrder) {
  std::string root = TempDir("layout_ok");
  for (const char* split : {"train", "val"}) {
    for (const char* wnid : {"n02", "n01"}) {
      fs::create_directories(fs::path(root) / split / wnid);
      for (const char* name : {"b.JPEG", "a.jpg", "notes.txt"}) WriteFile((fs::path(root) / split / wnid / name).string(), {1});
    }
  }
  DatasetIndex index;
  tessera::Status status = LoadImageNetIndex(root, true, &index);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(index.classes, (std::vector<std::string>{"n01", "n02"}));
  ASSERT_EQ(index.train.size(), 4u);
  EXPECT_EQ(index.val.size(), 4u);
  EXPECT_EQ(index.train[0].label, 0);
  EXPECT_NE(index.train[0].path.find("n01/a.jpg"), std::string::npos);
  EXPECT_EQ(index.train[3].label, 1);
}

std::string IndexError(const std::string& root, bool need_val = true) {
  DatasetIndex index;
  tessera::Status status = LoadImageNetIndex(root, need_val, &index);
  EXPECT_FALSE(status.ok()) << root;
  EXPECT_EQ(status.code(), tessera::Code::kInvalidArgument);
  return status.message();
}

TEST(DatasetIndex, MissingOrMalformedPathsAreClearErrors) {
  EXPECT_NE(IndexError("").find("no dataset path"), std::string::npos);
  EXPECT_NE(IndexError("/nonexistent/imagenet").find("/nonexistent/imagenet does not exist"), std::string::npos);

  std::string no_train = TempDir("no_train");
  EXPECT_NE(IndexError(no_train).find("train does not exist"), std::string::npos);

  std::string flat = TempDir("flat");
  fs::create_directories(flat + "/train");
  WriteFile(flat + "/train/x.JPEG", {1});
  EXPECT_NE(IndexError(flat).find("not in a class directory"), std::string::npos);

  std::string empty_class = TempDir("empty_class");
  fs::create_directories(empty_class + "/train/n01");
  EXPECT_NE(IndexError(empty_class).find("holds no .JPEG"), std::string::npos);

  std::string no_classes = TempDir("no_classes");
  fs::create_directories(no_classes + "/train");
  EXPECT_NE(IndexError(no_classes).find("no class directories"), std::string::npos);

  std::string unknown_val = TempDir("unknown_val");
  fs::create_directories(unknown_val + "/train/n01");
  fs::create_directories(unknown_val + "/val/n99");
  WriteFile(unknown_val + "/train/n01/a.JPEG", {1});
  WriteFile(unknown_val + "/val/n99/a.JPEG", {1});
  EXPECT_NE(IndexError(unknown_val).find("class n99"), std::string::npos);
  DatasetIndex index;
  EXPECT_TRUE(LoadImageNetIndex(unknown_val, false, &index).ok());  // val not needed

  std::string no_val = TempDir("no_val");
  fs::create_directories(no_val + "/train/n01");
  WriteFile(no_val + "/train/n01/a.JPEG", {1});
  EXPECT_NE(IndexError(no_val).find("val does not exist"), std::string::npos);

  std::string file_root = TempDir("file_root") + "/plain_file";
  WriteFile(file_root, {1});
  EXPECT_NE(IndexError(file_root).find("is not a directory"), std::string::npos);
}

}  // namespace
}  // namespace trainer
