#!/usr/bin/env bash
# The reference virtualenv: a real vLLM (the registry's CPU build, pinned in requirements.txt)
# beside simkv's own, never inside it. `make vllm-reference` runs this, then records the
# reference logs. About 3.5 GB and a few minutes.
#
# Wrinkles of the CPU build, applied here:
#   - torchvision, torchaudio and torchcodec come in as dependencies but do not load against
#     the CPU torch (transformers imports torchaudio when it is present): removed;
#   - engines start in process, single-threaded and unbound (record.py sets
#     VLLM_ENABLE_V1_MULTIPROCESSING=0, OMP_NUM_THREADS=1, VLLM_CPU_OMP_THREADS_BIND=nobind).
set -euo pipefail
VENV="$(realpath -m "${1:-.venv-vllm}")"  # (relative to where it is run from)
PYTHON="${PYTHON:-python3}"
cd "$(dirname "$0")"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install --upgrade pip --progress-bar on 2>&1 | tail -1
"$VENV/bin/pip" install -r requirements.txt --progress-bar on
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm, torch; print('vLLM', vllm.__version__, 'torch', torch.__version__)"
