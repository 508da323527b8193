#!/usr/bin/python3
"""Build a sweep of architectures beyond the benchmark corpus, with RANDOM weights, in the
ONNX backend-test layout that compare.py and kiln-run read:

    OUT/<model>/model.onnx, OUT/<model>/test_data_set_0/{input_0,output_0}.pb

The export recipe (seeded random weights, BatchNorm made non-trivial and calibrated, PyTorch
eager fp32 reference) is ../shared/bench/make_models.py's; this file only chooses the
networks. Each family the issues name is covered: segmentation with bilinear upsampling,
3-D convolution video networks, vision transformers, a text transformer with token
embeddings, squeeze-and-excitation with hard-swish / SiLU, grouped convolutions, dense
concatenation, channels-last LayerNorm with GELU (ConvNeXt), window attention (Swin).

With --reference float64 the expected outputs are recomputed by the same PyTorch model in
float64 (the network rebuilt from the same seeds, checked to reproduce the float32 export
bit for bit first), so that a model is judged against the exact value rather than against
PyTorch's own float32 rounding; --refs-only does just that for an existing folder.

Usage: /usr/bin/python3 test/e2e/make_sweep.py --out /tmp/kiln-sweep [--only a,b] [--skip c]
                                               [--reference float32|float64] [--refs-only]
"""
import argparse
import contextlib
import os
import sys

import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "bench"))
sys.path.insert(0, os.environ.get("KILN_BENCH_DIR", BENCH))
import make_models as mm  # noqa: E402  (../shared/bench/make_models.py)


class TextEncoder(nn.Module):
    """A small BERT-style encoder: token + position embeddings, 4 post-norm layers with GELU,
    the class token's state through a linear head. Input: int64 token ids [1, 128]."""

    def __init__(self, vocab=8000, dim=256, heads=4, layers=4, seq=128, classes=10):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        x = self.norm(self.enc(x))
        return self.head(x[:, 0])


class GPTDecoder(nn.Module):
    """A small GPT-style decoder: token embeddings, causal self-attention written out
    (MatMul, Softmax, a constant mask), pre-norm blocks with GELU, logits of every position.
    Input: int64 token ids [1, 64]."""

    def __init__(self, vocab=4000, dim=256, heads=4, layers=4, seq=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(dim), qkv=nn.Linear(dim, 3 * dim), proj=nn.Linear(dim, dim),
                ln2=nn.LayerNorm(dim), fc=nn.Linear(dim, 4 * dim), out=nn.Linear(4 * dim, dim))))
        self.ln = nn.LayerNorm(dim)
        self.headw = nn.Linear(dim, vocab, bias=False)
        self.heads = heads
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), -1e4), diagonal=1))

    def forward(self, ids):
        b, t = ids.shape
        x = self.tok(ids) + self.pos
        h = self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).chunk(3, dim=-1)
            q = q.reshape(b, t, h, -1).transpose(1, 2)
            k = k.reshape(b, t, h, -1).transpose(1, 2)
            v = v.reshape(b, t, h, -1).transpose(1, 2)
            a = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5) + self.mask
            y = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + blk["proj"](y)
            x = x + blk["out"](torch.nn.functional.gelu(blk["fc"](blk["ln2"](x))))
        return self.headw(self.ln(x))


