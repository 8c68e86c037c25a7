"""Hardened, parallel nbgrader autograding (README: "Grading you can trust").

Plugged into nbgrader through ``autograder/nbgrader_config.py``; one job per module:

- ``sandbox``: confine a process (namespaces, chroot, resource limits, unprivileged uid); ``probe`` what is possible.
- ``zygote``: a pre-warmed process (torch, ipykernel imported) that forks one confined kernel per submission.
- ``kernel``: the jupyter_client kernel manager whose kernels the zygote forks (ipc transport).
- ``execute``: nbgrader's Execute with those kernels; kernel deaths and timeouts cost only their cell.
- ``restore``: restore deleted, emptied and metadata-stripped locked cells from the gradebook; report tampering.
- ``references`` and ``verdict``: what hidden tests observe on the reference solution, and pass/fail decided by the
  grader from what they observe on the submission.
- ``autograde``: ``make autograde``: parallel workers, gradebook checks, hashes, ``results``: per-test JSON.
- ``attack_corpus``: the attack corpus of ``make test``.
"""
