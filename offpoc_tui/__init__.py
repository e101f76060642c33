"""offpoc's application: the ``offpoc`` command line, the dashboard, and the runtime they drive.

The interface, at this level: :mod:`offpoc_tui.cli` assembles the app from :mod:`offpoc_tui.commands`
(one module per command group), which parse, validate and print, with what they share (:mod:`.console`,
:mod:`.params`, :mod:`.specs`, :mod:`.sweep`, :mod:`.views`, :mod:`.follow`); :mod:`offpoc_tui.dashboard`
is the Textual app; :mod:`offpoc_tui.charts` writes figure files.

The runtime, in :mod:`offpoc_tui.runtime`: the store's scheduler, one worker process per run, stopping
and resuming, which checkpoint a run may load, and the Ray backend. It parses no `offpoc` command line.

Imports of torch and gymnasium stay inside the commands that train, so ``offpoc ps``,
``show`` and ``export`` start fast.
"""