def seg(name):
    fn = getattr(torchvision.models.segmentation, name)

    class Seg(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = fn(weights=None, weights_backbone=None, aux_loss=False)

        def forward(self, x):
            return self.m(x)["out"]
    return Seg


def vit(name):
    """torchvision initialises a ViT's classification head to zeros (the output would be all
    zeros, matching anything): give it random weights."""
    make = mm.tv(name)

    def ctor():
        m = make()
        with torch.no_grad():
            m.heads.head.weight.normal_(0, 0.02)
            m.heads.head.bias.normal_(0, 0.02)
        return m
    return ctor


def video(name):
    return getattr(torchvision.models.video, name)


def tv(name, **kw):
    return mm.tv(name, **kw)


# Attention modules take PyTorch's fused fast path (which has no ONNX export) when run without
# gradients; these networks are exported with gradients enabled, which keeps the plain path.
GRAD_EXPORT = {"vit_b_16", "text_encoder"}


@contextlib.contextmanager
def grad_enabled_export(enabled):
    """torch.onnx.export traces with gradients enabled (the parameters require them)."""
    saved = torch.onnx.export
    if enabled:
        def export(*a, **kw):
            with torch.enable_grad():
                return saved(*a, **kw)
        torch.onnx.export = export
    try:
        yield
    finally:
        torch.onnx.export = saved


SWEEP = [
    # name, constructor, input shape
    ("resnet18", tv("resnet18"), (1, 3, 224, 224)),
    ("resnet101", tv("resnet101"), (1, 3, 224, 224)),
    ("wide_resnet50_2", tv("wide_resnet50_2"), (1, 3, 224, 224)),
    ("resnext50_32x4d", tv("resnext50_32x4d"), (1, 3, 224, 224)),
    ("regnet_x_400mf", tv("regnet_x_400mf"), (1, 3, 224, 224)),
    ("regnet_y_400mf", tv("regnet_y_400mf"), (1, 3, 224, 224)),
    ("densenet121", tv("densenet121"), (1, 3, 224, 224)),
    ("googlenet", tv("googlenet", aux_logits=False, init_weights=True), (1, 3, 224, 224)),
    ("inception_v3", tv("inception_v3", aux_logits=False, init_weights=True), (1, 3, 299, 299)),
    ("shufflenet_v2_x1_0", tv("shufflenet_v2_x1_0"), (1, 3, 224, 224)),
    ("mnasnet1_0", tv("mnasnet1_0"), (1, 3, 224, 224)),
    ("mobilenet_v3_small", tv("mobilenet_v3_small"), (1, 3, 224, 224)),
    ("mobilenet_v3_large", tv("mobilenet_v3_large"), (1, 3, 224, 224)),
    ("efficientnet_b0", tv("efficientnet_b0"), (1, 3, 224, 224)),
    ("efficientnet_v2_s", tv("efficientnet_v2_s"), (1, 3, 224, 224)),
    ("convnext_tiny", tv("convnext_tiny"), (1, 3, 224, 224)),
    ("vgg16_bn", tv("vgg16_bn"), (1, 3, 224, 224)),
    ("vit_b_16", vit("vit_b_16"), (1, 3, 224, 224)),
    ("swin_t", tv("swin_t"), (1, 3, 224, 224)),
    ("fcn_resnet50", seg("fcn_resnet50"), (1, 3, 224, 224)),
    ("lraspp_mobilenet_v3", seg("lraspp_mobilenet_v3_large"), (1, 3, 224, 224)),
    ("deeplabv3_mobilenet_v3", seg("deeplabv3_mobilenet_v3_large"), (1, 3, 224, 224)),
    ("r3d_18", video("r3d_18"), (1, 3, 8, 112, 112)),
    ("r2plus1d_18", video("r2plus1d_18"), (1, 3, 8, 112, 112)),
    ("text_encoder", TextEncoder, ("ids", 8000, (1, 128))),
    ("gpt_decoder", GPTDecoder, ("ids", 4000, (1, 64))),
]


def rebuild(name, ctor, shape, idx, args):
    """The network and input export_one / the token path made for SWEEP entry idx."""
    import numpy as np
    torch.manual_seed(args.seed + idx)
    if isinstance(shape[0], str):
        _, vocab, ids_shape = shape
        model = ctor().eval()
        rng = np.random.default_rng(args.seed + idx)
        return model, torch.from_numpy(rng.integers(0, vocab, size=ids_shape, dtype=np.int64))
    model = ctor()
    mm.randomize_and_calibrate_bn(model, shape, args.seed + 1000 + idx, calib=not args.no_bn_calib)
    model.eval()
    rng = np.random.default_rng(args.seed + idx)
    return model, torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))


def first_output(y):
    if isinstance(y, (tuple, list)):
        y = y[0]
    if hasattr(y, "logits"):
        y = y.logits
    return y


