"""genenv engine: the headless GenEnv co-evolution of an agent and an environment simulator."""

__version__ = "0.1.0"

DISTRIBUTION = "genenv-console"
"""The distribution this project is installed as: its metadata's name, its extras (``genenv-console[log]``) and
what a plugin environment depends on. The import packages (``genenv_engine``, ``genenv_console``) and the commands
(``genenv``, ``genenv-console``) keep their names. ``genenv`` on the package index is an unrelated project that also
installs a ``genenv`` command; ``genenv --version`` names the distribution, and ``python -m genenv_engine`` always
runs this one."""
