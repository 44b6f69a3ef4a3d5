#!/bin/bash
# Runs a command with this machine's Open MPI and PMIx out of sight (inside
# `unshare -m`: the mounts vanish with the namespace), as on a GPU node that
# has no MPI: what the command finds must come from elsewhere.
set -euo pipefail
lib=/usr/lib/x86_64-linux-gnu
for d in $lib/openmpi $lib/pmix2 /usr/share/openmpi /etc/openmpi; do
  [[ -d $d ]] && mount -t tmpfs none "$d"
done
for f in $lib/libmpi.so.* $lib/libopen-rte.so.* $lib/libopen-pal.so.* $lib/libpmix.so.* \
  /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info; do
  [[ -f $f && ! -L $f ]] && mount --bind /dev/null "$f"
done
exec "$@"
