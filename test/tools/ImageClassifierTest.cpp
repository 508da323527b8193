// image-classifier end to end on the committed digits model (examples/digits): correct
// classes, labels, batches, resized inputs, and exit code 2 with a message for every error
// a user can cause (bad PNG, missing files, model/input mismatch).

#include "src/tools/Image.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace {

const char *kModel = "examples/digits/digits.onnx";
const char *kNorm = " --mean 0.5 --std 0.5 ";

std::string tmpPath(const std::string &name) {
  const char *t = std::getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

std::string image(int digit) {
  return "examples/digits/images/digit_" + std::to_string(digit) + "_0.png";
}

struct Result {
  int exitCode = -1;
  std::string out, err;
};

Result classify(const std::string &args) {
  std::string errPath = tmpPath("stderr.txt");
  std::string cmd = "src/tools/image-classifier " + args + " 2>" + errPath;
  Result r;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p)
    return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  int st = pclose(p);
  r.exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(errPath);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

/// The class printed for \p path ("<path>: <class>").
std::string topClass(const std::string &out, const std::string &path) {
  size_t pos = out.find(path + ": ");
  if (pos == std::string::npos)
    return "<missing>";
  size_t start = pos + path.size() + 2;
  return out.substr(start, out.find('\n', start) - start);
}

TEST(ImageClassifierTest, ClassifiesTheShippedDigits) {
  std::string args = std::string("--model ") + kModel + kNorm + "--top-k 3";
  for (int d = 0; d < 10; d++)
    args += " " + image(d);
  Result r = classify(args);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("10 images"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("float<10x1x8x8>"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("softmax applied"), std::string::npos) << r.out;
  for (int d = 0; d < 10; d++)
    EXPECT_EQ(topClass(r.out, image(d)), std::to_string(d)) << r.out;
}

TEST(ImageClassifierTest, CPUBackendAgrees) {
  std::string args = std::string("--model ") + kModel + kNorm + "--backend CPU";
  for (int d = 0; d < 10; d++)
    args += " " + image(d);
  Result r = classify(args);
  if (r.exitCode == 2 && r.err.find("unknown backend") != std::string::npos)
    GTEST_SKIP() << "the CPU backend is not part of this build";
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (int d = 0; d < 10; d++)
    EXPECT_EQ(topClass(r.out, image(d)), std::to_string(d)) << r.out;
}

// --quant-profile over the ten shipped digits, then --quantize from that profile: every
// schema keeps each digit's top-1 class (the classes were checked above), and the log
// says what was quantized.
TEST(ImageClassifierTest, QuantizedFromItsOwnProfileKeepsTheClasses) {
  std::string images;
  for (int d = 0; d < 10; d++)
    images += " " + image(d);
  std::string profile = tmpPath("digits.profile.json");
  Result r = classify(std::string("--model ") + kModel + kNorm + "--quant-profile " + profile +
                      images);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("profiled 10 values over 10 images"), std::string::npos) << r.err;
  for (const char *schema : {"asymmetric", "symmetric", "symmetric-uint8", "power2"}) {
    r = classify(std::string("--model ") + kModel + kNorm + "--quantize " + profile +
                 " --schema " + schema + images);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.err.find("9 nodes quantized, 1 Quantize, 1 Dequantize"), std::string::npos)
        << r.err;
    for (int d = 0; d < 10; d++)
      EXPECT_EQ(topClass(r.out, image(d)), std::to_string(d)) << schema << "\n" << r.out;
  }
  EXPECT_EQ(classify(std::string("--model ") + kModel + " --quantize " + profile +
                     " --schema int4" + images)
                .exitCode,
            2);
}

TEST(ImageClassifierTest, LabelsAndTopK) {
  std::string labels = tmpPath("labels.txt");
  {
    std::ofstream f(labels);
    for (const char *w : {"zero", "one", "two", "three", "four", "five", "six", "seven",
                          "eight", "nine"})
      f << w << "\n";
  }
  Result r = classify(std::string("--model ") + kModel + kNorm + "--labels " + labels +
                      " --top-k 20 " + image(3));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(topClass(r.out, image(3)), "three");
  // top-k is capped at the number of classes: one line per class, probabilities sum to 1.
  std::istringstream lines(r.out);
  std::string line;
  int ranked = 0;
  double sum = 0;
  while (std::getline(lines, line))
    if (line.rfind("  ", 0) == 0) {
      ranked++;
      sum += std::stod(line);
    }
  EXPECT_EQ(ranked, 10);
  EXPECT_NEAR(sum, 1.0, 2e-3);

  std::string few = tmpPath("few.txt");
  std::ofstream(few) << "a\nb\n";
  Result bad = classify(std::string("--model ") + kModel + kNorm + "--labels " + few + " " +
                        image(1));
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("2 labels"), std::string::npos) << bad.err;
}

