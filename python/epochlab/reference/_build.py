"""Build identity of the reference twin, mirroring ``epochlab._core.__version__`` and ``BUILD``."""

import platform

__version__ = "0.1.0"
BUILD = f"epochlab.reference {__version__} (pure Python {platform.python_version()})"
