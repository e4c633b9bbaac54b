"""Serve the browser example on http://localhost:8000/: this folder at /, onnxruntime-web's dist/
at /ort/ (from the npm packages `make node` installs into build/node, or TREE2MAT_NODE_MODULES),
tree2mat's score.mjs at /tree2mat/. WebGPU needs a secure context: localhost is one.

    python examples/web/make_model.py examples/web && python examples/web/serve.py
"""

from __future__ import annotations

import functools
import http.server
import os
import posixpath
import sys
from pathlib import Path
from urllib.parse import unquote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODULES = Path(os.environ.get("TREE2MAT_NODE_MODULES", ROOT / "build" / "node" / "node_modules"))
ROUTES = {"/ort/": MODULES / "onnxruntime-web" / "dist", "/tree2mat/": ROOT / "tree2mat" / "js", "/": HERE}


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript", ".wasm": "application/wasm"}

    def translate_path(self, path: str) -> str:
        """The file a request names, inside its route's folder (anything else: a path that
        does not exist, so a 404)."""
        path = posixpath.normpath(unquote(path.split("?", 1)[0].split("#", 1)[0]))
        path = path + "/" if path in ("/ort", "/tree2mat") else path
        prefix = next((p for p in ROUTES if path.startswith(p)), "/")
        root = ROUTES[prefix].resolve()
        target = (root / path[len(prefix):].lstrip("/")).resolve()
        return str(target) if target.is_relative_to(root) else str(root / "__outside_the_folder__")


if __name__ == "__main__":
    if not (MODULES / "onnxruntime-web").is_dir():
        sys.exit(f"no onnxruntime-web in {MODULES}: run `make node` (or npm install onnxruntime-web and set TREE2MAT_NODE_MODULES)")
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    print(f"http://localhost:{port}/")
    http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Handler)).serve_forever()
