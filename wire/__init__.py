from . import _compiled

_compiled.install()  # before any compiled module of wire or server loads
