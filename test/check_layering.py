#!/usr/bin/env python3
"""Checks the include graph against the library graph (docs/layout.md).

Every folder may include only the folders listed for it below (and itself);
inside runtime/, a sub-folder includes only the sub-folders below it
(RUNTIME_ALLOWED); the runtime and the core include no LLVM or MLIR header.
Prints each violation as file:line and exits 1 if there is any.
"""
import pathlib
import re
import sys

from source_files import report, sources

# folder -> folders it may include (besides itself). Lower layers first.
ALLOWED = {
    "core": [],
    "runtime": ["core"],
    "frontend": ["core"],
    "dialects": ["core"],
    "conversion": ["core", "frontend", "dialects"],
    "passes": ["core", "frontend", "dialects"],
    "targets": ["core", "frontend", "dialects", "passes", "runtime"],
    "tools": ["core", "frontend", "dialects", "conversion", "passes",
              "targets", "runtime"],
}
# runtime/ sub-folder -> runtime/ sub-folders it may include (besides
# itself), lowest first: formats < kernels < comm, data < exec, and
# tensorboard (the event files) beside kernels.
RUNTIME_ALLOWED = {
    "formats": [],
    "kernels": ["formats"],
    "tensorboard": ["formats"],
    "comm": ["formats", "kernels"],
    "data": ["formats", "kernels"],
    "exec": ["formats", "kernels", "comm", "data", "tensorboard"],
}
NO_LLVM = {"core", "runtime"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SYSTEM = re.compile(r'^\s*#\s*include\s+<((llvm|mlir)/[^>]+)>|'
                    r'^\s*#\s*include\s+"((llvm|mlir)/[^"]+)"')


def runtime_problem(rel: pathlib.Path, number: int, included: str):
    """The violation of including `included` from runtime file `rel`, or
    None: a sub-folder of runtime/ includes only those below it."""
    parts = included.split("/")
    if len(rel.parts) < 3 or len(parts) < 3 or parts[0] != "runtime":
        return None
    sub, target = rel.parts[1], parts[1]
    if sub not in RUNTIME_ALLOWED or target == sub:
        return None
    if target in RUNTIME_ALLOWED[sub]:
        return None
    return (f"{rel}:{number}: runtime/{sub}/ includes {included} "
            f"(runtime/{target}/ is not below runtime/{sub}/)")


def main(root: pathlib.Path) -> int:
    problems = []
    checked = 0
    for folder, rel, lines in sources(root, ALLOWED,
                                      {".h", ".cpp", ".td", ".cu", ".cuh",
                                       ".inc"}):
        allowed = ALLOWED[folder]
        checked += 1
        for number, line in lines:
            if folder in NO_LLVM and SYSTEM.match(line):
                problems.append(f"{rel}:{number}: {folder}/ must not "
                                f"include LLVM or MLIR: {line.strip()}")
            m = INCLUDE.match(line)
            if not m:
                continue
            if folder == "runtime":
                problem = runtime_problem(rel, number, m.group(1))
                if problem:
                    problems.append(problem)
            top = m.group(1).split("/")[0]
            if top not in ALLOWED or top == folder:
                continue
            if top not in allowed:
                problems.append(f"{rel}:{number}: {folder}/ includes "
                                f"{m.group(1)} ({top}/ is not below "
                                f"{folder}/)")
    return report("layering", "violations", problems, checked)


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
