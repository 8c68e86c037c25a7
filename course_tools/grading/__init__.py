"""Hardened, distributed nbgrader autograding (docs/security.md).

Plugged into nbgrader through ``autograder/nbgrader_config.py``, which names these modules as an installed package
(``make setup`` installs course_tools with torchdoctor), so a copy of the course root grades anywhere. One job per
module, each importing only modules above it in this list (tests/test_grading_helpers.py checks it):

- ``sandbox``: confine a process (namespaces, chroot, resource limits, unprivileged uid); ``probe`` what is possible.
- ``files``: a kernel's working copy: the submission's files in, the files the notebook wrote out (both capped).
- ``zygote``: a pre-warmed process (ipykernel, and what the source notebooks import) that forks confined kernels.
- ``kernel``: the jupyter_client kernel manager whose kernels the zygote forks (ipc transport).
- ``execute``: nbgrader's Execute with those kernels; kernel deaths and timeouts cost only their cell.
- ``restore``: restore deleted, emptied and metadata-stripped locked cells from the gradebook; report tampering.
- ``collect``: ``nbgrader collect`` copying plain files only (never following students' symbolic links).
- ``requirement_text``: the requirement sentences (``[R<part>.<n>]``) of an assignment's text, quoted in feedback.
- ``references``: what hidden tests observe on the reference solution, once per batch, kept across runs.
- ``exam_static``: a bug-clinic exam fix refused before it runs when it steps outside what the working script does.
- ``exam_cells``: a bug-clinic exam notebook refused when the student's own cells reach past the exam's case.
- ``exam_verdict``: the bug-clinic exam's verdicts: the roster's case, the diagnosis, the fix run confined.
- ``verdict``: pass/fail decided by the grader from what the hidden tests observed on the submission.
- ``feedback``: feedback shows no hidden test line, not even quoted in a traceback.
- ``compat``: refuse to grade when the Jupyter stack lacks a private method grading overrides (an upgrade).
- ``results``: per-test results JSON, read back from the gradebook and the autograded notebooks.
- ``nbgrader_costs``: per-submission costs of nbgrader that change no result, removed on the grading workers and
  in the gradebook writer.
- ``writer``: the one gradebook writer: assignment templates for workers, result bundles recorded through nbgrader.
- ``engine``: Dask clusters (local, an existing one, Slurm), workers' zygotes, one grading task per submission.
- ``autograde``: ``make autograde``: the batch on the engine, gradebook checks, hashes, results.
- ``attack_corpus``: the attack corpus of ``make test``.
- ``observe_asserts``: convert stock hidden asserts into observed tests (a command for instructors; imports none).
"""
