"""The public environment API and the registry that finds a benchmark by the name a run gives it.

The API (version `API_VERSION`): `Environment`, `LadderEnvironment`, `Task`, `CheckResult`, `Validation`,
`SplitSizes`, `GenerationParseError`; `docs/guide/environments.md` says how to write one.

A benchmark is named in ``benchmarks`` (``--benchmarks``, a config file, a preset) in one of four spellings, read
in this order:

1. ``rg:<dataset>``: a reasoning-gym dataset, served by the adapter `ADAPTERS` names
   (`genenv_engine.environments.reasoning_gym`);
2. ``module:Class``: the class imported from an importable module (a module named ``rg`` is refused);
3. a built-in name (`BENCHMARKS`);
4. the name of an entry point in the ``genenv.environments`` group (`ENTRY_POINT_GROUP`) of an installed package,
   whose value is the ``module:Class`` of the environment.

Inside a run a benchmark is known by its class's ``name`` alone (`NAME_PATTERN`: a bare TOML key), in task ids
and in the settings keyed by benchmark (``--set data_dirs.countdown=...``, ``curriculum.alpha_by_benchmark``).
The run's config records how each benchmark that is not built in was found (``[environments]``, name -> `Source`
text), so a saved session reads without the plugin (status, reports, exports) and only running it imports the
class (`RunConfig.check_paths` calls `require`). A plugin's class is built with the keyword options the config gives
it (``[environments_options.<name>]``, checked against its ``__init__`` by `check_options`). Nothing here imports a
benchmark until it is asked for.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from genenv_engine.core.errors import ConfigError
from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.base import (
    API_VERSION,
    NAME_PATTERN,
    Environment,
    GenerationParseError,
    LadderEnvironment,
    SplitSizes,
)

__all__ = [
    "ADAPTERS",
    "API_VERSION",
    "BENCHMARKS",
    "ENTRY_POINT_GROUP",
    "NAME_PATTERN",
    "PAPER_BENCHMARKS",
    "CheckResult",
    "Environment",
    "GenerationParseError",
    "LadderEnvironment",
    "Source",
    "SplitSizes",
    "Task",
    "Validation",
    "check_options",
    "entry_point_names",
    "environment_class",
    "environments_of",
    "get_environment",
    "require",
    "resolve_benchmarks",
]

BENCHMARKS: dict[str, str] = {
    "bfcl": "genenv_engine.environments.bfcl:BfclMini",
    "bamboogle": "genenv_engine.environments.bamboogle:BamboogleMini",
    "alfworld": "genenv_engine.environments.alfworld:AlfworldMini",
    "apibank": "genenv_engine.environments.apibank:ApiBankMini",
    "travelplanner": "genenv_engine.environments.travelplanner:TravelPlannerMini",
    "bfcl_official": "genenv_engine.environments.bfcl.official:BfclOfficial",
    "alfworld_textworld": "genenv_engine.environments.alfworld.textworld:AlfworldTextWorld",
    "chain": "genenv_engine.environments.chain:ChainEnv",
}
"""The built-in benchmark names and the class implementing each (a benchmark subpackage and the class its
``__init__`` exposes; ``chain`` is a generated benchmark of chained calls whose level is the chain length 1-8)."""

PAPER_BENCHMARKS: tuple[str, ...] = ("bfcl", "apibank", "alfworld", "bamboogle", "travelplanner")
"""The five benchmarks of the GenEnv paper as built-in minis (what ``--benchmarks all`` enables).

``bfcl_official`` (the real BFCL items and official checker, from the pinned ``bfcl-eval`` wheel) is
selectable by name instead of ``bfcl``; its prompts (median ~2k characters) are for real LLMs."""

ENTRY_POINT_GROUP = "genenv.environments"
"""The entry-point group an installed package registers its environments in: ``name = "module:Class"``, the name
equal to the class's ``name``."""

ADAPTERS: dict[str, str | None] = {"rg": "genenv_engine.environments.reasoning_gym.adapter:rg_environment"}
"""Reserved name prefixes (``rg:<dataset>``) -> the ``module:function`` of the adapter that serves them, None while
none does. The function takes the text after the prefix and returns an `Environment` class; an adapter also gives
its `Source` a distribution and version by defining ``<function>_origin() -> (distribution, version)``."""

_FOUND: dict[str, Source] = {}
"""The benchmarks that are not built in, by name, as this process found them (from a spelling or a saved config)."""


