"""The bug-hunt benchmark's logic (``epochlab.fuzz.bughunt``) and its table in ``docs/bugs.md``."""

from __future__ import annotations

import json
from pathlib import Path

from epochlab.checks.catalogue import BUGS
from epochlab.fuzz import bughunt
from epochlab.fuzz.bughunt import Budget, CampaignRecord, FindingRecord

ROOT = Path(__file__).resolve().parents[1]
KIP101_1 = next(b for b in BUGS if b.id == "KIP-101 problem 1")


def test_the_bughunt_table_in_docs_is_what_the_measured_json_renders() -> None:
    results = json.loads((ROOT / "benches" / "results" / "bughunt.json").read_text())
    doc = (ROOT / "docs" / "bugs.md").read_text()
    section = doc.split(bughunt.BEGIN, 1)[1].split(bughunt.END, 1)[0]
    assert section == bughunt.markdown(results)
    assert results["format"] == bughunt.FORMAT and results["sessions"]


def test_the_random_hunt_finds_kip101_problem_1_at_the_campaigns_run() -> None:
    """A cheap bug, one seed, a tiny budget; run for run what ``Campaign`` finds first."""
    from epochlab.fuzz.campaign import Campaign
    from epochlab.generations import Generation

    record = bughunt.hunt_random("hw-truncation", 1, Budget(runs=12, seconds=30), bugs=(KIP101_1,))
    first = record.first_match(KIP101_1)
    assert record.stopped == "all-matched" and first is not None
    assert first.run == record.runs and KIP101_1.id in first.known_bugs
    campaign = Campaign(Generation.TRUNCATE_TO_HW, seed=1, seconds=None, runs=12, until_found=True)
    found = min(campaign.run(), key=lambda f: f.run)
    assert (found.run + 1, found.seed, found.violation.invariant) == (first.run, first.run_seed,
                                                                       first.invariant)


def test_a_seed_without_a_match_is_censored_in_median_and_max(tmp_path) -> None:
    results = bughunt.new_results([1, 2, 3], ["random"], ["hw-truncation"], Budget(50, 10.0), None)
    results["sessions"].append({"date": "d", "command": "c", "machine": {}, "wall_seconds": 1})
    for seed, run in ((1, 4), (2, None), (3, 8)):
        record = CampaignRecord("random", "hw-truncation", seed, runs=run or 50, seconds=1.0,
                                stopped="all-matched" if run else "runs")
        if run:
            record.findings.append(FindingRecord("Inv-StrongIsr", run, 0.5, [KIP101_1.id], 7))
        record.findings.append(FindingRecord("Inv-IsrJoin", 2, 0.2, [], 9))
        bughunt.put_campaign(results, record)
    text = bughunt.markdown(results)
    row = next(line for line in text.splitlines() if line.startswith("| KIP-101 problem 1 |"))
    assert "| 4, >50, 8 | 8 / not within budget |" in row
    assert "| hw-truncation | random | Inv-IsrJoin | 1 (run 2, run seed 9)" in text
    assert "**none**" in text                                  # a finding matching no bug shows
    assert "atheris" not in text.split("Not measured")[0].split("| bug |")[1]
    doc = tmp_path / "bugs.md"
    doc.write_text(f"before\n{bughunt.BEGIN}old\n{bughunt.END}\nafter\n")
    assert bughunt.update_doc(results, doc) and not bughunt.update_doc(results, doc)
    assert doc.read_text().startswith("before\n") and doc.read_text().endswith(f"{bughunt.END}\nafter\n")


def test_the_harness_finding_line_is_parsed() -> None:
    line = ("epochlab: run 29: Inv-IsrJoin: broker 1 joined the ISR of leader 2 (epoch 5) with "
            "LEO 64 < LESO 79 -> /tmp/x/violations/inv-isrjoin\n")
    assert bughunt._parse_finding(line) == (29, "Inv-IsrJoin", "broker 1 joined the ISR of leader 2 "
                                            "(epoch 5) with LEO 64 < LESO 79")
    assert bughunt._parse_finding("#12 NEW cov: 3 ft: 4\n") is None
    assert bughunt._libfuzzer_runs("#12 NEW cov: 3 ft: 4\n") == 12


