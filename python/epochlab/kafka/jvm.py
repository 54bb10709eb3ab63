"""One in-process JVM (JPype) carrying one Kafka release's jars.

JPype can start a single JVM per process and never restart it, so every user of Kafka's classes
goes through :func:`ensure_jvm`: the first call starts the JVM with the jars of the requested
release; later calls for the same release reuse it, and a call for another release raises
:class:`ConfigError` (run each release in its own process), as does a JVM some other code
started (its class path is unknown). JPype is the ``kafka`` extra.

A caller may add folders of jars beside the release's (``extra``: the stale-follower check adds
Mockito, :func:`epochlab.kafka.jars.mockito_dir`); they are part of what the JVM carries, so a
later call asking for a folder the running JVM lacks raises :class:`ConfigError` too.

Releases up to 0.11 log through log4j 1.2 directly (``kafka.utils.Logging``); with no
configuration it prints a warning on the first message, so their log4j gets a null appender.

A release that logs through log4j 2 (4.0 on) has its SLF4J binding for it in
``jars/logging`` (:func:`epochlab.kafka.jars.logging_dir`); when that folder is there the JVM
carries it in place of ``slf4j-nop``, with every logger off and one logger context for the
whole JVM (log4j's ``BasicContextSelector``: the default selector keys contexts by class
loader, and a configuration set from Python then missed the clients' loggers). The JVM logs
nothing until :func:`log_to` points Kafka's loggers at a file, which a live run does to keep
its Java clients' log (:mod:`epochlab.kafka.live.client_log`); :func:`logs` says whether it
can.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, LOGGING, jar_dir

__all__ = ["ensure_jvm", "log_to", "logs", "running_release"]

_lock = threading.Lock()
_release: str | None = None
_extra: tuple[Path, ...] = ()
_logs = False

#: A log4j 2 configuration with every logger off: the JVM's at its start and after :func:`log_to`.
_OFF = "status = error\nrootLogger.level = off\n"
_LEVELS = ("ERROR", "WARN", "INFO", "DEBUG", "TRACE")


def running_release() -> str | None:
    """The Kafka version whose jars the process's JVM carries, or None before the first start."""
    return _release


def _keep_ctrl_c() -> None:
    """Give SIGINT back to Python after the JVM started. The JVM installs its own handler:
    with JPype's default (``interrupt=True``) Ctrl-C halted the process at once, leaving the
    brokers it had started running; with ``interrupt=False`` alone, SIGINT was ignored (a
    ``kafka fuzz --client both`` campaign went on through it). Python's handler raises
    KeyboardInterrupt, so the code that started brokers and clients stops them. Only the
    main thread may set it; a JVM started elsewhere keeps the JVM's."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def ensure_jvm(version: str = DEFAULT_KAFKA_VERSION, extra: Sequence[Path] = ()) -> Any:
    """Start (once) the JVM with Kafka ``version`` and the jars of the ``extra`` folders on the
    class path; return the ``jpype`` module."""
    global _release, _extra, _logs
    try:
        import jpype
    except ImportError as exc:
        raise ConfigError("Kafka's classes need JPype: pip install 'epochlab[kafka]'", where="jpype",
                          field="jpype", expected="JPype1 installed", got=None) from exc
    with _lock:
        if _release is not None:
            if _release != version:
                raise ConfigError(f"this process's JVM already carries Kafka {_release}; run Kafka "
                                  f"{version} in another process", where="jvm", field="version",
                                  expected=_release, got=version)
            missing = [str(f) for f in extra if Path(f) not in _extra]
            if missing:
                raise ConfigError(f"this process's JVM was started without {missing[0]}; run this in "
                                  "another process", where="jvm", field="classpath",
                                  expected=[str(f) for f in _extra], got=missing)
            return jpype
        folder = jar_dir(version)
        binding = folder / LOGGING
        logging = binding.is_dir() and any(binding.glob("log4j-slf4j-impl-*.jar"))
        jars = sorted(str(p) for p in folder.glob("*.jar") if not (logging and p.name.startswith("slf4j-nop")))
        jars = sorted(str(p) for p in binding.glob("*.jar")) + jars if logging else jars
        jars += [str(p) for f in extra for p in sorted(Path(f).glob("*.jar"))]
        if not jars:
            raise ConfigError(f"no jars in {folder}", where=str(folder), field="jars",
                              expected="Kafka's jars", got=0)
        if jpype.isJVMStarted():
            raise ConfigError("this process's JVM was started outside epochlab.kafka.jvm, with an "
                              f"unknown class path; run Kafka {version} in another process",
                              where="jvm", field="version", expected="no JVM yet", got=version)
        options = ["-Xmx512m", "-XX:+UseSerialGC"]
        if logging:
            options += ["-Dlog4j2.level=OFF", "-Dlog4j2.statusLoggerLevel=OFF",
                        "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector"]
        jpype.startJVM(*options, classpath=jars, convertStrings=False, interrupt=False)
        _keep_ctrl_c()
        if any(Path(j).name.startswith("log4j-1.") for j in jars):
            _silence_log4j(jpype)
        _release = version
        _extra = tuple(Path(f) for f in extra)
        _logs = logging
        return jpype


def logs() -> bool:
    """Whether the process's JVM can write a log (:func:`log_to`): started, and with log4j 2's
    binding in place of ``slf4j-nop`` (module doc)."""
    return _logs


def log_to(path: Path | None, level: str = "INFO", pattern: str = "%d{UNIX_MILLIS} %p [%c] %m%n") -> None:
    """Send what Kafka's classes (``org.apache.kafka``) log at ``level`` and above to ``path``
    (overwritten), one ``pattern`` line each; ``None``: log nothing again (the file is closed).
    Raises :class:`ConfigError` when the JVM cannot log (:func:`logs`)."""
    if level not in _LEVELS:
        raise ConfigError(f"log level: expected one of {', '.join(_LEVELS)}, got {level!r}", where="jvm",
                          field="level", expected=list(_LEVELS), got=level)
    if not _logs:
        raise ConfigError("this process's JVM has no log binding (a Kafka release before 4.0, or a jar "
                          "cache made before jars/logging existed: epochlab kafka jars)", where="jvm",
                          field="logging", expected="log4j 2's SLF4J binding on the class path", got=_release)
    import jpype

    text = _OFF if path is None else "\n".join([
        "status = error", "appender.run.type = File", "appender.run.name = run", f"appender.run.fileName = {path}",
        "appender.run.append = false", "appender.run.layout.type = PatternLayout",
        f"appender.run.layout.pattern = {pattern}", "rootLogger.level = off", "logger.kafka.name = org.apache.kafka",
        f"logger.kafka.level = {level}", "logger.kafka.appenderRef.run.ref = run", ""])
    core = "org.apache.logging.log4j.core.config."
    context = jpype.JClass("org.apache.logging.log4j.LogManager").getContext(False)
    source = jpype.JClass(core + "ConfigurationSource")(jpype.JClass("java.io.ByteArrayInputStream")(text.encode()))
    factory = jpype.JClass(core + "properties.PropertiesConfigurationFactory")()
    context.reconfigure(factory.getConfiguration(context, source))


def _silence_log4j(jpype: Any) -> None:
    """Give log4j 1.2 a null appender: Kafka's failures reach Python as exceptions."""
    appender = jpype.JClass("org.apache.log4j.varia.NullAppender")()
    jpype.JClass("org.apache.log4j.BasicConfigurator").configure(appender)
