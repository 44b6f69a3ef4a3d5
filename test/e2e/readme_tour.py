#!/usr/bin/python3
"""Runs every command of the README's tour ("A five-minute tour" and "Train
it"), in order, as a reader would, and checks the output the README shows.

A `console` block is `$ command` lines, each followed by the output it
shows; an `sh` block is commands alone (`\\` continues a line, `#` starts a
comment). Each command runs with bash in WORK, where build/bin, examples and
test lead to the build and the sources, and /tmp/ is WORK/tmp/. A command
must exit 0 unless the output shown holds an error (pipelines fail when any
part does). Each shown line must match a whole output line, in order: "..."
stands for anything and runs of spaces for any spaces; numbers must be the
ones shown, except in the output of a training run (`train`, `hypipe-run`),
whose losses and timings are the machine's.

usage: readme_tour.py README BIN_DIR SOURCE_DIR WORK"""
import os
import re
import subprocess
import sys

SECTIONS = ("## A five-minute tour", "## Train it")


def tour_blocks(readme):
    """(language, lines) of every fenced block in the tour's sections."""
    blocks, inside, lang, lines, section = [], False, None, [], None
    for line in readme.splitlines():
        if line.startswith("## "):
            section = line if line.startswith(SECTIONS) else None
        if line.startswith("```"):
            if inside:
                if section and lang in ("console", "sh"):
                    blocks.append((lang, lines))
                inside, lines = False, []
            else:
                inside, lang = True, line[3:].strip()
            continue
        if inside:
            lines.append(line)
    return blocks


def commands(lang, lines):
    """(command, shown output lines) in the order the block gives them."""
    out = []
    if lang == "console":
        for line in lines:
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
        return out
    pending = ""
    for line in lines:
        line = re.sub(r"\s+#.*$", "", line)
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        if (pending + line).strip():
            out.append(((pending + line).strip(), []))
        pending = ""
    return out


def shape(shown, loose_numbers):
    """A regex for a shown line: spaces loose, ... anything, numbers exact
    unless `loose_numbers`."""
    parts = []
    for piece in re.split(r"(\.\.\.|\d[\d,.]*|\s+)", shown.strip()):
        if piece == "...":
            parts.append(".*")
        elif loose_numbers and re.fullmatch(r"\d[\d,.]*", piece):
            parts.append(r"[\d,.]+")
        elif piece.isspace():
            parts.append(r"\s+")
        elif piece:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def check(command, shown, result, work, bin_dir):
    output = (result.stdout + result.stderr).replace(work + "/tmp/", "/tmp/")
    output = output.replace(os.path.realpath(bin_dir), "build/bin")
    lines = output.splitlines()
    problems = []
    expects_error = any("error:" in s for s in shown)
    if (result.returncode != 0) != expects_error:
        problems.append("exit status %d" % result.returncode)
    at = 0
    loose = re.search(r"\b(train|hypipe-run)\b", command) is not None
    for s in shown:
        if s.strip() in ("", "..."):
            continue
        pattern = shape(s, loose)
        found = next((i for i in range(at, len(lines))
                      if pattern.fullmatch(lines[i].strip())), None)
        if found is None:
            problems.append("no line shaped like: " + s)
            break
        at = found + 1
    if problems:
        print("FAIL: $ %s\n  %s\n--- output ---\n%s" % (command, "\n  ".join(problems), output))
    return not problems


def main():
    readme, bin_dir, source, work = sys.argv[1:5]
    os.makedirs(work + "/build", exist_ok=True)
    os.makedirs(work + "/tmp", exist_ok=True)
    for link, target in (("build/bin", bin_dir), ("examples", source + "/examples"),
                         ("test", source + "/test")):
        if not os.path.islink(work + "/" + link):
            os.symlink(os.path.realpath(target), work + "/" + link)
    ran = failed = 0
    for lang, lines in tour_blocks(open(readme).read()):
        for command, shown in commands(lang, lines):
            result = subprocess.run(["bash", "-o", "pipefail", "-c",
                                     command.replace("/tmp/", work + "/tmp/")],
                                    cwd=work, capture_output=True, text=True, timeout=300)
            ran += 1
            failed += not check(command, shown, result, work, bin_dir)
    print("README tour: %d commands, %d failed" % (ran, failed))
    sys.exit(1 if failed or ran < 10 else 0)


if __name__ == "__main__":
    main()
