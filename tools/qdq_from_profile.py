#!/usr/bin/env python3
"""Writes a QDQ-quantized copy of a float ONNX model from a Kiln quantization profile, in the
form ONNX Runtime's static quantizer writes, so that ONNX Runtime's int8 execution can be
measured against Kiln's on the same network and ranges.

usage: qdq_from_profile.py MODEL.onnx PROFILE.json OUT_DIR [--per-tensor] [--s8-activations]

PROFILE is what `kiln-run --model MODEL.onnx --quant-profile PROFILE --calibration DIR` writes
(docs/Quantization.md): one entry per value, named by the ONNX node that produces it (or the
graph input), with the min and max seen over the calibration inputs.

What is written (OUT_DIR/model.onnx; the test_data_set_* folders beside MODEL are copied, their
outputs still the float model's):
  - every activation that Kiln profiled (graph inputs and node outputs) passes through
    QuantizeLinear -> DequantizeLinear: uint8 asymmetric over [min(lo, 0), max(hi, 0)]
    (int8 with --s8-activations), except a Conv, Gemm or MatMul output whose only reader is a
    Relu or Clip (the activation's output is quantized instead, as ONNX Runtime fuses them)
    and the graph outputs, which stay float;
  - Conv weights int8 symmetric per output channel (per tensor with --per-tensor), Gemm and
    MatMul weights int8 symmetric per tensor, each read through DequantizeLinear;
  - Conv and Gemm biases int32 with scale input scale x weight scale, zero point 0.
Rounding is to nearest, halves to even (numpy's rint), as QuantizeLinear defines it.
"""
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper


def activation_qparams(lo, hi, signed):
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    qmin, qmax = (-128, 127) if signed else (0, 255)
    scale = (hi - lo) / (qmax - qmin)
    if scale == 0.0:
        scale = 1.0
    zero = int(np.clip(np.rint(qmin - lo / scale), qmin, qmax))
    return np.float32(scale), zero


def symmetric_weights(w, per_channel):
    """int8 weights and their scales (one per output channel, axis 0, or one)."""
    if per_channel:
        amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    else:
        amax = np.array([np.abs(w).max()])
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shape = (-1,) + (1,) * (w.ndim - 1) if per_channel else ()
    q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 3:
        sys.exit(__doc__)
    model_path, profile_path, out_dir = args
    per_channel = "--per-tensor" not in argv
    signed = "--s8-activations" in argv

    model = onnx.load(model_path)
    g = model.graph
    with open(profile_path) as f:
        ranges = {v["name"]: (v["min"], v["max"]) for v in json.load(f)["values"]}
    inits = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    graph_outputs = {o.name for o in g.output}

    # Which tensors get a Q -> DQ pair, and with which parameters.
    qparams = {}
    for inp in g.input:
        if inp.name in ranges and inp.name not in inits:
            qparams[inp.name] = activation_qparams(*ranges[inp.name], signed)
    for n in g.node:
        if n.name not in ranges or not n.output or n.output[0] in graph_outputs:
            continue
        out = n.output[0]
        rs = readers.get(out, [])
        if n.op_type in ("Conv", "Gemm", "MatMul") and len(rs) == 1 and rs[0].op_type in ("Relu", "Clip"):
            continue
        qparams[out] = activation_qparams(*ranges[n.name], signed)
    if not qparams:
        sys.exit("no value of the profile names a node or input of the model")

    zdtype = TP.INT8 if signed else TP.UINT8
    new_inits, nodes = [], []

    def const(name, array):
        new_inits.append(numpy_helper.from_array(array, name))
        return name

    def dq_name(t):
        return t + "_dq" if t in qparams else t

    def input_scale(t):
        # The scale an operand is read with: its own Q/DQ pair's.
        return qparams[t][0] if t in qparams else None

    for inp in g.input:
        if inp.name in qparams:
            nodes += qdq_pair(inp.name, qparams[inp.name], zdtype, const)
    removed = set()
    for n in g.node:
        ins = [dq_name(i) if i not in inits else i for i in n.input]
        if n.op_type in ("Conv", "Gemm", "MatMul") and len(n.input) > 1 and n.input[1] in inits:
            w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
            conv = n.op_type == "Conv"
            q, wscale = symmetric_weights(w if conv or n.op_type == "Gemm" else w.T,
                                          per_channel and conv)
            if n.op_type == "MatMul":
                q = q.T
            wname = n.input[1]
            removed.add(wname)
            const(wname + "_q", q)
            const(wname + "_s", wscale if per_channel and conv else wscale.reshape(()))
            const(wname + "_z", np.zeros(wscale.shape if per_channel and conv else (), np.int8))
            attrs = {"axis": 0} if per_channel and conv else {}
            nodes.append(helper.make_node("DequantizeLinear",
                                          [wname + "_q", wname + "_s", wname + "_z"],
                                          [wname + "_dq"], **attrs))
            ins[1] = wname + "_dq"
            xs = input_scale(n.input[0])
            if len(n.input) > 2 and n.input[2] in inits and xs is not None:
                b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float64)
                bscale = (np.float64(xs) * wscale.astype(np.float64))
                if bscale.size == 1:
                    bscale = np.full(b.shape, bscale.reshape(()))
                bq = np.clip(np.rint(b / bscale), -2**31, 2**31 - 1).astype(np.int32)
                bname = n.input[2]
                removed.add(bname)
                const(bname + "_q", bq)
                const(bname + "_s", bscale.astype(np.float32))
                const(bname + "_z", np.zeros(b.shape, np.int32))
                nodes.append(helper.make_node("DequantizeLinear",
                                              [bname + "_q", bname + "_s", bname + "_z"],
                                              [bname + "_dq"], axis=0))
                ins[2] = bname + "_dq"
        nodes.append(helper.make_node(n.op_type, ins, list(n.output), name=n.name,
                                      domain=n.domain, doc_string=n.doc_string))
        nodes[-1].attribute.extend(n.attribute)
        for o in n.output:
            if o in qparams:
                nodes += qdq_pair(o, qparams[o], zdtype, const)

    kept = [t for t in g.initializer if t.name not in removed]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    onnx.checker.check_model(model)

    os.makedirs(out_dir, exist_ok=True)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    src = os.path.dirname(os.path.abspath(model_path))
    for d in sorted(os.listdir(src)):
        if d.startswith("test_data_set_"):
            shutil.copytree(os.path.join(src, d), os.path.join(out_dir, d), dirs_exist_ok=True)
    print(f"{out_dir}/model.onnx: {len(qparams)} activations quantized "
          f"({'int8' if signed else 'uint8'}), weights "
          f"{'per channel' if per_channel else 'per tensor'}")


def qdq_pair(t, params, zdtype, const):
    scale, zero = params
    s = const(t + "_s", np.array(scale, np.float32))
    z = const(t + "_z", np.array(zero, np.int8 if zdtype == TP.INT8 else np.uint8))
    return [helper.make_node("QuantizeLinear", [t, s, z], [t + "_q"]),
            helper.make_node("DequantizeLinear", [t + "_q", s, z], [t + "_dq"])]


if __name__ == "__main__":
    main(sys.argv[1:])
