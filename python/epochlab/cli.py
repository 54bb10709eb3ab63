"""The ``epochlab`` command: a table of contents.

Exit status, as Jepsen's: 0 valid (every expectation holds, no protocol violation), 1 invalid
(a protocol violation, or a failed expectation), 2 anything else: a usage or input error, a
missing optional dependency (with the ``pip install`` line that adds it), an environment
problem (no Java, an unwritable output path, a closed output pipe), or a bug; reported as one
line on stderr naming the file and field, never a traceback for a user's mistake
(``EPOCHLAB_DEBUG=1`` adds the traceback).

    epochlab scenario list
    epochlab scenario run NAME_OR_FILE [--generation G] [--seed S] [--out DIR] [--json]
    epochlab scenario show NAME
    epochlab generations
    epochlab demo [--out DIR]
    epochlab trace replay FILE [--check NAME ...] [--json] [--all]
    epochlab trace generate OUT --batches N --leader-changes M --replicas R --seed S
    epochlab trace export RUN_DIR [-o OUT]
    epochlab fuzz [--engine random|atheris] [--generation G] [--config FILE] [--seconds N]
                  [--runs N] [--seed S] [--out DIR] [--json] [--until-found]
    epochlab replay SCHEDULE_OR_RUN_DIR [--out DIR] [--json]
    epochlab show RUN_DIR
    epochlab shrink SCHEDULE [--invariant NAME] [--out FILE] [--max-runs N] [--json]
    epochlab campaign [--grid FILE] [--runs N] [--seed S] [--master URL] [--out DIR] [--resume]
    epochlab kafka jars [--version V]

Every package with commands has a ``cli.py`` whose ``register(subparsers)`` adds its commands
and sets each one's handler (``set_defaults(handler=...)``): a function of the parsed
arguments that returns the exit status. :func:`main` builds the parser from them, in the order
``epochlab --help`` lists the commands, calls the handler, and turns what it raises into an
exit status and one line.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from epochlab.errors import ConfigError, EpochlabError, ScenarioError, UsageError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's own convention)
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    from epochlab.campaigns import cli as campaigns
    from epochlab.fuzz import cli as fuzz
    from epochlab.kafka import cli as kafka
    from epochlab.ondisk import cli as ondisk
    from epochlab.scenarios import cli as scenarios
    from epochlab.trace import cli as trace

    parser = _Parser(prog="epochlab", description="Model Apache Kafka partition replication.")
    parser.add_argument("--version", action="version", version=f"epochlab {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    # scenario, generations, show, schema, demo; trace; fuzz, replay, shrink; campaign; kafka; inspect
    for package in (scenarios, trace, fuzz, campaigns, kafka, ondisk):
        package.register(sub)
    return parser


#: optional modules -> the extra that installs them
_EXTRAS = {"pyarrow": "trace", "matplotlib": "plot", "atheris": "fuzz", "pyspark": "spark",
           "pandas": "spark", "jpype": "kafka", "confluent_kafka": "kafka"}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("epochlab")
    except Exception:  # noqa: BLE001 - not installed as a distribution (source tree)
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        code = int(args.handler(args))
        sys.stdout.flush()   # inside the handlers below: a closed pipe is not a traceback
        return code
    except UsageError as exc:
        return _fail(str(exc))
    except (ScenarioError, ConfigError) as exc:
        return _fail(f"epochlab: error: {exc.message}")
    except EpochlabError as exc:
        return _fail(f"epochlab: error: {type(exc).__name__}: {exc.message}")
    except BrokenPipeError:
        # the reader went away (`epochlab ... | head`): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 2
    except KeyboardInterrupt:
        return _fail("epochlab: interrupted")
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top in _EXTRAS:
            return _fail(f"epochlab: error: this command needs {top}, which is not installed: "
                         f'pip install "epochlab[{_EXTRAS[top]}]"')
        return _internal(exc)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(f"epochlab: error:{where}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - a bug, or an environment the code did not foresee
        return _internal(exc)


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def _internal(exc: BaseException) -> int:
    if os.environ.get("EPOCHLAB_DEBUG"):
        traceback.print_exception(exc)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return _fail(f"epochlab: internal error: {type(exc).__name__}: {first} (this is a bug or an "
                 "environment epochlab does not handle; EPOCHLAB_DEBUG=1 shows the traceback)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
