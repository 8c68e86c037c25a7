"""``nbgrader collect`` that copies plain files only, never following a symbolic link.

Students write their submissions into the exchange's inbound folder themselves. Stock ``collect`` copies them
into ``submitted/`` with ``shutil.copytree``, following symbolic links, as the grader: a student's
``notes.txt -> /srv/course/source/hw1/hw1.ipynb`` (or ``-> .../gradebook.db``) becomes a plain file of the
submission, holding the solutions, the hidden tests or everyone's grades, which the student's kernel then reads
and the feedback hands back. Here links are never followed: every file is opened with ``O_NOFOLLOW`` and must
be a regular file; links, FIFOs and devices are left out, with a warning. Enabled in the course's
``nbgrader_config.py`` (``c.ExchangeFactory.collect``).
"""

from __future__ import annotations

import os
import shutil
import stat
import typing as t

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import ignore_patterns


def copy_regular_file(src: str, dst: str, *, follow_symlinks: bool = True) -> str:
    """copytree's ``copy_function``: copy ``src`` only if it is a regular file, without following a link, even
    one swapped in after copytree listed the folder (O_NOFOLLOW; O_NONBLOCK so that a FIFO cannot block)."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{src}: not a regular file")
        with open(dst, "wb") as target:
            shutil.copyfileobj(source, target)
    os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))
    return dst


def remove_non_regular(folder: str, log: t.Any) -> None:
    """Remove the links copytree recreated (``symlinks=True``) from a copy we own."""
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(parent, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                log.warning("Left out %s: a symbolic link or special file, not a plain file", path)
                os.unlink(path)


class SafeCollect(ExchangeCollect):
    """The default exchange's collect, copying plain files only."""

    def do_copy(self, src: str, dest: str, log: t.Any = None) -> None:
        dir_size = self.get_size(src)
        if dir_size > 1000 * self.coursedir.max_dir_size:
            self.log.error("Directory size is too big")
            raise RuntimeError(f"Directory size is too big. Size is {dir_size}, "
                               f"maximum size is {1000 * self.coursedir.max_dir_size}")
        skip = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                               max_file_size=self.coursedir.max_file_size, log=self.log)

        def ignore(folder: str, names: list[str]) -> set[str]:
            skipped = set(skip(folder, names))
            for name in names:
                mode = os.lstat(os.path.join(folder, name)).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    self.log.warning("Left out %s: a symbolic link or special file", os.path.join(folder, name))
                    skipped.add(name)
            return skipped

        # symlinks=True: a link that appears between the listing and the copy is copied as a link (then removed),
        # never followed; a file swapped for a link fails its O_NOFOLLOW open.
        shutil.copytree(src, dest, symlinks=True, ignore=ignore, copy_function=copy_regular_file)
        remove_non_regular(dest, self.log)
        if self.coursedir.groupshared:  # as the stock do_copy: dirs ug+rwx, files ug+rw
            for dirname, _, filenames in os.walk(dest):
                for path, bits, mask in [(dirname, 0o2770, 0o2777)] + [
                        (os.path.join(dirname, f), 0o660, 0o777) for f in filenames]:
                    mode = os.stat(path).st_mode
                    if mode & bits != bits:
                        try:
                            os.chmod(path, (mode | bits) & mask)
                        except PermissionError:
                            self.log.warning("Could not update permissions of %s to make it groupshared", path)
