#!/usr/bin/env python3
"""Writes the inputs of docs/Quantization.md's accuracy measurement (test/quant/run_quant_eval.sh).

    /usr/bin/python3 test/quant/make_quant_data.py digits --out DIR [--png]
    /usr/bin/python3 test/quant/make_quant_data.py images --out DIR --shape 1x3x224x224 \
        --count 32 --seed S

digits: scikit-learn's 8x8 digits (Debian python3-sklearn; the data ship inside the package
as sklearn/datasets/data/digits.csv.gz), split exactly as examples/digits/train_digits.py
did (train_test_split, test_size 0.25, random_state 1234, stratified) and preprocessed the
same way: pixel p = round(v * 255 / 16), model input (p / 255 - 0.5) / 0.5. Writes
DIR/calib/input_0.pb (all training images as one batch [N,1,8,8]), DIR/test/input_0.pb (all
held-out images, one batch), DIR/test_labels.txt and, with --png, DIR/png/digit_<label>_<k>.png
for image-classifier (the held-out images in order, k their index in the held-out split).

images: COUNT synthetic ImageNet-normalised images (smooth random colour fields: a 7x7
random grid per channel upsampled bilinearly, plus a little pixel noise, in [0, 1], then
(x - mean) / std), the first COUNT/2 as DIR/calib/test_data_set_K, the others as
DIR/test/test_data_set_K. Needs only numpy and onnx.
"""
import argparse
import os
import struct
import zlib

import numpy as np
from onnx import numpy_helper


def write_tensor(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(arr)).SerializeToString())


def write_png_gray8(path, pixels):
    h, w = pixels.shape
    raw = b"".join(b"\x00" + bytes(row) for row in pixels.astype(np.uint8))

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data +
                struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def digits(out, png):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = d.images.astype(np.float32)
    y = d.target.astype(np.int64)
    pix = np.rint(x * 255.0 / 16.0)
    x01 = (pix / 255.0).astype(np.float32)
    idx = np.arange(len(y))
    tr, te = train_test_split(idx, test_size=0.25, random_state=1234, stratify=y)
    norm = lambda ids: ((x01[ids] - 0.5) / 0.5)[:, None, :, :].astype(np.float32)
    write_tensor(os.path.join(out, "calib", "input_0.pb"), norm(tr))
    write_tensor(os.path.join(out, "test", "input_0.pb"), norm(te))
    with open(os.path.join(out, "test_labels.txt"), "w") as f:
        f.write("".join(f"{int(v)}\n" for v in y[te]))
    if png:
        os.makedirs(os.path.join(out, "png"), exist_ok=True)
        for k, j in enumerate(te):
            write_png_gray8(os.path.join(out, "png", f"digit_{int(y[j])}_{k:03d}.png"), pix[j])
    print(f"digits: {len(tr)} training images, {len(te)} held-out images -> {out}")


def images(out, shape, count, seed):
    rng = np.random.default_rng(seed)
    n, c, h, w = shape
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:c, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:c, None, None]
    ys = np.linspace(0, 6, h)
    xs = np.linspace(0, 6, w)
    y0 = np.minimum(np.floor(ys).astype(int), 5)
    x0 = np.minimum(np.floor(xs).astype(int), 5)
    fy = (ys - y0)[:, None]
    fx = (xs - x0)[None, :]
    for i in range(count):
        img = np.empty((n, c, h, w), np.float32)
        for b in range(n):
            for ch in range(c):
                g = rng.uniform(0, 1, (7, 7))
                top = g[y0][:, x0] * (1 - fx) + g[y0][:, x0 + 1] * fx
                bot = g[y0 + 1][:, x0] * (1 - fx) + g[y0 + 1][:, x0 + 1] * fx
                img[b, ch] = top * (1 - fy) + bot * fy
        img += rng.normal(0, 0.03, img.shape).astype(np.float32)
        img = (np.clip(img, 0, 1) - mean) / std
        part = "calib" if i < count // 2 else "test"
        k = i if i < count // 2 else i - count // 2
        write_tensor(os.path.join(out, part, f"test_data_set_{k}", "input_0.pb"),
                     img.astype(np.float32))
    print(f"images: {count} of {shape} -> {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["digits", "images"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--png", action="store_true")
    ap.add_argument("--shape", default="1x3x224x224")
    ap.add_argument("--count", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.what == "digits":
        digits(a.out, a.png)
    else:
        images(a.out, [int(v) for v in a.shape.split("x")], a.count, a.seed)


if __name__ == "__main__":
    main()
