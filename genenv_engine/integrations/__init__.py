"""Co-evolution inside agent trainers other than genenv's own: the trainer trains the agent while the co-evolution
core (`genenv_engine.method.coevolution`) runs the environment side. `trl`: TRL's ``GRPOTrainer``."""
