#!/usr/bin/python3
"""bench/ort_peer.py - the ONNX Runtime peer of bench/peers.py.

    ort_peer.py SHAPE SECONDS [THREADS]   prints "SHAPE median_ms min_ms max_abs_diff overhead_ms"

Writes the shape's weights, inputs and mha.h's output (build/peer_data), builds an ONNX graph
of the layer with python3-onnx: MatMul and Add projections around ONNX Runtime's
com.microsoft.MultiHeadAttention (its fused CPU attention), MatMul and Add for the output;
for grouped-query shapes the key and value projections are widened to every head (each kv
head's weights repeated over its group), as that operator needs. Then runs it from node with
the npm package onnxruntime-node (build/ort/node_modules: `npm install --prefix build/ort
--ignore-scripts onnxruntime-node`), intra-op threads THREADS (default 1), checks the output
against mha.h's (within 1e-4 (1 + max |out|), else exit 1), and times it. overhead_ms is the
binding's own cost per run: the median of running a one-element Identity graph.
"""
import os
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
ORT_DIR = os.path.join(BUILD, "ort")


def available():
    return os.path.isdir(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node"))


def read_data(path):
    raw = open(path, "rb").read()
    n, m, dq, dk, dv, h, kv, pq, pv, po = struct.unpack("<10i", raw[:40])
    counts = [h * pq * dq, h * pq, kv * pq * dk, kv * pq, kv * pv * dv, kv * pv, po * h * pv, po, n * dq, m * dk,
              m * dv, n * po]
    arrs, at = [], 40
    for c in counts:
        arrs.append(np.frombuffer(raw, dtype="<f4", count=c, offset=at))
        at += 4 * c
    return (n, m, dq, dk, dv, h, kv, pq, pv, po), arrs


def build_model(dims, arrs, path):
    n, m, dq, dk, dv, h, kv, pq, pv, po = dims
    wq, bq, wk, bk, wv, bv, wo, bo = arrs[:8]
    grp = h // kv
    rows = [i // grp for i in range(h)]  # each query head's kv head
    wk_h = np.concatenate([wk.reshape(kv, pq, dk)[g] for g in rows]).reshape(h * pq, dk)
    bk_h = np.concatenate([bk.reshape(kv, pq)[g] for g in rows])
    wv_h = np.concatenate([wv.reshape(kv, pv, dv)[g] for g in rows]).reshape(h * pv, dv)
    bv_h = np.concatenate([bv.reshape(kv, pv)[g] for g in rows])
    inits = [numpy_helper.from_array(np.ascontiguousarray(a, dtype=np.float32), name) for name, a in (
        ("wq", wq.reshape(h * pq, dq).T), ("bq", bq), ("wk", wk_h.T), ("bk", bk_h), ("wv", wv_h.T), ("bv", bv_h),
        ("wo", wo.reshape(po, h * pv).T), ("bo", bo))]
    nodes = [
        helper.make_node("MatMul", ["q", "wq"], ["qm"]), helper.make_node("Add", ["qm", "bq"], ["qp"]),
        helper.make_node("MatMul", ["k", "wk"], ["km"]), helper.make_node("Add", ["km", "bk"], ["kp"]),
        helper.make_node("MatMul", ["v", "wv"], ["vm"]), helper.make_node("Add", ["vm", "bv"], ["vp"]),
        helper.make_node("MultiHeadAttention", ["qp", "kp", "vp"], ["heads"], domain="com.microsoft", num_heads=h),
        helper.make_node("MatMul", ["heads", "wo"], ["om"]), helper.make_node("Add", ["om", "bo"], ["out"]),
    ]
    graph = helper.make_graph(nodes, "mha", [
        helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, n, dq]),
        helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, m, dk]),
        helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, m, dv])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, n, po])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, path)


def identity_model(path):
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


NODE_SCRIPT = r"""
const ort = require('onnxruntime-node');
const fs = require('fs');
const [model, idmodel, data, seconds, threads] = process.argv.slice(2);
const raw = fs.readFileSync(data);
const hd = new Int32Array(raw.buffer, raw.byteOffset, 10);
const [n, m, dq, dk, dv, h, kv, pq, pv, po] = Array.from(hd);
const counts = [h * pq * dq, h * pq, kv * pq * dk, kv * pq, kv * pv * dv, kv * pv, po * h * pv, po, n * dq, m * dk,
                m * dv, n * po];
const arrs = []; let at = raw.byteOffset + 40;
const copy = new Uint8Array(raw).buffer;
at = 40;
for (const c of counts) { arrs.push(new Float32Array(copy, at, c)); at += 4 * c; }
const opts = {intraOpNumThreads: +threads, interOpNumThreads: 1, executionMode: 'sequential',
              graphOptimizationLevel: 'all'};
async function time(sess, feeds, budget) {
  const t = []; const start = process.hrtime.bigint();
  while (t.length < 2000 && (t.length < 3 || Number(process.hrtime.bigint() - start) / 1e9 < budget)) {
    const t0 = process.hrtime.bigint(); await sess.run(feeds); t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  t.sort((a, b) => a - b); return [t[t.length >> 1], t[0]];
}
(async () => {
  const sess = await ort.InferenceSession.create(model, opts);
  const feeds = {q: new ort.Tensor('float32', arrs[8], [1, n, dq]), k: new ort.Tensor('float32', arrs[9], [1, m, dk]),
                 v: new ort.Tensor('float32', arrs[10], [1, m, dv])};
  const out = (await sess.run(feeds)).out.data, ref = arrs[11];
  let big = 0, diff = 0;
  for (let i = 0; i < ref.length; ++i) { big = Math.max(big, Math.abs(ref[i])); const d = Math.abs(ref[i] - out[i]);
    diff = (d > diff || d !== d) ? d : diff; }
  if (!(diff <= 1e-4 * (1 + big))) { console.error('ort_peer: differs from mha.h by ' + diff); process.exit(1); }
  const [med, min] = await time(sess, feeds, +seconds);
  const ids = await ort.InferenceSession.create(idmodel, opts);
  const [ov] = await time(ids, {x: new ort.Tensor('float32', new Float32Array([1]), [1])}, 0.2);
  console.log(med.toFixed(5) + ' ' + min.toFixed(5) + ' ' + diff.toExponential(3) + ' ' + ov.toFixed(4));
})().catch(e => { console.error(e); process.exit(1); });
"""


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    name, seconds = argv[0], float(argv[1])
    threads = int(argv[2]) if len(argv) > 2 else 1
    if not available():
        print("ort_peer: onnxruntime-node is not installed in build/ort", file=sys.stderr)
        return 2
    tag = os.path.join(ORT_DIR, "shape_" + name)
    data, model, idm, script = tag + ".bin", tag + ".onnx", os.path.join(ORT_DIR, "identity.onnx"), \
        os.path.join(ORT_DIR, "ort_peer.js")
    subprocess.run([os.path.join(BUILD, "peer_data"), name, data], check=True)
    dims, arrs = read_data(data)
    build_model(dims, arrs, model)
    identity_model(idm)
    open(script, "w").write(NODE_SCRIPT)
    env = dict(os.environ, NODE_PATH=os.path.join(ORT_DIR, "node_modules"))
    out = subprocess.run(["node", script, model, idm, data, str(seconds), str(threads)], check=True, env=env,
                         capture_output=True, text=True).stdout.split()
    print(name, *out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
