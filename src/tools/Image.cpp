#include "Image.h"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace kiln::tools {

namespace {

/// State shared with libpng's callbacks. Only plain data: libpng reports errors by
/// longjmp, which must not skip destructors.
struct PngState {
  FILE *fp = nullptr;
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256] = {0};
};

void pngError(png_structp png, png_const_charp msg) {
  auto *st = static_cast<PngState *>(png_get_error_ptr(png));
  std::snprintf(st->message, sizeof(st->message), "%s", msg ? msg : "unknown libpng error");
  png_longjmp(png, 1);
}

void pngWarning(png_structp, png_const_charp) {}

/// Decodes the open PNG of \p st into \p raw (rows of 8- or 16-bit samples after the
/// transforms). Returns false with st.message set on failure. The vectors are owned by the
/// caller, so a longjmp out of libpng skips no destructor of an object created here.
bool decode(PngState &st, std::vector<unsigned char> &raw, std::vector<png_bytep> &rows,
            png_uint_32 &width, png_uint_32 &height, int &bitDepth, int &channels) {
  if (setjmp(png_jmpbuf(st.png)))
    return false;
  png_init_io(st.png, st.fp);
  png_set_sig_bytes(st.png, 8);
  png_set_user_limits(st.png, kMaxImageSide, kMaxImageSide);
  png_read_info(st.png, st.info);
  // Palette -> RGB, gray below 8 bits -> 8 bits, tRNS -> alpha; then drop alpha.
  png_set_expand(st.png);
  png_set_strip_alpha(st.png);
  png_set_interlace_handling(st.png);
  png_read_update_info(st.png, st.info);
  width = png_get_image_width(st.png, st.info);
  height = png_get_image_height(st.png, st.info);
  bitDepth = png_get_bit_depth(st.png, st.info);
  channels = png_get_channels(st.png, st.info);
  size_t rowBytes = png_get_rowbytes(st.png, st.info);
  if (width == 0 || height == 0 || (bitDepth != 8 && bitDepth != 16) ||
      (channels != 1 && channels != 3) ||
      rowBytes != size_t(width) * channels * (bitDepth / 8)) {
    std::snprintf(st.message, sizeof(st.message),
                  "unexpected layout after decoding (%u x %u, %d channels, %d bits)",
                  unsigned(width), unsigned(height), channels, bitDepth);
    return false;
  }
  raw.resize(rowBytes * height);
  rows.resize(height);
  for (png_uint_32 y = 0; y < height; y++)
    rows[y] = raw.data() + size_t(y) * rowBytes;
  png_read_image(st.png, rows.data());
  png_read_end(st.png, nullptr);
  return true;
}

} // namespace

Expected<Image> readPNG(const std::string &path, unsigned channels) {
  if (channels != 1 && channels != 3)
    return makeError(ErrorCode::InvalidArgument, "images can be read with 1 or 3 channels, not ",
                     channels);
  std::vector<unsigned char> raw;
  std::vector<png_bytep> rows;
  png_uint_32 width = 0, height = 0;
  int bitDepth = 0, fileChannels = 0;
  PngState st;
  st.fp = std::fopen(path.c_str(), "rb");
  if (!st.fp)
    return makeError(ErrorCode::NotFound, "cannot open image '", path, "': ",
                     std::strerror(errno));
  unsigned char sig[8];
  size_t got = std::fread(sig, 1, sizeof(sig), st.fp);
  if (got != sizeof(sig) || png_sig_cmp(sig, 0, sizeof(sig)) != 0) {
    std::fclose(st.fp);
    return makeError(ErrorCode::InvalidArgument, "'", path, "' is not a PNG file",
                     got < sizeof(sig) ? " (too short)" : " (bad signature)");
  }
  st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, pngError, pngWarning);
  if (st.png)
    st.info = png_create_info_struct(st.png);
  bool ok = st.png && st.info &&
            decode(st, raw, rows, width, height, bitDepth, fileChannels);
  if (!st.png || !st.info)
    std::snprintf(st.message, sizeof(st.message), "out of memory in libpng");
  png_destroy_read_struct(st.png ? &st.png : nullptr, st.info ? &st.info : nullptr, nullptr);
  std::fclose(st.fp);
  if (!ok)
    return makeError(ErrorCode::InvalidArgument, "cannot read PNG '", path, "': ", st.message);

  Image img;
  img.width = width;
  img.height = height;
  img.channels = channels;
  img.pixels.resize(size_t(width) * height * channels);
  const size_t n = size_t(width) * height;
  auto sample = [&](size_t i, int c) -> float {
    size_t k = i * fileChannels + c;
    if (bitDepth == 16)
      return float((unsigned(raw[2 * k]) << 8) | raw[2 * k + 1]) / 65535.0f;
    return float(raw[k]) / 255.0f;
  };
  for (size_t i = 0; i < n; i++) {
    if (unsigned(fileChannels) == channels) {
      for (unsigned c = 0; c < channels; c++)
        img.pixels[i * channels + c] = sample(i, int(c));
    } else if (channels == 1) {
      img.pixels[i] = 0.299f * sample(i, 0) + 0.587f * sample(i, 1) + 0.114f * sample(i, 2);
    } else {
      float g = sample(i, 0);
      for (unsigned c = 0; c < 3; c++)
        img.pixels[i * 3 + c] = g;
    }
  }
  return img;
}

