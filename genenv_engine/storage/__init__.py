"""Sessions and storage: the SQLite store (the only SQL), a session folder and its lease, read-only views of a session,
progress and the remote control file.
"""
