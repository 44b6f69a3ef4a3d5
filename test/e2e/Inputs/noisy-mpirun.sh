#!/bin/sh
# Stands in for mpirun (HYPIPE_MPIRUN) on the watchdog path: a rank's own
# error, then what Open MPI 4.1 prints after it when the rank aborts.
echo "error: step 3: rank 1 waited 4 s at 1RECV_F0 (the rank it waits for is stopped)" >&2
echo "[node:01234] [[1234,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file util/show_help.c at line 501" >&2
echo "--------------------------------------------------------------------------" >&2
echo "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD" >&2
echo "with errorcode 1." >&2
echo "--------------------------------------------------------------------------" >&2
echo "[node:01234] 1 more process has sent help message help-mpi-api.txt / mpi-abort" >&2
exit 1
