"""Chain: the built-in benchmark of ``k`` chained integer function calls (:class:`ChainEnv`, benchmark ``chain``),
level ``k`` from 1 to 8; the whole chain must be right.

Modules: :mod:`.mini` (the environment, its generator and its ``chain_exact`` checker), :mod:`.grammar` (the
rules, the prompt grammar and the gold chain it recomputes), :mod:`.task_grammar` (the Lark grammar of a task,
for constrained decoding).
"""

from genenv_engine.environments.chain.mini import ChainEnv

__all__ = ["ChainEnv"]
