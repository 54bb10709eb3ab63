"""Build identity of the reference twin, mirroring ``epochlab._core.__version__`` and ``BUILD``.

The version is the installed package's (its metadata, which maturin fills from Cargo.toml, the
one place the version is written), the same string the Rust core was compiled with."""

import platform
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("epochlab")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "unknown"
BUILD = f"epochlab.reference {__version__} (pure Python {platform.python_version()})"
