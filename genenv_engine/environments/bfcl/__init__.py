"""BFCL: the built-in mini (:class:`BfclMini`, benchmark ``bfcl``) and, in :mod:`.official`, the real items
with BFCL's own checkers (benchmark ``bfcl_official``).

Modules: :mod:`.mini` (the environment and its ``bfcl_ast`` checker), :mod:`.catalog` (the function catalog
and the prompt grammar), :mod:`.task_grammar` (the Lark grammar of a task, for constrained decoding).
"""

from genenv_engine.environments.bfcl.mini import BfclMini

__all__ = ["BfclMini"]
