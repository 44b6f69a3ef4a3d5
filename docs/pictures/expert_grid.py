#!/usr/bin/python3
"""Draws docs/images/expert-grid.svg: Megatron-LM's expert grid beside the
dense one (hypipe grid --etp), and how the two token dispatchers move a
MoE layer's tokens. Plain Python, no plotting library; the ranks and groups
come from `hypipe grid --json` so the picture cannot drift from the code.

usage: expert_grid.py HYPIPE OUT.svg   (then rsvg-convert OUT.svg -o OUT.png
to look at it)"""
import json
import subprocess
import sys

hypipe, out = sys.argv[1:3]
grid = json.loads(subprocess.run(
    [hypipe, "grid", "--json", "--tp", "2", "--dp", "4", "--pp", "2", "--ep", "4",
     "--etp", "1", "--token", "tp", "--token", "dp", "--token", "ep"],
    check=True, capture_output=True, text=True).stdout)
tp_groups = grid["groups"]["tp"]
expert = grid["expert"]["groups"]
ep_groups, edp_groups = expert["ep"], expert["dp"]
EXPERTS, EP = 8, 4

W, H = 1180, 740
parts = []
COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"]


def text(x, y, s, size=14, anchor="start", weight="normal", color="#222"):
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    parts.append(f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" '
                 f'font-weight="{weight}" fill="{color}">{s}</text>')


def rect(x, y, w, h, fill, stroke="#333", rx=6, dash=False, width=1.2):
    d = ' stroke-dasharray="5,4"' if dash else ""
    parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" fill="{fill}" '
                 f'stroke="{stroke}" stroke-width="{width}"{d}/>')


def arrow(x1, y1, x2, y2, color="#333"):
    parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" '
                 f'stroke-width="1.6" marker-end="url(#head)"/>')


def flow(y, steps, fill, stroke, dashed=()):
    """A row of boxes joined by arrows, one a step (title, two-line body);
    those titled in `dashed` drawn dashed."""
    for i, (title, body) in enumerate(steps):
        x0 = 20 + i * (sw + sx)
        rect(x0, y + 16, sw, sh, fill, stroke=stroke, dash=title in dashed)
        text(x0 + sw / 2, y + 36, title, 14, "middle", "bold")
        for j, line in enumerate(body.split("\n")):
            text(x0 + sw / 2, y + 54 + 15 * j, line, 12, "middle")
        if i:
            arrow(x0 - sx + 2, y + 16 + sh / 2, x0 - 4, y + 16 + sh / 2)


sw, sh, sx = 160, 66, 30  # a flow's boxes: width, height, gap

# --- Panel 1: the two grids over the same 16 ranks.
text(20, 32, "1. tp 2 × dp 4 × pp 2 = 16 ranks with ep 4, etp 1 "
     "(hypipe grid --tp 2 --dp 4 --pp 2 --ep 4 --etp 1)", 17, weight="bold")
text(20, 54, "Dense layers: tp pairs (brackets) and dp over them. MoE layers: expert "
     "groups of 4 ranks (colour), each rank 8/4 = 2 experts; edp pairs hold the same experts.", 13)
text(20, 72, "Megatron-LM's grid; hypipe grid prints it and hypipe-run runs it: each ep group "
     "is 2 replicas' tp groups, the MoE layer runs over it on their tokens.", 13, color="#a33")