Error writePNG(const std::string &path, const Image &img) {
  if (img.channels != 1 && img.channels != 3 && img.channels != 4)
    return makeError(ErrorCode::InvalidArgument, "cannot write a PNG with ", img.channels,
                     " channels");
  if (img.width == 0 || img.height == 0 ||
      img.pixels.size() != size_t(img.width) * img.height * img.channels)
    return makeError(ErrorCode::InvalidArgument, "image of ", img.width, " x ", img.height,
                     " x ", img.channels, " has ", img.pixels.size(), " values");
  std::vector<unsigned char> raw(img.pixels.size());
  for (size_t i = 0; i < raw.size(); i++)
    raw[i] = (unsigned char)std::lround(std::clamp(img.pixels[i], 0.0f, 1.0f) * 255.0f);
  std::vector<png_bytep> rows(img.height);
  for (unsigned y = 0; y < img.height; y++)
    rows[y] = raw.data() + size_t(y) * img.width * img.channels;

  PngState st;
  st.fp = std::fopen(path.c_str(), "wb");
  if (!st.fp)
    return makeError(ErrorCode::NotFound, "cannot create '", path, "': ", std::strerror(errno));
  st.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &st, pngError, pngWarning);
  if (st.png)
    st.info = png_create_info_struct(st.png);
  bool ok = false;
  if (st.png && st.info) {
    struct Writer {
      static bool run(PngState &s, const Image &im, std::vector<png_bytep> &r) {
        if (setjmp(png_jmpbuf(s.png)))
          return false;
        png_init_io(s.png, s.fp);
        int type = im.channels == 1   ? PNG_COLOR_TYPE_GRAY
                   : im.channels == 3 ? PNG_COLOR_TYPE_RGB
                                      : PNG_COLOR_TYPE_RGB_ALPHA;
        png_set_IHDR(s.png, s.info, im.width, im.height, 8, type, PNG_INTERLACE_NONE,
                     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(s.png, s.info);
        png_write_image(s.png, r.data());
        png_write_end(s.png, nullptr);
        return true;
      }
    };
    ok = Writer::run(st, img, rows);
  }
  png_destroy_write_struct(st.png ? &st.png : nullptr, st.info ? &st.info : nullptr);
  bool closed = std::fclose(st.fp) == 0;
  if (!ok || !closed)
    return makeError(ErrorCode::Runtime, "cannot write PNG '", path, "': ",
                     st.message[0] ? st.message : "write error");
  return Error::success();
}

