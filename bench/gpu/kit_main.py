"""How the GPU kit's Python peers end (bench/gpu, copied into the kit's py/):
main()'s exit code, or 1 with the trace and a one-line reason for any failure,
so that the kit's table says what failed."""
import sys
import traceback


def run(main, name):
    try:
        sys.exit(main())
    except Exception as e:  # noqa: BLE001 - any failure is exit 1, with its trace
        traceback.print_exc()
        print("%s: failed: %s" % (name, e))
        sys.exit(1)
