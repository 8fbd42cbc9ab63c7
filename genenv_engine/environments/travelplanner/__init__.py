"""TravelPlanner-mini (benchmark ``travelplanner``): plan-field steps over a synthetic sandbox.

Modules: :mod:`.mini` (:class:`TravelPlannerMini`, the ``tp_constraints`` checker), :mod:`.db` (sandbox,
query, schedule), :mod:`.formats` (upstream and compact plan formats), :mod:`.constraints` (the commonsense
and hard constraints), :mod:`.solver` (min-cost completion), :mod:`.upstream` (the upstream query CSV).
"""

from genenv_engine.environments.travelplanner.mini import TravelPlannerMini

__all__ = ["TravelPlannerMini"]
