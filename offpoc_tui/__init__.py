"""offpoc's application: the ``offpoc`` command line, the launcher and the training worker.

Imports of torch and gymnasium stay inside the commands that train, so ``offpoc ps``,
``show`` and ``export`` start fast.
"""
