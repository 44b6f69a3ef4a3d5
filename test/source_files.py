"""The walk and the report the source checks share (check_layering.py,
check_enum_compares.py): the sources under some folders of the tree, and a
check's problems printed with its count of files."""
import pathlib


def sources(root: pathlib.Path, folders, suffixes):
    """(folder, path relative to root, [(line number, line)]) of every file
    under each of `folders` whose suffix is in `suffixes`, in order."""
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in suffixes:
                lines = list(enumerate(path.read_text().splitlines(), 1))
                yield folder, path.relative_to(root), lines


def report(check: str, what: str, problems, checked: int) -> int:
    """Prints `problems` and `check: N files, M what`; 1 if there is any
    problem or the walk found too few files to mean anything, else 0."""
    for p in problems:
        print(p)
    print(f"{check}: {checked} files, {len(problems)} {what}")
    return 1 if problems or checked < 50 else 0
