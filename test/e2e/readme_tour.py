#!/usr/bin/python3
"""Runs every command of the README's tour ("A five-minute tour", "Train
it" and "From text to a trained model"), in order, as a reader would, and checks the output the README shows.

A `console` block is `$ command` lines, each followed by the output it
shows; an `sh` block is commands alone (`\\` continues a line, `#` starts a
comment). Each command runs with bash in WORK, where build/bin, examples and
test lead to the build and the sources, and /tmp/ is WORK/tmp/. A command
must exit 0 unless the output shown holds an error (pipelines fail when any
part does). Each shown line must match a whole output line, in order: "..."
stands for anything and runs of spaces for any spaces; numbers must be the
ones shown, except in the output of a training run (`train`, `hypipe-run`):
there times and rates (a number before s, ms, tokens/s) are the machine's,
and losses and norms may differ by 2 in their last digit or 2% (OpenBLAS's
kernels differ by CPU, and 200 steps grow the difference); counts (steps,
tokens, parameters) are exact.

usage: readme_tour.py README BIN_DIR SOURCE_DIR WORK [--section HEADING ...]
       readme_tour.py --self-test"""
import os
import re
import subprocess
import sys

SECTIONS = ("## A five-minute tour", "## Train it", "## From text to a trained model")


def tour_blocks(readme, sections=SECTIONS):
    """(language, lines) of every fenced block in the tour's sections."""
    blocks, inside, lang, lines, section = [], False, None, [], None
    for line in readme.splitlines():
        if line.startswith("## "):
            section = line if line.startswith(sections) else None
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


# What follows a number that is a time or a rate: the machine's, any value.
TIMED = re.compile(r"^(s|ms|us)\b|^(tokens|tok|steps)/s\b")


def shape(shown, training):
    """A regex for a shown line (spaces loose, ... anything) and, per group,
    the number shown with the distance allowed from it. Numbers must be the
    ones shown, but in the output of a training run (`training`): there
    times and rates are the machine's, and a number with decimals (a loss, a
    norm) may differ by 2 in its last digit (OpenBLAS's kernels differ by
    CPU); counts (tokens, parameters, steps) are exact everywhere."""
    parts, numbers = [], []
    pieces = re.split(r"(\.\.\.|\d+(?:[,.]\d+)*|\s+)", shown.strip())
    for i, piece in enumerate(pieces):
        after = "".join(pieces[i + 1:]).lstrip()
        if piece == "...":
            parts.append(".*")
        elif training and re.fullmatch(r"\d+(?:[,.]\d+)*", piece):
            if TIMED.match(after):
                parts.append(r"\d+(?:[,.]\d+)*")
            else:
                parts.append(r"(\d+(?:[,.]\d+)*)")
                number = piece
                decimals = len(number.split(".")[1]) if "." in number else 0
                # Decimals: 2 in the last digit, or 2% (200 steps on
                # OpenBLAS's AVX2 and AVX-512 kernels end with losses 0.15%
                # and gradient norms 1.2% apart).
                numbers.append((number, max(2 * 10.0 ** -decimals,
                                             0.02 * float(number.replace(",", "")))
                                if decimals else 0))
        elif piece.isspace():
            parts.append(r"\s+")
        elif piece:
            parts.append(re.escape(piece))
    return re.compile("".join(parts)), numbers


def matches(pattern, numbers, line):
    m = pattern.fullmatch(line)
    if not m:
        return False
    for got, (shown, allowed) in zip(m.groups(), numbers):
        try:
            value = float(got.replace(",", ""))
        except ValueError:
            return False
        if abs(value - float(shown.replace(",", ""))) > allowed * (1 + 1e-9):
            return False
    return True


def check(command, shown, result, work, bin_dir):
    output = (result.stdout + result.stderr).replace(work + "/tmp/", "/tmp/")
    output = output.replace(os.path.realpath(bin_dir), "build/bin")
    lines = output.splitlines()
    problems = []
    expects_error = any("error:" in s for s in shown)
    if (result.returncode != 0) != expects_error:
        problems.append("exit status %d" % result.returncode)
    at = 0
    training = re.search(r"\b(train|hypipe-run)\b", command) is not None
    for s in shown:
        if s.strip() in ("", "..."):
            continue
        pattern, numbers = shape(s, training)
        found = next((i for i in range(at, len(lines))
                      if matches(pattern, numbers, lines[i].strip())), None)
        if found is None:
            problems.append("no line like: " + s)
            break
        at = found + 1
    if problems:
        print("FAIL: $ %s\n  %s\n--- output ---\n%s" % (command, "\n  ".join(problems), output))
    return not problems


def self_test():
    """--self-test: the number rules on literal lines, each way."""
    shown = ("done: 10 steps in 0.40s, loss 5.5560 -> 4.2428, 20,802 real tokens "
             "(27.9% of the 74,528 that padding")
    cases = [("done: 10 steps in 9.99s, loss 5.5561 -> 4.2500, 20,802 real tokens "
              "(27.9% of the 74,528 that padding", True),   # time, losses within 2%
             ("done: 10 steps in 0.40s, loss 5.5560 -> 4.2428, 21,269 real tokens "
              "(27.9% of the 74,528 that padding", False),  # a stale count
             ("done: 10 steps in 0.40s, loss 5.5560 -> 4.5000, 20,802 real tokens "
              "(27.9% of the 74,528 that padding", False),  # a loss 6% off
             ("done: 11 steps in 0.40s, loss 5.5560 -> 4.2428, 20,802 real tokens "
              "(27.9% of the 74,528 that padding", False)]  # another step count
    pattern, numbers = shape(shown, True)
    bad = [line for line, ok in cases if matches(pattern, numbers, line) != ok]
    exact, _ = shape("makespan 27 (F=1 B=2)", False)
    if exact.fullmatch("makespan 28 (F=1 B=2)"):
        bad.append("a number outside a training run's output matched another")
    for line in bad:
        print("FAIL: self-test: " + line)
    print("self-test: %d of %d cases right" % (len(cases) + 1 - len(bad), len(cases) + 1))
    return 1 if bad else 0


def main():
    if sys.argv[1:2] == ["--self-test"]:
        sys.exit(self_test())
    readme, bin_dir, source, work = sys.argv[1:5]
    # --section HEADING (repeatable): another document's sections instead of
    # the README's tour (docs/ write `hypipe`: the build's bin is on PATH).
    args = sys.argv[5:]
    sections = tuple(args[i + 1] for i in range(len(args) - 1) if args[i] == "--section")
    env = dict(os.environ, PATH=os.path.realpath(bin_dir) + os.pathsep + os.environ["PATH"])
    os.makedirs(work + "/build", exist_ok=True)
    os.makedirs(work + "/tmp", exist_ok=True)
    for link, target in (("build/bin", bin_dir), ("examples", source + "/examples"),
                         ("test", source + "/test")):
        if not os.path.islink(work + "/" + link):
            os.symlink(os.path.realpath(target), work + "/" + link)
    ran = failed = 0
    for lang, lines in tour_blocks(open(readme).read(), sections or SECTIONS):
        for command, shown in commands(lang, lines):
            result = subprocess.run(["bash", "-o", "pipefail", "-c",
                                     command.replace("/tmp/", work + "/tmp/")],
                                    cwd=work, capture_output=True, text=True, timeout=300,
                                    env=env)
            ran += 1
            failed += not check(command, shown, result, work, bin_dir)
    print("README tour: %d commands, %d failed" % (ran, failed))
    sys.exit(1 if failed or ran < (10 if not sections else 1) else 0)


if __name__ == "__main__":
    main()
