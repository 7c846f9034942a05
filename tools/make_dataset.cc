// make_dataset: writes a small image-classification dataset in the ImageNet layout
// (<out>/train/<wnid>/<wnid>_<i>.JPEG, <out>/val/<wnid>/...), for the trainer's tests
// and demo.
//
// The classes are learnable, not random labels: class c is a striped texture whose
// orientation (c * 180 / classes degrees) and colour (hue c / classes) identify it,
// with a random stripe period, phase, brightness, small hue and angle jitter and pixel
// noise (--noise) in every image. The texture fills the image, so any random-resized
// crop keeps the class visible. Sizes vary (--min_size .. --max_size, independent width
// and height) so that resizing is exercised. --corrupt=N adds N broken files to train/
// (truncated JPEGs, text named .JPEG, empty files), which the trainer must skip and
// count. Everything follows from --seed: the same flags write the same bytes.
//
//   bazel run //tools:make_dataset -- --out=/tmp/stripes --classes=10 --train_per_class=100
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/jpeg_decoder.h"
#include "trainer/random.h"

namespace {

struct Options {
  std::string out;
  int classes = 10;
  int train_per_class = 100;
  int val_per_class = 20;
  int min_size = 96;
  int max_size = 160;
  int corrupt = 0;
  int quality = 90;
  int noise = 20;  // per-pixel noise, uniform in [-noise, noise] of 255
  uint64_t seed = 1;
};

bool ParseInt(const std::string& text, int min, int* value) {
  char* end = nullptr;
  long parsed = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || parsed < min || parsed > 1000000) return false;
  *value = static_cast<int>(parsed);
  return true;
}

bool ParseArgs(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t equals = arg.find('=');
    if (arg.rfind("--", 0) != 0 || equals == std::string::npos) {
      std::fprintf(stderr, "make_dataset: unexpected argument '%s' (flags are --name=value)\n", arg.c_str());
      return false;
    }
    std::string name = arg.substr(2, equals - 2), value = arg.substr(equals + 1);
    bool ok = true;
    if (name == "out") {
      options->out = value;
    } else if (name == "classes") {
      ok = ParseInt(value, 2, &options->classes);
    } else if (name == "train_per_class") {
      ok = ParseInt(value, 1, &options->train_per_class);
    } else if (name == "val_per_class") {
      ok = ParseInt(value, 1, &options->val_per_class);
    } else if (name == "min_size") {
      ok = ParseInt(value, 8, &options->min_size);
    } else if (name == "max_size") {
      ok = ParseInt(value, 8, &options->max_size);
    } else if (name == "corrupt") {
      ok = ParseInt(value, 0, &options->corrupt);
    } else if (name == "noise") {
      ok = ParseInt(value, 0, &options->noise) && options->noise <= 255;
    } else if (name == "quality") {
      ok = ParseInt(value, 1, &options->quality) && options->quality <= 100;
    } else if (name == "seed") {
      int seed = 0;
      ok = ParseInt(value, 0, &seed);
      options->seed = static_cast<uint64_t>(seed);
    } else {
      std::fprintf(stderr, "make_dataset: unknown flag --%s\n", name.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "make_dataset: bad value in %s\n", arg.c_str());
      return false;
    }
  }
  if (options->out.empty() || options->max_size < options->min_size) {
    std::fprintf(stderr,
                 "usage: make_dataset --out=DIR [--classes=10] [--train_per_class=100] [--val_per_class=20]\n"
                 "                    [--min_size=96] [--max_size=160] [--corrupt=0] [--quality=90] [--noise=20]\n"
                 "                    [--seed=1]\n");
    return false;
  }
  return true;
}

