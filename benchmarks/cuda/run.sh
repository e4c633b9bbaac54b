#!/bin/bash
# On the GPU machine, after prepare.sh's four parts: onnxruntime-gpu assembled, then the CUDA
# tests (one line per test, streamed to $OUT, so a run cut short still says which failed) and
# suite.py with tree2mat's and Hummingbird's graphs on CUDA. Threads: one per worker (onnxruntime
# and BLAS threads of several workers on 16 cores slowed the tests about tenfold). The tests take
# about 7.5 min with 14 workers on an H200 machine, which leaves no room for the suite within one
# call's 10 minutes: by default the tests alone; a second call with TEST_S=0 SUITE_S=170 runs the
# suite (the parts stay installed while the machine is warm). ROWS, BATCH and SUITE_ARGS change the
# suite's run, e.g. ROWS=1000000 BATCH=1000000 SUITE_ARGS="--forms auto --target cuda".
REPO=$PWD; export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/parts
cp build/cuda/p3/* /tmp/parts/ 2>/dev/null
cat /tmp/parts/ort.part.0* > /tmp/ort.tar.xz && rm -rf /tmp/ortgpu && mkdir -p /tmp/ortgpu
xz -dc -T0 /tmp/ort.tar.xz | tar -C /tmp/ortgpu -xf -
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/parts/*.whl
PY=$(python3 -c 'import sys; print(sys.prefix)')
export LD_LIBRARY_PATH=$(find "$PY" -type d -name lib -path '*nvidia*' 2>/dev/null | tr '\n' ':')${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/ortgpu:/tmp/site:$REPO
{ nvidia-smi -L; python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"; } | tee "$OUT/env.txt"
if [ "${TEST_S:-540}" != 0 ]; then
timeout "${TEST_S:-540}" python3 -m pytest -v -p no:cacheprovider -p no:benchmark -n "${WORKERS:-14}" \
  tests/runtimes/test_cuda.py tests/runtimes/test_placement.py 2>&1 | grep -v -E "Memcpy|PytestBenchmark|warner" > "$OUT/cuda_tests.txt"
grep -c PASSED "$OUT/cuda_tests.txt"; grep -E "FAILED|ERROR" "$OUT/cuda_tests.txt" | head -40
fi
[ "${SUITE_S:-0}" != 0 ] && timeout "${SUITE_S}" python3 -m benchmarks.suite --device cuda --workloads ${WORKLOADS:-xgb_clf lgbm_clf rf_clf} \
  --rows "${ROWS:-100000}" --batch "${BATCH:-1,1000,100000}" --repeat 3 --threads 16 ${SUITE_ARGS:-} --out "$OUT/suite_cuda.json" 2>&1 | grep -v Memcpy | tail -30
