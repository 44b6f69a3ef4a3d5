#!/usr/bin/env python3
"""Checks that no source compares a string against an enum's spelling.

Precision (fp32, bf16), target (cpu, cuda), schedule (gpipe, 1f1b, ...),
transport (mpi, mpi-staged, cuda-ipc, nccl) and data format (text, indexed,
jsonl, mock) are parsed once, where they are read (the spec loader, the
manifest reader, a command line, the IR's parser), and travel as enums:
core/model/Precision.h, rt::Target (core/model/LayerShapes.h),
schedule::ScheduleKind (core/schedule/Vocabulary.h), schedule::CommKind
(core/schedule/CommKind.h), DataFormat (core/data/DataFormat.h) and the
dialects' EnumAttrs. A `== "bf16"` anywhere else means a name escaped its
parser. Prints each such compare as file:line and exits 1 if there is any.

`auto` is left out: it is also the spelling of unrelated options
(`--resume auto`, `--progress auto`).
"""
import pathlib
import re
import sys

from source_files import report, sources

FOLDERS = ["frontend", "core", "dialects", "conversion", "passes", "targets",
           "tools", "runtime/formats", "runtime/data", "runtime/comm"]
NAMES = ["fp32", "bf16", "cpu", "cuda", "gpipe", "1f1b", "interleaved-1f1b",
         "zb-h1", "zbv", "dualpipev", "mpi", "mpi-staged", "cuda-ipc", "nccl",
         "text", "indexed", "jsonl", "mock"]
# Compares that remain for a reason, each with it. Keep this list short.
WAIVED = set()
_NAME = "|".join(re.escape(n) for n in NAMES)
COMPARE = re.compile(rf'[!=]=\s*"({_NAME})"|"({_NAME})"\s*[!=]=|'
                     rf'\.(?:equals|compare)\(\s*"({_NAME})"\s*\)')


def main(root: pathlib.Path) -> int:
    problems = []
    checked = 0
    for _, rel, lines in sources(root, FOLDERS, {".h", ".cpp", ".cu", ".cuh"}):
        if rel.as_posix() in WAIVED:
            continue
        checked += 1
        for number, line in lines:
            m = COMPARE.search(line)
            if m:
                name = next(g for g in m.groups() if g)
                problems.append(f"{rel}:{number}: compares a string with "
                                f"'{name}': parse it once where it is "
                                f"read and compare the enum")
    return report("enum compares", "compares", problems, checked)


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
