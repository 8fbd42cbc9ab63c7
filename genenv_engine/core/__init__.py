"""The engine's common ground: typed records, errors, events, limits, the machine description and the method's equations
(the alpha-curriculum reward, GRPO's loss); every other layer builds on these.
"""
