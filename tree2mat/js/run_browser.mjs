// Runs an ONNX graph in headless Chromium with onnxruntime-web's WebGPU backend, for tree2mat's
// `verify --runtime webgpu|webgpu-jsep`, or opens a page that scores rows itself (examples/web):
//
//   node run_browser.mjs <request.json>
//   node run_browser.mjs --page <folder>
//
// A server on 127.0.0.1 serves onnxruntime-web's dist/ at /ort/, this folder (score.mjs,
// webgpu.html) at /tree2mat/, and the request's folder (or the page's) at /. With a request
// (run_graph.mjs's, plus "import": the module the page imports, "onnxruntime-web/webgpu" or
// "onnxruntime-web"), webgpu.html scores it; outputs are written to request.dir/<k>.bin and
// described on stdout as one JSON line ({outputs, version, backend, adapter, log}). With
// --page, <folder>/index.html is opened and what it leaves in window.__tree2mat is printed.
// The two imports are two WebGPU backends: "onnxruntime-web/webgpu" the C++ WebGPU execution
// provider compiled to WebAssembly, "onnxruntime-web" (the default import) JSEP, whose kernels
// are onnxruntime-web's own TypeScript/WGSL.
// Chromium: TREE2MAT_CHROMIUM (default /usr/bin/chromium), started with --enable-unsafe-webgpu
// (WebGPU on Linux; headless it finds SwiftShader's adapter).
import { createRequire } from "node:module";
import { createServer } from "node:http";
import { readFileSync, writeFileSync, existsSync, statSync } from "node:fs";
import { basename, join, dirname, extname, normalize, sep } from "node:path";
import { fileURLToPath } from "node:url";

const modules = process.env.TREE2MAT_NODE_MODULES;
if (!modules) throw new Error("TREE2MAT_NODE_MODULES is not set");
const require = createRequire(join(modules, "_"));
const { chromium } = require("playwright-core");
const here = dirname(fileURLToPath(import.meta.url));
const pageMode = process.argv[2] === "--page";
const request = pageMode ? null : JSON.parse(readFileSync(process.argv[2], "utf8"));
const served = pageMode ? process.argv[3] : request.dir;
const roots = { "/ort/": join(modules, "onnxruntime-web", "dist"), "/tree2mat/": here, "/": served };
const TYPES = { ".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

const server = createServer((req, res) => {
  let path;
  try {
    path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  } catch {
    res.writeHead(400);
    res.end();
    return;
  }
  if (!/^(127\.0\.0\.1|localhost):\d+$/.test(req.headers.host || "")) {  // only the browser this script started
    res.writeHead(403);
    res.end();
    return;
  }
  const prefix = Object.keys(roots).find((p) => path.startsWith(p));
  const root = roots[prefix];
  const file = normalize(join(root, path.slice(prefix.length)));
  if (!file.startsWith(normalize(root + sep)) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404);
    res.end();
    return;
  }
  res.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream" });
  res.end(readFileSync(file));
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const base = `http://127.0.0.1:${server.address().port}`;
// The file of dist/ a bundler gives `import ... from request.import` (the package's exports, the
// condition for a wasm file served apart), so the page runs what an application of that import runs.
function entry(specifier) {
  const exports = JSON.parse(readFileSync(join(modules, "onnxruntime-web", "package.json"), "utf8")).exports;
  const subpath = specifier.startsWith("onnxruntime-web") ? "." + specifier.slice("onnxruntime-web".length) : null;
  const file = exports[subpath]?.import?.["onnxruntime-web-use-extern-wasm"];
  if (!file?.startsWith("./dist/")) throw new Error(`no browser module for import ${specifier}`);
  return "/ort/" + file.slice("./dist/".length);
}
if (!pageMode) {
  // (the request's files as the page fetches them: served from its folder at /)
  const atRoot = (described) => ({ ...described, file: "/" + basename(described.file) });
  const pageRequest = {
    ...request, model: "/graph.onnx", input: { ...request.input, file: "/input.bin" }, extra: (request.extra || []).map(atRoot),
    module: entry(request.import || "onnxruntime-web/webgpu"),
  };
  writeFileSync(join(request.dir, "page_request.json"), JSON.stringify(pageRequest));
}

const browser = await chromium.launch({
  executablePath: process.env.TREE2MAT_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"],
});
try {
  const page = await browser.newPage();
  await page.goto(pageMode ? `${base}/index.html` : `${base}/tree2mat/webgpu.html?request=/page_request.json`);
  await page.waitForFunction(() => window.__tree2mat !== undefined, null, { timeout: 600000 });
  const result = await page.evaluate(() => window.__tree2mat);
  if (pageMode) {
    process.stdout.write(JSON.stringify(result) + "\n");
  } else if (result.error) {
    process.stderr.write(`Error: ${result.error}\n`);
    process.exitCode = 1;
  } else {
    const outputs = result.outputs.map((o, k) => {
      const file = join(request.dir, `${k}.bin`);
      writeFileSync(file, Buffer.from(o.data, "base64"));
      return { name: o.name, dtype: o.dtype, shape: o.shape, file };
    });
    process.stdout.write(JSON.stringify({ outputs, version: result.version, backend: result.backend, adapter: result.adapter, log: result.log }) + "\n");
  }
} finally {
  await browser.close();
  server.close();
}
