"""The version of mdakit_fastrdf: the single source of truth.

The build reads it from this file (``pyproject.toml``: scikit-build-core's regex metadata
provider), so the wheel's metadata, ``mdakit_fastrdf.__version__``, ``build_info()['version']``
and the documentation agree. ``tests/packaging/test_metadata.py`` checks that ``CITATION.cff`` and the
top entry of ``CHANGELOG.md`` name the same version. Versions follow Semantic Versioning
(https://semver.org): MAJOR.MINOR.PATCH, with ``.devN`` between releases.
"""

__version__ = "0.1.0"
