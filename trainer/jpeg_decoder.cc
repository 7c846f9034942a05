// JPEG decoding and encoding through the TurboJPEG API (see jpeg_decoder.h).
#include "trainer/jpeg_decoder.h"

#include <turbojpeg.h>

#include <cerrno>
#include <cstdio>

namespace trainer {
namespace {

std::string TurboError(tjhandle handle) { return tjGetErrorStr2(handle); }

// Adobe CMYK JPEGs store inverted ink values: R = C * K / 255 and so on.
void CmykToRgb(const std::vector<uint8_t>& cmyk, RgbImage* image) {
  size_t pixels = static_cast<size_t>(image->width) * image->height;
  image->pixels.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    unsigned k = cmyk[4 * i + 3];
    for (int c = 0; c < 3; ++c) image->pixels[3 * i + c] = static_cast<uint8_t>(cmyk[4 * i + c] * k / 255);
  }
}

}  // namespace

tessera::Status ReadFileBytes(const std::string& path, std::vector<uint8_t>* bytes) {
  bytes->clear();
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return tessera::ErrnoError("cannot open the file", errno);
  uint8_t chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0) bytes->insert(bytes->end(), chunk, chunk + got);
  bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return tessera::SystemError("cannot read the file");
  if (bytes->empty()) return tessera::InvalidArgument("empty file");
  return tessera::Status::Ok();
}

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {}

JpegDecoder::~JpegDecoder() {
  if (handle_ != nullptr) tjDestroy(handle_);
}

tessera::Status JpegDecoder::ReadSize(const std::vector<uint8_t>& bytes, int* width, int* height) {
  int colorspace = 0;
  return ReadHeader(bytes, width, height, &colorspace);
}

tessera::Status JpegDecoder::ReadHeader(const std::vector<uint8_t>& bytes, int* width, int* height,
                                        int* colorspace) {
  if (handle_ == nullptr) return tessera::InternalError("tjInitDecompress failed");
  int subsampling = 0;
  if (tjDecompressHeader3(handle_, bytes.data(), bytes.size(), width, height, &subsampling, colorspace) != 0) {
    return tessera::InvalidArgument("not a JPEG: " + TurboError(handle_));
  }
  if (*width <= 0 || *height <= 0) return tessera::InvalidArgument("not a JPEG: no image size in the header");
  if (int64_t{*width} * *height > kMaxPixels) {
    return tessera::InvalidArgument("JPEG header claims " + std::to_string(*width) + "x" +
                                    std::to_string(*height) + " pixels");
  }
  return tessera::Status::Ok();
}

tessera::Status JpegDecoder::Decode(const std::vector<uint8_t>& bytes, double need_width, double need_height,
                                    int min_width, int min_height, RgbImage* image, double* scale) {
  int width = 0, height = 0, colorspace = 0;
  TESSERA_RETURN_IF_ERROR(ReadHeader(bytes, &width, &height, &colorspace));

  // The smallest scaling factor that keeps the needed region at least min_* pixels.
  int factor_count = 0;
  tjscalingfactor* factors = tjGetScalingFactors(&factor_count);
  tjscalingfactor chosen = {1, 1};
  for (int i = 0; factors != nullptr && i < factor_count; ++i) {
    const tjscalingfactor& f = factors[i];
    double scale = static_cast<double>(f.num) / f.denom;
    if (scale > 1.0) continue;
    if (need_width * scale < min_width || need_height * scale < min_height) continue;
    if (scale < static_cast<double>(chosen.num) / chosen.denom) chosen = f;
  }
  if (scale != nullptr) *scale = static_cast<double>(chosen.num) / chosen.denom;
  image->width = TJSCALED(width, chosen);
  image->height = TJSCALED(height, chosen);
  const int flags = TJFLAG_STOPONWARNING;
  bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  int result;
  if (cmyk) {
    std::vector<uint8_t> ink(static_cast<size_t>(image->width) * image->height * 4);
    result = tjDecompress2(handle_, bytes.data(), bytes.size(), ink.data(), image->width, 0, image->height,
                           TJPF_CMYK, flags);
    if (result == 0) CmykToRgb(ink, image);
  } else {
    image->pixels.resize(static_cast<size_t>(image->width) * image->height * 3);
    result = tjDecompress2(handle_, bytes.data(), bytes.size(), image->pixels.data(), image->width, 0,
                           image->height, TJPF_RGB, flags);
  }
  // With TJFLAG_STOPONWARNING a warning (e.g. a truncated file) is a failure too.
  if (result != 0) return tessera::InvalidArgument("corrupt JPEG: " + TurboError(handle_));
  return tessera::Status::Ok();
}

tessera::Status EncodeJpeg(const RgbImage& image, int quality, std::vector<uint8_t>* jpeg) {
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) return tessera::InternalError("tjInitCompress failed");
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  int result = tjCompress2(handle, image.pixels.data(), image.width, 0, image.height, TJPF_RGB, &buffer, &size,
                           TJSAMP_420, quality, 0);
  tessera::Status status;
  if (result != 0) {
    status = tessera::InternalError("tjCompress2 failed: " + TurboError(handle));
  } else {
    jpeg->assign(buffer, buffer + size);
  }
  tjFree(buffer);
  tjDestroy(handle);
  return status;
}

}  // namespace trainer