TEST(ImageClassifierTest, BatchResultsEqualSingleResults) {
  Result one = classify(std::string("--model ") + kModel + kNorm + "--top-k 2 " + image(7));
  Result three = classify(std::string("--model ") + kModel + kNorm + "--top-k 2 " + image(7) +
                          " " + image(7) + " " + image(7));
  ASSERT_EQ(one.exitCode, 0) << one.err;
  ASSERT_EQ(three.exitCode, 0) << three.err;
  std::string block = one.out.substr(one.out.find('\n') + 1);
  std::string rest = three.out.substr(three.out.find('\n') + 1);
  EXPECT_EQ(rest, block + block + block);
}

TEST(ImageClassifierTest, LargerImagesAreResized) {
  // Each shipped digit upscaled 4x (nearest) to 32x32 RGB: resized back to 8x8 gray, most
  // keep their class (the filter blurs a little).
  int correct = 0;
  for (int d = 0; d < 10; d++) {
    kiln::Expected<kiln::tools::Image> small = kiln::tools::readPNG(image(d), 1);
    ASSERT_TRUE(bool(small));
    kiln::tools::Image big;
    big.width = big.height = 32;
    big.channels = 3;
    big.pixels.resize(32 * 32 * 3);
    for (unsigned y = 0; y < 32; y++)
      for (unsigned x = 0; x < 32; x++)
        for (unsigned c = 0; c < 3; c++)
          big.at(y, x, c) = small->at(y / 4, x / 4, 0);
    std::string p = tmpPath("big" + std::to_string(d) + ".png");
    ASSERT_FALSE(kiln::tools::writePNG(p, big));
    Result r = classify(std::string("--model ") + kModel + kNorm + p);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    correct += topClass(r.out, p) == std::to_string(d);
  }
  EXPECT_GE(correct, 8);
}

// ---- Errors: exit 2 and a message, never a crash. ----

TEST(ImageClassifierTest, BadPNG) {
  std::string p = tmpPath("not-a-png.png");
  std::ofstream(p) << "hello";
  Result r = classify(std::string("--model ") + kModel + " " + image(1) + " " + p);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("not a PNG"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(p), std::string::npos) << r.err;

  // A truncated PNG.
  std::ifstream in(image(4), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::string t = tmpPath("truncated.png");
  std::ofstream(t, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  r = classify(std::string("--model ") + kModel + " " + t);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("cannot read PNG"), std::string::npos) << r.err;
}

TEST(ImageClassifierTest, MissingFiles) {
  Result r = classify(std::string("--model ") + kModel + " " + tmpPath("nope.png"));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  r = classify("--model " + tmpPath("nope.onnx") + " " + image(1));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_FALSE(r.err.empty());
  std::string junk = tmpPath("junk.onnx");
  std::ofstream(junk) << "definitely not protobuf \xff\xff\xff";
  r = classify("--model " + junk + " " + image(1));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_FALSE(r.err.empty());
}

TEST(ImageClassifierTest, ModelInputMismatch) {
  // The digits model takes one channel.
  Result r = classify(std::string("--model ") + kModel + " --channels 3 " + image(1));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("does not match the model's input"), std::string::npos) << r.err;
  // Read as NHWC, its [N, 1, 8, 8] input would have 8 channels.
  r = classify(std::string("--model ") + kModel + " --layout NHWC " + image(1));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("8 channels"), std::string::npos) << r.err;
  // A mean with one value per channel of an RGB model does not fit a gray one.
  r = classify(std::string("--model ") + kModel + " --mean 0.1,0.2,0.3 " + image(1));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("mean and std"), std::string::npos) << r.err;
}

TEST(ImageClassifierTest, BadFlags) {
  for (const char *args : {"", "--model", "--model m.onnx", "--top-k 0 --model m.onnx x.png",
                           "--scale 7 --model m.onnx x.png", "--mean a --model m.onnx x.png",
                           "--frobnicate", "--backend NoSuchBackend"}) {
    Result r = classify(args);
    EXPECT_EQ(r.exitCode, 2) << args;
    EXPECT_NE(r.err.find("image-classifier:"), std::string::npos) << args;
  }
  Result r = classify(std::string("--model ") + kModel + " --backend NoSuchBackend " + image(1));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("unknown backend 'NoSuchBackend'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Interpreter"), std::string::npos) << r.err;
}

} // namespace
