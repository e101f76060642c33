"""What runs the runs: the store's scheduler (one detached process per store, starting queued runs),
the worker (one process per run), a run's life from claim to end (:mod:`.lifecycle`), which checkpoint
a run may load (:mod:`.checkpoints`), stopping and resuming (:mod:`.stop_resume`), and the Ray backend
(:mod:`.ray_backend`, :mod:`.ray_task`, :mod:`.ray_leftovers`). Nothing here parses a command line of
the ``offpoc`` app or prints for a user; the interface (:mod:`offpoc_tui.commands`,
:mod:`offpoc_tui.dashboard`) drives it."""
