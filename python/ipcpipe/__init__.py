"""ipcpipe from Python: the C library's communicator, transfers and
requests over any buffer NumPy, PyTorch, CuPy or the buffer protocol
hands out, without a copy (python/README.md)."""
from ._core import Comm, Error, Info, Request, version  # noqa: F401

__all__ = ["Comm", "Error", "Info", "Request", "version"]
