"""offpoc's application: the ``offpoc`` command line, the scheduler, the workers and the dashboard.

The interface: :mod:`offpoc_tui.cli` assembles the app from :mod:`offpoc_tui.commands` (one module
per command group), which parse, validate and print; :mod:`offpoc_tui.dashboard` is the Textual app.
The runtime they drive: :mod:`offpoc_tui.scheduler` (one detached process per store, starting queued
runs), :mod:`offpoc_tui.worker` (one process per run), :mod:`offpoc_tui.control` (stop, resume),
:mod:`offpoc_tui.checkpoints` (which checkpoint a run may load), and the Ray backend
(:mod:`offpoc_tui.ray_backend`, :mod:`offpoc_tui.ray_task`).

Imports of torch and gymnasium stay inside the commands that train, so ``offpoc ps``,
``show`` and ``export`` start fast.
"""
