"""Atheris harness for ``leader-epoch-checkpoint`` parsing.

The fuzzer's bytes become checkpoint text, either free-form or assembled from the tokens the
format is made of (versions, counts, numbers at and beyond their ranges, Java ``\\s`` and other
whitespace, CR, NUL, non-ASCII digits), and are parsed by ``epochlab._core`` and
``epochlab.reference``, both from a string (``from_checkpoint_text``) and from a file
(``read_checkpoint``, raw bytes, so invalid UTF-8 too). Each must either parse, to the same
entries on both sides, or raise ``CorruptCheckpointError`` with the same line number
(``StorageError`` for the file read). A parsed cache must write back text that parses to the
same cache. Anything else raises :class:`HarnessFailure`, which atheris reports as a crash.

    pip install atheris
    mkdir -p fuzz/corpus/checkpoint
    python fuzz/fuzz_checkpoint.py -atheris_runs=100000 fuzz/corpus/checkpoint
"""

from __future__ import annotations

import atexit
import functools
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any


from _atheris import instrumentation  # noqa: E402 - this folder is on sys.path

with instrumentation(__name__ == "__main__"):
    import epochlab._core as core
    import epochlab.reference as reference
    from epochlab.errors import CorruptCheckpointError, StorageError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_core_api import HarnessFailure, provider  # noqa: E402 - after the path is set

IMPLS = (core, reference)
TOKENS = ["0", "1", "2", "3", "7", "00", "01", "-1", "+1", "1_0", "0x1", "1e3", "1.0", " ", "  ",
          "\t", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\x00", "\u00a0", "\u2003", "\u0663",
          "\uff11", str(2**31 - 1), str(2**31), str(2**63 - 1), str(2**63), str(2**64),
          "9" * 25, "a", "\n"]
_WORKDIR: Path | None = None


def workdir() -> Path:
    """One temporary directory per process for the file reads, removed at exit."""
    global _WORKDIR
    if _WORKDIR is None:
        _WORKDIR = Path(tempfile.mkdtemp(prefix="epochlab-fuzz-checkpoint-"))
        atexit.register(shutil.rmtree, _WORKDIR, True)
    return _WORKDIR


def parse(call: Any, label: str, allowed: tuple[type[BaseException], ...]) -> tuple[Any, ...]:
    """``("ok", entries)`` or ``("raise", class name, line)``; any other exception is a crash."""
    try:
        return ("ok", [tuple(e) for e in call().entries()])
    except allowed as err:
        return ("raise", type(err).__name__, getattr(err, "line", None))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - PanicException derives from BaseException
        raise HarnessFailure(f"{label}: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc


def both(label: str, call: Any, allowed: tuple[type[BaseException], ...]) -> tuple[Any, ...]:
    results = [parse(functools.partial(call, m), f"{m.__name__} {label}", allowed) for m in IMPLS]
    if results[0] != results[1]:
        raise HarnessFailure(f"{label}: core {results[0]} != reference {results[1]}")
    return results[0]


def structured_text(fdp: Any) -> str:
    """Near-valid checkpoints: a version line, a count, entry lines, each from tokens, with a
    valid shape more often than not."""
    lines = []
    for _ in range(fdp.ConsumeIntInRange(0, 7)):
        if fdp.ConsumeBool():
            gap = fdp.PickValueInList([" ", "\t", "  "])
            lines.append(f"{fdp.ConsumeIntInRange(0, 9)}{gap}{fdp.ConsumeIntInRange(0, 60)}")
        else:
            lines.append("".join(fdp.PickValueInList(TOKENS)
                                 for _ in range(fdp.ConsumeIntInRange(0, 4))))
    if fdp.ConsumeBool():
        lines = ["0", str(max(0, len(lines) + fdp.ConsumeIntInRange(-1, 1)))] + lines
    ending = fdp.PickValueInList(["\n", "", "\r\n", "\n\n", " \n"])
    separator = "\r\n" if fdp.ConsumeIntInRange(0, 5) == 0 else "\n"
    return separator.join(lines) + ending


def check_text(text: str) -> None:
    parsed = both(f"from_checkpoint_text({text!r})",
                  lambda m: m.LeaderEpochCache.from_checkpoint_text(text, "checkpoint"),
                  (CorruptCheckpointError,))
    if parsed[0] == "ok":
        # What parses must write back to text that parses to the same entries, on both sides.
        for m in IMPLS:
            again = m.LeaderEpochCache.from_checkpoint_text(
                m.LeaderEpochCache(parsed[1]).to_checkpoint_text())
            if [tuple(e) for e in again.entries()] != parsed[1]:
                raise HarnessFailure(f"{m.__name__}: {text!r} does not round-trip")


def check_file(content: bytes) -> None:
    path = workdir() / "leader-epoch-checkpoint"
    path.write_bytes(content)
    both(f"read_checkpoint of {content!r}", lambda m: m.LeaderEpochCache.read_checkpoint(path),
         (CorruptCheckpointError, StorageError))


def test_one_input(data: bytes) -> None:
    fdp = provider(data)
    mode = fdp.ConsumeIntInRange(0, 3)
    if mode == 0:
        check_text(fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes()))
    elif mode == 1:
        check_text(structured_text(fdp))
    elif mode == 2:
        check_file(fdp.ConsumeBytes(fdp.remaining_bytes()))
    else:
        text = structured_text(fdp)
        encoding = fdp.PickValueInList(["utf-8", "latin-1", "utf-16"])
        check_file(text.encode(encoding, errors="replace"))


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
