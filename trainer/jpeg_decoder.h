// JPEG decoding with libjpeg-turbo (TurboJPEG API) for the input pipeline.
//
// The decoder reads the header first so that the caller can choose a crop, then decodes
// at the smallest of libjpeg-turbo's DCT scaling factors (1/8 .. 1) that still leaves
// the crop at least as large as the network input: decoding a 500x375 ImageNet photo at
// 1/2 scale for a 224 crop costs about a third of a full decode, and the crop is then
// resampled down anyway.
//
// Anything wrong with a file (unreadable, empty, not a JPEG, truncated, libjpeg
// warnings, absurd dimensions) is an error Status naming the problem: the pipeline
// skips and counts such files. Grayscale JPEGs decode to RGB; CMYK / YCCK ones (a few
// dozen in ImageNet) are converted with the Adobe convention (inverted CMYK).
//
// Thread safety: one JpegDecoder per thread (it owns a TurboJPEG handle).
#ifndef TESSERA_TRAINER_JPEG_DECODER_H_
#define TESSERA_TRAINER_JPEG_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainer {

// 8-bit RGB pixels, row-major, 3 bytes per pixel.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3
};

// Reads a whole file into `bytes`; an empty file is an error. Messages do not repeat the
// path (callers prefix it).
tessera::Status ReadFileBytes(const std::string& path, std::vector<uint8_t>* bytes);

class JpegDecoder {
 public:
  // Images with more pixels than this are refused (a corrupt header can claim 65535^2).
  static constexpr int64_t kMaxPixels = int64_t{1} << 28;

  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Width and height stored in the JPEG header.
  tessera::Status ReadSize(const std::vector<uint8_t>& bytes, int* width, int* height);

  // Decodes the image scaled by the smallest available factor s such that
  // s * need_width >= min_width and s * need_height >= min_height hold for a region of
  // need_width x need_height original pixels (pass the crop size and the network input
  // size). *scale (if not null) receives s: original pixel coordinate x is x * s in the
  // result. The result's size is ceil(s * size), so it must not be used to derive s.
  tessera::Status Decode(const std::vector<uint8_t>& bytes, double need_width, double need_height,
                         int min_width, int min_height, RgbImage* image, double* scale = nullptr);

 private:
  tessera::Status ReadHeader(const std::vector<uint8_t>& bytes, int* width, int* height, int* colorspace);

  void* handle_;  // tjhandle
};

// Encodes RGB pixels as a baseline JPEG of the given quality (1..100); used by the
// dataset generator and the tests.
tessera::Status EncodeJpeg(const RgbImage& image, int quality, std::vector<uint8_t>* jpeg);

}  // namespace trainer

#endif  // TESSERA_TRAINER_JPEG_DECODER_H_
