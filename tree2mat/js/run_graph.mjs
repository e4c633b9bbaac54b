// Runs an ONNX graph on onnxruntime-node or onnxruntime-web (its wasm backend, in Node.js) for
// tree2mat's `verify --runtime onnxruntime-node|onnxruntime-web`.
//
//   node run_graph.mjs <onnxruntime-node|onnxruntime-web> <request.json>
//
// request.json: {"model": path, "input": {"name", "dtype", "shape", "file"}, "outputs": [names],
// "dir": folder, "extra": [the graph's other inputs, each as "input" is; optional]}. The inputs
// are raw little-endian data (bool: a byte each); each output is written to dir/<k>.bin and
// described on stdout as one JSON line: [{"name", "dtype", "shape", "file"}], then
// {"version": ...}. The packages are looked up in TREE2MAT_NODE_MODULES (a node_modules folder).
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [backend, requestPath] = process.argv.slice(2);
const modules = process.env.TREE2MAT_NODE_MODULES;
if (!modules) throw new Error("TREE2MAT_NODE_MODULES is not set");
const require = createRequire(join(modules, "_"));
const ort = require(backend);
const version = JSON.parse(readFileSync(join(modules, backend, "package.json"), "utf8")).version;
if (backend === "onnxruntime-web") {
  ort.env.wasm.numThreads = 1;
}

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  bool: Uint8Array, uint8: Uint8Array, int8: Int8Array,
};

// An input described as request.input is: its tensor (bool: "bool" of a Uint8Array).
function tensor(described) {
  const bytes = readFileSync(described.file);
  const Kind = ARRAYS[described.dtype];
  const data = new Kind(bytes.buffer, bytes.byteOffset, bytes.byteLength / Kind.BYTES_PER_ELEMENT);
  return new ort.Tensor(described.dtype, data, described.shape);
}

const request = JSON.parse(readFileSync(requestPath, "utf8"));
const session = await ort.InferenceSession.create(readFileSync(request.model), { executionProviders: [backend === "onnxruntime-web" ? "wasm" : "cpu"] });
const feeds = {};
for (const described of [request.input, ...(request.extra || [])]) feeds[described.name] = tensor(described);
const results = await session.run(feeds, request.outputs);
const described = request.outputs.map((name, k) => {
  const tensor = results[name];
  const file = join(request.dir, `${k}.bin`);
  if (tensor.type === "string") {
    writeFileSync(file, JSON.stringify(tensor.data));
  } else {
    const view = tensor.data;
    writeFileSync(file, Buffer.from(view.buffer, view.byteOffset, view.byteLength));
  }
  return { name, dtype: tensor.type, shape: tensor.dims.map(Number), file };
});
process.stdout.write(JSON.stringify({ outputs: described, version }) + "\n");
