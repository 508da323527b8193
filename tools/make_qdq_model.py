#!/usr/bin/env python3
"""Writes a small QDQ-quantized CNN in the form ONNX Runtime's quantizer writes
(QuantizeLinear / DequantizeLinear around Conv and MatMul, int8 weights per channel, int32
biases dequantized with scale x_scale * w_scale), with one test data set whose output is the
QDQ float reference computed here with numpy (float32 arithmetic, rounding halves to even,
as ONNX defines QuantizeLinear).

usage: make_qdq_model.py OUT_DIR   (writes OUT_DIR/model.onnx, OUT_DIR/test_data_set_0/)

The graph: x [1,3,16,16] float -> Q(u8) -> DQ -> Conv 3->8 3x3 pad 1 (per-channel int8
weights, int32 bias) -> Relu -> Q(u8, zero point 0) -> DQ -> Conv 8->8 3x3 stride 2 group 8
(depthwise, per-channel) -> Q(u8) -> DQ -> Reshape [1, 512] -> MatMul [512, 10] (int8 per
tensor) -> Q(u8) -> DQ -> y [1, 10].
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

rng = np.random.default_rng(7)


def q_u8(x, s, z):
    return np.clip(np.rint(x / np.float32(s)) + z, 0, 255).astype(np.uint8)


def dq(q, s, z):
    return ((q.astype(np.int32) - np.int32(z)).astype(np.float32) * np.float32(s)).astype(np.float32)


def conv(x, w, b, stride, pad, group):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    og = o // group
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[0, g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                y[0, oc, i, j] = np.sum(patch * w[oc].astype(np.float64)) + b[oc]
    return y.astype(np.float32)


def per_channel_int8(w):
    amax = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
    s = (amax / 127).astype(np.float32)
    q = np.clip(np.rint(w / s.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
    return q, s


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))

    def qdq(src, s, z, name):
        init(name + ".s", np.array(s, np.float32))
        init(name + ".z", np.array(z, np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [src, name + ".s", name + ".z"], [name + ".q"]))
        nodes.append(helper.make_node("DequantizeLinear", [name + ".q", name + ".s", name + ".z"], [name + ".dq"]))
        return name + ".dq"

    x = rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)
    xs, xz = np.float32(2 / 255), 128

    # Conv 1: per-channel int8 weights, int32 bias.
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 8).astype(np.float32)
    w1q, w1s = per_channel_int8(w1)
    b1q = np.rint(b1 / (xs * w1s)).astype(np.int32)
    init("w1", w1q), init("w1.s", w1s), init("w1.z", np.zeros(8, np.int8))
    init("b1", b1q), init("b1.s", (xs * w1s).astype(np.float32)), init("b1.z", np.zeros(8, np.int32))
    a = qdq("x", xs, xz, "in")
    nodes.append(helper.make_node("DequantizeLinear", ["w1", "w1.s", "w1.z"], ["w1.dq"], axis=0))
    nodes.append(helper.make_node("DequantizeLinear", ["b1", "b1.s", "b1.z"], ["b1.dq"], axis=0))
    nodes.append(helper.make_node("Conv", [a, "w1.dq", "b1.dq"], ["c1"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    r1s = np.float32(0.02)
    a = qdq("r1", r1s, 0, "act1")

    # Conv 2: depthwise, stride 2, per-channel.
    w2 = rng.normal(0, 0.4, (8, 1, 3, 3)).astype(np.float32)
    b2 = rng.normal(0, 0.05, 8).astype(np.float32)
    w2q, w2s = per_channel_int8(w2)
    b2q = np.rint(b2 / (r1s * w2s)).astype(np.int32)
    init("w2", w2q), init("w2.s", w2s), init("w2.z", np.zeros(8, np.int8))
    init("b2", b2q), init("b2.s", (r1s * w2s).astype(np.float32)), init("b2.z", np.zeros(8, np.int32))
    nodes.append(helper.make_node("DequantizeLinear", ["w2", "w2.s", "w2.z"], ["w2.dq"], axis=0))
    nodes.append(helper.make_node("DequantizeLinear", ["b2", "b2.s", "b2.z"], ["b2.dq"], axis=0))
    nodes.append(helper.make_node("Conv", [a, "w2.dq", "b2.dq"], ["c2"], pads=[1, 1, 1, 1],
                                  strides=[2, 2], group=8))
    c2s, c2z = np.float32(0.015), 128
    a = qdq("c2", c2s, c2z, "act2")

    # MatMul: per-tensor int8 weights.
    init("shape", np.array([1, 512], np.int64))
    nodes.append(helper.make_node("Reshape", [a, "shape"], ["flat"]))
    w3 = rng.normal(0, 0.05, (512, 10)).astype(np.float32)
    w3s = np.float32(np.abs(w3).max() / 127)
    w3q = np.clip(np.rint(w3 / w3s), -127, 127).astype(np.int8)
    init("w3", w3q), init("w3.s", w3s), init("w3.z", np.array(0, np.int8))
    nodes.append(helper.make_node("DequantizeLinear", ["w3", "w3.s", "w3.z"], ["w3.dq"]))
    nodes.append(helper.make_node("MatMul", ["flat", "w3.dq"], ["mm"]))
    ys, yz = np.float32(0.01), 128
    y_name = qdq("mm", ys, yz, "out")
    nodes.append(helper.make_node("Identity", [y_name], ["y"]))

    graph = helper.make_graph(nodes, "qdq_cnn",
                              [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "model.onnx"))

    # The QDQ float reference.
    t = dq(q_u8(x, xs, xz), xs, xz)
    w1f = (w1q.astype(np.float32) * w1s.reshape(-1, 1, 1, 1)).astype(np.float32)
    t = conv(t, w1f, b1q.astype(np.float32) * (xs * w1s), 1, 1, 1)
    t = dq(q_u8(np.maximum(t, 0), r1s, 0), r1s, 0)
    w2f = (w2q.astype(np.float32) * w2s.reshape(-1, 1, 1, 1)).astype(np.float32)
    t = conv(t, w2f, b2q.astype(np.float32) * (r1s * w2s), 2, 1, 8)
    t = dq(q_u8(t, c2s, c2z), c2s, c2z).reshape(1, 512)
    t = (t.astype(np.float64) @ (w3q.astype(np.float64) * float(w3s))).astype(np.float32)
    y = dq(q_u8(t, ys, yz), ys, yz)
    d = os.path.join(out, "test_data_set_0")
    onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(d, "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(y, "y"), os.path.join(d, "output_0.pb"))


if __name__ == "__main__":
    main()
