# A small transformer encoder (2 layers, S=128, D=256, 4 heads, FF=1024) of ONNX MatMuls,
# bias Adds, Softmax and Relu, with random weights, and 4 random input sets: the
# MatMul-heavy network of docs/Quantization.md's int8 MatMul measurement.
#   /usr/bin/python3 test/quant/make_mini_transformer.py OUT_DIR   (needs python3-onnx)
import numpy as np, onnx, os, sys
from onnx import helper, numpy_helper, TensorProto
S, D, H, FF, LAYERS = 128, 256, 4, 1024, 2
dh = D // H
rng = np.random.default_rng(0)
nodes, inits = [], []
def const(name, arr):
    inits.append(numpy_helper.from_array(arr.astype(np.float32) if arr.dtype != np.int64 else arr, name))
    return name
def node(op, ins, out, **kw):
    nodes.append(helper.make_node(op, ins, [out], **kw)); return out
def w(name, shape):
    return const(name, rng.normal(0, 1.0 / np.sqrt(shape[0]), shape))
x = "tokens"
const("shape_split", np.array([S, H, dh], np.int64)); const("shape_flat", np.array([S, D], np.int64))
for l in range(LAYERS):
    n = f"l{l}_"
    def heads(which, perm):
        p = node("MatMul", [x, w(n + "W" + which, (D, D))], n + which)
        r = node("Reshape", [p, "shape_split"], n + which + "_split")
        return node("Transpose", [r], n + which + "_heads", perm=perm)
    q = heads("q", [1, 0, 2]); kt = heads("k", [1, 2, 0]); v = heads("v", [1, 0, 2])
    sc = node("MatMul", [q, kt], n + "scores")
    p = node("Softmax", [sc], n + "probs", axis=-1)
    c = node("MatMul", [p, v], n + "ctx")
    m = node("Reshape", [node("Transpose", [c], n + "merge", perm=[1, 0, 2]), "shape_flat"], n + "flat")
    o = node("MatMul", [m, w(n + "Wo", (D, D))], n + "o")
    x1 = node("Add", [x, o], n + "res1")
    h = node("Add", [node("MatMul", [x1, w(n + "W1", (D, FF))], n + "ff1"), const(n + "b1", rng.normal(0, 0.1, FF))], n + "ff1b")
    h = node("Relu", [h], n + "relu")
    f = node("Add", [node("MatMul", [h, w(n + "W2", (FF, D))], n + "ff2"), const(n + "b2", rng.normal(0, 0.1, D))], n + "ff2b")
    x = node("Add", [x1, f], n + "res2")
g = helper.make_graph(nodes, "mini_transformer",
                      [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [S, D])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [S, D])], inits)
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))
for i in range(4):
    d = os.path.join(out, f"test_data_set_{i}"); os.makedirs(d, exist_ok=True)
    t = numpy_helper.from_array(rng.normal(0, 1, (S, D)).astype(np.float32), "tokens")
    open(os.path.join(d, "input_0.pb"), "wb").write(t.SerializeToString())
print("ok")
