from wire import _compiled

_compiled.install()  # before any compiled module of server loads
