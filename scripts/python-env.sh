#!/usr/bin/env bash
# The Python environment of the tests' references that Debian does not
# package: PyTorch 2 and Hugging Face transformers 5, from the Python package
# index, in a virtual environment outside the source tree
# (${HYPIPE_VENV:-$HOME/.cache/hypipe/venv}), made once and reused while its
# requirements are unchanged. test/lit.cfg.py finds it at the same place.
# The first install downloads about 3 GB (PyTorch's CUDA libraries come with
# its Linux wheel) and takes 2 to 5 minutes; afterwards this returns at once.
# hypipe itself needs no Python.
set -euo pipefail
venv=${HYPIPE_VENV:-$HOME/.cache/hypipe/venv}
requirements=(torch==2.15.0 transformers==5.24.0)
# Installed without their dependencies, into the environment as it is:
# megatron-core's parallel_state imports with torch alone (it warns that
# Transformer Engine and Apex are missing), for test/cli/grid.test; the
# cudnn-frontend's C++ headers (site-packages/include), which the build
# compiles cuDNN's fused attention with (runtime/kernels/cuda/CMakeLists.txt).
extras=(megatron-core==0.16.1 nvidia-cudnn-frontend==1.32.0)
# Installed with their dependencies: TensorBoard's own event reader
# (EventAccumulator), for test/e2e/tensorboard.test.
readers=(tensorboard==2.21.0)
stamp="$venv/.hypipe-requirements"
extras_stamp="$venv/.hypipe-extras"
if [[ -x $venv/bin/python && -f $stamp && "$(cat "$stamp")" == "${requirements[*]}" ]]; then
  if [[ -f $extras_stamp && "$(cat "$extras_stamp")" == "${extras[*]} ${readers[*]}" ]]; then
    exit 0
  fi
else
  echo "python-env: installing ${requirements[*]} into $venv (first time: a few minutes)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "${requirements[@]}"
  "$venv/bin/python" -c "import torch, transformers; print('python-env: torch', torch.__version__, 'transformers', transformers.__version__)"
  echo "${requirements[*]}" > "$stamp"
fi
# The extras alone: a few tens of MB, added to (or changed in) the environment above
# without remaking it.
echo "python-env: adding ${extras[*]} to $venv (without dependencies)"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir --no-deps "${extras[@]}"
# Its import warns about the optional packages it lacks: shown only on failure.
if ! imported=$("$venv/bin/python" -c "from megatron.core.parallel_state import RankGenerator" 2>&1); then
  echo "$imported" >&2
  exit 1
fi
echo "python-env: megatron-core's RankGenerator imports"
echo "python-env: adding ${readers[*]} to $venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "${readers[@]}"
"$venv/bin/python" -c "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator"
echo "${extras[*]} ${readers[*]}" > "$extras_stamp"
