# SPDX-License-Identifier: MIT
"""forklet: a Python client for forkletd (standard library only).

    import forklet
    c = forklet.Client()
    web = c.apply(open("hello.yaml").read())[0]
    web.wait("Running")
    print(web.exec(["uname", "-a"]).stdout.decode())

See docs/clients.md.
"""

from .client import Client
from .errors import (APIError, ExecError, ForkletError, SessionFailed, TransportError,
                     WaitTimeout)
from .execstream import ExecResult
from .session import Session

__version__ = "0.1.0"
__all__ = ["Client", "Session", "ExecResult", "ForkletError", "APIError", "TransportError",
           "ExecError", "WaitTimeout", "SessionFailed"]
