"""The store's schema: the SQL that makes each version of it from the one before.

Its version lives in ``PRAGMA user_version``; :func:`store.db.open_store` brings an older file
up to :data:`SCHEMA_VERSION` by running each missing step of :data:`MIGRATIONS` in one transaction.
"""

from __future__ import annotations

SCHEMA_VERSION = 14

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    algo TEXT NOT NULL,
    env TEXT NOT NULL,
    correction TEXT NOT NULL,
    divergence TEXT,
    seed INTEGER NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    total_steps INTEGER NOT NULL,
    steps INTEGER NOT NULL DEFAULT 0,
    updates INTEGER NOT NULL DEFAULT 0,
    sps REAL,
    last_return REAL,
    best_return REAL,
    mean_lambda REAL,
    pid INTEGER,
    launcher_pid INTEGER,
    host TEXT,
    source TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    heartbeat REAL,
    wall_time REAL,
    checkpoint_step INTEGER,
    error TEXT,
    traceback TEXT
);
CREATE INDEX runs_status ON runs (status);
CREATE TABLE evaluations (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    wall_time REAL NOT NULL,
    return_mean REAL NOT NULL,
    return_std REAL NOT NULL,
    length_mean REAL NOT NULL,
    returns TEXT NOT NULL,
    lengths TEXT NOT NULL,
    UNIQUE (run_id, step)
);
CREATE TABLE episodes (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    episode INTEGER NOT NULL,
    return REAL NOT NULL,
    length INTEGER NOT NULL,
    UNIQUE (run_id, step)
);
CREATE TABLE train (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    updates INTEGER NOT NULL,
    critic_loss REAL,
    actor_loss REAL,
    q_mean REAL,
    alpha REAL,
    sps REAL NOT NULL,
    UNIQUE (run_id, step)
);
CREATE TABLE weights (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    first_update INTEGER NOT NULL,
    first_step INTEGER NOT NULL,
    count INTEGER NOT NULL,
    columns TEXT NOT NULL,
    mean REAL NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (run_id, first_step)
);
CREATE TABLE histograms (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    counts TEXT NOT NULL,
    UNIQUE (run_id, step)
);
"""

# Imported runs: ``origin`` names what a run was imported as (unique, so importing twice adds
# nothing; NULL for trained runs), and evaluations may lack what a published curve does not
# record (wall time, spread across episodes, episode length): those columns become nullable,
# which SQLite only allows by rebuilding the table.
_V2 = """
ALTER TABLE runs ADD COLUMN origin TEXT;
CREATE UNIQUE INDEX runs_origin ON runs (origin);
CREATE TABLE evaluations_v2 (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step INTEGER NOT NULL,
    wall_time REAL,
    return_mean REAL NOT NULL,
    return_std REAL,
    length_mean REAL,
    returns TEXT NOT NULL,
    lengths TEXT NOT NULL,
    UNIQUE (run_id, step)
);
INSERT INTO evaluations_v2 SELECT id, run_id, step, wall_time, return_mean, return_std, length_mean, returns, lengths
    FROM evaluations;
DROP TABLE evaluations;
ALTER TABLE evaluations_v2 RENAME TO evaluations
"""

# The store's identity, which its run files and checkpoints carry: a copy of the file shares it,
# a store deleted and recreated under the same name does not.
_V3 = """
INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))))
"""

# Logged quantities besides λ (a correction declares its own): weights and histograms gain the
# quantity's name (existing rows are λ's) and histograms its range; ``quantities`` keeps each
# run's labels. The unique keys grow by the name, which SQLite only allows by rebuilding.
_V4 = """
CREATE TABLE quantities (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    label TEXT NOT NULL,
    low REAL NOT NULL,
    high REAL NOT NULL,
    UNIQUE (run_id, name)
);
INSERT OR IGNORE INTO quantities (run_id, name, label, low, high)
    SELECT run_id, 'lambda', 'λ', 0.0, 1.0 FROM (SELECT run_id FROM weights UNION SELECT run_id FROM histograms);
