// PNG reading, resizing and normalisation for the image classifier (and its tests).
// Pixels are kept as floats in [0, 1], interleaved (row-major, channel last).
#ifndef KILN_SRC_TOOLS_IMAGE_H
#define KILN_SRC_TOOLS_IMAGE_H

#include "kiln/Base/Error.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::tools {

/// An image with values in [0, 1], stored height x width x channels.
struct Image {
  unsigned width = 0, height = 0, channels = 0;
  std::vector<float> pixels;

  float at(unsigned y, unsigned x, unsigned c) const {
    return pixels[(size_t(y) * width + x) * channels + c];
  }
  float &at(unsigned y, unsigned x, unsigned c) {
    return pixels[(size_t(y) * width + x) * channels + c];
  }
};

/// Largest width or height readPNG accepts (larger files are rejected, not decoded).
constexpr unsigned kMaxImageSide = 16384;

/// Reads the PNG file at \p path with \p channels channels (1: gray, 3: RGB). Every PNG
/// colour type and bit depth is accepted: palettes and gray below 8 bits are expanded,
/// 16-bit samples keep their precision, alpha is dropped, colour is converted to gray
/// (ITU-R BT.601 luma, as PIL's "L") or gray replicated to RGB as needed.
/// Interlaced files are de-interlaced. Unreadable, truncated or corrupt files return an
/// Error naming the file and what libpng reported.
Expected<Image> readPNG(const std::string &path, unsigned channels);

/// Writes \p img as an 8-bit gray (1 channel), RGB (3) or RGBA (4) PNG.
Error writePNG(const std::string &path, const Image &img);

/// Resizes \p img to \p width x \p height with a bilinear (triangle) filter on pixel
/// centres; when shrinking, the filter widens by the scale factor so that every source
/// pixel contributes (anti-aliased, as PIL's BILINEAR). Same size returns a copy.
Image resizeBilinear(const Image &img, unsigned width, unsigned height);

/// How pixel values in [0, 1] become model inputs: v = (p * scale - mean[c]) / std[c].
struct Normalization {
  /// 1 for values in [0, 1], 255 for values in [0, 255].
  float scale = 1.0f;
  /// Per channel; ImageNet's by default (for one channel, the mean of these).
  std::vector<float> mean = {0.485f, 0.456f, 0.406f};
  std::vector<float> std = {0.229f, 0.224f, 0.225f};
};

/// The ImageNet defaults for \p channels channels (1: the average of the three).
Normalization imageNetNormalization(unsigned channels);

/// Writes \p img normalised into \p dst in CHW order (channels x height x width).
/// mean and std must have one value, or one per channel.
Error writeCHW(const Image &img, const Normalization &norm, float *dst);

} // namespace kiln::tools

#endif // KILN_SRC_TOOLS_IMAGE_H
