"""The command-line tool ``mdakit-fastrdf``, the top layer of the package: the main command
(:mod:`.app`, computing g(r) with :class:`~mdakit_fastrdf.InterRDF` or
:class:`~mdakit_fastrdf.LateralRDF`), the subcommands the analyses declare
(:mod:`.commands`) and what both share (:mod:`.common`)."""

from .app import main

__all__ = ["main"]
