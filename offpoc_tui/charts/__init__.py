"""Figure files (matplotlib): the paper's learning curves with the user's runs (:mod:`.curves`) and the
aggregate, profile and improvement figures (:mod:`.aggregate`), written by ``offpoc plot``."""
