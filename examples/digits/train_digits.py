#!/usr/bin/env python3
"""Trains the embedded default model of Kiln's main command: a small CNN on scikit-learn's
8x8 handwritten digits (Debian: python3-sklearn), exported to ONNX opset 13.

    /usr/bin/python3 examples/digits/train_digits.py      # needs python3-torch, python3-onnx, python3-sklearn

Writes, next to this script:
  digits.onnx                  input "image" [N, 1, 8, 8] (N symbolic), output "logits" [N, 10]
  images/digit_<label>_<i>.png  8-bit grayscale PNGs of held-out digits (white ink on black)
and prints the accuracy on the held-out split. Deterministic: fixed seeds, one thread.

Preprocessing, which the image classifier repeats from the PNGs: pixel values 0..16 are
written as round(v * 255 / 16); the model sees (p / 255 - 0.5) / 0.5, i.e. `--mean 0.5
--std 0.5` with values scaled to [0, 1] (image-classifier's default scale).
Kiln itself needs none of these Python packages: the .onnx and the PNGs are committed.
"""
import os
import random
import struct
import zlib

import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 1234
MEAN, STD = 0.5, 0.5
IMAGES_PER_CLASS = 1

random.seed(SEED)
np.random.seed(SEED)
torch.manual_seed(SEED)
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2))                                   # 32 x 4 x 4
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.25),
            nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
            nn.Linear(64, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def write_png_gray8(path, pixels):
    """Minimal PNG writer (8-bit grayscale), so that no imaging library is needed."""
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


def main():
    digits = load_digits()
    x = digits.images.astype(np.float32)                      # (1797, 8, 8), values 0..16
    y = digits.target.astype(np.int64)
    # What the classifier sees: the 8-bit PNG value scaled to [0, 1].
    pix = np.rint(x * 255.0 / 16.0)
    x01 = (pix / 255.0).astype(np.float32)
    idx = np.arange(len(y))
    tr, te = train_test_split(idx, test_size=0.25, random_state=SEED, stratify=y)

    def tensor(ids):
        return torch.from_numpy((x01[ids] - MEAN) / STD).unsqueeze(1), torch.from_numpy(y[ids])

    xtr, ytr = tensor(tr)
    xte, yte = tensor(te)

    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(SEED)
    for epoch in range(40):
        model.train()
        perm = torch.randperm(len(ytr), generator=g)
        for i in range(0, len(perm), 64):
            b = perm[i:i + 64]
            xb = xtr[b]
            # Light augmentation: shift by up to one pixel.
            dx, dy = torch.randint(-1, 2, (2,), generator=g).tolist()
            xb = torch.roll(xb, shifts=(dy, dx), dims=(2, 3))
            opt.zero_grad()
            loss = loss_fn(model(xb), ytr[b])
            loss.backward()
            opt.step()

    model.eval()
    with torch.no_grad():
        pred = model(xte).argmax(1)
    acc = (pred == yte).float().mean().item()
    print(f"test accuracy: {acc * 100:.2f}% ({int((pred == yte).sum())}/{len(yte)}) "
          f"on the held-out 25% of {len(y)} digits")

    onnx_path = os.path.join(HERE, "digits.onnx")
    torch.onnx.export(model, xte[:1], onnx_path, opset_version=13,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=True)
    print(f"wrote {onnx_path} ({os.path.getsize(onnx_path)} bytes)")

    # A few held-out images, one per class, that the model classifies correctly.
    img_dir = os.path.join(HERE, "images")
    os.makedirs(img_dir, exist_ok=True)
    for f in os.listdir(img_dir):
        if f.startswith("digit_") and f.endswith(".png"):
            os.remove(os.path.join(img_dir, f))
    written = 0
    for label in range(10):
        picked = [int(te[k]) for k in range(len(te))
                  if yte[k].item() == label and pred[k].item() == label][:IMAGES_PER_CLASS]
        for i, j in enumerate(picked):
            write_png_gray8(os.path.join(img_dir, f"digit_{label}_{i}.png"), pix[j])
            written += 1
    print(f"wrote {written} held-out test images to {img_dir}")


if __name__ == "__main__":
    main()
