"""The C tools the package's modules run beside it."""
import os
import shutil


def find_tool(name):
    """The path of ipcpipe's tool `name`: on PATH, else in the build tree
    beside the package (build/python/ipcpipe -> build/tools); None when
    neither has it."""
    found = shutil.which(name)
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.join(here, "..", "..", "tools", name)
    return cand if os.access(cand, os.X_OK) else None
