// Scores rows with an ONNX graph in onnxruntime-web: the browser side of tree2mat's WebGPU runs
// (`verify --runtime webgpu`, make test-webgpu) and of examples/web.
//
//   const { outputs, backend } = await score(ort, modelBytes, { name, dtype, shape, data }, names, "webgpu");
//
// input: the rows, { name, dtype, shape, data }, or an array of such inputs (the rows, then the
// graph's extra inputs, a bool one as dtype "bool" of a Uint8Array). backend "webgpu" runs on WebGPU only (an error where the browser has no adapter); "auto"
// tries WebGPU and falls back to WebAssembly; "wasm" is WebAssembly. Returns the outputs by name
// (onnxruntime-web Tensors) and the backend that ran.
export async function score(ort, modelBytes, input, names, backend = "auto") {
  const tries = backend === "auto" ? ["webgpu", "wasm"] : [backend];
  let last;
  for (const ep of tries) {
    if (ep === "webgpu" && !(globalThis.navigator && navigator.gpu && (await navigator.gpu.requestAdapter()))) {
      last = new Error("this browser has no WebGPU adapter");
      continue;
    }
    try {
      const session = await ort.InferenceSession.create(modelBytes, { executionProviders: [ep] });
      const feeds = {};
      for (const one of Array.isArray(input) ? input : [input]) feeds[one.name] = new ort.Tensor(one.dtype, one.data, one.shape);
      const outputs = await session.run(feeds, names && names.length ? names : session.outputNames);
      return { outputs, backend: ep };
    } catch (err) {
      last = err;
    }
  }
  throw last;
}

// A tensor's data as base64 of its little-endian bytes (strings: JSON), for the page to hand back.
export function tensorBytes(tensor) {
  if (tensor.type === "string") return btoa(unescape(encodeURIComponent(JSON.stringify(tensor.data))));
  const view = tensor.data;
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}