def float64_reference(name, ctor, shape, idx, args):
    """Rewrites OUT/name/test_data_set_0/output_0.pb with the float64 result."""
    import numpy as np
    from onnx import numpy_helper
    ddir = os.path.join(args.out, name, "test_data_set_0")
    ref = numpy_helper.to_array(_load_tensor(os.path.join(ddir, "output_0.pb")))
    model, x = rebuild(name, ctor, shape, idx, args)
    with torch.no_grad():
        y32 = first_output(model(x)).numpy().astype(np.float32)
    if y32.shape != ref.shape or not np.array_equal(y32, ref):
        raise RuntimeError("the rebuilt network does not reproduce the exported reference "
                           "(max diff %g)" % float(np.abs(y32.astype(np.float64) - ref).max()
                                                   if y32.shape == ref.shape else -1))
    model = model.double()
    xd = x.double() if x.is_floating_point() else x
    with torch.no_grad():
        y64 = first_output(model(xd)).numpy()
    out = numpy_helper.from_array(y64.astype(np.float32), _load_tensor(
        os.path.join(ddir, "output_0.pb")).name)
    with open(os.path.join(ddir, "output_0.pb"), "wb") as f:
        f.write(out.SerializeToString())
    rel = float(np.abs(y64 - ref).max() / max(np.abs(y64).max(), 1e-30))
    print("   float64 reference: float32 PyTorch was off by %.3g of max|y|" % rel, flush=True)


def _load_tensor(path):
    import onnx
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="/tmp/kiln-sweep")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--only", default="")
    ap.add_argument("--skip", default="")
    ap.add_argument("--reference", default="float32", choices=("float32", "float64"))
    ap.add_argument("--refs-only", action="store_true",
                    help="only recompute the references of an existing sweep (float64)")
    args = ap.parse_args()
    args.no_bn_calib = False
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    skip = set(filter(None, args.skip.split(",")))
    import numpy as np
    from onnx import numpy_helper
    for idx, (name, ctor, shape) in enumerate(SWEEP):
        if (only and name not in only) or name in skip:
            continue
        print("== %s" % name, flush=True)
        if args.refs_only:
            float64_reference(name, ctor, shape, idx, args)
            continue
        if isinstance(shape[0], str):  # token ids: export by hand (make_models feeds floats)
            _, vocab, ids_shape = shape
            torch.manual_seed(args.seed + idx)
            model = ctor().eval()
            rng = np.random.default_rng(args.seed + idx)
            ids = rng.integers(0, vocab, size=ids_shape, dtype=np.int64)
            with torch.no_grad():
                y = model(torch.from_numpy(ids)).numpy().astype(np.float32)
            mdir = os.path.join(args.out, name)
            ddir = os.path.join(mdir, "test_data_set_0")
            os.makedirs(ddir, exist_ok=True)
            path = os.path.join(mdir, "model.onnx")
            with grad_enabled_export(name in GRAD_EXPORT), torch.no_grad():
                torch.onnx.export(model, torch.from_numpy(ids), path, opset_version=args.opset,
                                  input_names=["input"], output_names=["output"],
                                  do_constant_folding=True)
            with open(os.path.join(ddir, "input_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(ids, "input").SerializeToString())
            with open(os.path.join(ddir, "output_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(y, "output").SerializeToString())
            print("   ok", flush=True)
            if args.reference == "float64":
                float64_reference(name, ctor, shape, idx, args)
            continue
        try:
            with grad_enabled_export(name in GRAD_EXPORT):
                rec = mm.export_one(name, ctor, shape, idx, args, args.out)
        except Exception as e:  # report and go on with the next network
            rec = {"status": "error", "error": str(e)[-500:]}
        print("   %s %s" % (rec.get("status"), {k: rec.get(k) for k in
              ("opset", "gflops", "num_nodes", "output_absmax", "error")}), flush=True)
        if rec.get("status") == "ok" and args.reference == "float64":
            float64_reference(name, ctor, shape, idx, args)


if __name__ == "__main__":
    main()
