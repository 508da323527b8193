#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus: small valid ONNX models that together use most of the
operators and attribute forms the importer handles (shape subgraphs, both Clip forms,
opset-dependent Squeeze/Split/Slice...). Deterministic; needs python3-onnx only.

    /usr/bin/python3 test/fuzz/make_corpus.py test/fuzz/corpus
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="kiln-fuzz-seed")
    m.ir_version = 7
    return m


N = helper.make_node
seeds = {}

seeds["conv_pool_gemm"] = model(
    [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
     N("Relu", ["c"], ["r"]),
     N("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
     N("Flatten", ["p"], ["f"], axis=1),
     N("Gemm", ["f", "fw", "fb"], ["y"], transB=1)],
    [("x", F, [1, 2, 4, 4])], [("y", F, [1, 3])],
    [init("w", rand(4, 2, 3, 3)), init("b", rand(4)), init("fw", rand(3, 16)), init("fb", rand(3))])

seeds["shape_subgraph_reshape"] = model(
    [N("Shape", ["x"], ["s"]),
     N("Gather", ["s", "i0"], ["d0"], axis=0),
     N("Unsqueeze", ["d0", "ax0"], ["d0u"]),
     N("Concat", ["d0u", "m1"], ["ns"], axis=0),
     N("Reshape", ["x", "ns"], ["y"])],
    [("x", F, ["batch", 3, 4])], [("y", F, None)],
    [init("i0", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
     init("m1", np.array([-1], np.int64))])

seeds["bn_softmax"] = model(
    [N("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], epsilon=1e-5),
     N("GlobalAveragePool", ["n"], ["g"]),
     N("Flatten", ["g"], ["f"]),
     N("Softmax", ["f"], ["y"], axis=1)],
    [("x", F, [1, 3, 2, 2])], [("y", F, [1, 3])],
    [init("s", rand(3)), init("b", rand(3)), init("m", rand(3)), init("v", np.abs(rand(3)) + 1)])

seeds["clip_attr_opset7"] = model(
    [N("Clip", ["x"], ["c"], min=-1.0, max=1.0), N("Sigmoid", ["c"], ["y"])],
    [("x", F, [2, 3])], [("y", F, [2, 3])], opset=7)

seeds["clip_inputs_opset13"] = model(
    [N("Clip", ["x", "lo", "hi"], ["c"]), N("Tanh", ["c"], ["t"]), N("LeakyRelu", ["t"], ["y"], alpha=0.1)],
    [("x", F, [2, 3])], [("y", F, [2, 3])],
    [init("lo", np.array(-1.0, np.float32)), init("hi", np.array(1.0, np.float32))])

seeds["slice_concat_transpose"] = model(
    [N("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
     N("Transpose", ["s"], ["t"], perm=[1, 0]),
     N("Concat", ["t", "t"], ["y"], axis=0)],
    [("x", F, [4, 6])], [("y", F, None)],
    [init("st", np.array([1, 0], np.int64)), init("en", np.array([3, 6], np.int64)),
     init("ax", np.array([0, 1], np.int64)), init("sp", np.array([1, 2], np.int64))])

seeds["slice_attr_opset9"] = model(
    [N("Slice", ["x"], ["s"], starts=[0, 1], ends=[2, 100], axes=[0, 1]),
     N("Identity", ["s"], ["y"])],
    [("x", F, [3, 4])], [("y", F, None)], opset=9)

seeds["split_squeeze_unsqueeze"] = model(
    [N("Split", ["x", "sz"], ["a", "b"], axis=1),
     N("Unsqueeze", ["a", "ax"], ["u"]),
     N("Squeeze", ["u", "ax"], ["s"]),
     N("Add", ["s", "b"], ["y"])],
    [("x", F, [2, 4])], [("y", F, [2, 2])],
    [init("sz", np.array([2, 2], np.int64)), init("ax", np.array([0], np.int64))])

seeds["split_attr_opset11"] = model(
    [N("Split", ["x"], ["a", "b"], axis=0, split=[1, 1]),
     N("Squeeze", ["a"], ["s"], axes=[0]),
     N("Unsqueeze", ["s"], ["y"], axes=[0])],
    [("x", F, [2, 3])], [("y", F, [1, 3])], opset=11)

seeds["pad_expand_tile"] = model(
    [N("Pad", ["x", "pads", "cv"], ["p"], mode="constant"),
     N("Expand", ["p", "es"], ["e"]),
     N("Tile", ["e", "reps"], ["y"])],
    [("x", F, [1, 2])], [("y", F, None)],
    [init("pads", np.array([0, 1, 0, 1], np.int64)), init("cv", np.array(0.5, np.float32)),
     init("es", np.array([3, 4], np.int64)), init("reps", np.array([1, 2], np.int64))])

seeds["reduce_matmul"] = model(
    [N("MatMul", ["x", "w"], ["m"]),
     N("ReduceMean", ["m"], ["r"], axes=[1], keepdims=1),
     N("Sub", ["m", "r"], ["d"]),
     N("Mul", ["d", "d"], ["sq"]),
     N("ReduceSum", ["sq", "rax"], ["y"], keepdims=0)],
    [("x", F, [2, 3])], [("y", F, None)],
    [init("w", rand(3, 5)), init("rax", np.array([1], np.int64))])

seeds["cast_constant_of_shape"] = model(
    [N("Shape", ["x"], ["s"]),
     N("ConstantOfShape", ["s"], ["z"], value=helper.make_tensor("v", F, [1], [1.5])),
     N("Constant", [], ["k"], value=helper.make_tensor("k", F, [1], [2.0])),
     N("Mul", ["z", "k"], ["zk"]),
     N("Add", ["x", "zk"], ["a"]),
     N("Cast", ["a"], ["y"], to=F)],
    [("x", F, [2, 2])], [("y", F, [2, 2])])

seeds["avgpool_logsoftmax_dropout"] = model(
    [N("AveragePool", ["x"], ["p"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1]),
     N("Dropout", ["p"], ["d"]),
     N("Flatten", ["d"], ["f"]),
     N("LogSoftmax", ["f"], ["y"], axis=-1)],
    [("x", F, [1, 1, 3, 3])], [("y", F, None)])

seeds["gather_elementwise"] = model(
    [N("Gather", ["emb", "idx"], ["g"], axis=0),
     N("Div", ["g", "two"], ["d"]),
     N("Exp", ["d"], ["e"]),
     N("Sqrt", ["e"], ["s"]),
     N("Max", ["s", "d"], ["y"])],
    [("idx", I64, [3])], [("y", F, None)],
    [init("emb", rand(5, 4)), init("two", np.array(2.0, np.float32))])

seeds["unsupported_op"] = model(
    [N("Relu", ["x"], ["r"]), N("NonMaxSuppression", ["r", "r"], ["y"])],
    [("x", F, [1, 1, 4])], [("y", I64, None)], opset=11)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)
for name, m in seeds.items():
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())
print(f"wrote {len(seeds)} seeds to {out}")