CREATE TABLE weights_v4 (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    quantity TEXT NOT NULL,
    first_update INTEGER NOT NULL,
    first_step INTEGER NOT NULL,
    count INTEGER NOT NULL,
    columns TEXT NOT NULL,
    mean REAL NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (run_id, quantity, first_step)
);
INSERT INTO weights_v4 SELECT id, run_id, 'lambda', first_update, first_step, count, columns, mean, data FROM weights;
DROP TABLE weights;
ALTER TABLE weights_v4 RENAME TO weights;
CREATE TABLE histograms_v4 (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    quantity TEXT NOT NULL,
    step INTEGER NOT NULL,
    counts TEXT NOT NULL,
    UNIQUE (run_id, quantity, step)
);
INSERT INTO histograms_v4 SELECT id, run_id, 'lambda', step, counts FROM histograms;
DROP TABLE histograms;
ALTER TABLE histograms_v4 RENAME TO histograms
"""

# Seeds found to be the same run plus noise (store.duplicates): the run they copy.
_V5 = """
ALTER TABLE runs ADD COLUMN duplicate_of INTEGER
"""

# Where a run runs: ``backend`` NULL on this machine (the store's scheduler starts a worker
# process), 'ray' as a task on a Ray cluster; ``stop_requested`` is how ``stop`` reaches a worker
# it cannot signal (a Ray task on another node): the writer answers its next batch with it.
_V6 = """
ALTER TABLE runs ADD COLUMN backend TEXT;
ALTER TABLE runs ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0
"""

# A run's owner: a token its worker draws when it claims the run; every write of the worker checks it,
# so a worker that lost its run (declared lost and resumed, deleted) stops without writing.
_V7 = """
ALTER TABLE runs ADD COLUMN owner TEXT
"""

# A run's revision: bumped whenever records it stored are replaced (a resumed run rewinding past its
# checkpoint), so that a reader caching records by step (the dashboard) knows to read them again.
_V8 = """
ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0
"""

# Sequential studies (store.studies): a study's design and estimand, declared before its first seed; its
# runs carry the study, the interim and the arm (method) they belong to; ``decisions`` keeps every
# interim's verdict per comparison, as it was reached.
_V9 = """
CREATE TABLE studies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    algo TEXT NOT NULL,
    env TEXT NOT NULL,
    design TEXT NOT NULL,
    estimand TEXT NOT NULL,
    arms TEXT NOT NULL,
    comparisons TEXT NOT NULL,
    first_seed INTEGER NOT NULL,
    status TEXT NOT NULL,
    note TEXT,
    created REAL NOT NULL,
    finished REAL
);
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY,
    study_id INTEGER NOT NULL,
    interim INTEGER NOT NULL,
    method TEXT NOT NULL,
    other TEXT NOT NULL,
    verdict TEXT NOT NULL,
    statistic REAL NOT NULL,
    boundary REAL,
    level_spent REAL NOT NULL,
    seeds INTEGER NOT NULL,
    recorded REAL NOT NULL,
    UNIQUE (study_id, interim, method, other)
);
ALTER TABLE runs ADD COLUMN study_id INTEGER;
ALTER TABLE runs ADD COLUMN interim INTEGER;
ALTER TABLE runs ADD COLUMN arm TEXT
"""

# A block of a logged quantity may hold every other update (TD3 logs its actor's quantities at its actor
# steps): its rows' updates and steps advance by ``stride``; 1 for every block written before.
_V10 = """
ALTER TABLE weights ADD COLUMN stride INTEGER NOT NULL DEFAULT 1
"""

# A run's tags and note (what the user says of it), and the folder its environment's module was imported
# from where it was queued (``module:Env-v0`` from the current directory), for its worker to import it too.
_V11 = """
ALTER TABLE runs ADD COLUMN note TEXT;
ALTER TABLE runs ADD COLUMN env_path TEXT;
CREATE TABLE tags (
    run_id INTEGER NOT NULL,
    tag TEXT NOT NULL,
    PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
CREATE INDEX tags_tag ON tags (tag)
"""

# AC-Off-POC's divergence and ref_std, common config fields until now, are its options, and each correction's
# paper name is the store's to record (store/methods.py): a store from before gets the record of the
# corrections built in when it was written, and its option owners learn the two options' owner. The blocks of
# logged quantities (λ and every other a correction or sampler logs) leave the table named ``weights``.
_V12 = """
INSERT OR IGNORE INTO meta (key, value) VALUES ('methods', json('[
    {"correction": "none", "paper_name": "none", "method_option": null},
    {"correction": "acoffpoc", "paper_name": "AC-Off-POC", "method_option": "divergence", "method_default": "jsd"},
    {"correction": "ace", "paper_name": "ACE", "method_option": null},
    {"correction": "geoff-pac", "paper_name": "Geoff-PAC", "method_option": null},
    {"correction": "ipg", "paper_name": "IPG", "method_option": null},
    {"correction": "ris-off-pac", "paper_name": "RIS-Off-PAC", "method_option": null}
]'));
UPDATE meta SET value = json_set(value, '$.divergence', json('["acoffpoc"]'), '$.ref_std', json('["acoffpoc"]'))
    WHERE key = 'option_owners' AND json_valid(value) AND json_type(value) = 'object';
ALTER TABLE weights RENAME TO quantity_blocks
"""

# A run trained as a lane of a lane group (agents/lanes.py) records its group: the id of the group's first run.
_V13 = """
ALTER TABLE runs ADD COLUMN lane_group INTEGER
"""

# Each comparison of a sequential study is its own two-arm test at Holm's level (store/sequential.py): a
# decision records that level and its mean difference's repeated confidence interval (empty in rows recorded
# before); its statistic and boundary are on the scale of a mean difference (they were sums over the
# interims: divided by the interim, which is exact, as every interim adds n seeds a method).
_V14 = """
ALTER TABLE decisions ADD COLUMN level REAL;
ALTER TABLE decisions ADD COLUMN ci_low REAL;
ALTER TABLE decisions ADD COLUMN ci_high REAL;
UPDATE decisions SET statistic = statistic / interim, boundary = boundary / interim
"""

MIGRATIONS: dict[int, str] = {
    1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6, 7: _V7, 8: _V8, 9: _V9, 10: _V10, 11: _V11, 12: _V12,
    13: _V13, 14: _V14,
}  # fmt: skip
"""Version → the SQL that brings version − 1 to it (0 = an empty file)."""

DATA_TABLES = ("evaluations", "episodes", "train", "quantity_blocks", "histograms", "quantities", "tags")
"""Tables holding a run's observations (and its tags), keyed by run_id."""
