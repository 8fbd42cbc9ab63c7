"""The GenEnv method: the controller that owns the epoch (`loop`), the named strategies it resolves once per run, the
simulator's reward-weighted update and the procedural samplers.
"""
