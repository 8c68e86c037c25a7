"""ENGINE=slurm: a one-node Slurm (munged, slurmctld and slurmd started here by .ci/grading_services.sh, always
stopped) on which dask-jobqueue's SLURMCluster grades the representative part of the hw1 corpus
(tests/test_grading_distributed.py ``representative``: every kind of outcome, every grade cell lost), two jobs of one
worker each: every submission gets the score it deserves, as on the local engine (tests/test_grading_corpus.py grades
the whole corpus there). Needs root and Debian's slurm-wlm and munge
(`make test` installs them as root); skipped, saying why, elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from course_tools import grading_corpus
from course_tools.grading.zygote import unprotected_refusal
from course_tools.release import REPO
from tests.test_grading_distributed import representative

SCRIPT = REPO / ".ci" / "grading_services.sh"
HW1 = "hw1_dimensions"


@pytest.fixture(scope="module")
def slurm():
    if os.geteuid() != 0:
        pytest.skip("a private Slurm needs root (slurmd runs jobs as their users)")
    if not (shutil.which("slurmctld") or os.path.exists("/usr/sbin/slurmctld")):
        pytest.fail("Slurm is not installed (make test installs slurm-wlm and munge as root)")
    line = unprotected_refusal()
    if line:
        pytest.skip(line)
    # Not pytest's tmp_path: munged runs as the munge account and must reach its folder (pytest's are private).
    folder = Path(tempfile.mkdtemp(prefix="td-slurm-"))
    folder.chmod(0o755)
    saved = os.environ.get("SLURM_CONF")
    try:
        subprocess.run(["bash", str(SCRIPT), "slurm-start", str(folder)], check=True, timeout=120)
        os.environ["SLURM_CONF"] = str(folder / "slurm.conf")
        yield folder
    finally:
        subprocess.run(["bash", str(SCRIPT), "slurm-stop", str(folder)], timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved


def test_the_hw1_corpus_on_slurm_gets_the_scores_it_deserves(slurm, tmp_path):
    submissions = representative(grading_corpus.load_corpus(HW1))
    scores = grading_corpus.grade(HW1, submissions, tmp_path, args=(
        "--engine", "slurm", "--workers", "2", "--cores", "1", "--memory", "3GiB", "--walltime", "00:30:00"))
    found = [p for s in submissions for p in grading_corpus.problems(s, scores[s.name])]
    assert not found, "\n".join(found)
    results = json.loads((tmp_path / "course" / "results" / f"{HW1}.json").read_text())
    assert results["ungraded"] == [] and results["submitted_files_changed"] == []
    assert results["protections_by_host"], "no result came from a Slurm job"
    left = subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip()
    assert not left, f"jobs left in the queue: {left}"
