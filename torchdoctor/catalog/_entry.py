"""What a catalog entry is, and the helpers that reproducers of several chapters share."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

Needs = Literal["cpu", "cuda", "cuda-build-without-gpu", "cpu-only-build"]

# Where the tests raise an entry's reproducer for real, by what it needs. The CPU runner (and any machine
# like it) has the pinned PyTorch, a CUDA build, and no GPU; the GPU runner has a CUDA GPU.
CHECKED_ON: dict[str, str] = {
    "cpu": "CPU",
    "cuda-build-without-gpu": "CPU (a CUDA build of PyTorch without a GPU)",
    "cuda": "CUDA runner only",
    "cpu-only-build": "not on the course's runners (needs a CPU-only build of PyTorch)",
}
SpecificFix = Callable[[Mapping[str, str]], str]


@dataclass(frozen=True)
class ErrorEntry:
    """One error the course teaches.

    ``exception_types`` lists the accepted class names, the one raised by the pinned PyTorch first; an empty
    tuple accepts any type (used when PyTorch re-raises someone else's exception). ``specific_fix`` turns the
    named groups of ``pattern`` into advice that uses the numbers in the message. ``needs`` says where the
    reproducer can raise the error. ``quotes_other_errors`` marks messages that embed the message of the error
    that caused them (a DataLoader worker's traceback): such entries are matched before all others.
    ``chapter`` is a slug of the course manifest (course.toml); a test checks it exists there.
    """

    id: str
    title: str
    chapter: str
    exception_types: tuple[str, ...]
    pattern: str
    example: str
    cause: str
    fix: str
    reproducer: Callable[[], None]
    needs: Needs = "cpu"
    specific_fix: SpecificFix | None = None
    quotes_other_errors: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern, re.DOTALL))

    @property
    def checked_on(self) -> str:
        """Where the tests raise this entry's error for real: 'CPU', 'CUDA runner only', ..."""
        return CHECKED_ON[self.needs]

    @property
    def exception_type(self) -> str:
        return self.exception_types[0] if self.exception_types else "Exception"

    def fix_for(self, groups: Mapping[str, str]) -> str:
        """The fix, made specific with the numbers of one message where the entry knows how."""
        if self.specific_fix is not None and groups and all(v is not None for v in groups.values()):
            return self.specific_fix(groups)
        return self.fix


@contextmanager
def warnings_as_errors(category: type[Warning]) -> Iterator[None]:
    """Turn one warning category into an exception, so a reproducer can raise a warning like an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", category)
        yield
