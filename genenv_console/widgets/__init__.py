"""Reusable console widgets: the status bar and the live plots."""
