"""Compares `hypipe grid --json` with megatron-core's own RankGenerator
(megatron.core.parallel_state) for many shapes: every token hypipe prints,
each get_ranks(token) group for group. Then `hypipe grid --etp`'s expert grid
with the expert RankGenerator that parallel_state.initialize_model_parallel
builds (tp=etp, ep, dp=world/(etp*ep*pp), pp, cp=1), and the layouts it
refuses with those it asserts against. Prints two lines, or each difference
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

# Tokens as a user may write them (`hypipe grid --token`): out of the grid's
# order, or naming a dimension twice, which megatron-core's mask takes once.
ODD_TOKENS = ("tp-tp", "dp-tp-dp", "pp-tp", "pp-dp-tp-pp")
for tp, cp, ep, dp, pp, order in ((2, 1, 1, 2, 2, ORDERS[0]),
                                  (2, 1, 2, 1, 2, ORDERS[1])):
    out = subprocess.run([hypipe, "grid", "--json", "--tp", str(tp), "--cp", str(cp),
                          "--ep", str(ep), "--dp", str(dp), "--pp", str(pp),
                          "--order", order]
                         + [a for t in ODD_TOKENS for a in ("--token", t)],
                         check=True, capture_output=True, text=True).stdout
    ours = json.loads(out)["groups"]
    theirs = RankGenerator(tp=tp, ep=ep, dp=dp, pp=pp, cp=cp, order=order)
    for token in ODD_TOKENS:
        if ours.get(token) != theirs.get_ranks(token):
            differences.append(f"order {order} token {token}: hypipe "
                               f"{ours.get(token)}, megatron-core "
                               f"{theirs.get_ranks(token)}")
print(f"{len(shapes)} shapes and {2 * len(ODD_TOKENS)} odd tokens, "
      f"{len(differences)} differences from megatron-core")


def megatron_expert_grid(tp, cp, dp, pp, ep, etp, order):
    """initialize_model_parallel's expert generator, or why it refuses
    (its RuntimeError and its two asserts, run on its own generators)."""
    world = tp * cp * dp * pp
    if world % (etp * ep * pp):
        return None
    edp = world // (etp * ep * pp)
    dense = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
    expert = RankGenerator(tp=etp, ep=ep, dp=edp, pp=pp, cp=1, order=order)
    if not (order.endswith("pp") or pp == 1 or edp == dp):
        return None
    if dense.get_ranks("pp") != expert.get_ranks("pp"):
        return None
    return expert


# Shapes of sizes 1..4 (etp 1, 2 or tp) in both orders with a world of at
# most 64 ranks: 40 that megatron-core builds and 12 it refuses, spread over
# the list.
every = [(tp, cp, dp, pp, ep, etp, order)
         for tp, cp, dp, pp, ep in itertools.product(range(1, 5), repeat=5)
         if tp * cp * dp * pp <= 64
         for etp in sorted({1, 2, tp})
         for order in ORDERS]
built = [s for s in every if megatron_expert_grid(*s) is not None]
expert_shapes = built[::11][:40]
expert_shapes += [s for s in every if megatron_expert_grid(*s) is None][::29][:12]
planted = next(s for s in expert_shapes if s[4] > 1)
refused = 0
expert_differences = []
for tp, cp, dp, pp, ep, etp, order in expert_shapes:
    run = subprocess.run([hypipe, "grid", "--json", "--tp", str(tp), "--cp", str(cp),
                          "--dp", str(dp), "--pp", str(pp), "--ep", str(ep),
                          "--etp", str(etp), "--order", order],
                         capture_output=True, text=True)
    theirs = megatron_expert_grid(tp, cp, dp, pp, ep, etp, order)
    shape = f"tp {tp} cp {cp} dp {dp} pp {pp} ep {ep} etp {etp} order {order}"
    if theirs is None:
        refused += 1
        if run.returncode == 0 or "error:" not in run.stderr:
            expert_differences.append(f"{shape}: megatron-core refuses, hypipe does not")
        continue
    if run.returncode != 0:
        expert_differences.append(f"{shape}: hypipe refuses: {run.stderr.strip()}")
        continue
    ours = json.loads(run.stdout)["expert"]
    if plant and (tp, cp, dp, pp, ep, etp, order) == planted:
        ours["groups"]["ep"][0].reverse()
    for token, groups in ours["groups"].items():
        expected = theirs.get_ranks(token)
        if groups != expected:
            expert_differences.append(f"{shape} expert token {token}: hypipe {groups}, "
                                      f"megatron-core {expected}")
print(f"{len(expert_shapes)} expert grids ({refused} refused), "
      f"{len(expert_differences)} differences from megatron-core")
differences += expert_differences
for d in differences:
    print("DIFFERENT:", d)
sys.exit(1 if differences else 0)