// HSV (all in [0, 1]) to RGB in [0, 1].
void HsvToRgb(double h, double s, double v, double rgb[3]) {
  h = h - std::floor(h);
  double sector = h * 6.0;
  int i = static_cast<int>(sector) % 6;
  double f = sector - std::floor(sector);
  double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  const double table[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  for (int c = 0; c < 3; ++c) rgb[c] = table[i][c];
}

// One image of class `label`: stripes at the class's angle in the class's colour.
trainer::RgbImage DrawImage(int label, const Options& options, trainer::Rng* rng) {
  trainer::RgbImage image;
  image.width = options.min_size + static_cast<int>(rng->Below(options.max_size - options.min_size + 1));
  image.height = options.min_size + static_cast<int>(rng->Below(options.max_size - options.min_size + 1));
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);

  const double jitter = 0.25 / options.classes;  // a quarter of the gap between classes
  const double angle = M_PI * (label + rng->Uniform(-1, 1) * jitter * options.classes / 2) / options.classes;
  const double hue = static_cast<double>(label) / options.classes + rng->Uniform(-jitter, jitter);
  const double period = rng->Uniform(8.0, 20.0);
  const double phase = rng->Uniform(0, 2 * M_PI);
  const double brightness = rng->Uniform(0.6, 1.0);
  double stripe[3], background[3];
  HsvToRgb(hue, rng->Uniform(0.6, 1.0), brightness, stripe);
  HsvToRgb(hue + 0.5, rng->Uniform(0.0, 0.3), rng->Uniform(0.1, 0.4), background);
  const double ca = std::cos(angle), sa = std::sin(angle);
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      double along = x * ca + y * sa;
      double mix = 0.5 + 0.5 * std::sin(2 * M_PI * along / period + phase);
      uint8_t* pixel = &image.pixels[(static_cast<size_t>(y) * image.width + x) * 3];
      for (int c = 0; c < 3; ++c) {
        double value = 255.0 * (mix * stripe[c] + (1 - mix) * background[c]);
        if (options.noise > 0) value += rng->Uniform(-options.noise, options.noise);
        pixel[c] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, value)));
      }
    }
  }
  return image;
}

bool WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes, size_t count) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  bool ok = std::fwrite(bytes.data(), 1, count, file) == count;
  return std::fclose(file) == 0 && ok;
}

std::string Wnid(int label) {
  char name[16];
  std::snprintf(name, sizeof name, "n%08d", 1000000 + label);
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) return 2;
  namespace fs = std::filesystem;
  for (const char* split : {"train", "val"}) {
    int per_class = std::string(split) == "train" ? options.train_per_class : options.val_per_class;
    for (int label = 0; label < options.classes; ++label) {
      fs::path dir = fs::path(options.out) / split / Wnid(label);
      std::error_code error;
      fs::create_directories(dir, error);
      if (error) {
        std::fprintf(stderr, "make_dataset: cannot create %s: %s\n", dir.c_str(), error.message().c_str());
        return 1;
      }
      for (int i = 0; i < per_class; ++i) {
        trainer::Rng rng(trainer::StreamSeed(options.seed, split[0], static_cast<uint64_t>(label) * 1000003 + i));
        std::vector<uint8_t> jpeg;
        tessera::Status status = trainer::EncodeJpeg(DrawImage(label, options, &rng), options.quality, &jpeg);
        std::string path = (dir / (Wnid(label) + "_" + std::to_string(i) + ".JPEG")).string();
        if (!status.ok() || !WriteBytes(path, jpeg, jpeg.size())) {
          std::fprintf(stderr, "make_dataset: cannot write %s %s\n", path.c_str(), status.message().c_str());
          return 1;
        }
      }
    }
  }
  // Broken files, spread over the train classes.
  for (int i = 0; i < options.corrupt; ++i) {
    int label = i % options.classes;
    std::string path = (fs::path(options.out) / "train" / Wnid(label) / ("corrupt_" + std::to_string(i) + ".JPEG")).string();
    std::vector<uint8_t> bytes;
    size_t count = 0;
    if (i % 3 == 0) {  // a JPEG cut off at 40 %
      trainer::Rng rng(trainer::StreamSeed(options.seed, 'c', static_cast<uint64_t>(i)));
      trainer::EncodeJpeg(DrawImage(label, options, &rng), options.quality, &bytes);
      count = bytes.size() * 2 / 5;
    } else if (i % 3 == 1) {  // text under a JPEG name
      std::string text = "this is not a JPEG\n";
      bytes.assign(text.begin(), text.end());
      count = bytes.size();
    }  // else: an empty file
    if (!WriteBytes(path, bytes, count)) {
      std::fprintf(stderr, "make_dataset: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  std::printf("make_dataset: %d classes, %d train + %d val images per class, %d corrupt files in %s\n",
              options.classes, options.train_per_class, options.val_per_class, options.corrupt, options.out.c_str());
  return 0;
}
