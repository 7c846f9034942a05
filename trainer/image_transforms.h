// The image transforms of the ImageNet recipe, as pure functions on decoded pixels.
//
//   training:   RandomResizedCrop(crop) + RandomHorizontalFlip + Normalize
//   validation: Resize(resize) + CenterCrop(crop) + Normalize
//
// with torchvision's semantics (same box arithmetic, scale (0.08, 1), ratio (3/4, 4/3),
// 10 attempts then a central fallback). A crop is described as a box in source pixel
// coordinates, so that the decoder can pick a reduced DCT scale from it and the
// resampler can read the region directly, without materialising the intermediate
// resized image. Resampling is bilinear with antialiasing when shrinking (the filter
// widens with the scale, as in PIL, which torchvision uses).
#ifndef TESSERA_TRAINER_IMAGE_TRANSFORMS_H_
#define TESSERA_TRAINER_IMAGE_TRANSFORMS_H_

#include "trainer/jpeg_decoder.h"
#include "trainer/random.h"

namespace trainer {

// A region of an image in pixel coordinates; fractional edges are allowed.
struct CropBox {
  double x = 0;
  double y = 0;
  double width = 0;
  double height = 0;
};

// Per-channel mean and standard deviation of RGB values scaled to [0, 1].
struct Normalization {
  float mean[3];
  float std[3];
};
constexpr Normalization kImageNetNormalization = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};

// torchvision's RandomResizedCrop box for a width x height image: area fraction uniform in
// [min_area, max_area], log aspect ratio uniform in [log 3/4, log 4/3].
CropBox RandomResizedCropBox(int width, int height, Rng* rng, double min_area = 0.08, double max_area = 1.0);

// torchvision's Resize(resize) (shorter side to `resize`) followed by CenterCrop(crop),
// as the box of the source image that lands in the crop.
CropBox ResizeCenterCropBox(int width, int height, int resize, int crop);

// The same box in an image that was decoded at another size (e.g. a DCT-scaled decode).
CropBox ScaleBox(const CropBox& box, double scale_x, double scale_y);

// Resamples `box` of `image` to out_size x out_size, mirrors it left-right if `flip`,
// and writes (value / 255 - mean) / std as 3 planes (C, H, W) of floats to `chw`, which
// must hold 3 * out_size * out_size floats. crop_first: the box is cut out before it is
// resized, so the filter reads no pixel outside it (torchvision's RandomResizedCrop);
// otherwise the whole image is resized and the box cut out after (Resize + CenterCrop),
// and the filter reads pixels around the box.
void ResampleNormalize(const RgbImage& image, const CropBox& box, int out_size, bool flip, bool crop_first,
                       const Normalization& normalization, float* chw);

}  // namespace trainer

#endif  // TESSERA_TRAINER_IMAGE_TRANSFORMS_H_
