"""Lets nbgrader (and JupyterLab's nbgrader extension) started from the repository root find the course."""

from pathlib import Path

load_subconfig(str(Path(__file__).resolve().parent / "autograder" / "nbgrader_config.py"))  # noqa: F821