namespace {

/// Weights of one output coordinate: the source range [first, first + weights.size()).
struct Taps {
  unsigned first = 0;
  std::vector<float> weights;
};

/// Triangle-filter taps for resizing \p in samples to \p out samples along one axis.
std::vector<Taps> makeTaps(unsigned in, unsigned out) {
  std::vector<Taps> taps(out);
  double scale = double(in) / out;
  double support = std::max(scale, 1.0); // the filter's half-width in source pixels
  for (unsigned o = 0; o < out; o++) {
    double center = (o + 0.5) * scale;
    int lo = std::max(0, int(std::floor(center - support)));
    int hi = std::min(int(in) - 1, int(std::ceil(center + support)));
    Taps &t = taps[o];
    double sum = 0;
    std::vector<double> w;
    for (int i = lo; i <= hi; i++) {
      double d = std::fabs((i + 0.5 - center) / support);
      w.push_back(d < 1 ? 1 - d : 0);
      sum += w.back();
    }
    if (sum <= 0) { // cannot happen for in > 0, but never divide by zero
      int nearest = std::clamp(int(center), 0, int(in) - 1);
      t.first = unsigned(nearest);
      t.weights = {1.0f};
      continue;
    }
    t.first = unsigned(lo);
    for (double x : w)
      t.weights.push_back(float(x / sum));
  }
  return taps;
}

} // namespace

Image resizeBilinear(const Image &img, unsigned width, unsigned height) {
  if (width == img.width && height == img.height)
    return img;
  const unsigned C = img.channels;
  std::vector<Taps> tx = makeTaps(img.width, width), ty = makeTaps(img.height, height);
  // Horizontal pass: img.height x width.
  std::vector<float> tmp(size_t(img.height) * width * C, 0.0f);
  for (unsigned y = 0; y < img.height; y++)
    for (unsigned x = 0; x < width; x++)
      for (unsigned c = 0; c < C; c++) {
        float acc = 0;
        for (size_t k = 0; k < tx[x].weights.size(); k++)
          acc += tx[x].weights[k] * img.at(y, tx[x].first + unsigned(k), c);
        tmp[(size_t(y) * width + x) * C + c] = acc;
      }
  Image out;
  out.width = width;
  out.height = height;
  out.channels = C;
  out.pixels.assign(size_t(width) * height * C, 0.0f);
  for (unsigned y = 0; y < height; y++)
    for (unsigned x = 0; x < width; x++)
      for (unsigned c = 0; c < C; c++) {
        float acc = 0;
        for (size_t k = 0; k < ty[y].weights.size(); k++)
          acc += ty[y].weights[k] * tmp[((ty[y].first + k) * width + x) * C + c];
        out.at(y, x, c) = std::clamp(acc, 0.0f, 1.0f);
      }
  return out;
}

Normalization imageNetNormalization(unsigned channels) {
  Normalization n;
  if (channels == 1) {
    n.mean = {(0.485f + 0.456f + 0.406f) / 3};
    n.std = {(0.229f + 0.224f + 0.225f) / 3};
  }
  return n;
}

Error writeCHW(const Image &img, const Normalization &norm, float *dst) {
  const unsigned C = img.channels;
  auto ok = [&](const std::vector<float> &v) { return v.size() == 1 || v.size() == C; };
  if (!ok(norm.mean) || !ok(norm.std))
    return makeError(ErrorCode::InvalidArgument, "mean and std need 1 or ", C,
                     " values; got ", norm.mean.size(), " and ", norm.std.size());
  for (unsigned c = 0; c < C; c++) {
    float m = norm.mean[norm.mean.size() == 1 ? 0 : c];
    float s = norm.std[norm.std.size() == 1 ? 0 : c];
    if (!(s != 0) || !std::isfinite(s) || !std::isfinite(m))
      return makeError(ErrorCode::InvalidArgument, "std of channel ", c,
                       " must be finite and non-zero, mean finite (got mean ", m, ", std ",
                       s, ")");
    for (unsigned y = 0; y < img.height; y++)
      for (unsigned x = 0; x < img.width; x++)
        dst[(size_t(c) * img.height + y) * img.width + x] =
            (img.at(y, x, c) * norm.scale - m) / s;
  }
  return Error::success();
}

} // namespace kiln::tools
