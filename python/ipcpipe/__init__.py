"""ipcpipe from Python: the C library's communicator, transfers, requests,
shareable memory and one-sided put/get over any buffer NumPy, PyTorch,
CuPy or the buffer protocol hands out, without a copy (python/README.md)."""
from ._core import (  # noqa: F401
    BadDescriptor, BootstrapFailed, Comm, ConfigError, CudaError, Error, Info,
    InvalidArgument, Memory, NotRegistered, OutOfMemory, OutOfRange,
    PeerLost, PermissionDenied, Registration, Remote, Request,
    StateError, SystemCallFailed, Timeout, Truncated, Unsupported, settings,
    version)

__all__ = [
    "Comm", "Info", "Request", "Memory", "Registration", "Remote", "version",
    "settings",
    "Error", "InvalidArgument", "OutOfMemory", "SystemCallFailed", "Timeout",
    "PeerLost", "Truncated", "NotRegistered", "OutOfRange", "BadDescriptor",
    "StateError", "Unsupported", "CudaError", "BootstrapFailed",
    "PermissionDenied", "ConfigError",
]
