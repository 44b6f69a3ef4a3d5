#!/bin/bash
# Builds the GPU kit's probes and baselines into OUTDIR with nvcc, for sm_90a
# (H100) plus compute_90 PTX. Works here (CPU-only, Open MPI installed) and on
# the GPU node (no mpicxx: mpi_share_gpu is skipped with a message).
# Usage: scripts/gpu-kit/probes/build.sh OUTDIR
# Environment: CUDA_HOME (default /usr/local/cuda), NVCC (default
# $CUDA_HOME/bin/nvcc), MPICXX (default mpicxx).
#
# Every program prints readable lines plus one `@figure NAME VALUE UNIT` line
# per measured figure, and exits 0 passed, 1 failed (saying what), 77 skipped
# (no GPU visible, or a library it needs is missing at run time, named).
#
#   nccl_self             NCCL at communicator size 1 on GPU 0: send/recv to
#                         self in one group, all-reduce (sum), reduce-scatter,
#                         all-gather, each checked element by element.
#                         @figure nccl_version V -
#   cuda_ipc              two processes (fork before CUDA) share a 256 MiB
#                         buffer and an interprocess event through CUDA IPC
#                         handles; every word checked in both directions.
#                         @figure ipc_copy_gbs X GB/s  (child -> parent D2D)
#   mpirun -np 2 mpi_share_gpu
#                         two MPI ranks on GPU 0 exchange 64 MiB staged
#                         through pinned host memory (MPI_Sendrecv), checked
#                         on the device; staged ping-pong.
#                         @figure mpi_staged_gbs X GB/s  (rank 0 prints)
#   cublas_gemm [--smoke] [MxNxK ...]
#                         cuBLAS GEMM rate on hypipe's linear layout at
#                         8192^3 and each shape given, for the forward,
#                         input-gradient and weight-gradient (beta 1)
#                         products: bf16 (GemmEx, bf16 operands, fp32
#                         accumulation), hypipe_bf16 (hypipe's own mode: fp32
#                         operands, COMPUTE_32F_FAST_16BF) and fp32 (Sgemm,
#                         pedantic: no TF32, forward at 8192^3), one product
#                         per case checked against the host;
#                         --smoke: one 256^3 case only (for the tools).
#                         @figure gemm_<mode>_<fwd|dgrad|wgrad>_<M>x<N>x<K> X TFLOP/s
#   cudnn_sdpa            cuDNN fused attention forward through the backend
#                         graph API: causal and causal variable-length, bf16,
#                         d=64 and 128, checked against a naive kernel; timed
#                         at b=1 h=16 s=4096. No backward (see its header).
#                         @figure cudnn_version V -
#                         @figure cudnn_sdpa_fwd_engines N -
#                         @figure cudnn_sdpa_fwd_d64 X TFLOP/s
#                         @figure cudnn_sdpa_fwd_d128 X TFLOP/s
#   libkernel_times.so    CUPTI injection library: run any CUDA program with
#                         CUDA_INJECTION64_PATH=$OUTDIR/libkernel_times.so
#                         [HYPIPE_KERNEL_TIMES=out.csv, "%p" -> pid] to get
#                         kind,name,start_ns,end_ns,stream,grid,block of
#                         every kernel, memcpy and memset at exit.
#   classify_kernels.py KERNEL_TIMES.csv [--skip-first-ns N]
#                         GPU time per hypipe kernel class (gemm, scan, conv,
#                         attention, norm, elementwise, moe_routing,
#                         optimizer, communication, memcpy, other).
#                         @figure class_<name>_ms X ms, class_total_ms
#                         (--check-sources runtime/kernels/cuda checks that
#                         every __global__ kernel there has a class)
#
# Run-time libraries. nccl_self and cudnn_sdpa dlopen libnccl.so.2 and
# libcudnn.so.9 (only their headers are needed to build), so a node without
# them reports a skip instead of failing to start; put the node's copies on
# LD_LIBRARY_PATH (e.g. PyTorch's nvidia/*/lib). cublas_gemm links
# libcublas/libcublasLt and libkernel_times.so links libcupti, all from the
# CUDA toolkit, found through an rpath to $CUDA_HOME/lib64 (and
# extras/CUPTI/lib64) or LD_LIBRARY_PATH. The CUDA runtime is linked
# statically. mpi_share_gpu links Open MPI (libmpi.so.40 here), which the GPU
# node does not have: to run it there, carry Open MPI's libraries and mpirun
# along (OPAL_PREFIX) or build it on a node that has MPI.
set -uo pipefail
out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
MPICXX=${MPICXX:-mpicxx}
mkdir -p "$out"

# shellcheck disable=SC2054 # the commas belong to -Xcompiler and -gencode
common=(-O3 -std=c++17 -I"$here" -Xcompiler -Wall,-Wextra)
# shellcheck disable=SC2054
arch=(-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90)
libdirs=()
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/extras/CUPTI/lib64"; do
  [ -d "$d" ] && libdirs+=(-L"$d" -Xlinker -rpath="$d")
done

status=0
build() { # NAME ARGS...
  local name=$1
  shift
  echo "== $name"
  if ! "$NVCC" "${common[@]}" "$@" -o "$out/$name"; then
    echo "error: building $name failed"
    status=1
  fi
}

build nccl_self "${arch[@]}" "$here/nccl_self.cu" -ldl
build cuda_ipc "${arch[@]}" "$here/cuda_ipc.cu"
build cublas_gemm "${arch[@]}" "$here/cublas_gemm.cu" "${libdirs[@]}" -lcublas -lcublasLt
build cudnn_sdpa "${arch[@]}" "$here/cudnn_sdpa.cu" -ldl
build libkernel_times.so -shared -Xcompiler -fPIC -cudart none \
  "$here/kernel_times.cpp" "${libdirs[@]}" -lcupti

# nvcc takes -I/-L/-l/-D as they are; anything else mpicxx asks for goes to
# the host compiler or linker.
mpi_flags() { # compile|link
  local flag
  for flag in $("$MPICXX" --showme:"$1"); do
    case $flag in
    -I* | -L* | -l* | -D*) printf '%s\n' "$flag" ;;
    -Wl,*) printf '%s\n' -Xlinker "${flag#-Wl,}" ;;
    *) printf '%s\n' -Xcompiler "$flag" ;;
    esac
  done
}
if command -v "$MPICXX" > /dev/null; then
  mapfile -t mpi_compile < <(mpi_flags compile)
  mapfile -t mpi_link < <(mpi_flags link)
  build mpi_share_gpu "${arch[@]}" "${mpi_compile[@]}" \
    "$here/mpi_share_gpu.cu" "${mpi_link[@]}"
else
  echo "== mpi_share_gpu: skipped, no $MPICXX here (MPI is not installed)"
fi

cp "$here/classify_kernels.py" "$out/"
[ $status = 0 ] && echo "built into $out"
exit $status
