"""The ``offpoc`` commands, one module per group; :mod:`offpoc_tui.cli` assembles them into the app."""
