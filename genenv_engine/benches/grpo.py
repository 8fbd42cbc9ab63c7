"""``genenv bench grpo``: placeholder."""

def add_arguments(parser):
    """Options."""


def run(args):
    """Entry point."""
    return {"error": "not implemented yet"}


def table(result):
    """Table."""
    from rich.table import Table
    return Table(title="grpo")
