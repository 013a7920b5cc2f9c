"""The engine's refusals, each raised before any forward pass runs."""


class UnsupportedModelError(ValueError):
    """A model the engine cannot serve: another architecture, or RoPE the op does not compute."""


class PoolTooSmallError(ValueError):
    """A request needs more pool rows than the whole pool has, so it could never be admitted."""


class EngineArgumentError(ValueError):
    """A bad argument to the engine (a token id that is no int, a count out of range); the message names it."""


class ContractError(ValueError):
    """A scheduler's or a plugged part's answer the engine will not carry out (a request run for 0 tokens, a
    page evicted that is still held); the message names who answered, the call and the answer."""

    def _render_traceback_(self) -> list[str]:
        """What IPython (a notebook) shows: the message alone, not the engine's frames that led to it."""
        return f"{type(self).__name__}: {self}".splitlines()


class WrongThreadError(RuntimeError):
    """An engine stepped from another thread than the one that made it (MLX's streams are per thread)."""


class WatcherError(RuntimeError):
    """A watcher (:meth:`Engine.watch`) raised after a step committed: the step stands, every other watcher
    was told of it. ``batch`` is the step's Batch (finished requests included); ``errors`` what each raised."""

    def __init__(self, message: str, batch, errors: list):
        super().__init__(message)
        self.batch = batch
        self.errors = errors
