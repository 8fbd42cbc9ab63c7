"""``python -m genenv_engine.training.warmstart``: runs the warm-start command
(`genenv_engine.training.warmstart.command.main`)."""

from genenv_engine.training.warmstart.command import main

if __name__ == "__main__":
    main()
