"""``ferrymq admin``: Apache's ``mqadmin`` commands in Python, with its command names, option letters and
output layout, so operators' habits and scripts carry over and no JVM is needed.

One module per command family (:mod:`.cluster`, :mod:`.topic`, :mod:`.broker`, :mod:`.consumer`,
:mod:`.message`, :mod:`.offset`); each command is declared once with :func:`.command.command`. :func:`main` runs one command line.
"""

from .main import main

__all__ = ["main"]
