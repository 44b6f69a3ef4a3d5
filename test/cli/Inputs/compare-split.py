"""Compares `hypipe split --json` with megatron-core's own split of a data
set: parse_and_normalize_split, convert_split_vector_to_split_matrix, and
the bookends BlendedMegatronDatasetBuilder rounds (int(round(bookend *
num_elements))) for every part of many splits and document counts. Prints
one line, or each difference and exits 1.

usage: compare-split.py HYPIPE [--plant] (--plant moves one of hypipe's
boundaries by one, to show that a difference is found)"""
import json
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")
from megatron.core.datasets.blended_megatron_dataset_config import (  # noqa: E402
    convert_split_vector_to_split_matrix, parse_and_normalize_split)

hypipe, plant = sys.argv[1], "--plant" in sys.argv[2:]
# Megatron's defaults and common choices, padded ones, fractions, parts of
# weight 0, and weights whose bookends land on .5 (rounded half to even).
SPLITS = ["969,30,1", "949,50,1", "99,1,0", "98,2", "1,1", "1,2", "1,1,1",
          "7,2,1", "0.5,0.3,0.2", "100", "0,1", "3,0,1", "1,1,2", "90,5,5"]
COUNTS = [0, 1, 2, 3, 4, 5, 6, 7, 10, 33, 99, 100, 101, 999, 1000, 12345]
PARTS = ["train", "validation", "test"]


def megatron_ranges(split, n):
    matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(split))
    # A part of weight 0 has no bookends (None): no dataset, no documents.
    return [[0, 0] if b is None else
            [int(round(b[0] * float(n))), int(round(b[1] * float(n)))]
            for b in matrix]


differences = []
cases = 0
for split in SPLITS:
    out = subprocess.run([hypipe, "split", split, "--json", "--documents"] +
                         [str(n) for n in COUNTS],
                         check=True, capture_output=True, text=True).stdout
    got = json.loads(out)
    if plant and split == "1,1":
        got["data_sets"][5]["train"][1] += 1
    for data_set, n in zip(got["data_sets"], COUNTS):
        cases += 1
        mine = [data_set[p] for p in PARTS]
        theirs = megatron_ranges(split, n)
        if data_set["documents"] != n or mine != theirs:
            differences.append("DIFFERENT: split %s, %d documents: hypipe %s, "
                               "megatron-core %s" % (split, n, mine, theirs))
for d in differences:
    print(d)
print("%d splits x documents, %d differences from megatron-core"
      % (cases, len(differences)))
sys.exit(1 if differences else 0)