@dataclass(frozen=True)
class Source:
    """How a benchmark that is not built in was found: ``kind`` (``module``, ``entry point`` or ``adapter``),
    ``target`` (``module:Class``, or the ``rg:<dataset>`` spelling) and the distribution that provided it."""

    kind: str
    target: str
    distribution: str = ""
    version: str = ""

    @property
    def text(self) -> str:
        """The text a config records (`parse` reads it back).

        >>> Source("entry point", "countdown_env:Countdown", "countdown-env", "0.1").text
        'entry point countdown_env:Countdown from countdown-env 0.1'
        >>> Source.parse("module mypkg.env:Countdown")
        Source(kind='module', target='mypkg.env:Countdown', distribution='', version='')
        """
        origin = f" from {self.distribution} {self.version}" if self.distribution else ""
        return f"{self.kind} {self.target}{origin}"

    @classmethod
    def parse(cls, text: str) -> Source:
        """The source a config recorded as ``text``; ValueError when it is not one."""
        match = re.fullmatch(r"(module|entry point|adapter) (\S+:\S+)(?: from (\S+) (\S+))?", text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not '<module|entry point|adapter> <module:Class>[ from <dist> <version>]'")
        return cls(match[1], match[2], match[3] or "", match[4] or "")

    def describe(self) -> str:
        """The source in words, for an error line."""
        if self.kind == "entry point":
            return f"entry point {self.target} of group {ENTRY_POINT_GROUP}" + (
                f" (package {self.distribution} {self.version})" if self.distribution else ""
            )
        return f"{self.kind} {self.target}"

    def load(self, name: str | None = None) -> type[Environment]:
        """The class of benchmark ``name`` (None: whatever its name, for a spelling not yet resolved); a one-line
        `ConfigError` naming the missing module or entry point."""
        if self.kind == "adapter":
            return _adapted(self.target)[0]
        module, _, attr = self.target.partition(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            what = f"benchmark {name!r} comes from {self.describe()}, which" if name else f"{self.target}"
            missing = f"install {self.distribution}" if self.distribution else "put its folder on PYTHONPATH"
            raise ConfigError("benchmarks", f"{what} is not importable here ({exc}); {missing}") from None
        return _checked(found, self.target, name)

    def installed(self) -> Source:
        """This source with the version of its distribution installed here (itself when it names none or that
        one is not installed)."""
        if not self.distribution:
            return self
        try:
            return dataclasses.replace(self, version=metadata.version(self.distribution))
        except metadata.PackageNotFoundError:
            return self


def _checked(cls: Any, spelling: str, name: str | None = None) -> type[Environment]:
    """``cls`` if it is an environment class this genenv can run (under ``name`` when given); else a ConfigError."""
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise ConfigError("benchmarks", f"{spelling} is not a genenv_engine.environments.Environment subclass")
    if inspect.isabstract(cls):
        raise ConfigError("benchmarks", f"{spelling} does not write {', '.join(sorted(cls.__abstractmethods__))}")
    if not re.fullmatch(NAME_PATTERN, cls.name or ""):
        raise ConfigError(
            "benchmarks",
            f"{spelling} has name {cls.name!r}; a benchmark name is lowercase letters, "
            "digits and '_', starting with a letter",
        )
    if cls.api_version > API_VERSION:
        raise ConfigError(
            "benchmarks",
            f"{spelling} needs environment API {cls.api_version}; this genenv has {API_VERSION}: upgrade genenv",
        )
    if name is not None and cls.name != name:
        raise ConfigError("benchmarks", f"{spelling} loads a class named {cls.name!r}, not {name!r}")
    return cls


def _adapted(spelling: str) -> tuple[type[Environment], Source]:
    """The class and source of a name with a reserved prefix (``rg:<dataset>``), from the adapter serving it."""
    prefix, _, rest = spelling.partition(":")
    target = ADAPTERS[prefix]
    if target is None:
        raise ConfigError(
            "benchmarks",
            f"{spelling!r}: names starting '{prefix}:' are reserved for the "
            "reasoning-gym adapter, which is not available in this genenv",
        )
    module, _, attr = target.partition(":")
    adapter = importlib.import_module(module)
    origin = getattr(adapter, f"{attr}_origin", lambda: ("", ""))()
    return _checked(getattr(adapter, attr)(rest), spelling), Source("adapter", spelling, *origin)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def entry_point_names() -> list[str]:
    """The names of the environments installed packages register (`ENTRY_POINT_GROUP`), sorted."""
    return sorted(_entry_points())


def _find(spelling: str) -> tuple[str, Source | None]:
    """The name and source of a benchmark spelling (None for a built-in), importing its class; a ConfigError."""
    prefix, sep, _ = spelling.partition(":")
    if sep and prefix in ADAPTERS:
        cls, source = _adapted(spelling)
    elif sep:
        top = prefix.split(".")[0]
        if top in ADAPTERS:
            raise ConfigError(
                "benchmarks",
                f"{spelling!r}: a module named {top!r} is refused ('{top}:' names are "
                "reserved for the reasoning-gym adapter); rename the package",
            )
        source = Source("module", spelling)
        cls = source.load()
    elif spelling in BENCHMARKS:
        return spelling, None
    else:
        ep = _entry_points().get(spelling)
        if ep is None:
            known = [*BENCHMARKS, *entry_point_names()]
            raise ConfigError(
                "benchmarks", f"unknown benchmark {spelling!r}; known: {', '.join(known)}, or module:Class"
            )
        dist = ep.dist
        source = Source("entry point", ep.value, dist.name if dist else "", dist.version if dist else "")
        cls = source.load(spelling)  # an entry point's name is its class's
    if cls.name in BENCHMARKS:
        if environment_class(cls.name) is cls:
            return cls.name, None
        raise ConfigError(
            "benchmarks", f"{spelling} is named {cls.name!r}, a built-in benchmark's name; give it another name"
        )
    _FOUND[cls.name] = source
    return cls.name, source


def resolve_benchmarks(spellings: Sequence[str], recorded: Mapping[str, str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The benchmarks' names inside a run and how each one not built in was found (name -> `Source.text`).

    A name ``recorded`` by a saved config keeps its source without importing anything (its class loads only when
    the run needs it); any other spelling is found as the module docstring says, importing its class. Raises a
    one-line `ConfigError`."""
    names: list[str] = []
    sources: dict[str, str] = {}
    for spelling in spellings:
        if spelling in recorded:
            try:
                _FOUND[spelling] = Source.parse(recorded[spelling])
            except ValueError as exc:
                raise ConfigError(f"environments.{spelling}", str(exc)) from None
            names.append(spelling)
            sources[spelling] = _FOUND[spelling].text
            continue
        name, source = _find(spelling)
        names.append(name)
        if source is not None:
            sources[name] = source.text
    return tuple(names), sources


def current_sources(recorded: Mapping[str, str]) -> dict[str, str]:
    """``recorded`` sources with each package's installed version: what a new session's tasks come from."""
    return {name: Source.parse(text).installed().text for name, text in recorded.items()}


def release_change(name: str, recorded: str) -> str | None:
    """Why a session whose benchmark ``name`` was recorded as ``recorded`` cannot go on here: its package is
    installed at another version, whose tasks may differ from the ones the session stored; None when it can."""
    source = Source.parse(recorded)
    now = source.installed()
    if now.version == source.version:
        return None
    dist = source.distribution
    return (
        f"benchmark {name!r} was recorded from {dist} {source.version}, but {dist} {now.version} is installed "
        f"here, whose tasks may differ from the ones the session stored; install {dist}=={source.version} to go "
        "on with it, or start a new session"
    )


def require(names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Import the class of every benchmark in ``names`` that is not built in (where a run starts) and check the
    keyword ``options`` given to it (`check_options`); a one-line `ConfigError` naming the module or entry point of
    the first that is missing here. (A built-in that needs an optional package says so where it is built.)"""
    for name in names:
        if name not in BENCHMARKS:
            check_options(name, environment_class(name), (options or {}).get(name))


RESERVED_OPTIONS = ("seed", "sizes", "data_dir")
"""The constructor arguments genenv itself passes; ``environments_options`` may not set them."""


def check_options(name: str, cls: type[Environment], options: Mapping[str, Any] | None) -> None:
    """Raise a one-line `ConfigError` unless ``cls.__init__`` accepts every keyword of ``options`` (the
    ``environments_options`` of benchmark ``name``); a built-in benchmark accepts none."""
    if not options:
        return
    if name in BENCHMARKS:
        raise ConfigError(
            f"environments_options.{name}",
            f"{name!r} is a built-in benchmark, which takes no options; options are for plugin environments",
        )
    params = inspect.signature(cls.__init__).parameters.values()
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    accepted = [
        p.name
        for p in params
        if p.name != "self"
        and p.name not in RESERVED_OPTIONS
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    for key in options:
        if key in RESERVED_OPTIONS:
            raise ConfigError(
                f"environments_options.{name}.{key}",
                f"{key!r} is set by genenv; options are the class's other keyword arguments",
            )
        if not takes_any and key not in accepted:
            raise ConfigError(
                f"environments_options.{name}.{key}",
                f"benchmark {name!r} ({cls.__module__}.{cls.__qualname__}) takes no option {key!r}; "
                f"it accepts: {', '.join(accepted) or 'no options'}",
            )


def environment_class(name: str) -> type[Environment]:
    """The environment class of the benchmark ``name``: built in, found by this process (`resolve_benchmarks`),
    or an installed entry point. KeyError for a name none of these knows."""
    if name in BENCHMARKS:
        module, _, cls = BENCHMARKS[name].partition(":")
        return getattr(importlib.import_module(module), cls)
    if name not in _FOUND and name in _entry_points():
        _find(name)
    if name not in _FOUND:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    return _FOUND[name].load(name)


def environments_of(config: Any) -> dict[str, Environment]:
    """Every benchmark a run config names, seeded and with its data folder: the environments the loop runs on."""
    options = getattr(config, "environments_options", {})
    return {
        name: get_environment(name, config.seed, data_dir=config.data_dirs.get(name), options=options.get(name))
        for name in config.benchmarks
    }


def get_environment(
    name: str,
    seed: int = 0,
    sizes: SplitSizes | None = None,
    data_dir: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Environment:
    """Build the environment ``name`` with seeded splits (and upstream data from ``data_dir`` if given), its class
    given the keyword ``options`` of a plugin (`check_options`, from ``environments_options``); a class that sets
    ``sandboxed_check`` has its ``check`` run in a contained worker (`sandboxed_check`)."""
    cls = environment_class(name)
    check_options(name, cls, options)
    env = cls(seed=seed, sizes=sizes, data_dir=data_dir, **dict(options or {}))
    env.constructor_options = dict(options or {})  # keys its cached splits (`LadderEnvironment.splits`)
    if getattr(env, "sandboxed_check", False):
        sandboxed_check(env)
    return env


SANDBOXED_CHECK_SECONDS = 20.0
"""How long a sandboxed ``check`` may take before its worker is killed and the reply fails (``score_timeout``)."""
_SANDBOXED: dict[str, Environment] = {}
"""The environments whose ``check`` runs in a worker, by name: the forked worker finds its environment here."""


def _check_in_worker(name: str, task: Task, response: str) -> dict[str, Any]:
    """The class's own ``check`` of the environment registered as ``name``, as data (run in the worker)."""
    env = _SANDBOXED[name]
    result = type(env).check(env, task, response)
    return {
        "success": bool(result.success),
        "score": float(result.score),
        "sub_scores": {str(k): float(v) for k, v in result.sub_scores.items()},
        "error_type": None if result.error_type is None else str(result.error_type),
    }


def _result(data: Any) -> CheckResult:
    """A `CheckResult` from the worker's data; ValueError for anything else (the worker may have run the reply).

    >>> _result({"success": True, "score": 1.0, "sub_scores": {}, "error_type": None}).success
    True
    """
    if not (
        isinstance(data, dict)
        and isinstance(data.get("success"), bool)
        and isinstance(data.get("score"), (int, float))
        and isinstance(data.get("sub_scores"), dict)
        and isinstance(data.get("error_type"), (str, type(None)))
    ):
        raise ValueError("not a check result")
    return CheckResult(
        data["success"],
        min(1.0, max(0.0, float(data["score"]))),
        {str(k): float(v) for k, v in data["sub_scores"].items()},
        data["error_type"],
    )


class _SandboxedCheck:
    """An environment's ``check`` called in its contained worker (pickles with the environment, unstarted)."""

    def __init__(self, env: Environment, seconds: float) -> None:
        from genenv_engine.environments.sandbox import Sandbox

        self.env = env
        self.box = Sandbox(_check_in_worker, seconds=seconds, contained=True, name=env.name)

    def __call__(self, task: Task, response: str) -> CheckResult:
        from genenv_engine.environments.sandbox import SandboxError

        _SANDBOXED[self.env.name] = self.env  # what the worker, forked from here, scores with
        try:
            return _result(self.box.call(self.env.name, task, response))
        except SandboxError as err:
            return CheckResult(False, 0.0, error_type=getattr(err, "genenv_reason", "score_error"))
        except ValueError:
            return CheckResult(False, 0.0, error_type="score_error")


def sandboxed_check(env: Environment, seconds: float = SANDBOXED_CHECK_SECONDS) -> None:
    """Run ``env``'s ``check`` in a forked worker under the sandbox's containment
    (`genenv_engine.environments.sandbox`): no file written, no process, socket or signal, ``seconds`` a call; a
    reply whose check fails there, runs past its time or answers something else is a failed rollout with its
    reason. A `ConfigError` where the containment is not available."""
    from genenv_engine.environments.sandbox import unavailable_reason

    missing = unavailable_reason()
    if missing:
        raise ConfigError(
            "benchmarks", f"{env.name} asks for a sandboxed check, and the sandbox cannot contain one ({missing})"
        )
    env.check = _SandboxedCheck(env, seconds)  # type: ignore[method-assign]
