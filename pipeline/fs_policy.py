"""Which paths commscope reads: the one symlink and file-type policy for every input path.

**Policy.** It applies to log files found by ``ingest`` (``commscope.pipeline.ingest.discover``), run
manifests (``commscope.pipeline.run_config.read_manifest``), ``serve``'s run folders
(``commscope.pipeline.runs.discover_runs``) and the re-check when a file is opened
(``commscope.pipeline.ingest.ingest_file`` and ``commscope.parsers._io.Source.open``):

1. **Named paths are the user's choice.** A file named on the command line is read even if it
   is a symlink (to anywhere).
2. **Inside a walked folder, a symlinked file is read only if it resolves inside that
   folder.** Links out of the folder, broken links and link loops are reported per path and
   never read. This covers a ``manifest.json`` beside the logs too: a manifest linked from
   outside the input folder is not read, so it is neither stored nor shown in a report.
3. **Symlinked folders are never followed** inside a walk (``ingest``: reported per folder;
   ``serve``: a symlinked run folder is skipped with a note). Name the target to read it.
4. **Only regular files are read.** A device, FIFO or socket named on the command line is
   refused with one line naming its kind (``not a regular file (character device)``); a
   folder walk skips it with a per-path note. A FIFO is never opened in blocking mode (the
   open uses ``O_NONBLOCK``, and the type is checked before anything is read).
5. **What was checked is what is read.** When a file is opened for parsing, the opened
   descriptor must be the file that was checked: a path that was not a symlink is opened
   with ``O_NOFOLLOW``, and the descriptor's ``(st_dev, st_ino)`` must equal the checked
   file's. A file swapped for a symlink or for another file after it was checked is refused
   ("replaced after it was found"), never read. (A file deleted and then re-created can get
   the same inode number back; a rename over the path, the usual swap, cannot.)
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "folder"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISLNK, "symlink"),
)

OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
"""Flags of every checked open: read-only, and never blocking on a FIFO swapped in."""

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def kind_of(mode: int) -> str:
    """A file type in words, for messages (``regular file``, ``FIFO``, ``character device``)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "regular file" if stat.S_ISREG(mode) else "special file"


def not_regular(mode: int) -> str | None:
    """The refusal message for a file that is not a regular file (rule 4), else None."""
    if stat.S_ISREG(mode):
        return None
    return f"not a regular file ({kind_of(mode)})"


def symlink_problem(f: Path, tree: Path) -> str | None:
    """Why a symlink met inside the walked folder ``tree`` is not read (rule 2); None otherwise.

    Args:
        f: a path inside ``tree`` (not resolved).
        tree: the walked folder, resolved.
    """
    if not f.is_symlink():
        return None
    try:
        target = f.resolve(strict=True)
    except (OSError, RuntimeError):
        return "broken or looping symlink, not followed"
    if not target.is_relative_to(tree):
        return f"symlink to {target}, outside the input folder {tree}: not followed"
    return None


@dataclass(frozen=True)
class Checked:
    """A file that passed the policy: where to read it and which file it must be."""

    real: Path
    """The resolved path (no symlink in it)."""
    identity: tuple[int, int]
    """``(st_dev, st_ino)`` of the checked file."""
    size: int


def check_file(path: Path, *, symlink_ok: bool = True) -> Checked | str:
    """Check ``path`` against the policy and open it once to prove it is the file checked.

    Args:
        path: the file to read.
        symlink_ok: whether ``path`` may be a symlink now (it was one when it was found, or it
            was named explicitly). False for a file found as a plain file in a walk: if it is
            a symlink now, it was swapped after discovery.

    Returns:
        The checked file, or a one-line reason it is refused (missing, permission denied, not
        a regular file, swapped for a symlink).
    """
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if not symlink_ok:
                return "replaced by a symlink after it was found: not read"
            real = path.resolve(strict=True)
            st = real.stat()
        else:
            real = path.parent.resolve(strict=True) / path.name
        problem = not_regular(st.st_mode)
        if problem is not None:
            return problem
        fd = os.open(real, OPEN_FLAGS | NOFOLLOW)
        try:
            fst = os.fstat(fd)
        finally:
            os.close(fd)
    except PermissionError:
        return "permission denied"
    except RuntimeError:
        return "symlink loop, not followed"
    except OSError as exc:
        return exc.strerror or str(exc)
    if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(fst.st_mode):
        return "replaced after it was found: not read"
    return Checked(real, (fst.st_dev, fst.st_ino), fst.st_size)


def read_checked(path: Path, tree: Path, limit: int) -> bytes | str | None:
    """Read a small file found inside the walked folder ``tree`` (a manifest), by the policy.

    Args:
        path: the file (inside ``tree``).
        tree: the folder it was found in (resolved or not).
        limit: read at most this many bytes plus one (the caller refuses longer files).

    Returns:
        The bytes; None when there is no such file; or a one-line reason it is not read
        (a symlink out of the folder, not a regular file, unreadable).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    flags = OPEN_FLAGS
    if stat.S_ISLNK(st.st_mode):
        problem = symlink_problem(path, tree.resolve())
        if problem is not None:
            return problem
    else:
        flags |= NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        fst = os.fstat(fd)
        problem = not_regular(fst.st_mode)
        if problem is not None:
            return problem
        if not stat.S_ISLNK(st.st_mode) and (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            return "replaced after it was found: not read"
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        os.close(fd)
