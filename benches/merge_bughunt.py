"""Merge bug-hunt results files measured in separate processes (one engine each, the same
budget, profile and seeds) into one, for one table: the way to measure two engines on two cores
at once.

    python benches/merge_bughunt.py OUT.json A.json B.json [...]

The plans must agree on budget, profile and bugs; seeds, engines and generations are united,
campaigns and sessions concatenated (a campaign measured twice: the later file's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from epochlab.fuzz import bughunt
from epochlab.generations import Generation


def merge(paths: list[Path]) -> dict:
    results = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    first = results[0]
    for other, path in zip(results[1:], paths[1:]):
        for key in ("budget", "profile", "bugs"):
            if other["plan"][key] != first["plan"][key]:
                raise SystemExit(f"{path}: plan {key} {other['plan'][key]!r} differs from {first['plan'][key]!r}")
    plan = dict(first["plan"])
    plan["seeds"] = sorted({s for r in results for s in r["plan"]["seeds"]})
    plan["engines"] = sorted({e for r in results for e in r["plan"]["engines"]}, key=bughunt.ENGINES.index)
    plan["generations"] = sorted({g for r in results for g in r["plan"]["generations"]},
                                 key=lambda g: int(Generation.parse(g)))
    merged = {**first, "plan": plan, "sessions": [s for r in results for s in r["sessions"]], "campaigns": []}
    for r in results:
        for c in r["campaigns"]:
            bughunt.put_campaign(merged, bughunt.CampaignRecord.from_dict(c))
    return merged


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.write_text(json.dumps(merge([Path(p) for p in argv[1:]]), indent=1) + "\n", encoding="utf-8")
    print(f"{out}: merged {len(argv) - 1} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
