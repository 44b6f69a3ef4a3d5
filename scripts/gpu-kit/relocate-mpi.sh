#!/usr/bin/env bash
# Copies this machine's Open MPI (Debian's 4.1: mpirun, its libraries, the
# MCA components that load without InfiniBand, UCX or libfabric, the help
# texts, PMIx) into DIR so that it runs where no MPI is installed: DIR/env.sh
# points OPAL_PREFIX and PMIx at DIR and puts DIR's libraries first on the
# library path. Ranks launched by DIR's mpirun find libmpi there too.
# Usage: scripts/gpu-kit/relocate-mpi.sh DIR
set -euo pipefail
out=${1:?usage: relocate-mpi.sh DIR}
mpirun=$(readlink -f "$(command -v mpirun)")
prefix=$(ompi_info --path prefix --parsable | sed -n 's/^path:prefix://p')
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
pkgdatadir=$(ompi_info --path pkgdatadir --parsable | sed -n 's/^path:pkgdatadir://p')
pmix=$(ompi_info --all --parsable 2> /dev/null | sed -n "s/.*--with-pmix=\([^' ]*\).*/\1/p" | head -1)
[[ -d $pkglibdir && -n $prefix ]] || {
  echo "error: no Open MPI found (ompi_info); install openmpi-bin" >&2
  exit 1
}
# The layout under DIR mirrors the installed one below its prefix: Open MPI
# derives every directory from OPAL_PREFIX that way.
rel() { echo "${1#"$prefix"/}"; }
mkdir -p "$out/bin" "$out/lib" "$out/$(rel "$pkglibdir")" "$out/$(rel "$pkgdatadir")"
cp -L "$mpirun" "$out/bin/orterun"
ln -sf orterun "$out/bin/mpirun"
cp -L "$(dirname "$mpirun")/orted" "$out/bin/orted"

# A component is kept when every library it needs is on a bare node or
# carried here; network stacks a single node never uses are left behind.
system_lib() {
  case "$(basename "$1")" in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | \
      libstdc++.so* | libgcc_s.so* | libz.so* | libcuda.so*) return 0 ;;
  esac
  return 1
}
carry_deps() { # copy every non-system library $1 needs into $out/lib
  ldd "$1" 2> /dev/null | awk '/=> \// {print $3}' | while read -r lib; do
    system_lib "$lib" || [[ -e $out/lib/$(basename "$lib") ]] || cp -L "$lib" "$out/lib/"
  done
}
loads_here() { ! ldd "$1" 2> /dev/null | grep -q "not found"; }
for f in "$out/bin/orterun" "$out/bin/orted"; do carry_deps "$f"; done
kept=0
for comp in "$pkglibdir"/mca_*.so; do
  name=$(basename "$comp")
  case "$name" in
    *ucx* | *ofi* | *openib* | *verbs* | *psm* | *usnic* | *portals* | *java* | *cuda* | *pmix_flux* | *ras_gridengine* | *sshmem_ucx* | *spml_ucx*) continue ;;
  esac
  loads_here "$comp" || continue
  cp -L "$comp" "$out/$(rel "$pkglibdir")/"
  carry_deps "$comp"
  kept=$((kept + 1))
done
cp -L "$pkgdatadir"/help-*.txt "$out/$(rel "$pkgdatadir")/" 2> /dev/null || true
cp -L "$pkgdatadir"/*-wrapper-data.txt "$out/$(rel "$pkgdatadir")/" 2> /dev/null || true
# mpi.h and the wrapper's flags, so a probe can be rebuilt on the node.
incdir=$(ompi_info --path incdir --parsable | sed -n 's/^path:incdir://p')
mkdir -p "$out/include"
cp -L "$incdir"/mpi.h "$incdir"/mpi_portable_platform.h "$out/include/" 2> /dev/null || true
# libmpi for the ranks (hypipe-run and the probes link it).
for lib in libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$out/lib/"
done
carry_deps "$out/lib/libmpi.so.40"

if [[ -n $pmix && -d $pmix/lib ]]; then
  mkdir -p "$out/pmix/lib/pmix" "$out/pmix/share/pmix"
  cp -L "$pmix"/lib/libpmix.so.2 "$out/lib/"
  cp -L "$pmix"/lib/pmix/*.so "$out/pmix/lib/pmix/" 2> /dev/null || true
  cp -L "$pmix"/share/pmix/*.txt "$out/pmix/share/pmix/" 2> /dev/null || true
  carry_deps "$out/lib/libpmix.so.2"
fi

cat > "$out/env.sh" << 'ENV'
# Source this to use the relocated Open MPI: mpirun, and ranks that find
# libmpi here. Components that need a network stack this node lacks were left
# behind; shared memory (vader) and TCP carry every message on one node.
mpi_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX="$mpi_here"
export PMIX_INSTALL_PREFIX="$mpi_here/pmix"
export PMIX_MCA_mca_base_component_path="$mpi_here/pmix/lib/pmix"
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_pml=ob1
export OMPI_MCA_plm_rsh_agent=false
export PATH="$mpi_here/bin:$PATH"
export LD_LIBRARY_PATH="$mpi_here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ENV
echo "mpi: $(du -sh "$out" | cut -f1), $kept MCA components, in $out"
