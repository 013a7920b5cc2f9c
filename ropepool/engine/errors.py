"""The engine's two refusals, both raised before any forward pass runs."""


class UnsupportedModelError(ValueError):
    """A model the engine cannot serve: another architecture, or RoPE the op does not compute."""


class PoolTooSmallError(ValueError):
    """A request needs more pool rows than the whole pool has, so it could never be admitted."""
