"""``python -m genenv_engine.warmstart``: runs the warm-start command (`genenv_engine.warmstart.command.main`)."""

from genenv_engine.warmstart.command import main

if __name__ == "__main__":
    main()
