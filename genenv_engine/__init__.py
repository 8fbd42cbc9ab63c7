"""genenv engine: the headless GenEnv co-evolution of an agent and an environment simulator."""

__version__ = "0.1.0"
