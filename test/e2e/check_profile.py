"""Reads hypipe-run --profile's table from stdin and checks it.

usage: check_profile.py CLASS [CLASS...]

Every rank column's classes must add up to its total line (within the
rounding of the printed figures) and to about 100%; every CLASS named must
have spent time on every rank. Prints 'profile adds up' and the classes."""
import re
import sys

want = sys.argv[1:]
lines = sys.stdin.read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith("profile "))
ranks = len(re.findall(r"rank \d+", lines[start]))
assert ranks >= 1, lines[start]
rows = {}
for line in lines[start + 1:]:
    cells = re.findall(r"([0-9.]+)s +([0-9.]+)%", line)
    if len(cells) != ranks:
        break
    name = line[:16].strip()
    rows[name] = [(float(s), float(p)) for s, p in cells]
total_key = next(k for k in rows if k.endswith("steps"))
total = rows.pop(total_key)
for r in range(ranks):
    seconds = sum(v[r][0] for v in rows.values())
    percent = sum(v[r][1] for v in rows.values())
    assert abs(seconds - total[r][0]) <= 0.0001 * len(rows) + 1e-9, (r, seconds, total[r])
    assert abs(percent - 100.0) <= 0.1 * len(rows), (r, percent)
for name in want:
    assert name in rows, f"no '{name}' row in {sorted(rows)}"
    for r in range(ranks):
        assert rows[name][r][0] > 0 or rows[name][r][1] > 0, f"rank {r} spent no time in {name}"
print("profile adds up:", ", ".join(sorted(rows)))
