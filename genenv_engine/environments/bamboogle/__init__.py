"""Bamboogle-mini (benchmark ``bamboogle``): multi-hop QA with a local search tool, scored by EM / token F1.

Modules: :mod:`.mini` (:class:`BamboogleMini`, the ``qa_em_f1`` checker), :mod:`.kb` (knowledge base and
BM25), :mod:`.prompt` (the question grammar and its strict reader), :mod:`.upstream` (the upstream Q/A file).
"""

from genenv_engine.environments.bamboogle.mini import BamboogleMini

__all__ = ["BamboogleMini"]
