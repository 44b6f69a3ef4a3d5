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
stamp="$venv/.hypipe-requirements"
if [[ -x $venv/bin/python && -f $stamp && "$(cat "$stamp")" == "${requirements[*]}" ]]; then
  exit 0
fi
echo "python-env: installing ${requirements[*]} into $venv (first time: a few minutes)"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "${requirements[@]}"
"$venv/bin/python" -c "import torch, transformers; print('python-env: torch', torch.__version__, 'transformers', transformers.__version__)"
echo "${requirements[*]}" > "$stamp"
