// The image library of image-classifier: PNG decoding of every colour type and bit depth
// (files written here with libpng), errors for unreadable files, bilinear resizing and
// normalisation.

#include "src/tools/Image.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {

std::string tmpPath(const std::string &name) {
  const char *t = std::getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

/// What a test PNG holds: raw samples as libpng expects them for the colour type and bit
/// depth (big-endian for 16 bits; packed rows for depths below 8).
struct PngSpec {
  unsigned width = 0, height = 0;
  int colorType = PNG_COLOR_TYPE_GRAY, bitDepth = 8;
  bool interlaced = false;
  std::vector<png_color> palette;
  std::vector<png_byte> trns; // palette alpha
  std::vector<std::vector<png_byte>> rows;
};

void writeSpec(const std::string &path, PngSpec &s) {
  FILE *fp = std::fopen(path.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows;
  for (auto &r : s.rows)
    rows.push_back(r.data());
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(fp);
    FAIL() << "libpng failed to write " << path;
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, s.width, s.height, s.bitDepth, s.colorType,
               s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty())
    png_set_PLTE(png, info, s.palette.data(), int(s.palette.size()));
  if (!s.trns.empty())
    png_set_tRNS(png, info, s.trns.data(), int(s.trns.size()), nullptr);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(fp);
}

std::string readBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void writeBytes(const std::string &path, const std::string &b) {
  std::ofstream f(path, std::ios::binary);
  f << b;
}

Image readOK(const std::string &path, unsigned channels) {
  Expected<Image> img = readPNG(path, channels);
  EXPECT_TRUE(bool(img)) << (img ? "" : img.getError().message());
  return img ? std::move(img).get() : Image{};
}

TEST(ImageTest, Gray8) {
  PngSpec s;
  s.width = 3;
  s.height = 2;
  s.rows = {{0, 128, 255}, {51, 102, 204}};
  std::string p = tmpPath("gray8.png");
  writeSpec(p, s);
  Image img = readOK(p, 1);
  ASSERT_EQ(img.width, 3u);
  ASSERT_EQ(img.height, 2u);
  ASSERT_EQ(img.channels, 1u);
  EXPECT_FLOAT_EQ(img.at(0, 0, 0), 0.0f);
  EXPECT_NEAR(img.at(0, 1, 0), 128 / 255.0f, 1e-6);
  EXPECT_FLOAT_EQ(img.at(0, 2, 0), 1.0f);
  EXPECT_NEAR(img.at(1, 2, 0), 0.8f, 1e-6);
  // Gray read as RGB replicates the channel.
  Image rgb = readOK(p, 3);
  ASSERT_EQ(rgb.channels, 3u);
  for (unsigned c = 0; c < 3; c++)
    EXPECT_NEAR(rgb.at(1, 0, c), 0.2f, 1e-6);
}

TEST(ImageTest, GrayLowBitDepthsExpand) {
  // 1, 2 and 4 bits per pixel: the maximum sample is white, 0 black.
  for (int depth : {1, 2, 4}) {
    PngSpec s;
    s.width = 4;
    s.height = 1;
    s.bitDepth = depth;
    unsigned maxv = (1u << depth) - 1;
    // Samples maxv, 0, maxv, 0 packed MSB first.
    unsigned bits = 0, nbits = 0;
    std::vector<png_byte> row;
    for (unsigned x = 0; x < 4; x++) {
      bits = (bits << depth) | (x % 2 == 0 ? maxv : 0);
      nbits += depth;
      if (nbits == 8) {
        row.push_back(png_byte(bits));
        bits = nbits = 0;
      }
    }
    if (nbits)
      row.push_back(png_byte(bits << (8 - nbits)));
    s.rows = {row};
    std::string p = tmpPath("gray" + std::to_string(depth) + ".png");
    writeSpec(p, s);
    Image img = readOK(p, 1);
    ASSERT_EQ(img.width, 4u) << depth;
    EXPECT_FLOAT_EQ(img.at(0, 0, 0), 1.0f) << depth;
    EXPECT_FLOAT_EQ(img.at(0, 1, 0), 0.0f) << depth;
    EXPECT_FLOAT_EQ(img.at(0, 2, 0), 1.0f) << depth;
  }
}

TEST(ImageTest, Gray16KeepsPrecision) {
  PngSpec s;
  s.width = 2;
  s.height = 1;
  s.bitDepth = 16;
  // 0x0101 = 257 -> 257 / 65535 (between 8-bit levels 1/255 exactly; 0x1234 is not).
  s.rows = {{0x12, 0x34, 0xff, 0xff}};
  std::string p = tmpPath("gray16.png");
  writeSpec(p, s);
  Image img = readOK(p, 1);
  EXPECT_NEAR(img.at(0, 0, 0), 0x1234 / 65535.0f, 1e-7);
  EXPECT_FLOAT_EQ(img.at(0, 1, 0), 1.0f);
}

TEST(ImageTest, GrayAlphaDropsAlpha) {
  PngSpec s;
  s.width = 2;
  s.height = 1;
  s.colorType = PNG_COLOR_TYPE_GRAY_ALPHA;
  s.rows = {{100, 0, 200, 255}};
  std::string p = tmpPath("graya.png");
  writeSpec(p, s);
  Image img = readOK(p, 1);
  ASSERT_EQ(img.width, 2u);
  EXPECT_NEAR(img.at(0, 0, 0), 100 / 255.0f, 1e-6);
  EXPECT_NEAR(img.at(0, 1, 0), 200 / 255.0f, 1e-6);
}

TEST(ImageTest, RGB8AndToGray) {
  PngSpec s;
  s.width = 2;
  s.height = 1;
  s.colorType = PNG_COLOR_TYPE_RGB;
  s.rows = {{255, 0, 0, 10, 20, 30}};
  std::string p = tmpPath("rgb8.png");
  writeSpec(p, s);
  Image img = readOK(p, 3);
  ASSERT_EQ(img.channels, 3u);
  EXPECT_FLOAT_EQ(img.at(0, 0, 0), 1.0f);
  EXPECT_FLOAT_EQ(img.at(0, 0, 1), 0.0f);
  EXPECT_NEAR(img.at(0, 1, 2), 30 / 255.0f, 1e-6);
  Image gray = readOK(p, 1);
  ASSERT_EQ(gray.channels, 1u);
  EXPECT_NEAR(gray.at(0, 0, 0), 0.299f, 1e-5);
  EXPECT_NEAR(gray.at(0, 1, 0), (0.299f * 10 + 0.587f * 20 + 0.114f * 30) / 255, 1e-5);
}

TEST(ImageTest, RGB16AndRGBA) {
  PngSpec s;
  s.width = 1;
  s.height = 1;
  s.colorType = PNG_COLOR_TYPE_RGB;
  s.bitDepth = 16;
  s.rows = {{0xff, 0xff, 0x80, 0x00, 0x00, 0x00}};
  std::string p = tmpPath("rgb16.png");
  writeSpec(p, s);
  Image img = readOK(p, 3);
  EXPECT_FLOAT_EQ(img.at(0, 0, 0), 1.0f);
  EXPECT_NEAR(img.at(0, 0, 1), 0x8000 / 65535.0f, 1e-7);
  EXPECT_FLOAT_EQ(img.at(0, 0, 2), 0.0f);

  PngSpec a;
  a.width = 2;
  a.height = 1;
  a.colorType = PNG_COLOR_TYPE_RGB_ALPHA;
  a.rows = {{1, 2, 3, 0, 4, 5, 6, 255}};
  std::string q = tmpPath("rgba.png");
  writeSpec(q, a);
  Image rgba = readOK(q, 3);
  ASSERT_EQ(rgba.channels, 3u);
  EXPECT_NEAR(rgba.at(0, 0, 2), 3 / 255.0f, 1e-6);
  EXPECT_NEAR(rgba.at(0, 1, 0), 4 / 255.0f, 1e-6);
}

TEST(ImageTest, PaletteWithTransparency) {
  PngSpec s;
  s.width = 3;
  s.height = 1;
  s.colorType = PNG_COLOR_TYPE_PALETTE;
  s.bitDepth = 8;
  s.palette = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
  s.trns = {255, 128};
  s.rows = {{2, 0, 1}};
  std::string p = tmpPath("palette.png");
  writeSpec(p, s);
  Image img = readOK(p, 3);
  ASSERT_EQ(img.width, 3u);
  EXPECT_FLOAT_EQ(img.at(0, 0, 2), 1.0f); // blue
  EXPECT_FLOAT_EQ(img.at(0, 1, 0), 1.0f); // red
  EXPECT_FLOAT_EQ(img.at(0, 2, 1), 1.0f); // green (alpha 128 dropped)
  EXPECT_FLOAT_EQ(img.at(0, 2, 0), 0.0f);
}

TEST(ImageTest, InterlacedMatchesPlain) {
  PngSpec s;
  s.width = 9;
  s.height = 7;
  for (unsigned y = 0; y < s.height; y++) {
    std::vector<png_byte> r;
    for (unsigned x = 0; x < s.width; x++)
      r.push_back(png_byte((x * 29 + y * 17) % 256));
    s.rows.push_back(r);
  }
  std::string p = tmpPath("plain.png"), q = tmpPath("adam7.png");
  writeSpec(p, s);
  s.interlaced = true;
  writeSpec(q, s);
  Image a = readOK(p, 1), b = readOK(q, 1);
  ASSERT_EQ(b.width, 9u);
  EXPECT_EQ(a.pixels, b.pixels);
}

TEST(ImageTest, WritePNGRoundTrips) {
  Image img;
  img.width = 3;
  img.height = 2;
  img.channels = 3;
  for (int i = 0; i < 18; i++)
    img.pixels.push_back(float(i * 14) / 255.0f);
  std::string p = tmpPath("roundtrip.png");
  ASSERT_FALSE(writePNG(p, img));
  Image back = readOK(p, 3);
  ASSERT_EQ(back.pixels.size(), img.pixels.size());
  for (size_t i = 0; i < img.pixels.size(); i++)
    EXPECT_NEAR(back.pixels[i], img.pixels[i], 1e-6);
  Image bad = img;
  bad.channels = 2;
  EXPECT_TRUE(writePNG(p, bad));
}

// ---- Unreadable files: an Error naming the file, never a crash. ----

void expectReadError(const std::string &path, const std::string &part) {
  Expected<Image> img = readPNG(path, 3);
  ASSERT_FALSE(bool(img));
  Error e = img.takeError();
  EXPECT_NE(e.message().find(path), std::string::npos) << e.message();
  EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
}

TEST(ImageTest, MissingFile) {
  expectReadError(tmpPath("does-not-exist.png"), "cannot open");
}

TEST(ImageTest, NotAPNG) {
  std::string p = tmpPath("text.png");
  writeBytes(p, "this is not an image, just some text\n");
  expectReadError(p, "not a PNG");
  std::string q = tmpPath("short.png");
  writeBytes(q, "\x89PN");
  expectReadError(q, "not a PNG");
}

PngSpec gradient(unsigned w, unsigned h) {
  PngSpec s;
  s.width = w;
  s.height = h;
  s.colorType = PNG_COLOR_TYPE_RGB;
  for (unsigned y = 0; y < h; y++) {
    std::vector<png_byte> r;
    for (unsigned x = 0; x < w * 3; x++)
      r.push_back(png_byte((x * 7 + y * 3) % 256));
    s.rows.push_back(r);
  }
  return s;
}

TEST(ImageTest, TruncatedAtEveryLength) {
  PngSpec s = gradient(16, 16);
  std::string p = tmpPath("full.png");
  writeSpec(p, s);
  std::string bytes = readBytes(p);
  ASSERT_GT(bytes.size(), 60u);
  std::string q = tmpPath("truncated.png");
  for (size_t len = 0; len < bytes.size(); len++) {
    writeBytes(q, bytes.substr(0, len));
    Expected<Image> img = readPNG(q, 3);
    // Only the trailing IEND chunk may be cut without losing pixels.
    if (len < bytes.size() - 12) {
      EXPECT_FALSE(bool(img)) << "prefix of " << len << " bytes decoded";
    }
    if (!img) {
      EXPECT_NE(img.getError().message().find(q), std::string::npos);
    }
  }
}

TEST(ImageTest, CorruptChunks) {
  PngSpec s = gradient(8, 8);
  std::string p = tmpPath("corrupt-src.png");
  writeSpec(p, s);
  std::string bytes = readBytes(p);
  std::string q = tmpPath("corrupt.png");
  // A bad IHDR CRC.
  std::string b = bytes;
  b[29] ^= 0x55;
  writeBytes(q, b);
  expectReadError(q, "cannot read PNG");
  // Garbage in the compressed data.
  b = bytes;
  size_t idat = b.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  for (size_t i = idat + 6; i < idat + 20 && i < b.size(); i++)
    b[i] = char(0xA5);
  writeBytes(q, b);
  expectReadError(q, "cannot read PNG");
  // Every single-byte flip: an image or an Error, nothing else.
  for (size_t i = 8; i < bytes.size(); i++) {
    b = bytes;
    b[i] ^= 0xFF;
    writeBytes(q, b);
    Expected<Image> img = readPNG(q, 1);
    if (img) {
      EXPECT_EQ(img->pixels.size(), size_t(img->width) * img->height);
    }
  }
}

TEST(ImageTest, AbsurdDimensionsRejected) {
  // A valid IHDR claiming 100000 x 100000 pixels: rejected before allocating.
  PngSpec s = gradient(1, 1);
  std::string p = tmpPath("tiny.png");
  writeSpec(p, s);
  std::string b = readBytes(p);
  auto put32 = [&](size_t off, uint32_t v) {
    for (int k = 0; k < 4; k++)
      b[off + k] = char((v >> (24 - 8 * k)) & 0xff);
  };
  put32(16, 100000);
  put32(20, 100000);
  // The chunk CRC (over type and data), recomputed so that only the size is wrong.
  uint32_t crc = 0xffffffffu;
  for (size_t i = 12; i < 29; i++) {
    crc ^= uint8_t(b[i]);
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  put32(29, crc);
  std::string q = tmpPath("huge.png");
  writeBytes(q, b);
  expectReadError(q, "cannot read PNG");
}

TEST(ImageTest, BadChannelCount) {
  PngSpec s = gradient(2, 2);
  std::string p = tmpPath("ch.png");
  writeSpec(p, s);
  EXPECT_FALSE(bool(readPNG(p, 2)));
  EXPECT_FALSE(bool(readPNG(p, 4)));
}

// ---- Resizing. ----

Image makeImage(unsigned w, unsigned h, unsigned c, const std::vector<float> &v) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = c;
  img.pixels = v;
  return img;
}

TEST(ImageTest, ResizeSameSizeIsCopy) {
  Image a = makeImage(2, 2, 1, {0.1f, 0.2f, 0.3f, 0.4f});
  Image b = resizeBilinear(a, 2, 2);
  EXPECT_EQ(a.pixels, b.pixels);
}

TEST(ImageTest, ResizeUpsampleIsHalfPixelBilinear) {
  // 2 -> 4 along x: source coordinates -0.25, 0.25, 0.75, 1.25 (clamped at the edges).
  Image a = makeImage(2, 1, 1, {0.0f, 1.0f});
  Image b = resizeBilinear(a, 4, 1);
  ASSERT_EQ(b.pixels.size(), 4u);
  EXPECT_NEAR(b.pixels[0], 0.0f, 1e-6);
  EXPECT_NEAR(b.pixels[1], 0.25f, 1e-6);
  EXPECT_NEAR(b.pixels[2], 0.75f, 1e-6);
  EXPECT_NEAR(b.pixels[3], 1.0f, 1e-6);
  // And along y, with three channels kept apart.
  Image c = makeImage(1, 2, 3, {0, 0.5f, 1, 1, 0.5f, 0});
  Image d = resizeBilinear(c, 1, 4);
  EXPECT_NEAR(d.at(1, 0, 0), 0.25f, 1e-6);
  EXPECT_NEAR(d.at(1, 0, 1), 0.5f, 1e-6);
  EXPECT_NEAR(d.at(2, 0, 2), 0.25f, 1e-6);
}

TEST(ImageTest, ResizeConstantStaysConstant) {
  Image a = makeImage(7, 5, 3, std::vector<float>(7 * 5 * 3, 0.3f));
  for (auto [w, h] : {std::pair{224u, 224u}, {3u, 2u}, {1u, 1u}, {13u, 4u}}) {
    Image b = resizeBilinear(a, w, h);
    ASSERT_EQ(b.pixels.size(), size_t(w) * h * 3);
    for (float v : b.pixels)
      EXPECT_NEAR(v, 0.3f, 1e-5);
  }
}

TEST(ImageTest, ResizeDownsampleAntialiases) {
  // A 1-pixel checkerboard shrunk 4x: every output pixel is close to the mean (plain
  // bilinear sampling would alias to 0s and 1s).
  const unsigned n = 32;
  std::vector<float> v(n * n);
  for (unsigned y = 0; y < n; y++)
    for (unsigned x = 0; x < n; x++)
      v[y * n + x] = float((x + y) % 2);
  Image b = resizeBilinear(makeImage(n, n, 1, v), n / 4, n / 4);
  for (float p : b.pixels)
    EXPECT_NEAR(p, 0.5f, 0.1f);
  // Shrinking to one pixel averages everything.
  Image one = resizeBilinear(makeImage(n, n, 1, v), 1, 1);
  EXPECT_NEAR(one.pixels[0], 0.5f, 0.02f);
}

// ---- Normalisation. ----

TEST(ImageTest, WriteCHWNormalises) {
  // 2 x 1 RGB image: channel-major output, (p * scale - mean) / std.
  Image a = makeImage(2, 1, 3, {0.0f, 0.5f, 1.0f, 1.0f, 0.5f, 0.0f});
  Normalization n;
  n.mean = {0.5f, 0.0f, 1.0f};
  n.std = {0.5f, 1.0f, 2.0f};
  std::vector<float> out(6);
  ASSERT_FALSE(writeCHW(a, n, out.data()));
  std::vector<float> expect = {-1.0f, 1.0f, 0.5f, 0.5f, 0.0f, -0.5f};
  for (int i = 0; i < 6; i++)
    EXPECT_NEAR(out[i], expect[i], 1e-6) << i;
  // Scale 255 with a single mean/std for all channels.
  n.scale = 255;
  n.mean = {127.5f};
  n.std = {127.5f};
  ASSERT_FALSE(writeCHW(a, n, out.data()));
  EXPECT_NEAR(out[0], -1.0f, 1e-6);
  EXPECT_NEAR(out[1], 1.0f, 1e-6);
  // Wrong counts and a zero std are errors.
  n.mean = {1, 2};
  EXPECT_TRUE(writeCHW(a, n, out.data()));
  n.mean = {0};
  n.std = {0};
  EXPECT_TRUE(writeCHW(a, n, out.data()));
}

TEST(ImageTest, ImageNetDefaults) {
  Normalization rgb = imageNetNormalization(3);
  ASSERT_EQ(rgb.mean.size(), 3u);
  EXPECT_FLOAT_EQ(rgb.mean[0], 0.485f);
  EXPECT_FLOAT_EQ(rgb.std[2], 0.225f);
  EXPECT_FLOAT_EQ(rgb.scale, 1.0f);
  Normalization g = imageNetNormalization(1);
  ASSERT_EQ(g.mean.size(), 1u);
  EXPECT_NEAR(g.mean[0], 0.449f, 1e-3);
}

} // namespace
} // namespace kiln::tools
