"""Reading files a user hands us (catalog overlays, scenarios, designs, sweeps, defaults, traffic).

One place for the errors: a missing file, a folder, an unreadable or non-UTF-8 file, broken YAML,
a duplicated key, a file too large or nested too deeply, or the wrong top-level shape each become an
``InputError`` that names the file, says what is wrong and how to fix it — never a traceback.

Limits (checked before parsing): ``MAX_USER_FILE_BYTES`` per file and ``MAX_YAML_DEPTH`` levels of
nesting. Writes are atomic (``write_atomic``): a temporary file in the same folder, renamed over the
target; the target keeps its permission bits (a new file gets the umask's), and temporary files left
by killed writers are removed by the next write to the same target.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError

MAX_USER_FILE_BYTES = 2 * 1024 * 1024  # 2 MiB: the largest sweep or catalog we ship is < 40 KiB; YAML parses at ~1 MiB/s
MAX_YAML_DEPTH = 32


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster


class _StrictLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """SafeLoader that refuses duplicate keys (YAML would silently keep the last) and deep nesting."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
        except TypeError:  # unhashable key: let the base constructor give its error
            break
        if dup:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})", key_node.start_mark)
        seen[key] = key_node
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _depth(node: yaml.Node, limit: int) -> int:
    """Nesting depth of a composed YAML node tree, iteratively (no recursion to exhaust)."""
    best, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        if best > limit:
            return best
        if isinstance(n, yaml.MappingNode):
            stack.extend((v, d + 1) for _, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend((v, d + 1) for v in n.value)
    return best


def is_file(text: str | os.PathLike) -> bool:
    """Whether ``text`` names an existing file; False for what cannot be a path (too long, NUL bytes),
    so a long or odd *name* is looked up as a name and refused as one, never a crash."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def parse_yaml_text(text: str, label: str) -> Any:
    """Parse YAML text with the limits above; ``label`` names the source in messages."""
    if len(text) > MAX_USER_FILE_BYTES:
        raise InputError(f"{label} is {len(text) / 2**20:.1f} MiB, more than the {MAX_USER_FILE_BYTES // 2**20} MiB "
                         "a ClusterTwin input file may hold", hint="split it, or check that it is the right file")
    # Flow collections ("[[[[...") are nested by the parser itself: bound them before composing.
    if re.search(r"[\[{]{" + str(MAX_YAML_DEPTH) + ",}", text):
        raise InputError(f"{label} is nested more than {MAX_YAML_DEPTH} levels deep", hint="flatten the file")
    loader = _StrictLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise InputError(f"{label} is nested more than {MAX_YAML_DEPTH} levels deep", hint="flatten the file") from None
        if node is None:
            return None
        if _depth(node, MAX_YAML_DEPTH) > MAX_YAML_DEPTH:
            raise InputError(f"{label} is nested more than {MAX_YAML_DEPTH} levels deep", hint="flatten the file")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise InputError(f"{label} is not valid YAML: {exc}", hint="fix the YAML at the line shown") from None
    finally:
        loader.dispose()


def read_text(path: str | os.PathLike, what: str, *, hint: str | None = None) -> str:
    """The text of ``path``; ``what`` names the kind of file in messages ("scenario file")."""
    p = Path(path)
    try:
        if p.is_file() and p.stat().st_size > MAX_USER_FILE_BYTES:
            raise InputError(f"{what} {str(p)!r} is {p.stat().st_size / 2**20:.1f} MiB, more than the "
                             f"{MAX_USER_FILE_BYTES // 2**20} MiB a ClusterTwin input file may hold",
                             hint="check that it is the right file")
        if p.exists() and not p.is_file() and not p.is_dir():
            raise InputError(f"{what} {str(p)!r} is not a regular file (a device or a pipe)", hint="give the path of a file")
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
    data = parse_yaml_text(text, f"{what} {str(path)!r}")
    if mapping:
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise InputError(f"{what} {str(path)!r} must hold a mapping" + (f" ({shape})" if shape else ""),
                             hint=hint)
    return data


_TMP_RE = r"^\.{name}\.(\d+)\.[^.]+\.tmp$"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but not ours
        return True
    return True


def _clean_stale_temps(parent: Path, name: str) -> None:
    """Remove temporary files of earlier writes to ``name`` whose writer process is gone."""
    pat = re.compile(_TMP_RE.format(name=re.escape(name)))
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for e in entries:
        m = pat.match(e.name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(e.path)
            except OSError:
                pass


def _target_mode(p: Path) -> int:
    try:
        return os.stat(p).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_atomic(path: str | os.PathLike, data: str | bytes | None = None, *, writer=None) -> Path:
    """Write a file so that a crash never leaves it half-written: write a temporary file in the same
    folder, flush it to disk, then rename it over the target. Pass ``data`` (text or bytes) or
    ``writer(tmp_path)`` for libraries that write to a path themselves (pyarrow). The target keeps its
    permission bits; a new file gets the umask's (not mkstemp's 0600)."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {str(p)!r}: folder {str(parent)!r} does not exist",
                         hint="create the folder first or choose another path")
    if p.is_dir():
        raise InputError(f"cannot write {str(p)!r}: it is a folder", hint="give a file name")
    _clean_stale_temps(parent, p.name)
    mode = _target_mode(p)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{os.getpid()}.", suffix=".tmp", dir=parent)
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
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except OSError as exc:
        hint = "free space on that disk and rerun" if exc.errno == 28 else None
        raise InputError(f"cannot write {str(p)!r}: {exc.strerror}", hint=hint) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return p
