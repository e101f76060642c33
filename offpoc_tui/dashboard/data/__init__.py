"""Each view's data, built in the poller thread from the store: one module per view (:mod:`.curves`,
:mod:`.quantities`, :mod:`.compare`, :mod:`.detail`), each with its data class and the function that builds
it. :class:`~offpoc_tui.dashboard.model.Model` picks the one the view on screen needs."""
