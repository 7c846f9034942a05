// Crop boxes and the antialiased bilinear resampler (see image_transforms.h).
#include "trainer/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace trainer {
namespace {

// Taps of a 1-D resampling from [start, start + extent) of a source axis to out_size
// pixels, reading only source pixels [read_lo, read_hi): output i reads source pixels
// first[i] .. first[i]+count[i]-1 with weights weights[i * max_taps + k].
struct AxisTaps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;
  int max_taps = 0;
};

// PIL's bilinear filter: a triangle of radius 1, widened by the scale when shrinking.
AxisTaps ComputeTaps(double start, double extent, int read_lo, int read_hi, int out_size) {
  AxisTaps taps;
  double scale = extent / out_size;
  double widen = std::max(scale, 1.0);
  double support = widen;  // the triangle's radius (1) in source pixels
  taps.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.weights.assign(static_cast<size_t>(out_size) * taps.max_taps, 0.0f);
  for (int i = 0; i < out_size; ++i) {
    double center = start + (i + 0.5) * scale;
    int lo = std::max(static_cast<int>(std::floor(center - support + 0.5)), read_lo);
    int hi = std::min(static_cast<int>(std::floor(center + support + 0.5)), read_hi);
    if (hi <= lo) {  // a box at the very edge: take the nearest pixel
      lo = std::min(std::max(static_cast<int>(center), read_lo), read_hi - 1);
      hi = lo + 1;
    }
    hi = std::min(hi, lo + taps.max_taps);
    double total = 0;
    float* w = &taps.weights[static_cast<size_t>(i) * taps.max_taps];
    for (int x = lo; x < hi; ++x) {
      double t = std::fabs((x + 0.5 - center) / widen);
      double weight = t < 1.0 ? 1.0 - t : 0.0;
      w[x - lo] = static_cast<float>(weight);
      total += weight;
    }
    if (total <= 0) {  // cannot happen for a non-empty range, but never divide by zero
      w[0] = 1.0f;
      hi = lo + 1;
      total = 1.0;
    }
    for (int k = 0; k < hi - lo; ++k) w[k] = static_cast<float>(w[k] / total);
    taps.first[i] = lo;
    taps.count[i] = hi - lo;
  }
  return taps;
}

}  // namespace

CropBox RandomResizedCropBox(int width, int height, Rng* rng, double min_area, double max_area) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * rng->Uniform(min_area, max_area);
    double aspect = std::exp(rng->Uniform(log_lo, log_hi));
    int w = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));
    int h = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      int top = static_cast<int>(rng->Below(static_cast<uint64_t>(height - h + 1)));
      int left = static_cast<int>(rng->Below(static_cast<uint64_t>(width - w + 1)));
      return CropBox{static_cast<double>(left), static_cast<double>(top), static_cast<double>(w),
                     static_cast<double>(h)};
    }
  }
  // Fallback: the largest central crop whose aspect ratio is within bounds.
  double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = static_cast<int>(std::nearbyint(w / (3.0 / 4.0)));
  } else if (in_ratio > 4.0 / 3.0) {
    w = static_cast<int>(std::nearbyint(h * (4.0 / 3.0)));
  }
  return CropBox{static_cast<double>((width - w) / 2), static_cast<double>((height - h) / 2),
                 static_cast<double>(w), static_cast<double>(h)};
}

CropBox ResizeCenterCropBox(int width, int height, int resize, int crop) {
  // Resize: the shorter side becomes `resize`, the longer one int(resize * long / short).
  int resized_w, resized_h;
  if (width <= height) {
    resized_w = resize;
    resized_h = static_cast<int>(static_cast<int64_t>(resize) * height / width);
  } else {
    resized_h = resize;
    resized_w = static_cast<int>(static_cast<int64_t>(resize) * width / height);
  }
  // CenterCrop on the resized image (offsets rounded half to even, as Python's round()
  // in torchvision), then back to source coordinates.
  double left = std::nearbyint((resized_w - crop) / 2.0);
  double top = std::nearbyint((resized_h - crop) / 2.0);
  double sx = static_cast<double>(width) / resized_w, sy = static_cast<double>(height) / resized_h;
  return CropBox{left * sx, top * sy, crop * sx, crop * sy};
}

