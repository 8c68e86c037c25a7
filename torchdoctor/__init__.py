"""torchdoctor: the companion library of the Torch Doctor course."""

__version__ = "0.1.0"
