"""The command-line tool ``mdakit-fastrdf``, the top layer of the package: the program
(:mod:`.app`: :func:`main`, ``--info``), the commands the analyses declare, the main one
(g(r), declared by :class:`~mdakit_fastrdf.InterRDF`) included (:mod:`.commands`), and what
they share (:mod:`.common`)."""

from .app import main

__all__ = ["main"]
