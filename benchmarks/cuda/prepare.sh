#!/bin/bash
# Here (no GPU): the wheels the CUDA check needs on a lent GPU machine, which cannot reach PyPI,
# in four parts of under 64 MiB each (one device call carries at most 64 MiB with the tree).
# onnxruntime-gpu's wheel is ~255 MB; its TensorRT provider is dropped and the rest repacked.
# Then, on the device, four calls back to back (the machine stays warm 30 s between calls):
#   carry build/cuda/p0: mkdir -p /tmp/parts && cp build/cuda/p0/* /tmp/parts/
#   carry build/cuda/p1, then build/cuda/p2: cp build/cuda/pN/* /tmp/parts/
#   carry build/cuda/p3: bash benchmarks/cuda/run.sh
set -euo pipefail
ORT=${ORT:-onnxruntime-gpu==1.31.1}
out=build/cuda
rm -rf "$out" && mkdir -p "$out/wheels" "$out/p0" "$out/p1" "$out/p2" "$out/p3"
for p in "$ORT" lightgbm==4.7.0 xgboost-cpu==3.2.0 skl2onnx==1.20.0 onnxmltools==1.16.0 hummingbird-ml==0.4.11 \
         onnxconverter-common==1.16.0 dill==0.4.1; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$out/wheels" "$p"
done
mkdir "$out/ort" && (cd "$out/ort" && unzip -q ../wheels/onnxruntime_gpu-*.whl && rm -f onnxruntime/capi/libonnxruntime_providers_tensorrt.so)
tar -C "$out/ort" -cf - . | xz -T2 -6 > "$out/ort.tar.xz"
split -n 4 -d "$out/ort.tar.xz" "$out/ort.part."
for k in 0 1 2 3; do mv "$out/ort.part.0$k" "$out/p$k/"; done
find "$out/wheels" -name '*.whl' ! -name 'onnxruntime_gpu*' -exec cp {} "$out/p0/" \;
rm -rf "$out/ort" "$out/ort.tar.xz"
du -sh "$out"/p*