bw, bh, gap = 116, 62, 16
for stage in range(2):
    y0 = 100 + stage * 130
    text(20, y0 + 38, f"stage {stage}", 14, weight="bold")
    for i in range(8):
        rank = stage * 8 + i
        x0 = 100 + i * (bw + gap)
        ep_group = next(g for g in ep_groups if rank in g)
        ep_rank = ep_group.index(rank)
        colour = COLORS[ep_rank]
        rect(x0, y0, bw, bh, colour + "33", stroke=colour, width=2)
        text(x0 + bw / 2, y0 + 22, f"rank {rank}", 14, "middle", "bold")
        first = ep_rank * EXPERTS // EP
        text(x0 + bw / 2, y0 + 42, f"experts {first}, {first + 1}", 13, "middle")
        edp = next(g for g in edp_groups if rank in g)
        text(x0 + bw / 2, y0 + 57, "edp " + "+".join(map(str, edp)), 11, "middle", color="#555")
    for g in tp_groups:
        if g[0] // 8 != stage:
            continue
        xa = 100 + (g[0] % 8) * (bw + gap) + 10
        xb = 100 + (g[-1] % 8) * (bw + gap) + bw - 10
        yb = y0 + bh + 8
        parts.append(f'<path d="M{xa},{yb - 4} L{xa},{yb} L{xb},{yb} L{xb},{yb - 4}" '
                     f'fill="none" stroke="#333" stroke-width="1.4"/>')
        text((xa + xb) / 2, yb + 15, "tp", 12, "middle")
    for j, g in enumerate(g for g in ep_groups if g[0] // 8 == stage):
        xa = 100 + (g[0] % 8) * (bw + gap) - 6
        xb = 100 + (g[-1] % 8) * (bw + gap) + bw + 6
        rect(xa, y0 - 6, xb - xa, bh + 12, "none", stroke="#777", rx=10, dash=True)
        text(xa + 4, y0 - 10, f"ep group {g}", 11, color="#555")

# --- Panel 2: the allgather dispatcher.
y = 380
text(20, y, "2. allgather dispatcher (Megatron-LM's default), tp 2 × ep 2 inside the "
     "tensor-parallel group", 17, weight="bold")
steps = [("tokens", "rank r: its sequence\nshard of T/2 tokens"),
         ("all-gather", "over tp × ep:\nall T tokens on both"),
         ("route", "replicated router:\nsame top-k everywhere"),
         ("experts", "rank r runs its E/2\nexperts on their rows"),
         ("combine", "weighted sum of the\nrows it ran (partial)"),
         ("reduce-scatter", "sums the partials:\nits T/2 outputs")]
flow(y, steps, "#eef3f8", "#4e79a7")
text(20, y + 106, "Backward: the output gradient all-gathered, the routing weights' "
     "gradients all-reduced, the input gradient reduce-scattered; the router's gradient "
     "summed over tp.", 12)

# --- Panel 3: the alltoall dispatcher.
y = 520
text(20, y, "3. alltoall dispatcher (--moe-token-dispatcher-type alltoall; hypipe-run: one "
     "all-to-all over the group each way)", 17, weight="bold")
steps = [("route", "each rank its own\ntokens' top-k"),
         ("permute", "rows sorted by the\nep rank of their expert"),
         ("all-to-all", "over ep, counts first:\neach row to its owner"),
         ("all-gather", "over etp (each\nexpert split in etp)"),
         ("experts", "sorted by local expert,\nfc1, act, fc2"),
         ("undo", "reduce-scatter over etp,\nall-to-all back, unpermute")]
flow(y, steps, "#fdf1e6", "#f28e2b", dashed=("all-gather",))
text(20, y + 106, "allgather moves every token's hidden state to every rank of the group; "
     "alltoall moves each routed row once, to the rank of its expert (top-k rows a token).", 12)
text(20, y + 124, "Rank r of an ep group owns experts [r·E/ep, (r+1)·E/ep); a rank's ep rank "
     "is its rank in the tp-ep group ((dp rank mod m)·tp + tp rank) / etp.", 12)

svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H - 60}" '
       f'viewBox="0 0 {W} {H - 60}" font-family="DejaVu Sans, Arial, sans-serif">'
       '<defs><marker id="head" markerWidth="10" markerHeight="8" refX="9" refY="4" '
       'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker></defs>'
       f'<rect width="{W}" height="{H}" fill="white"/>' + "".join(parts) + "</svg>\n")
open(out, "w").write(svg)