def test_the_off_by_default_steps_section_is_what_its_json_renders() -> None:
    results = json.loads((ROOT / "benches" / "results" / "bughunt-steps.json").read_text())
    doc = (ROOT / "docs" / "bugs.md").read_text()
    begin, end = bughunt.markers(bughunt.STEPS_SECTION)
    section = doc.split(begin, 1)[1].split(end, 1)[0]
    assert section == bughunt.markdown(results)
    assert not any(row.endswith("| **none** |") for row in section.splitlines())  # all matched
    hunted = {row.split(" | ")[0].lstrip("| ") for row in section.splitlines()
              if row.startswith("| KAFKA-6082") or row.startswith("| KAFKA-2334")}
    assert hunted == {"KAFKA-6082 (KAFKA-3083)", "KAFKA-2334"}


def test_the_wrapper_batches_section_is_what_its_json_renders() -> None:
    results = json.loads((ROOT / "benches" / "results" / "bughunt-wrappers.json").read_text())
    doc = (ROOT / "docs" / "bugs.md").read_text()
    begin, end = bughunt.markers("wrappers")
    section = doc.split(begin, 1)[1].split(end, 1)[0]
    assert section == bughunt.markdown(results)
    assert not any(row.endswith("| **none** |") for row in section.splitlines())  # all matched
    rows = [row for row in section.splitlines() if row.startswith("| KAFKA-3919 | hw-truncation | random")]
    assert len(rows) == 1
    found_by = rows[0].split(" | ")[4]  # runs to the first match per seed
    assert sum(not r.startswith(">") for r in found_by.split(", ")) >= 3, rows[0]


def test_the_guided_sections_are_what_their_json_renders() -> None:
    """Each section comparing the guided engine with random is its results file rendered, and
    every finding in them matches a catalogued bug (a guided run that reaches a situation
    random rarely does is where a model defect would show)."""
    doc = (ROOT / "docs" / "bugs.md").read_text()
    for path in sorted((ROOT / "benches" / "results").glob("bughunt-guided-*.json")):
        section_name = path.stem.removeprefix("bughunt-")
        results = json.loads(path.read_text())
        begin, end = bughunt.markers(section_name)
        section = doc.split(begin, 1)[1].split(end, 1)[0]
        assert section == bughunt.markdown(results), path
        assert not any(row.endswith("| **none** |") for row in section.splitlines()), path
        assert {c["engine"] for c in results["campaigns"]} == {"random", "guided"}, path


def test_the_benchmark_refuses_a_document_it_could_not_render_into_before_it_runs(tmp_path) -> None:
    """A missing ``--doc``, or one without the section's markers, is refused up front (exit 2,
    naming the file), not after the campaigns: nothing is run and no results file is written."""
    import subprocess
    import sys

    out = tmp_path / "out.json"
    plain = tmp_path / "plain.md"
    plain.write_text("no markers here\n")
    for doc, words in ((tmp_path / "missing.md", "cannot be read"), (plain, "markers")):
        done = subprocess.run([sys.executable, str(ROOT / "benches" / "bench_bughunt.py"), "--fresh", "--engines",
                               "random", "--generations", "hw-truncation", "--seeds", "1", "--runs", "5",
                               "--out", str(out), "--doc", str(doc)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and str(doc) in done.stderr and words in done.stderr, done.stderr
        assert not out.exists()
    with_markers = tmp_path / "doc.md"
    with_markers.write_text(f"{bughunt.BEGIN}old\n{bughunt.END}\n")
    assert bughunt.doc_text(with_markers).startswith(bughunt.BEGIN)


def test_a_campaign_with_results_of_its_own_leaves_the_docs_alone(tmp_path) -> None:
    """Without ``--doc`` the table goes into docs/bugs.md only when ``--out`` is one of the
    repository's results files: a campaign with an ``--out`` of its own (here a 3-run one)
    prints its table and leaves the measured one in the docs as it was."""
    import subprocess
    import sys

    doc = ROOT / "docs" / "bugs.md"
    before = doc.read_bytes()
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(ROOT / "benches" / "bench_bughunt.py"), "--fresh", "--engines",
                           "random", "--generations", "hw-truncation", "--seeds", "1", "--runs", "3",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert doc.read_bytes() == before
    assert json.loads(out.read_text())["campaigns"] and "| bug |" in done.stdout
