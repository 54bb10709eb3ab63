"""Atheris harness for the parsers of Kafka's on-disk files (``src/formats/``) and the
directory reader of ``epochlab inspect``.

Inputs are either free bytes or a damaged copy of a file Kafka 4.3.1 wrote
(``tests/fixtures/kafka-4.3.1``: segments in every codec and v0/v1, indexes, the transaction
index, producer snapshots, checkpoints): bit flips, cuts, inserted bytes and length or count
fields overwritten with extreme values, at positions the fuzzer picks. Each parser must
return or raise :class:`~epochlab.errors.KafkaFormatError` naming the file and a byte offset
inside it; a segment must come back with ``valid_bytes <= size``, batches inside the valid
bytes in increasing positions, and an error offset inside the file. Parsing twice gives the
same answer. Then the damaged file is put in a partition directory and ``read_log_dir`` must
read it without raising (damage becomes a problem naming the file). Anything else raises
:class:`HarnessFailure`, which atheris reports as a crash.

    pip install atheris
    mkdir -p fuzz/corpus/kafka-files
    python fuzz/fuzz_kafka_files.py -atheris_runs=100000 fuzz/corpus/kafka-files
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _atheris import instrumentation  # noqa: E402 - this folder is on sys.path

with instrumentation(__name__ == "__main__"):
    import epochlab._core as core
    from epochlab.errors import KafkaFormatError
    from epochlab.ondisk import read_log_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_core_api import HarnessFailure, provider  # noqa: E402 - after the path is set

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "kafka-4.3.1"
PARSERS = {
    "log": core.parse_segment,
    "index": core.parse_offset_index,
    "timeindex": core.parse_time_index,
    "txnindex": core.parse_txn_index,
    "snapshot": core.parse_producer_snapshot,
    "leader-epoch-checkpoint": core.parse_leader_epoch_checkpoint,
    "partition.metadata": core.parse_partition_metadata,
    "replication-offset-checkpoint": core.parse_offset_checkpoint,
}
EXTREMES = [b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x00",
            b"\x00\x00\x00\x01", b"\xff" * 8, b"\x7f" + b"\xff" * 7, b"\x80" + b"\x00" * 7]
_WORKDIR: Path | None = None


def _kind(name: str) -> str:
    """The parser for a file name: by suffix for ``<offset>.<suffix>``; the three broker
    offset checkpoints share one format."""
    if name[:1].isdigit():
        return name.rsplit(".", 1)[-1]
    return "replication-offset-checkpoint" if name.endswith("offset-checkpoint") else name


def samples() -> list[tuple[str, bytes]]:
    """Every fixture file Kafka wrote, as ``(kind, bytes)``, in a stable order."""
    return [(_kind(f.name), f.read_bytes()) for f in sorted(FIXTURES.rglob("*"))
            if f.is_file() and _kind(f.name) in PARSERS]


_SAMPLES = samples() if FIXTURES.is_dir() else []


def workdir() -> Path:
    global _WORKDIR
    if _WORKDIR is None:
        _WORKDIR = Path(tempfile.mkdtemp(prefix="epochlab-fuzz-kafka-files-"))
        atexit.register(shutil.rmtree, _WORKDIR, True)
    return _WORKDIR


def damage(fdp: Any, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        op = fdp.ConsumeIntInRange(0, 4)
        pos = fdp.ConsumeIntInRange(0, max(len(buf) - 1, 0))
        if op == 0 and buf:
            buf[pos] ^= 1 << fdp.ConsumeIntInRange(0, 7)
        elif op == 1:
            del buf[pos:]
        elif op == 2:
            buf[pos:pos] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 8))
        elif op == 3:
            value = fdp.PickValueInList(EXTREMES)
            buf[pos:pos + len(value)] = value
        else:
            buf[pos:pos + 1] = bytes([fdp.ConsumeIntInRange(0, 255)])
    return bytes(buf)


def check(kind: str, data: bytes) -> None:
    parse = PARSERS[kind]
    first = _call(parse, kind, data)
    if _call(parse, kind, data) != first:
        raise HarnessFailure(f"{kind}: two parses of the same bytes differ")
    if kind == "log" and first[0] == "ok":
        _check_segment(first[1], len(data))


def _call(parse: Any, kind: str, data: bytes) -> tuple[Any, ...]:
    try:
        return ("ok", parse(data, "f"))
    except KafkaFormatError as err:
        offset = getattr(err, "offset", None)
        if getattr(err, "file", None) != "f" or offset is None or not 0 <= offset <= len(data):
            raise HarnessFailure(f"{kind}: error without the file or a byte offset inside it: {err!r}") from err
        return ("raise", offset, getattr(err, "reason", None))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - PanicException derives from BaseException
        raise HarnessFailure(f"{kind}: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc


def _check_segment(dump: dict[str, Any], size: int) -> None:
    if dump["size"] != size or not 0 <= dump["valid_bytes"] <= size:
        raise HarnessFailure(f"segment: size {dump['size']} / valid_bytes {dump['valid_bytes']} for {size} bytes")
    end = 0
    for b in dump["batches"]:
        if b["position"] != end or b["size"] <= 0:
            raise HarnessFailure(f"segment: batch at {b['position']} does not follow the previous one (ends {end})")
        end = b["position"] + b["size"]
    if end != dump["valid_bytes"]:
        raise HarnessFailure(f"segment: batches end at {end}, valid_bytes {dump['valid_bytes']}")
    error = dump["error"]
    if (error is None) != (end == size) or (error is not None and not end <= error["offset"] <= size):
        raise HarnessFailure(f"segment: error {error} inconsistent with valid bytes {end} of {size}")


def check_directory(kind: str, data: bytes) -> None:
    """The damaged file inside a partition directory: ``read_log_dir`` reports, never raises."""
    part = workdir() / "logdir" / "t-0"
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    name = {"log": "00000000000000000000.log", "index": "00000000000000000000.index",
            "timeindex": "00000000000000000000.timeindex", "txnindex": "00000000000000000000.txnindex",
            "snapshot": "00000000000000000005.snapshot"}.get(kind, kind)
    (part / name).write_bytes(data)
    if kind != "log":
        (part / "00000000000000000000.log").write_bytes(b"")
    try:
        read_log_dir(part.parent)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure(f"read_log_dir with a damaged {kind}: {type(exc).__name__}: {exc}") from exc


def test_one_input(data: bytes) -> None:
    fdp = provider(data)
    if _SAMPLES and fdp.ConsumeBool():
        kind, sample = _SAMPLES[fdp.ConsumeIntInRange(0, len(_SAMPLES) - 1)]
        damaged = damage(fdp, sample)
    else:
        kind = fdp.PickValueInList(sorted(PARSERS))
        damaged = fdp.ConsumeBytes(fdp.remaining_bytes())
    check(kind, damaged)
    check_directory(kind, damaged)


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
