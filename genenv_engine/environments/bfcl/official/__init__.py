"""The real BFCL benchmark (``bfcl_official``), from the pinned ``bfcl-eval`` wheel (imports without it).

Modules: :mod:`.environment` (:class:`BfclOfficial`), :mod:`.data` (package access, prompts, items),
:mod:`.calls` (safe call decoding and rendering), :mod:`.multiturn` (multi-turn items on the official backends).
"""

from genenv_engine.environments.bfcl.official.environment import BfclOfficial

__all__ = ["BfclOfficial"]