CropBox ScaleBox(const CropBox& box, double scale_x, double scale_y) {
  return CropBox{box.x * scale_x, box.y * scale_y, box.width * scale_x, box.height * scale_y};
}

void ResampleNormalize(const RgbImage& image, const CropBox& box, int out_size, bool flip, bool crop_first,
                       const Normalization& normalization, float* chw) {
  // The pixels the filter may read: the whole image, or only those the box touches.
  int x_lo = 0, x_hi = image.width, y_lo = 0, y_hi = image.height;
  if (crop_first) {
    x_lo = std::max(static_cast<int>(std::floor(box.x)), 0);
    x_hi = std::min(static_cast<int>(std::ceil(box.x + box.width)), image.width);
    y_lo = std::max(static_cast<int>(std::floor(box.y)), 0);
    y_hi = std::min(static_cast<int>(std::ceil(box.y + box.height)), image.height);
    if (x_hi <= x_lo || y_hi <= y_lo) {  // an empty box: fall back to the whole image
      x_lo = 0, x_hi = image.width, y_lo = 0, y_hi = image.height;
    }
  }
  AxisTaps columns = ComputeTaps(box.x, box.width, x_lo, x_hi, out_size);
  AxisTaps rows = ComputeTaps(box.y, box.height, y_lo, y_hi, out_size);
  int row_lo = rows.first[0];
  int row_hi = rows.first[out_size - 1] + rows.count[out_size - 1];
  for (int i = 0; i < out_size; ++i) {
    row_lo = std::min(row_lo, rows.first[i]);
    row_hi = std::max(row_hi, rows.first[i] + rows.count[i]);
  }

  // Horizontal pass over the source rows the vertical taps read: (row, out x, channel).
  std::vector<float> horizontal(static_cast<size_t>(row_hi - row_lo) * out_size * 3);
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = &image.pixels[static_cast<size_t>(y) * image.width * 3];
    float* dst = &horizontal[static_cast<size_t>(y - row_lo) * out_size * 3];
    for (int x = 0; x < out_size; ++x) {
      const float* w = &columns.weights[static_cast<size_t>(x) * columns.max_taps];
      const uint8_t* p = src + static_cast<size_t>(columns.first[x]) * 3;
      float r = 0, g = 0, b = 0;
      for (int k = 0; k < columns.count[x]; ++k) {
        r += w[k] * p[3 * k];
        g += w[k] * p[3 * k + 1];
        b += w[k] * p[3 * k + 2];
      }
      dst[3 * x] = r;
      dst[3 * x + 1] = g;
      dst[3 * x + 2] = b;
    }
  }

  // Vertical pass, then flip, scale, normalise into planes.
  const size_t plane = static_cast<size_t>(out_size) * out_size;
  float gain[3], offset[3];
  for (int c = 0; c < 3; ++c) {
    gain[c] = 1.0f / (255.0f * normalization.std[c]);
    offset[c] = -normalization.mean[c] / normalization.std[c];
  }
  for (int y = 0; y < out_size; ++y) {
    const float* w = &rows.weights[static_cast<size_t>(y) * rows.max_taps];
    for (int x = 0; x < out_size; ++x) {
      float sum[3] = {0, 0, 0};
      for (int k = 0; k < rows.count[y]; ++k) {
        const float* p = &horizontal[(static_cast<size_t>(rows.first[y] + k - row_lo) * out_size + x) * 3];
        sum[0] += w[k] * p[0];
        sum[1] += w[k] * p[1];
        sum[2] += w[k] * p[2];
      }
      int out_x = flip ? out_size - 1 - x : x;
      for (int c = 0; c < 3; ++c) {
        chw[c * plane + static_cast<size_t>(y) * out_size + out_x] = sum[c] * gain[c] + offset[c];
      }
    }
  }
}

}  // namespace trainer
