#!/usr/bin/env bash
# Installs every Debian package hypipe needs. Idempotent: when everything is
# already installed it only runs `dpkg-query` and returns in well under a second.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ python3
  clang libclang-rt-14-dev                 # libFuzzer targets (optional build)
  llvm-19-dev llvm-19-tools                # LLVM, lit, FileCheck
  libmlir-19-dev mlir-19-tools             # MLIR 19, mlir-tblgen
  libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev
  libopenblas-dev libopenmpi-dev openmpi-bin
  libxxhash-dev                            # checkpoint and stage-library checksums
  libsentencepiece-dev                     # hypipe data prepare: SentencePiece tokenizers
  sentencepiece                            # spm_train, spm_encode: the data tests' tokenizer and reference
  libprotobuf-dev protobuf-compiler        # --tensorboard-dir: TensorBoard's event protos
  librsvg2-bin                             # rsvg-convert: the loss pictures as PNG (docs, tests)
  openssh-client                           # Open MPI's launcher wants an rsh agent, even on one node
  procps                                   # pgrep, used by the Ctrl-C test
  python3-torch                            # the numerical reference in tests and the bench peer
  python3-venv                             # scripts/python-env.sh: PyTorch 2 and transformers for the interop tests
  slurmd slurmctld slurm-client munge      # scripts/multihost/slurm.sh: srun in test/multihost
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
