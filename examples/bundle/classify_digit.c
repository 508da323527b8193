/* Classifies handwritten digits with the digits model compiled ahead of time into a bundle
 * (digits.o, digits.h, digits.weights; see BUILD). Plain C: it links the bundle's object
 * file, libpng and libc/libm, no Kiln and no LLVM.
 *
 *   classify_digit [--weights FILE] [--logits] IMAGE.png...
 *
 * prints "IMAGE.png: DIGIT" per image; --logits adds the model's input and its ten logits
 * as C99 hex floats (exact, for tests). The model was trained on (p - 0.5) / 0.5 for pixel
 * values p in [0, 1]; images of another size than the model's are resized bilinearly. */
#include "digits.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A region of at least `size` bytes, aligned as the bundle needs. */
static uint8_t *region(uint64_t size) {
  uint64_t bytes = (size + DIGITS_ALIGNMENT - 1) / DIGITS_ALIGNMENT * DIGITS_ALIGNMENT;
  return aligned_alloc(DIGITS_ALIGNMENT, bytes ? bytes : DIGITS_ALIGNMENT);
}

static int readWeights(const char *path, uint8_t *dst) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "classify_digit: cannot open '%s'\n", path);
    return -1;
  }
  size_t n = fread(dst, 1, DIGITS_CONSTANTS_SIZE, f);
  int extra = fgetc(f);
  fclose(f);
  if (n != DIGITS_CONSTANTS_SIZE || extra != EOF) {
    fprintf(stderr, "classify_digit: '%s' is not this bundle's weights (%llu bytes expected)\n",
            path, (unsigned long long)DIGITS_CONSTANTS_SIZE);
    return -1;
  }
  return 0;
}

/* Reads `path` as 8-bit gray, resized to w x h, into x as (p - 0.5) / 0.5. */
static int readImage(const char *path, float *x, int w, int h) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path)) {
    fprintf(stderr, "classify_digit: %s: %s\n", path, img.message);
    return -1;
  }
  img.format = PNG_FORMAT_GRAY;
  png_bytep px = malloc(PNG_IMAGE_SIZE(img));
  if (!px || !png_image_finish_read(&img, NULL, px, 0, NULL)) {
    fprintf(stderr, "classify_digit: %s: %s\n", path, px ? img.message : "out of memory");
    free(px);
    png_image_free(&img);
    return -1;
  }
  int iw = (int)img.width, ih = (int)img.height;
  for (int y = 0; y < h; y++)
    for (int xo = 0; xo < w; xo++) {
      /* Bilinear with pixel centres aligned (the identity when the sizes match). */
      float sy = ((float)y + 0.5f) * (float)ih / (float)h - 0.5f;
      float sx = ((float)xo + 0.5f) * (float)iw / (float)w - 0.5f;
      if (sy < 0) sy = 0;
      if (sx < 0) sx = 0;
      int y0 = (int)sy, x0 = (int)sx;
      int y1 = y0 + 1 < ih ? y0 + 1 : ih - 1, x1 = x0 + 1 < iw ? x0 + 1 : iw - 1;
      float fy = sy - (float)y0, fx = sx - (float)x0;
      float top = px[y0 * iw + x0] * (1 - fx) + px[y0 * iw + x1] * fx;
      float bot = px[y1 * iw + x0] * (1 - fx) + px[y1 * iw + x1] * fx;
      float p = (top * (1 - fy) + bot * fy) / 255.0f;
      x[y * w + xo] = (p - 0.5f) / 0.5f;
    }
  free(px);
  return 0;
}

int main(int argc, char **argv) {
  const char *weights = "examples/bundle/digits.weights"; /* its runfiles path */
  int logits = 0, first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (!strcmp(argv[first], "--logits"))
      logits = 1;
    else if (!strcmp(argv[first], "--weights") && first + 1 < argc)
      weights = argv[++first];
    else {
      fprintf(stderr, "usage: classify_digit [--weights FILE] [--logits] IMAGE.png...\n");
      return 2;
    }
  }
  if (first == argc) {
    fprintf(stderr, "usage: classify_digit [--weights FILE] [--logits] IMAGE.png...\n");
    return 2;
  }
  const kiln_bundle_tensor *in = &digits_inputs[0], *out = &digits_outputs[0];
  int h = (int)in->shape[2], w = (int)in->shape[3], classes = (int)out->shape[1];
  uint8_t *constants = region(DIGITS_CONSTANTS_SIZE);
  uint8_t *mutables = region(DIGITS_MUTABLES_SIZE);
  uint8_t *activations = region(DIGITS_ACTIVATIONS_SIZE);
  if (!constants || !mutables || !activations || readWeights(weights, constants))
    return 1;
  float *x = (float *)(mutables + DIGITS_IMAGE_OFFSET);
  const float *y = (const float *)(mutables + DIGITS_LOGITS_OFFSET);
  int status = 0;
  for (int i = first; i < argc; i++) {
    if (readImage(argv[i], x, w, h)) {
      status = 1;
      continue;
    }
    int rc = digits(constants, mutables, activations);
    if (rc) {
      fprintf(stderr, "classify_digit: %s: the bundle returned %d\n", argv[i], rc);
      status = 1;
      continue;
    }
    int best = 0;
    for (int c = 1; c < classes; c++)
      if (y[c] > y[best])
        best = c;
    printf("%s: %d\n", argv[i], best);
    if (logits) {
      printf("input");
      for (int k = 0; k < w * h; k++)
        printf(" %a", x[k]);
      printf("\nlogits");
      for (int c = 0; c < classes; c++)
        printf(" %a", y[c]);
      printf("\n");
    }
  }
  free(constants);
  free(mutables);
  free(activations);
  return status;
}
