"""The console's screens: dashboard, tasks, sessions, and the edit, help and error modals."""
