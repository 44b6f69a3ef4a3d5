"""Compares `hypipe grid --json` with megatron-core's own RankGenerator
(megatron.core.parallel_state) for many shapes: every token hypipe prints,
each get_ranks(token) group for group. Prints one line, or each difference
and exits 1.

usage: compare-rank-grid.py HYPIPE [--plant] (--plant changes one group of
hypipe's, to show that a difference is found)"""
import itertools
import json
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")
from megatron.core.parallel_state import RankGenerator  # noqa: E402

hypipe, plant = sys.argv[1], "--plant" in sys.argv[2:]
ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")
# The tokens Megatron's parallel_state asks for must be among hypipe's.
NEEDED = {"tp", "cp", "ep", "dp", "pp", "tp-pp", "tp-dp", "dp-pp", "tp-ep",
          "tp-cp", "cp-dp", "dp-cp", "tp-cp-dp", "tp-dp-cp", "tp-ep-pp"}

# Every shape of sizes 1..4 with a world of at most 64 ranks and not both
# ep and cp above 1 (RankGenerator refuses that), in both orders; 40 of them,
# spread over the list, and a few orders that leave out dimensions of size 1.
shapes = [(tp, cp, ep, dp, pp, order)
          for tp, cp, ep, dp, pp in itertools.product(range(1, 5), repeat=5)
          if tp * cp * ep * dp * pp <= 64 and (ep == 1 or cp == 1)
          for order in ORDERS]
# An odd step alternates the orders.
shapes = shapes[::17][:40]
shapes += [(2, 1, 1, 2, 2, "tp-dp-pp"), (4, 1, 1, 1, 2, "pp-tp"),
           (2, 1, 1, 3, 1, "dp-tp"), (1, 1, 1, 1, 1, "tp")]

differences = []
for tp, cp, ep, dp, pp, order in shapes:
    out = subprocess.run([hypipe, "grid", "--json", "--tp", str(tp), "--cp", str(cp),
                          "--ep", str(ep), "--dp", str(dp), "--pp", str(pp),
                          "--order", order],
                         check=True, capture_output=True, text=True).stdout
    ours = json.loads(out)
    theirs = RankGenerator(tp=tp, ep=ep, dp=dp, pp=pp, cp=cp, order=order)
    missing = NEEDED - set(ours["groups"])
    if missing:
        differences.append(f"hypipe grid prints no groups of {sorted(missing)}")
    if ours["order"] != theirs.order:
        differences.append(f"{order}: order {ours['order']} != {theirs.order}")
    if ours["world"] != theirs.world_size:
        differences.append(f"{order}: world {ours['world']} != {theirs.world_size}")
    if plant and (tp, cp, ep, dp, pp, order) == shapes[-2]:
        ours["groups"]["tp"][0].reverse()
    for token, groups in ours["groups"].items():
        expected = theirs.get_ranks(token)
        if groups != expected:
            differences.append(f"tp {tp} cp {cp} ep {ep} dp {dp} pp {pp} "
                               f"order {order} token {token}: hypipe {groups}, "
                               f"megatron-core {expected}")
for d in differences:
    print("DIFFERENT:", d)
print(f"{len(shapes)} shapes, {len(differences)} differences from megatron-core")
sys.exit(1 if differences else 0)
