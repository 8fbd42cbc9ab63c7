"""API-Bank-mini (benchmark ``apibank``): next API call after a short dialogue, checked by executing it.

Modules: :mod:`.mini` (:class:`ApiBankMini`, the ``apibank_exec`` checker), :mod:`.db` (mock database and
APIs), :mod:`.syntax` (the call form and time/date normalisers), :mod:`.dialogue` (the prompt grammar and its
strict reader), :mod:`.task_grammar` (the Lark grammar of a task, for constrained decoding), :mod:`.upstream`
(official API-Bank dialogues).
"""

from genenv_engine.environments.apibank.mini import ApiBankMini

__all__ = ["ApiBankMini"]
