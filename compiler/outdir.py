"""The output folder as flatjob touches it: every path opened through folder descriptors, never a link.

The rendered folder comes from the same pull request as the jobs, so any of its entries may
be a symbolic link (to `/etc`, to `../.git/config`).  Each folder under the output root is
opened with O_NOFOLLOW | O_DIRECTORY relative to its parent's descriptor, and each file
with O_NOFOLLOW relative to its folder's, so a read, write, rename or delete can neither
leave the root nor pass through a link: meeting one raises LinkFound instead.  A relative
root is opened the same way from the working directory (a committed link on the way is
refused; `..` is the caller's); an absolute one is the caller's (only its last component
must not be a link).
"""

from __future__ import annotations

import errno
import os
import stat
from collections import OrderedDict
from pathlib import Path, PurePosixPath

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
# A file flatjob writes is always a new one (O_EXCL): an old file at that name may be a hard
# link to one outside the root, or a FIFO that would block the open for ever.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK}  # what O_NOFOLLOW gives for a link (Linux, BSD)


class _Refused(Exception):
    """A path flatjob will not use (rel: its path under the root, "" for the root itself;
    `path`: the path as named, for a folder on the way to the root)."""

    def __init__(self, rel: str, path: str | None = None) -> None:
        super().__init__(rel)
        self.rel, self.path = rel, path

    def where(self, root: Path) -> str:
        """The path to name in a message (before issue 21, `-o link` was named `link/link`)."""
        if self.path is not None:
            return self.path
        return str(root / self.rel) if self.rel else str(root)


class LinkFound(_Refused):
    """A symbolic link where flatjob reads or writes."""


class NotAFile(_Refused):
    """Something other than a regular file (a folder) where flatjob reads or writes a file."""


def _is_link_error(exc: OSError) -> bool:
    return exc.errno in _LINK_ERRNOS


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


OPEN_FOLDERS = 64  # folder descriptors a SafeDir keeps open at most


