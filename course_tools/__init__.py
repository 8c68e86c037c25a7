"""Tools that build, run and grade the course (not part of the torchdoctor library)."""
