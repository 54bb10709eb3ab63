"""The campaign report: Markdown, HTML and PNG plots from ``summary.json``.

Sections: Kafka-semantics expectations (pass/fail with the numbers), the three tables of seed
002 regenerated with measured numbers beside the seed's claims (*Producer Guarantees Summary*,
*What Messages Are Lost When Leader Fails*, *Downtime During Leader Failure*), every
disagreement called out in a "Disagreements" list, then every configuration, the distinct
protocol violations with their shrunk schedules, and the plots.

The seed's rows are fixed here (:data:`SEED_GUARANTEES`, :data:`SEED_LOST`,
:data:`SEED_DOWNTIME`); the measured side always comes from the latest generation in the
campaign, replication factor 3, unless the row says otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["SEED_DOWNTIME", "SEED_GUARANTEES", "SEED_LOST", "expectations", "guarantees_table",
           "md_table", "render", "write_report"]

SEED = "seeds/002 (Kafka Leader Failure: Complete Analysis)"
LOSS_RANK = {"High": 3, "Medium": 2, "Low": 1, "Lowest": 0}
LATENCY_RANK = {"Lowest": 0, "Low": 1, "Medium": 2, "Higher": 3}

#: (label, filter, seed loss risk, seed duplicates risk, seed latency, seed use case)
SEED_GUARANTEES: list[tuple[str, dict[str, Any], str, str, str, str]] = [
    ("acks=0", {"acks": "0", "min_insync_replicas": 2, "idempotence": False},
     "High", "None", "Lowest", "Metrics, logs"),
    ("acks=1", {"acks": "1", "min_insync_replicas": 2, "idempotence": False},
     "Medium", "Possible", "Low", "Balanced"),
    ("acks=all, min.isr=1", {"acks": "all", "min_insync_replicas": 1, "idempotence": False},
     "Medium", "Possible", "Medium", "Don't use"),
    ("acks=all, min.isr=2", {"acks": "all", "min_insync_replicas": 2, "idempotence": False},
     "Low", "Possible", "Higher", "Critical data"),
    ("acks=all, min.isr=2, idempotent", {"acks": "all", "min_insync_replicas": 2, "idempotence": True},
     "Lowest", "None", "Higher", "Best practice"),
]

#: (message state, state key, seed "Lost?", seed "Why?")
SEED_LOST: list[tuple[str, str, str, str]] = [
    ("Below HWM (committed)", "committed", "No", "Replicated to all ISR members"),
    ("Above HWM, replicated to some ISR", "replicated", "No", "If those replicas become leader"),
    ("Above HWM, only on leader", "leader_only", "Yes", "No replicas have it"),
    ("Acknowledged with acks=1, not replicated", "acked_unreplicated", "Yes",
     "Producer thinks it's sent but it's lost"),
    ("Acknowledged with acks=all, ISR have it", "acked_isr", "No", "Safe on multiple brokers"),
    ("In producer buffer, not sent", "unsent", "No", "Producer retries after metadata refresh"),
]

#: (component, phase column, seed claim, seed notes, seed range in ms or None)
SEED_DOWNTIME: list[tuple[str, str, str, str, tuple[int, int] | None]] = [
    ("Detection", "detection_ms", "0-6 seconds", "Heartbeat timeout", (0, 6000)),
    ("Election", "election_ms", "50-200ms", "Usually ~100ms", (50, 200)),
    ("Metadata Propagation", "propagation_ms", "10-100ms", "Clients refresh metadata", (10, 100)),
    ("Producer Recovery", "producer_recovery_ms", "0-30s", "Depends on request timeout", (0, 30000)),
    ("Consumer Recovery", "consumer_recovery_ms", "0-30s", "Depends on request timeout", (0, 30000)),
    ("Offline (no leader at all)", "offline_ms", "~100-300ms", "'Effective downtime: just the election'",
     (100, 300)),
]


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a proportion ``successes / n``: well
    behaved at 0 and 1 and for small ``n``, unlike the normal approximation."""
    if n <= 0:
        return (0.0, 1.0)
    p = min(1.0, max(0.0, successes / n))
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _runs_rate(r: dict[str, Any], key: str) -> tuple[float, tuple[float, float]]:
    """A per-run rate (fraction of runs with the event) and its Wilson interval: runs are the
    independent unit (records of one run are not)."""
    n = int(r.get("runs") or 0)
    rate = float(r.get(key) or 0.0)
    return rate, wilson(round(rate * n), n)


