"""The timeline picture (``timeline.png``), drawn with matplotlib when it is installed.

One panel per step, top to bottom; in each panel one row per replica and one cell per offset.
A cell's colour is the record's leader epoch and its text the value; the high watermark is a
thick black bar, the log end offset a dashed one. Records highlighted in red are *lost* (absent
from the final surviving log), records with an orange border were *truncated* from that
replica by a later step, and a purple hatch marks an offset where the replica *diverges* from
the leader of that step. Without matplotlib nothing is drawn and the report says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

__all__ = ["available", "save_timeline"]


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def save_timeline(records: Sequence[Any], path: str | Path, title: str = "") -> str:
    """Draw ``records`` (runner step records with snapshots) into ``path``; returns the line
    the report shows (the image link, or why there is none)."""
    if not available():
        return "(timeline.png skipped: matplotlib is not installed; `pip install matplotlib`)"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    snaps = [r.snapshot for r in records if r.snapshot is not None]
    if not snaps:
        return "(timeline.png skipped: no snapshots)"
    final = snaps[-1]
    survivors = final.reference_values()
    later_held = _later_held(snaps)
    width = max([r.log_end_offset for s in snaps for r in s.replicas] + [1])
    n_rep = max(len(s.replicas) for s in snaps)
    fig, axes = plt.subplots(len(snaps), 1, figsize=(max(6, 0.6 * width + 3), 0.45 * n_rep * len(snaps) + 1.2),
                             squeeze=False)
    cmap = plt.get_cmap("tab10")
    for i, (rec, snap) in enumerate(zip(records, snaps)):
        ax = axes[i][0]
        leader = snap.leader_replica()
        leader_at = leader.value_at() if leader is not None else {}
        for row, rep in enumerate(snap.replicas):
            y = n_rep - 1 - row
            for offset, epoch, value in rep.records():
                lost = value not in survivors
                truncated = (offset, value) not in later_held[i].get(rep.broker, set())
                diverged = leader is not None and offset in leader_at and leader_at[offset] != value
                face = "#e74c3c" if lost else cmap(epoch % 10)
                ax.add_patch(Rectangle((offset, y), 1, 0.9, facecolor=face,
                                       edgecolor="#e67e22" if truncated else "white",
                                       linewidth=2.5 if truncated else 0.5,
                                       hatch="//" if diverged else None, alpha=0.85 if rep.alive else 0.35))
                ax.text(offset + 0.5, y + 0.45, f"m{value}", ha="center", va="center", fontsize=7)
            ax.plot([rep.high_watermark] * 2, [y, y + 0.9], color="black", linewidth=2.5)
            ax.plot([rep.log_end_offset] * 2, [y, y + 0.9], color="grey", linewidth=1.2, linestyle="--")
        ax.set_xlim(0, width + 0.5)
        ax.set_ylim(-0.2, n_rep)
        ax.set_yticks([n_rep - 1 - r + 0.45 for r in range(len(snap.replicas))])
        ax.set_yticklabels([f"b{r.broker}{'*' if snap.leader == r.broker else ''}"
                            f"{'' if r.alive else ' (down)'}" for r in snap.replicas], fontsize=7)
        ax.set_xticks(range(width + 1))
        ax.tick_params(axis="x", labelsize=6)
        label = "start" if rec.step is None else f"{i}: {rec.step.describe()}"
        ax.set_title(f"t={snap.time_ms} ms  {label}  (leader {snap.leader}, epoch {snap.leader_epoch})",
                     fontsize=8, loc="left")
    if title:
        fig.suptitle(title, fontsize=10)
    # Leave room at the top for the figure title above the first panel's own title.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"![timeline]({Path(path).name})"


def _later_held(snaps: Sequence[Any]) -> list[dict[int, set[tuple[int, int]]]]:
    """For each snapshot index, what each replica still holds in the next snapshot (a record
    missing there was truncated by the next step); the last snapshot keeps everything."""
    out = []
    for i, snap in enumerate(snaps):
        nxt = snaps[i + 1] if i + 1 < len(snaps) else snap
        out.append({r.broker: {(o, v) for o, _e, v in r.records()} for r in nxt.replicas})
    return out