class SafeDir:
    """Descriptor-relative access to a root folder and everything under it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fds: OrderedDict[str, int] = OrderedDict()  # the most recently used last; at most OPEN_FOLDERS
        self._listings: dict[str, frozenset[str]] = {}  # folder -> its names, for listed() (read-only plans)
        self.made: list[str] = []  # folders this object created, in creation order

    # --- folders -----------------------------------------------------------------------

    def open_root(self, create: bool) -> bool:
        """Open the root (creating it and its parents if asked); False when it does not exist."""
        if "" in self._fds:
            return True
        parts = self.root.parts
        if self.root.is_absolute():
            parent = Path(*parts[:-1]) if len(parts) > 1 else Path("/")
            if create:
                parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return False
            names = parts[-1:] if len(parts) > 1 else ()
        else:
            fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
            names = tuple(p for p in parts if p != ".")
        walked = []
        for name in names:
            walked.append(name)
            try:
                fd = self._step(fd, name, create, PurePosixPath(*walked).as_posix(), root_level=True)  # closes the parent
            except (LinkFound, NotAFile) as exc:  # the root itself, or a folder on the way to it
                raise type(exc)("", None if len(walked) == len(names) else exc.rel) from None
            if fd < 0:
                return False
        self._fds[""] = fd
        return True

    def _step(self, parent: int, name: str, create: bool, shown: str, root_level: bool = False) -> int:
        """Open folder `name` under `parent` (closing `parent` when at root level); -1 if missing."""
        try:
            try:
                return os.open(name, _DIR, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    return -1
                try:
                    os.mkdir(name, dir_fd=parent)
                except FileExistsError:
                    pass  # another compile made it between our open and mkdir: it is not ours to undo
                else:
                    if not root_level:
                        self.made.append(shown)
                return os.open(name, _DIR, dir_fd=parent)
            except OSError as exc:
                # O_DIRECTORY | O_NOFOLLOW on a link gives ENOTDIR on Linux, ELOOP elsewhere.
                if _is_link_error(exc) or (exc.errno == errno.ENOTDIR and _is_link(parent, name)):
                    raise LinkFound(shown) from None
                if exc.errno == errno.ENOTDIR:
                    raise NotAFile(shown) from None
                raise
        finally:
            if root_level:
                os.close(parent)

    def folder(self, rel: str, create: bool = False) -> int:
        """A descriptor of folder `rel` under the root ("" is the root); -1 when it does not exist."""
        if rel in self._fds:
            self._fds.move_to_end(rel)
            return self._fds[rel]
        if rel == "":
            return self._fds[""] if self.open_root(create) else -1
        head, _, name = rel.rpartition("/")
        parent = self.folder(head, create)
        if parent < 0:
            return -1
        fd = self._step(parent, name, create, rel)
        if fd >= 0:
            self._fds[rel] = fd
            self._evict()
        return fd

    def listed(self, rel: str) -> bool:
        """Whether `rel` is in the folder, from listings of the folders it passes through,
        each read once, from the root down: a metadata file may name 300 000 files, each in a
        folder of its own, and opening each name's folders cost 2 s (and looking each up from
        its own folder upwards, 0.9 s)."""
        here = ""
        for part in rel.split("/"):
            names = self._listing(here)
            if names is None or part not in names:
                return False
            here = f"{here}/{part}" if here else part
        return True

    def names(self, rel: str = "") -> frozenset[str]:
        """The names in folder `rel` (read once; empty when it cannot be opened)."""
        return self._listing(rel) or frozenset()

    def _listing(self, rel: str) -> frozenset[str] | None:
        """The names in folder `rel`, whose parent lists it (cached), or None when it cannot be opened."""
        if rel in self._listings:
            return self._listings[rel]
        fd = self.folder(rel)
        if fd < 0:
            return None
        names = frozenset(os.listdir(fd))
        self._listings[rel] = names
        return names

    def _evict(self) -> None:
        """Close the least recently used folders beyond OPEN_FOLDERS (never the root): a
        committed metadata file may name files in thousands of folders, and each held open
        would run a CI runner out of descriptors. Callers use a descriptor at once, and hold at
        most two (a rename's), both just used, so none is closed under them."""
        while len(self._fds) > OPEN_FOLDERS:
            oldest = next(k for k in self._fds if k != "")
            os.close(self._fds.pop(oldest))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- files -------------------------------------------------------------------------

    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        """A file's bytes (at most `limit` + 1 of them: more says it is bigger), or None when
        it does not exist."""
        head, _, name = rel.rpartition("/")
        parent = self.folder(head)
        if parent < 0:
            return None
        try:
            fd = os.open(name, _READ, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if _is_link_error(exc):
                raise LinkFound(rel) from None
            if exc.errno == errno.ENOTDIR:
                raise NotAFile(head) from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotAFile(rel)
            cap = None if limit is None else limit + 1
            chunks, size = [], 0
            while cap is None or size < cap:
                chunk = os.read(fd, 1 << 20 if cap is None else min(1 << 20, cap - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def exists(self, rel: str) -> bool:
        """Whether anything (a file, a folder, a link) is at `rel`; folders on the way must not be links."""
        head, _, name = rel.rpartition("/")
        parent = self.folder(head)
        if parent < 0:
            return False
        try:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def write(self, rel: str, data: bytes) -> None:
        """Write `rel` as a new file with the umask's mode, after removing whatever was at that
        name (every caller writes a staged or temporary name of flatjob's own, then renames it)."""
        self._listings.clear()  # listed() reads the folder as it is now
        head, _, name = rel.rpartition("/")
        parent = self.folder(head, create=True)
        try:
            os.unlink(name, dir_fd=parent)  # a link, a hard link, a FIFO: the name, never what it points at
        except FileNotFoundError:
            pass
        except (IsADirectoryError, PermissionError):
            raise NotAFile(rel) from None
        try:
            fd = os.open(name, _CREATE, 0o666, dir_fd=parent)
        except OSError as exc:
            if _is_link_error(exc):
                raise LinkFound(rel) from None
            raise
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        """Move file `src` over `dst` (atomic; a link at `dst` is replaced, never followed)."""
        self._listings.clear()  # listed() reads the folder as it is now
        shead, _, sname = src.rpartition("/")
        dhead, _, dname = dst.rpartition("/")
        source = self.folder(shead)
        if source < 0:
            raise FileNotFoundError(2, "No such file or directory", src)
        os.replace(sname, dname, src_dir_fd=source, dst_dir_fd=self.folder(dhead, create=True))

    def unlink(self, rel: str) -> bool:
        """Delete file `rel`; False when it was not there."""
        self._listings.clear()  # listed() reads the folder as it is now
        head, _, name = rel.rpartition("/")
        parent = self.folder(head)
        if parent < 0:
            return False
        try:
            os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            return False
        except (IsADirectoryError, PermissionError):  # a folder (EISDIR; EPERM elsewhere) at a file's name
            raise NotAFile(rel) from None
        return True

    def remove_empty(self, rel: str) -> bool:
        """Remove folder `rel` if it is empty; False when it is not (or not there)."""
        self._listings.clear()  # listed() reads the folder as it is now
        head, _, name = rel.rpartition("/")
        parent = self.folder(head)
        if parent < 0 or not name:
            return False
        fd = self._fds.pop(rel, None)
        if fd is not None:
            os.close(fd)
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError:
            return False
        return True

    def fileno(self) -> int:
        """The root's descriptor (for locking it)."""
        return self._fds[""]