def _ci(r: dict[str, Any], key: str) -> str:
    rate, (lo, hi) = _runs_rate(r, key)
    return f"{_pct(rate, 0)} of runs [95% CI {_pct(lo, 0)}-{_pct(hi, 0)}]"


def _differ(ra: dict[str, Any], rb: dict[str, Any], key: str) -> bool:
    """Whether two configurations' per-run rates differ significantly (disjoint 95% Wilson
    intervals, a conservative test)."""
    _, (lo_a, hi_a) = _runs_rate(ra, key)
    _, (lo_b, hi_b) = _runs_rate(rb, key)
    return hi_a < lo_b or hi_b < lo_a


def _pick(rows: list[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def _pct(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _ms(x: Any) -> str:
    if x is None:
        return "-"
    x = float(x)
    return f"{x / 1000:.1f} s" if x >= 1000 else f"{x:.0f} ms"


def _base(summary: dict[str, Any]) -> dict[str, Any]:
    return {"generation": summary["latest_generation"], "replication_factor": 3, "unclean": False}


# -- tables -------------------------------------------------------------------------------

def guarantees_table(summary: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    """Seed 002's Producer Guarantees Summary with measured numbers; returns (header, rows,
    disagreements)."""
    header = ["Configuration", "Data loss (seed)", "Acked writes lost (measured)",
              "Committed lost", "Duplicates (seed)", "Duplicates (measured)",
              "Latency (seed)", "Produce latency p50 / p99", "Runs"]
    rows, found, notes = [], [], []
    for label, match, loss, dups, latency, _use in SEED_GUARANTEES:
        hit = _pick(summary["by_config"], **_base(summary), **match)
        if not hit:
            continue
        r = hit[0]
        found.append((label, r, loss, dups, latency))
        lat = r.get("latency_pct_ms") or [None, None]
        rows.append([label, loss,
                     f"{_pct(r['acked_loss_rate'])} of acked ({_ci(r, 'acked_loss_runs')})",
                     f"{_pct(r['committed_loss_rate'])} ({r['committed_lost']} records)", dups,
                     f"{_pct(r['duplicate_rate'])} ({_ci(r, 'duplicate_runs')})",
                     latency, _latency(r), str(r["runs"])])
    for i, (la, ra, lossa, dupsa, lata) in enumerate(found):
        if dupsa == "None" and ra["duplicates"]:
            notes.append(f"**{la}**: the seed says duplicates *None*; measured "
                         f"{ra['duplicates']} duplicate records in {_pct(ra['duplicate_runs'], 0)} of runs.")
        if dupsa == "Possible" and not ra["duplicates"]:
            notes.append(f"**{la}**: the seed says duplicates *Possible*; none measured in "
                         f"{ra['runs']} runs (possible in principle: a retry after a lost "
                         "response; this workload's faults rarely hit that window).")
        for lb, rb, lossb, _d, latb in found[i + 1:]:
            a, _ = _runs_rate(ra, "acked_loss_runs")
            b, _ = _runs_rate(rb, "acked_loss_runs")
            significant = _differ(ra, rb, "acked_loss_runs")
            if LOSS_RANK[lossa] == LOSS_RANK[lossb] and significant:
                notes.append(f"**{la}** vs **{lb}**: the seed rates both *{lossa}* data-loss "
                             f"risk; measured runs with acknowledged loss {_ci(ra, 'acked_loss_runs')} "
                             f"vs {_ci(rb, 'acked_loss_runs')} (95% intervals disjoint).")
            elif LOSS_RANK[lossa] > LOSS_RANK[lossb] and a < b and significant:
                notes.append(f"**{la}** (*{lossa}*) vs **{lb}** (*{lossb}*): runs with "
                             f"acknowledged loss are fewer for the riskier one "
                             f"({_ci(ra, 'acked_loss_runs')} vs {_ci(rb, 'acked_loss_runs')}, "
                             "95% intervals disjoint).")
            pa = (ra.get("latency_pct_ms") or [0])[0] or 0
            pb = (rb.get("latency_pct_ms") or [0])[0] or 0
            ca, cb = (ra.get("latency_ci_ms") or [None])[0], (rb.get("latency_ci_ms") or [None])[0]
            disjoint = ca is not None and cb is not None and ca[0] > cb[1]
            if LATENCY_RANK[lata] < LATENCY_RANK[latb] and pa > pb and disjoint:
                notes.append(f"**{la}** (*{lata}* latency) vs **{lb}** (*{latb}*): measured "
                             f"p50 {_ms(pa)} [{_ms(ca[0])}-{_ms(ca[1])}] vs {_ms(pb)} "
                             f"[{_ms(cb[0])}-{_ms(cb[1])}] (95% bootstrap intervals disjoint).")
    return header, rows, notes


def lost_table(summary: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    """Seed 002's What Messages Are Lost When Leader Fails, per record state at the fault."""
    latest = summary["latest_generation"]
    oldest = summary["generations"][0]
    groups = [("latest, clean", {"generation": latest, "replication_factor": 3, "unclean": False}),
              ("latest, unclean", {"generation": latest, "replication_factor": 3, "unclean": True}),
              (f"{oldest}, clean", {"generation": oldest, "replication_factor": 3, "unclean": False})]
    header = ["Message state", "Lost? (seed)", "Why? (seed)"] + [f"Lost (measured: {g})" for g, _ in groups]
    rows, notes = [], []
    for label, key, claim, why in SEED_LOST:
        cells = [label, claim, why]
        for gname, match in groups:
            part = _pick(summary["by_state"], **match)
            total = sum(r[key] or 0 for r in part)
            lost = sum(r[f"{key}_lost"] or 0 for r in part)
            cells.append("-" if not total else f"{lost}/{total} ({_pct(lost / total, 1)})")
            if gname != "latest, clean" or not total:
                continue
            if claim == "No" and lost:
                extra = ""
                if key == "unsent":
                    failed = sum(r.get("unsent_failed") or 0 for r in part)
                    extra = f"; besides, {failed} of them failed with an error the producer saw"
                notes.append(f"**{label}**: the seed says *not lost*; measured {lost} of {total} "
                             f"lost silently in the latest generation with clean elections{extra}.")
            if claim == "Yes" and lost < total:
                notes.append(f"**{label}**: the seed says *lost*; measured only {lost} of {total} "
                             f"({_pct(lost / total, 1)}) lost: the rest survive because the "
                             "producer retries records it has no acknowledgement for, or the old "
                             "leader returns (or the partition heals) before another is elected.")
        rows.append(cells)
    return header, rows, notes


def downtime_table(summary: dict[str, Any], fault: str = "leader-crash") -> tuple[list[str], list[list[str]], list[str]]:
    """Seed 002's Downtime During Leader Failure, measured for one fault kind (acks=all,
    min.isr=2, RF=3, clean, latest generation)."""
    header = ["Component", "Downtime (seed)", "Notes (seed)", "Measured p50", "p90", "min - max",
              "Runs with phase"]
    part = _pick(summary["downtime_latest"], fault=fault)
    rows, notes = [], []
    if not part:
        return header, rows, notes
    d = part[0]
    for label, col, claim, why, rng in SEED_DOWNTIME:
        pct = d.get(f"{col}_pct") or [None, None]
        rows.append([label, claim, why, _ms(pct[0]), _ms(pct[1]),
                     f"{_ms(d.get(f'{col}_min'))} - {_ms(d.get(f'{col}_max'))}",
                     f"{d.get(f'{col}_n', 0)}/{d['runs']}"])
        if rng is not None and pct[0] is not None and not (rng[0] <= pct[0] <= rng[1]):
            notes.append(f"**{label}** ({fault}): the seed says {claim}; measured median {_ms(pct[0])}"
                         + (" (the model's controller elects in the same instant it detects the "
                            "failure)" if col == "election_ms" else "")
                         + (" (offline time counts only intervals with *no* eligible leader; a "
                            "clean failover to an in-sync follower is never offline)"
                            if col == "offline_ms" else "") + ".")
    return header, rows, notes


def expectations(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Kafka's semantics as checks over the latest generation, RF=3: each with ``ok`` (``None``
    when the grid has no configuration the check applies to: it was not run) and the measured
    value."""
    base = {"generation": summary["latest_generation"], "replication_factor": 3}
    rows = summary["by_config"]

    def total(key: str, **m: Any) -> tuple[int, int]:
        part = _pick(rows, **base, **m)
        return sum(r[key] or 0 for r in part), sum(int(r.get("runs") or 0) for r in part)

    def check(name: str, key: str, want_zero: bool, unit: str, **m: Any) -> dict[str, Any]:
        value, runs = total(key, **m)
        if not runs:
            return {"name": name, "ok": None, "measured": "not run: no such configuration in the grid"}
        return {"name": name, "ok": (value == 0) if want_zero else (value > 0),
                "measured": f"{value} {unit} in {runs} runs"}

    return [
        check("no committed loss with acks=all, min.insync.replicas=2, clean elections",
              "committed_lost", True, "committed records lost", acks="all",
              min_insync_replicas=2, unclean=False),
        check("no acknowledged loss with acks=all, min.insync.replicas=2, clean elections",
              "acked_lost", True, "acknowledged records lost", acks="all",
              min_insync_replicas=2, unclean=False),
        check("loss with acks=1 and unclean election", "acked_lost", False,
              "acknowledged records lost", acks="1", unclean=True),
        check("loss with acks=1 even with clean elections", "acked_lost", False,
              "acknowledged records lost", acks="1", unclean=False),
        check("no duplicates with idempotence", "duplicates", True, "duplicate records",
              idempotence=True),
    ]


def config_table(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["config", "runs", "acked lost", "committed lost", "dups", "out of order",
              "offline p50/p90/max", "latency p50/p99", "violations"]
    rows = []
    for r in summary["by_config"]:
        off = r.get("offline_pct_ms") or [None, None, None]
        rows.append([r["config_id"], str(r["runs"]), _pct(r["acked_loss_rate"]),
                     _pct(r["committed_loss_rate"]), _pct(r["duplicate_rate"]),
                     _pct(r["out_of_order_rate"]),
                     f"{_ms(off[0])} / {_ms(off[1])} / {_ms(r['offline_max_ms'])}",
                     _latency(r), str(r["violation_runs"])])
    return header, rows


# -- rendering ----------------------------------------------------------------------------

def _latency(r: dict[str, Any]) -> str:
    """``p50 [lo-hi] / p99 [lo-hi]`` with the bootstrap intervals when there are some."""
    lat = r.get("latency_pct_ms") or [None, None]
    ci = r.get("latency_ci_ms") or [None, None]
    parts = []
    for value, interval in zip(lat, ci):
        text = _ms(value)
        if interval is not None and value is not None:
            text += f" [{_ms(interval[0])}-{_ms(interval[1])}]"
        parts.append(text)
    return " / ".join(parts)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (``|`` in a cell escaped)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


DEFINITIONS = (
    "Definitions. *Acked writes lost*: records acknowledged to the producer whose value is not in "
    "the final leader's log after healing, as a share of acknowledged records, then the share of "
    "runs with at least one, with its 95% Wilson interval (runs are independent; records of one "
    "run are not, so intervals are over runs). *Committed lost*: records below the true high "
    "watermark (committed on every ISR member) missing at the end. *Duplicates*: values present "
    "more than once in the final log. *Produce latency*: from a send's invocation to its "
    "acknowledgement, over acknowledged sends, in virtual milliseconds (percentiles over every "
    "acknowledged send of the configuration; in brackets their 95% interval by a bootstrap over "
    "runs, 200 resamples). A disagreement with the seed is listed only when the two "
    "configurations' 95% intervals are disjoint.")


def _sections(summary: dict[str, Any], meta: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """(title, blocks); a block is a str paragraph, ("table", header, rows), ("list", items)
    or ("image", path)."""
    exp = expectations(summary)
    g_head, g_rows, g_notes = guarantees_table(summary)
    l_head, l_rows, l_notes = lost_table(summary)
    d_head, d_rows, d_notes = downtime_table(summary)
    p_head, p_rows, p_notes = downtime_table(summary, "leader-partition")
    c_head, c_rows = config_table(summary)
    latest = summary["latest_generation"]
    intro = (f"{summary['runs']} runs over {summary['configs']} configurations "
             f"(campaign seed {meta.get('seed')}, build {meta.get('build', '?')}); fault mix "
             + ", ".join(f"{f['fault']} {f['count']}" for f in summary["faults"]) + ". "
             f"Measured columns: generation {latest}, replication factor 3, clean elections, "
             "unless stated. Seed claims quoted from " + SEED + ".")
    out: list[tuple[str, list[Any]]] = [
        ("Campaign", [intro]),
        ("Kafka semantics", [("table", ["expectation", "holds", "measured"],
                              [[e["name"], {True: "yes", False: "NO", None: "not run"}[e["ok"]], e["measured"]]
                               for e in exp])]),
        ("Producer Guarantees Summary (seed 002, measured)", [("table", g_head, g_rows), DEFINITIONS]),
        ("What Messages Are Lost When Leader Fails? (seed 002, measured)",
         ["Record states are taken at the instant of the fault, on the leader; a record is lost "
          "when its value is missing from the final leader's log after healing.",
          ("table", l_head, l_rows)]),
        ("Downtime During Leader Failure (seed 002, measured)",
         [f"Leader crash, acks=all, min.insync.replicas=2, {latest}, session timeout 6 s, "
          "request.timeout.ms 3 s. Detection: crash -> the controller expires the session; "
          "election: -> a leader is installed; propagation: -> the new leader acts; producer / "
          "consumer recovery: crash -> first acknowledged send / first poll with records.",
          ("table", d_head, d_rows),
          "The same for a network partition of the leader (with the producer on its side):",
          ("table", p_head, p_rows)]),
        ("Disagreements with the seed", [("list", g_notes + l_notes + d_notes + p_notes
                                          or ["none: every measured number agrees with the seed's claim"])]),
        ("Protocol violations", _violation_blocks(summary)),
        ("Every configuration", [("table", c_head, c_rows)]),
        ("Plots", [("image", f"plots/{name}.png") for name in PLOTS]),
    ]
    return out


def _violation_blocks(summary: dict[str, Any]) -> list[Any]:
    if not summary["violations"]:
        return ["No protocol violation in any run."]
    rows = []
    for v in summary["violations"]:
        sched = v.get("schedule") or "-"
        rows.append([v["signature"], str(v["runs"]), ", ".join(v["generations"]), str(v["configs"]),
                     f"run {v['first']['run_id']} ({v['first']['config_id']})",
                     f"epochlab replay {sched}" if v.get("schedule") else "-"])
    allowed = ", ".join(f"{a['signature']} ({a['runs']} runs)" for a in summary.get("allowed", []))
    return [("table", ["signature", "runs", "generations", "configs", "first", "replay"], rows),
            f"Allowed by the configuration (not violations): {allowed or 'none'}."]


def render(summary: dict[str, Any], meta: dict[str, Any], fmt: str = "md") -> str:
    sections = _sections(summary, meta)
    if fmt == "md":
        parts = ["# epochlab campaign report"]
        for title, blocks in sections:
            parts.append(f"## {title}")
            for b in blocks:
                if isinstance(b, str):
                    parts.append(b)
                elif b[0] == "table":
                    parts.append(md_table(b[1], b[2]))
                elif b[0] == "list":
                    parts.append("\n".join(f"- {item}" for item in b[1]))
                elif b[0] == "image":
                    parts.append(f"![{Path(b[1]).stem}]({b[1]})")
        return "\n\n".join(parts) + "\n"
    # HTML: the same markdown rendered by a CommonMark library (markdown-it-py, which rich
    # already depends on), in a fixed page; no HTML is built by hand from the data.
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(render(summary, meta, "md"))
    return _PAGE.replace("{body}", body)


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>epochlab campaign report</title>
<style>
body { font-family: sans-serif; max-width: 1200px; margin: auto; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #bbb; padding: 3px 6px; }
img { max-width: 100%; }
</style>
</head>
<body>
{body}</body>
</html>
"""


# -- plots --------------------------------------------------------------------------------

PLOTS = ("loss_by_config", "committed_loss_by_generation", "downtime_phases", "latency_by_acks")


def _plots(summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    latest = [r for r in summary["by_config"] if r["generation"] == summary["latest_generation"]]

    def label(r: dict[str, Any]) -> str:
        return (f"acks={r['acks']} isr={r['min_insync_replicas']} rf={r['replication_factor']}"
                f"{' unclean' if r['unclean'] else ''}{' idem' if r['idempotence'] else ''}")

    fig, ax = plt.subplots(figsize=(9, 0.3 * len(latest) + 1.5))
    ys = range(len(latest))
    ax.barh([y + 0.2 for y in ys], [100 * (r["acked_loss_rate"] or 0) for r in latest], 0.4,
            label="acked writes lost")
    ax.barh([y - 0.2 for y in ys], [100 * (r["committed_loss_rate"] or 0) for r in latest], 0.4,
            label="committed writes lost")
    ax.set_yticks(list(ys), [label(r) for r in latest], fontsize=7)
    ax.set_xlabel("% of records")
    ax.set_title(f"Loss by configuration ({summary['latest_generation']})")
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "loss_by_config.png"))

    fig, ax = plt.subplots(figsize=(8, 4))
    for unclean in (False, True):
        pts = []
        for g in summary["generations"]:
            part = _pick(summary["by_config"], generation=g, acks="all", min_insync_replicas=2,
                         replication_factor=3, unclean=unclean)
            runs = sum(r["runs"] for r in part)
            pts.append(100 * sum(r["committed_loss_runs"] * r["runs"] for r in part) / runs if runs else 0)
        ax.plot(summary["generations"], pts, marker="o",
                label=f"acks=all isr=2 rf=3 {'unclean' if unclean else 'clean'}")
    ax.set_ylabel("% of runs with committed loss")
    ax.set_title("Committed loss by protocol generation")
    ax.tick_params(axis="x", labelrotation=20)
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "committed_loss_by_generation.png"))

    fig, ax = plt.subplots(figsize=(8, 4))
    faults = summary["downtime_latest"]
    phases = [p for _, p, _, _, _ in SEED_DOWNTIME]
    width = 0.8 / max(1, len(faults))
    for i, d in enumerate(faults):
        vals = [((d.get(f"{p}_pct") or [None])[0] or 0) / 1000 for p in phases]
        ax.bar([x + i * width for x in range(len(phases))], vals, width, label=d["fault"])
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(phases))],
                  [c for c, *_ in SEED_DOWNTIME], fontsize=7, rotation=15)
    ax.set_ylabel("median seconds")
    ax.set_title("Failover phases (acks=all, isr=2, rf=3, clean, latest generation)")
    if faults:
        ax.legend(fontsize=7)
    fig.tight_layout()
    written.append(_save(fig, out / "downtime_phases.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, match, *_r) in enumerate(SEED_GUARANTEES):
        part = _pick(summary["by_config"], **_base(summary), **match)
        if part and part[0].get("latency_pct_ms"):
            p50, p99 = part[0]["latency_pct_ms"]
            ci = part[0].get("latency_ci_ms")
            err = [[[max(0.0, v - c[0])], [max(0.0, c[1] - v)]] for v, c in zip((p50, p99), ci)] if ci else [None, None]
            ax.bar([i - 0.2], [p50], 0.4, color="tab:blue", label="p50" if i == 0 else None,
                   yerr=err[0], capsize=3)
            ax.bar([i + 0.2], [p99], 0.4, color="tab:orange", label="p99" if i == 0 else None,
                   yerr=err[1], capsize=3)
    ax.set_xticks(range(len(SEED_GUARANTEES)), [g[0] for g in SEED_GUARANTEES], fontsize=7, rotation=15)
    ax.set_yscale("symlog")
    ax.set_ylabel("produce latency (ms, virtual)")
    ax.set_title("Produce latency by producer configuration")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "latency_by_acks.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(summary: dict[str, Any], meta: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and ``plots/*.png`` under ``out``."""
    out = Path(out)
    paths = {"md": out / "report.md", "html": out / "report.html"}
    for fmt, path in paths.items():
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(render(summary, meta, fmt), encoding="utf-8")
        tmp.replace(path)
    try:
        for p in _plots(summary, out / "plots"):
            paths[p.stem] = p
    except ImportError:  # matplotlib is optional: the tables are still written
        pass
    return paths
