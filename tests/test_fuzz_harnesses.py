"""The atheris harnesses in ``fuzz/`` run here on fixed inputs, without atheris' fuzzing loop.

Each harness's ``test_one_input`` gets ~200 deterministic byte strings (a few hand-written, the
rest from a seeded generator), so a harness that rots, or a crash that a short fuzzing run
would find, shows up in the ordinary test run. A failure prints the input in hex, which replays
with ``python -c "import fuzz_core_api as h; h.test_one_input(bytes.fromhex('...'))"`` from
``fuzz/``.
"""

from __future__ import annotations

import importlib
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parent.parent / "fuzz"
HARNESSES = ["fuzz_core_api", "fuzz_checkpoint", "fuzz_formats", "fuzz_kafka_files"]
SEED = 20240601

HAND_WRITTEN = [
    b"", b"\x00", b"\xff" * 64, bytes(range(256)), b"0\n1\n0 0\n", b"\x01\x010\n2\n0 0\n1 5\n",
    b"\x02" + "0\n1\n5 7\r\n".encode(), b"\x03" * 300,
]


def load(name: str) -> ModuleType:
    if str(FUZZ_DIR) not in sys.path:
        sys.path.insert(0, str(FUZZ_DIR))
    return importlib.import_module(name)


def inputs() -> list[bytes]:
    rng = random.Random(SEED)
    generated = [rng.randbytes(rng.choice([4, 16, 64, 256, 600])) for _ in range(192)]
    return HAND_WRITTEN + generated


@pytest.mark.parametrize("name", HARNESSES)
def test_harness_accepts_deterministic_inputs(name: str) -> None:
    harness = load(name)
    failures = []
    for data in inputs():
        try:
            harness.test_one_input(data)
        except harness.HarnessFailure as failure:
            failures.append(f"{failure}\n    input: {data.hex()}")
    assert not failures, f"{len(failures)} of {len(inputs())} inputs crash; the first ones:\n" + \
        "\n".join(failures[:3])


def test_harnesses_import_and_run_without_atheris() -> None:
    """CI need not install atheris: the modules import lazily and fall back to ByteReader."""
    script = (
        "import sys; sys.modules['atheris'] = None; "
        f"sys.path.insert(0, {str(FUZZ_DIR)!r}); "
        "import fuzz_core_api, fuzz_checkpoint; "
        "assert isinstance(fuzz_core_api.provider(b'x'), fuzz_core_api.ByteReader); "
        "fuzz_core_api.test_one_input(b'\\x01\\x02\\x03' * 20); "
        "fuzz_checkpoint.test_one_input(b'\\x01' + b'0\\n1\\n0 0\\n')"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def test_byte_reader_is_deterministic_and_total() -> None:
    """The fallback decoder reads exhausted input as zeros and stays in range."""
    reader = load("fuzz_core_api").ByteReader(b"\xff\x10")
    assert reader.ConsumeIntInRange(3, 5) in (3, 4, 5)
    assert reader.ConsumeIntInRange(0, 1000) in range(1001)
    assert reader.remaining_bytes() == 0
    assert reader.ConsumeIntInRange(7, 9) == 7 and reader.ConsumeBool() is False
    assert reader.ConsumeBytes(4) == b"" and reader.ConsumeUnicodeNoSurrogates(2) == "\x00\x00"


def test_the_formats_campaign_finds_no_crash_on_a_short_run() -> None:
    """The loop behind the long hostile-input campaign (``fuzz/hostile.py``), briefly: every
    damaged file of every format is accepted or refused with an epochlab error."""
    formats = load("fuzz_formats")
    counts = formats.campaign(1400, seed=3)
    assert sum(counts.values()) == 1400
    assert {f for f, _ in counts} == set(formats.FORMATS)
    assert all(outcome in ("ok", "refused") for _, outcome in counts)


@pytest.mark.parametrize("fmt, data", [
    ("scenario", b'name = "x"\ndescription = "\xff\xfe"\n'),                 # not UTF-8
    ("scenario", b'name = "x"\nseed = ' + b"[" * 3000 + b"]" * 3000 + b"\n"),  # nested too deeply
    ("schedule", b'{"format": "epochlab-schedule", "version": 2, "generation": "kip-101", '
                 b'"actions": [{"op": "heal", "at_ms": 1000000000000000000}]}'),
    ("profile", b'{"actions": 1e308}'),
    ("grid-toml", b'[faults]\n"leader-crash" = 99999999999999999\n'),
])
def test_regressions_found_by_the_formats_harness(fmt: str, data: bytes) -> None:
    formats = load("fuzz_formats")
    assert formats.check_one(fmt, data) == "refused"
