"""A kernel's working copy: the submission's files in, the files the notebook wrote back out, both capped.

A stock nbgrader kernel runs in ``autograded/<student>/<assignment>/``: it reads every file there (data files,
helpers, hidden folders such as ``.data/``) and what it writes (plots, CSV files, checkpoints) stays there. A confined
kernel runs in a copy instead, so:

- ``copy_in`` copies the folder's plain files and folders, hidden ones included, up to a total size; notebooks stay
  out (the one being graded holds the hidden tests; an earlier autograded copy too), and so do symbolic links, FIFOs
  and devices (a link in a submission would hand the kernel whatever it points to);
- ``copy_out`` copies the plain files the kernel created or changed back, up to a number of files and a total
  size. It reads the kernel's files while student code may still be running there, so it never follows a link,
  walks by file descriptor (``os.fwalk``, opened ``O_NOFOLLOW``), opens nothing that is not a plain file, and writes
  only below the target folder, through folders it created or checked itself.

Both return what they left out, for the log.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

NOTEBOOK = ".ipynb"
CHUNK = 1 << 20


def copy_in(source: str, target: str, max_bytes: int) -> list[str]:
    """Copy ``source``'s plain files and folders (hidden ones too, notebooks not) into ``target``, in sorted order,
    until ``max_bytes``; the relative paths left out for size."""
    skipped: list[str] = []
    used = 0
    inside = os.path.realpath(target)  # a scratch folder inside the notebook's folder is not copied into itself
    for folder, dirs, files in os.walk(source):  # never follows links to folders
        dirs.sort()
        relative = os.path.relpath(folder, source)
        os.makedirs(os.path.join(target, relative), exist_ok=True)
        for name in list(dirs):
            path = os.path.join(folder, name)
            if not stat.S_ISDIR(os.lstat(path).st_mode) or inside.startswith(os.path.realpath(path) + os.sep) \
                    or os.path.realpath(path) == inside:
                dirs.remove(name)
        for name in sorted(files):
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if name.endswith(NOTEBOOK) or not stat.S_ISREG(info.st_mode):
                continue
            if used + info.st_size > max_bytes:
                skipped.append(os.path.normpath(os.path.join(relative, name)))
                continue
            used += info.st_size
            shutil.copyfile(path, os.path.join(target, relative, name), follow_symlinks=False)
    return skipped


def _same(dir_fd: int, name: str, original: str) -> bool:
    """Whether the kernel's file ``name`` (in ``dir_fd``) has the bytes of the working copy's ``original``."""
    try:
        if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size != os.lstat(original).st_size:
            return False
    except OSError:
        return False
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as mine, open(original, "rb") as theirs:
        while True:
            a, b = mine.read(CHUNK), theirs.read(CHUNK)
            if a != b:
                return False
            if not a:
                return True


def _target_folder(target: str, relative: str) -> str | None:
    """``target/relative``, created as needed; None where a component exists and is not a plain folder (never
    written through a link)."""
    path = target
    for part in Path(relative).parts:
        if part in (".", ""):
            continue
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            os.mkdir(path)
            continue
        if not stat.S_ISDIR(mode):
            return None
    return path


def _copy_file(dir_fd: int, name: str, out_path: str, limit: int) -> int:
    """Copy the plain file ``name`` of ``dir_fd`` to ``out_path``, at most ``limit`` bytes; the bytes copied.
    OSError when it is not a plain file (any more)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise OSError(f"{name} is not a plain file")
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        copied = 0
        with os.fdopen(out, "wb") as dst:
            while copied < limit:
                block = src.read(min(CHUNK, limit - copied))
                if not block:
                    break
                dst.write(block)
                copied += len(block)
        return copied


def copy_out(kernel_dir: str, original: str, target: str, max_files: int, max_bytes: int) -> tuple[int, list[str]]:
    """Copy the plain files of ``kernel_dir`` (the kernel's working folder) that are new or differ from
    ``original`` (what ``copy_in`` gave it) into ``target``, notebooks excepted, within ``max_files`` files and
    ``max_bytes`` bytes; the number copied and the relative paths left out."""
    copied, used, skipped = 0, 0, []
    for folder, dirs, files, dir_fd in os.fwalk(kernel_dir, follow_symlinks=False):
        dirs.sort()
        relative = os.path.relpath(folder, kernel_dir)
        for name in sorted(files):
            rel = os.path.normpath(os.path.join(relative, name))
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if name.endswith(NOTEBOOK) or not stat.S_ISREG(info.st_mode):
                    continue
                if _same(dir_fd, name, os.path.join(original, rel)):
                    continue
            except OSError:  # gone, or swapped for something else meanwhile (student code may still run)
                skipped.append(rel)
                continue
            if copied >= max_files or used + info.st_size > max_bytes:
                skipped.append(rel)
                continue
            try:
                folder_out = _target_folder(target, relative)
            except OSError:
                folder_out = None
            if folder_out is None:
                skipped.append(rel)
                continue
            out_path = os.path.join(folder_out, name)
            if os.path.lexists(out_path) and not stat.S_ISREG(os.lstat(out_path).st_mode):
                skipped.append(rel)
                continue
            try:
                used += _copy_file(dir_fd, name, out_path, max_bytes - used)
            except OSError:
                skipped.append(rel)
                continue
            copied += 1
    return copied, skipped
