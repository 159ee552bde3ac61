"""Reading files a user hands us (catalog overlays, scenarios, designs, sweeps, defaults, traffic).

One place for the errors: a missing file, a folder, an unreadable or non-UTF-8 file, broken YAML or
the wrong top-level shape each become an ``InputError`` that names the file, says what is wrong and
how to fix it — never a traceback.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError


def read_text(path: str | os.PathLike, what: str, *, hint: str | None = None) -> str:
    """The text of ``path``; ``what`` names the kind of file in messages ("scenario file")."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {str(p)!r} does not exist", hint=hint or "check the path") from None
    except IsADirectoryError:
        raise InputError(f"{what} {str(p)!r} is a folder, not a file", hint=hint or "give the path of a file") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {str(p)!r} is not UTF-8 text", hint="save it as UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {str(p)!r}: {exc.strerror}") from None


def read_yaml(path: str | os.PathLike, what: str, *, hint: str | None = None, shape: str | None = None,
              mapping: bool = True) -> Any:
    """Parse a YAML file. With ``mapping`` (the default) the top level must be a mapping; an empty file
    reads as ``{}``. ``shape`` describes the expected content for the error message."""
    text = read_text(path, what, hint=hint)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{what} {str(path)!r} is not valid YAML: {exc}",
                         hint="fix the YAML syntax at the line shown") from None
    if mapping:
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise InputError(f"{what} {str(path)!r} must hold a mapping" + (f" ({shape})" if shape else ""),
                             hint=hint)
    return data


def write_atomic(path: str | os.PathLike, data: str | bytes | None = None, *, writer=None) -> Path:
    """Write a file so that a crash never leaves it half-written: write a temporary file in the same
    folder, flush it to disk, then rename it over the target. Pass ``data`` (text or bytes) or
    ``writer(tmp_path)`` for libraries that write to a path themselves (pyarrow)."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {str(p)!r}: folder {str(parent)!r} does not exist",
                         hint="create the folder first or choose another path")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write in {str(parent)!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if writer is None:
                fh.write(data if isinstance(data, bytes) else (data or "").encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
        if writer is not None:
            writer(tmp)
        os.replace(tmp, p)
    except OSError as exc:
        raise InputError(f"cannot write {str(p)!r}: {exc.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return p
