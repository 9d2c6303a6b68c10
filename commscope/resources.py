"""Where commscope's data files are: the SQL modules, the example run configs and the bundled
real sample runs.

Why through the package: installed from a wheel, commscope has no source tree; these folders are
package data (``commscope.sql``, ``commscope.configs``, ``commscope.sample_traces``) found with
:mod:`importlib.resources`, so ``derive``, ``report`` and ``demo`` work from any folder. In an
editable install they are the checkout's ``sql/``, ``configs/`` and ``sample_traces/``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _folder(package: str) -> Path:
    """The folder of a data package on disk.

    Raises:
        RuntimeError: the package is not on disk (a zipped install), which commscope does not
            support: DuckDB and the parsers read these files by path.
    """
    found = resources.files(package)
    if not isinstance(found, Path):
        raise RuntimeError(
            f"{package} is not installed as files on disk ({found!r}); install commscope "
            "from its wheel or source folder, not as a zip"
        )
    return found


def sql_dir() -> Path:
    """The SQL modules: ``macros/``, ``staging/``, ``intermediate/``, ``marts/``."""
    return _folder("commscope.sql")


def configs_dir() -> Path:
    """The example run configs (TOML: the paper's GPT-3B layouts and the generator's runs)."""
    return _folder("commscope.configs")


def sample_traces_dir() -> Path:
    """The bundled real recordings, one run per sub-folder (see its README.md)."""
    return _folder("commscope.sample_traces")
