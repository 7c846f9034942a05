// transform_dump: runs the input pipeline on one JPEG and writes what the network would
// see, so that pipeline_torchvision_test.sh can compare it with torchvision's transforms.
//
//   transform_dump --mode=train|val [--crop=224] [--resize=256] [--seed=1] [--epoch=0]
//                  [--position=0] IMAGE OUT
//
// Writes 3 x crop x crop float32 values (C, H, W), normalised, to OUT, and prints one
// line "box X Y WIDTH HEIGHT flip F image W H scale S": the crop box in the image's
// full-size pixels and the flip that the pipeline chose (trainer::ChooseCrop), for the
// same transform to be redone elsewhere, and the DCT scale the JPEG was decoded at.
// Exit status 1 if the image cannot be loaded, 2 for bad arguments.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainer/batch_loader.h"
#include "trainer/jpeg_decoder.h"

namespace {

bool ParseFlag(const std::string& arg, const char* name, std::string* value) {
  std::string prefix = std::string("--") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  *value = arg.substr(prefix.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  trainer::PipelineOptions options;
  std::vector<std::string> paths;
  int64_t position = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (ParseFlag(arg, "mode", &value)) {
      if (value != "train" && value != "val") {
        std::fprintf(stderr, "transform_dump: --mode is train or val\n");
        return 2;
      }
      options.train = value == "train";
    } else if (ParseFlag(arg, "crop", &value)) {
      options.crop_size = std::atoi(value.c_str());
    } else if (ParseFlag(arg, "resize", &value)) {
      options.resize_size = std::atoi(value.c_str());
    } else if (ParseFlag(arg, "seed", &value)) {
      options.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (ParseFlag(arg, "epoch", &value)) {
      options.epoch = std::atoi(value.c_str());
    } else if (ParseFlag(arg, "position", &value)) {
      position = std::atoll(value.c_str());
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "transform_dump: unknown flag %s\n", arg.c_str());
      return 2;
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.size() != 2 || options.crop_size < 1 || options.resize_size < options.crop_size) {
    std::fprintf(stderr, "usage: transform_dump --mode=train|val [--crop=224] [--resize=256] [--seed=1] "
                         "[--epoch=0] [--position=0] IMAGE OUT\n");
    return 2;
  }

  std::vector<uint8_t> bytes;
  trainer::JpegDecoder decoder;
  int width = 0, height = 0;
  tessera::Status status = trainer::ReadFileBytes(paths[0], &bytes);
  if (status.ok()) status = decoder.ReadSize(bytes, &width, &height);
  std::vector<float> chw(static_cast<size_t>(3) * options.crop_size * options.crop_size);
  double scale = 1.0;
  if (status.ok()) status = trainer::LoadImage(&decoder, paths[0], position, options, chw.data(), &scale);
  if (!status.ok()) {
    std::fprintf(stderr, "transform_dump: %s: %s\n", paths[0].c_str(), status.message().c_str());
    return 1;
  }
  trainer::CropBox box;
  bool flip = false;
  trainer::ChooseCrop(width, height, position, options, &box, &flip);

  FILE* out = std::fopen(paths[1].c_str(), "wb");
  if (out == nullptr || std::fwrite(chw.data(), sizeof(float), chw.size(), out) != chw.size() ||
      std::fclose(out) != 0) {
    std::fprintf(stderr, "transform_dump: cannot write %s\n", paths[1].c_str());
    return 1;
  }
  std::printf("box %.17g %.17g %.17g %.17g flip %d image %d %d scale %g\n", box.x, box.y, box.width, box.height,
              flip ? 1 : 0, width, height, scale);
  return 0;
}
