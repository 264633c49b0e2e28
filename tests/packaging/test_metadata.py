"""Registry and packaging metadata: one version everywhere, MDAKit metadata.yaml complete."""

import re
from importlib import metadata as importlib_metadata
from pathlib import Path

import pytest

import mdakit_fastrdf

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
VERSION_FILE = ROOT / "mdakit_fastrdf" / "_version.py"

#: Required entries of the MDAKit registry's metadata.yaml template.
REQUIRED = ("project_name", "authors", "maintainers", "description", "keywords", "license",
            "project_home", "documentation_home", "documentation_type")


def source_version():
    match = re.search(r'^__version__ = "([^"]+)"$', VERSION_FILE.read_text(), re.M)
    assert match, "mdakit_fastrdf/_version.py must define __version__"
    return match.group(1)


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def registry_metadata():
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "metadata.yaml").read_text(encoding="utf-8"))


def test_version_is_semver_and_single_sourced():
    version = source_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", version)
    project = pyproject()
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    provider = project["tool"]["scikit-build"]["metadata"]["version"]
    assert provider["input"] == "mdakit_fastrdf/_version.py"
    assert mdakit_fastrdf.__version__ == version


def test_installed_metadata_matches():
    try:
        installed = importlib_metadata.version("mdakit_fastrdf")
    except importlib_metadata.PackageNotFoundError:  # pragma: no cover
        pytest.skip("mdakit_fastrdf is not installed with metadata")
    assert installed == mdakit_fastrdf.__version__
    assert mdakit_fastrdf.build_info()["version"] == mdakit_fastrdf.__version__


def test_changelog_and_citation_name_the_version():
    version = source_version()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d[^\]]*)\]", changelog, re.M)
    assert releases and releases[0] == version.split(".dev")[0]
    citation = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(rf"^version: {re.escape(version)}$", citation, re.M)
    assert "cff-version: 1.2.0" in citation


def test_citation_cites_the_papers_of_the_design():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    dois = {ref.get("doi") for ref in cff["references"]}
    # CADISHI, Levine/Stone/Kohlmeyer, Al-Kharusi/Walker (../shared/papers) and MDAnalysis
    assert {"10.1016/j.cpc.2018.10.018", "10.1016/j.jcp.2011.01.048",
            "10.1177/1094342019846282", "10.1002/jcc.21787"} <= dois
    assert cff["license"] == "MIT"


def test_registry_metadata_complete_and_consistent():
    meta = registry_metadata()
    for key in REQUIRED:
        assert meta.get(key), f"metadata.yaml: required entry {key!r} is empty"
    project = pyproject()["project"]
    assert meta["project_name"] == project["name"]
    assert meta["import_name"] == "mdakit_fastrdf"
    assert meta["license"] == "MIT" == project["license"]["text"]
    assert meta["python_requires"] == project["requires-python"]
    mda = [d for d in project["dependencies"] if d.startswith("MDAnalysis")]
    assert mda and meta["mdanalysis_requires"] == mda[0][len("MDAnalysis"):]
    urls = project["urls"]
    assert meta["project_home"] == urls["Source"]
    assert meta["documentation_home"] == urls["Documentation"]
    assert meta["changelog"] == urls["Changelog"]
    # the registry's template writes the status as the name of a PyPI "Development Status"
    # classifier without its prefix ("Production/Stable"); pyproject.toml has the classifier
    status = [c for c in project["classifiers"] if c.startswith("Development Status :: ")]
    assert len(status) == 1
    assert meta["development_status"] == status[0].split(" - ", 1)[1] == "Alpha"
    assert meta["run_tests"] and meta["src_install"]


def test_license_and_typing_marker():
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert (ROOT / "mdakit_fastrdf" / "py.typed").exists()
    assert "Typing :: Typed" in pyproject()["project"]["classifiers"]
    assert Path(mdakit_fastrdf.__file__).with_name("py.typed").exists()


def test_docs_conf_reads_the_version():
    text = (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    assert "_version.py" in text


def _names(requirements):
    return {re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower() for req in requirements}


def test_test_dependencies_match_the_test_extra():
    """The registry installs what CI installs with ".[test]", h5py included (HDF5 tests)."""
    extras = pyproject()["project"]["optional-dependencies"]
    test_extra = _names(extras["test"])
    assert "h5py" in test_extra and "h5py" in _names(extras["hdf5"])
    commands = registry_metadata()["test_dependencies"]
    assert len(commands) == 1 and commands[0].startswith("pip install ")
    assert _names(commands[0].split()[2:]) == test_extra


def test_readthedocs_config():
    """Read the Docs (metadata.yaml's documentation_home) builds docs/conf.py with -W, from
    the package installed by pip with its docs extra."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    assert config["build"]["os"] == "ubuntu-24.04"
    python = str(config["build"]["tools"]["python"])
    assert f"Programming Language :: Python :: {python}" in pyproject()["project"]["classifiers"]
    assert config["sphinx"]["configuration"] == "docs/conf.py"
    assert (ROOT / config["sphinx"]["configuration"]).is_file()
    assert config["sphinx"]["fail_on_warning"] is True
    assert {"method": "pip", "path": ".", "extra_requirements": ["docs"]} in (
        config["python"]["install"])
    docs_extra = _names(pyproject()["project"]["optional-dependencies"]["docs"])
    assert "sphinx" in docs_extra
    assert registry_metadata()["documentation_home"].endswith(".readthedocs.io")
