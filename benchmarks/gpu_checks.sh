#!/bin/bash
# The device checks, as one script for a lent GPU machine (about 6 minutes on an H200, 4 on an H100):
# the CUDA tests, then `bench_large.py --section gpu` (GPT-2 124M against plain inference and the
# naive loop; a 7B Llama-shaped model in bfloat16), profile_cuda_cnn.py (where a small CNN's time goes),
# then bench_models on CUDA with what time is left (3 repeats: the medians leave the process's first landscape out).
# The machine's image has torch, transformers, h5py, protobuf, joblib, scikit-learn, matplotlib and
# tqdm, but not google-crc32c: carry its cp312 wheel in .whl/ (see the device tool's README).
# Results go to $OUT (or ./gpu_out).
export PYTHONUNBUFFERED=1
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
T0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/env.txt"
timeout 170 python3 -m pytest -q -rA -s -p no:cacheprovider -m cuda tests/landscape/engine/test_cuda.py \
  tests/landscape/curvature/test_cuda.py tests/landscape/execution/test_sharded.py tests/landscape/execution/test_workers.py \
  2>&1 | tee "$OUT/pytest_cuda.log" | grep -E "PASSED|FAILED|ERROR|passed|failed|CUDA peak|^E " | head -40
echo "tests done at +$(( $(date +%s) - T0 )) s"
timeout 290 python3 benchmarks/bench_large.py --section gpu --json "$OUT/bench_gpu.json" 2>&1 | tee "$OUT/bench_gpu.log" \
  | grep -v "^\[transformers\]" | tail -20
timeout 100 python3 benchmarks/profile_cuda_cnn.py 2>&1 | tee "$OUT/profile_cuda_cnn.log" | grep -v Warning | tail -4
left=$(( ${BUDGET_S:-520} - ($(date +%s) - T0) ))
if [ $left -gt 40 ]; then
  timeout $left python3 benchmarks/bench_models.py --device cuda --models resnet20,resnet18,transformer,gpt2 --samples 512 \
    --repeats 3 --seconds 1 2>&1 | tee "$OUT/bench_models_cuda.log" | grep "^{" | tail -8
fi
echo "all done at +$(( $(date +%s) - T0 )) s"
