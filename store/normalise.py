"""Per-task score normalisation for aggregate statistics: (score − random) / (reference − random).

``RANDOM``: the uniform-random policy's mean return over 100 episodes, measured here on the version
that runs on these machines (MuJoCo ``-v4``, Box2D ``-v3``) with ``python -m agents.random_scores``.
``REFERENCE``: the paper's published TD3 baseline, its final performance at 1M steps (mean over 10
seeds of each seed's last 10 evaluations, as in its Tables 1-2, from the published curves). A
normalised score of 0 is the random policy, 1 is TD3 as published. Both are per task family, so
Hopper-v2 (published) and Hopper-v4 (trained here) share them.
"""

from __future__ import annotations

from store.tasks import env_family

RANDOM = {
    "Ant": -46.95, "BipedalWalker": -102.82, "HalfCheetah": -282.49, "Hopper": 17.67, "Humanoid": 120.89,
    "LunarLanderContinuous": -212.68, "Swimmer": 0.8, "Walker2d": 2.61,
}  # fmt: skip
REFERENCE = {
    "Ant": 4846.66, "BipedalWalker": 271.77, "HalfCheetah": 10050.95, "Hopper": 3174.56, "Humanoid": 4929.35,
    "LunarLanderContinuous": 277.36, "Swimmer": 52.18, "Walker2d": 4107.08,
}  # fmt: skip
NORMALISATIONS = ("minmax", "none")


class NormalisationError(ValueError):
    """A task has no random or reference score; the message names it."""


def normaliser(env: str, how: str = "minmax") -> tuple[float, float]:
    """(offset, scale) so that the normalised score is (score − offset) / scale."""
    if how == "none":
        return 0.0, 1.0
    family = env_family(env)
    if family not in RANDOM:
        known = ", ".join(sorted(RANDOM))
        raise NormalisationError(f"no random and reference scores for {env} (known: {known}): use --normalise none")
    return RANDOM[family], REFERENCE[family] - RANDOM[family]
