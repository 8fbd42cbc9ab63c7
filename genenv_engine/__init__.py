"""genenv engine: the headless GenEnv co-evolution of an agent and an environment simulator.

Importing this package loads nothing heavy: submodules are imported where they are used, so
front ends (the console, the CLI) and tests can import it cheaply.
"""

__version__ = "0.1.0"
