"""The loop: add requests, step until every one has finished, return tokens and logits."""

from __future__ import annotations

import copy
import os
import signal
import threading
import weakref
from dataclasses import dataclass

import mlx.core as mx

from ..blas_threads import for_step as blas_threads_for_step
from .allocator import MAX_POOL_ROWS, Allocator
from .arguments import check_int, check_token_ids
from .errors import EngineArgumentError, WatcherError, WrongThreadError
from .journal import Journal, SigintHold, bookkeeping, deliver
from .protocols import AllocatorFactory, CacheFactory, RunnerParts, SchedulerFactory
from .radix import NoCache, RadixCache
from .request import Request
from .runner import Runner
from .scheduler import Batch, Scheduler, Stats


@dataclass
class Result:
    """One request's output: ``tokens`` (the new token ids, greedy) and ``logits`` ``[len(tokens), vocab]`` float32
    (None when not kept)."""

    tokens: list[int]
    logits: mx.array | None


class Engine:
    """A continuous-batching engine over one mlx-lm model and one pool of ``pool_rows`` rows per layer.

    Each :meth:`step` is one forward pass: :meth:`Scheduler.schedule`, :meth:`Runner.run`,
    :meth:`Scheduler.postprocess`, as one transaction.

    Parameters
    ----------
    model : an mlx-lm model of ``llama`` (Llama, Mistral), ``qwen2``, ``phi3``, ``qwen3``, ``gemma3_text``,
        ``gpt_oss`` (sliding windows: with ``prefix_cache=False`` their sliding layers keep a ring of at
        most ``window`` rows per request, ``pool_rows`` together) or ``deepseek_v3`` (MLA), float or
        quantized; never changed
    pool_rows : int, P, the rows of each layer's KV pool, at most ``2**31 - 1`` (slots are int32)
    backend : the ``rope_pool_fused`` backend ("auto", "cpu", "mlx", "metal", "cuda")
    stop : a token id (e.g. a chat model's end-of-turn) that finishes a request as soon as it is
        chosen; its rows are given back in that same step
    prefix_cache : keep written rows in a radix tree over token ids, so that a prompt starting with
        tokens already in the pool reuses their rows (:mod:`.radix`); False: every prompt is computed
        whole; or a factory ``(allocator) -> cache`` of your own (:mod:`.protocols`)
    max_step_tokens : the most new tokens one step runs; a longer prompt is prefilled in chunks
    page_size : rows per page the allocator hands out (1: SGLang's; 16: vLLM's); must divide ``pool_rows``
    keep_logits : keep each new token's ``[vocab]`` logits in ``Request.logits`` (off: a long-lived
        engine would hold them all)
    allocator, scheduler : factories of the engine's parts, ``(pool_rows, page_size) -> allocator`` and
        ``(allocator, cache, max_step_tokens=...) -> scheduler``; the engine's own by default. A part of
        your own plugs in through the interfaces of :mod:`.protocols`
    parts : a :class:`~.protocols.RunnerParts`: a rotation, FP8 encoder or slot mapping of your own that
        the runner calls in place of its own (the build track's parts); None: the engine's
    group : the ``mx.distributed`` group ``model`` was split over (:func:`.parallel.shard`): this rank's
        pools hold its ``Hkv / N`` heads; every rank must make the same engine and the same calls
    blas_threads : OpenBLAS's thread count during this engine's steps (an int >= 1: the same float32
        rounding whatever the machine's load); None: the process's setting (:mod:`ropepool.blas_threads`:
        as many as the cores other programs leave free, unless ``ROPEPOOL_BLAS_THREADS=N`` or
        ``OPENBLAS_NUM_THREADS`` says). Either way the count before a step is set back after it

    The engine holds only the requests it is serving: a finished request goes out in the step's
    ``Batch.finished`` and is the caller's (:attr:`requests` lists those someone still holds).

    Use an engine from the thread that made it: MLX's streams are per thread, so a step from
    another thread fails inside MLX; :meth:`step` refuses it with :class:`WrongThreadError`.
    """

    def __init__(
        self,
        model,
        *,
        pool_rows: int,
        backend: str = "auto",
        stop: int | None = None,
        prefix_cache: bool | CacheFactory = True,
        max_step_tokens: int = 256,
        page_size: int = 1,
        keep_logits: bool = False,
        kv_dtype: str | None = None,
        kv_scales=None,
        allocator: AllocatorFactory = Allocator,
        scheduler: SchedulerFactory = Scheduler,
        parts: RunnerParts | None = None,
        group=None,
        blas_threads: int | None = None,
    ):
        vocab = model.args.vocab_size
        pool_rows = check_int("pool_rows", pool_rows, 1, MAX_POOL_ROWS)
        if stop is not None:
            stop = check_int("stop", stop, 0, vocab - 1)
        if not isinstance(keep_logits, bool):
            raise EngineArgumentError(f"keep_logits must be True or False, got {keep_logits!r:.60}")
        if not (isinstance(prefix_cache, bool) or callable(prefix_cache)):
            raise EngineArgumentError(
                f"prefix_cache must be True or False, got {prefix_cache!r:.60} (or a factory: "
                "allocator -> cache, see ropepool.engine.protocols)"
            )
        for name, factory in (("allocator", allocator), ("scheduler", scheduler)):
            if not callable(factory):
                raise EngineArgumentError(
                    f"{name} must be a class or factory (see ropepool.engine.protocols), got {factory!r:.60}"
                )
        max_step_tokens = check_int("max_step_tokens", max_step_tokens, 1)
        self.blas_threads = None if blas_threads is None else check_int("blas_threads", blas_threads, 1, 1024)
        if not (parts is None or isinstance(parts, RunnerParts)):
            raise EngineArgumentError(f"parts must be a RunnerParts (ropepool.engine.protocols), got {parts!r:.60}")
        # Without a prefix cache, sliding-window layers keep only their window's rows (engine.window)
        self.runner = Runner(
            model, pool_rows, backend, kv_dtype, kv_scales, ring=prefix_cache is False, parts=parts, group=group
        )  # the pools are lazy: nothing allocated yet
        check_pool_memory(self.runner, pool_rows)
        self.allocator = allocator(pool_rows, page_size)
        if isinstance(prefix_cache, bool):
            prefix_cache = RadixCache if prefix_cache else NoCache
        cache = prefix_cache(self.allocator)
        self.scheduler = scheduler(self.allocator, cache, max_step_tokens=max_step_tokens)
        self.journal = Journal()  # the step's undo log, shared by the parts that keep one (:mod:`.protocols`)
        self._unjournaled = []  # parts without a journal: copied at each step instead
        if hasattr(self.runner, "journal"):  # the runner's own rows (a sliding window's ring) are undone too
            self.runner.journal = self.journal
        for part in (self.allocator, cache, self.scheduler):
            if hasattr(part, "journal"):
                part.journal = self.journal
            else:
                self._unjournaled.append(part)
        self.held_interrupts = 0  # Ctrl-Cs held after a step committed (Python's handler), raised by the next step
        self.vocab_size = vocab
        self.stop = stop
        self.keep_logits = keep_logits
        self.thread = threading.get_ident()
        self._requests = weakref.WeakValueDictionary()  # rid -> Request, while someone holds it
        self._next_rid = 0
        self.watchers = []  # f(engine, batch, records) after each committed step (see watch)

    def watch(self, watcher) -> None:
        """Call ``watcher(engine, batch, records)`` after every step that commits, with the step's undo records
        (``(undo, args)`` oldest first, :mod:`.journal`): what the step changed (:mod:`.recording` keeps it).
        Watchers run outside the engine's Ctrl-C hold, each told whatever the others raise (:meth:`step`)."""
        self.watchers.append(watcher)

    @property
    def pool_bytes(self) -> int:
        """The bytes all the engine's pools hold now: every layer's slot pools and the sliding layers' rings
        (grown as requests need them, never past ``pool_rows`` rows: :func:`check_pool_memory` counts them)."""
        return self.runner.pool_bytes

    @property
    def stats(self) -> Stats:
        """What the engine has done so far (see :class:`Stats`): prefill and cached tokens, preemptions, rows, steps."""
        return self.scheduler.stats

    @property
    def steps(self) -> int:
        return self.stats.steps

    @property
    def requests(self) -> list[Request]:
        """The requests added to this engine that are still held, by it (waiting, running) or by the caller."""
        return [self._requests[rid] for rid in sorted(self._requests.keys())]

    def add_request(self, prompt, max_new_tokens: int) -> Request:
        """Queue one prompt (a non-empty list of token ids: Python or NumPy ints).

        Raises
        ------
        WrongThreadError
            Called from another thread than the one that made the engine (a request added while that
            thread's step fails would be rolled back with it, and never run).
        EngineArgumentError
            A prompt that is no list of ints (a string, bytes, a dict, floats), empty, with a token id
            outside ``[0, vocab)``, or ``max_new_tokens`` not an int >= 1.
        PoolTooSmallError
            The request needs more rows than the pool has.
        """
        self._check_thread("add_request")
        self._settle()  # a rollback cut short first: this request must not join its stale undo log
        rid = self._next_rid
        prompt = check_token_ids(f"prompt {rid}", prompt, self.vocab_size)
        max_new_tokens = check_int(f"max_new_tokens of prompt {rid}", max_new_tokens, 1)
        req = Request(rid, prompt, max_new_tokens, stop=self.stop)
        self.scheduler.add(req)
        self._requests[rid] = req
        self._next_rid += 1
        return req

    def step(self) -> Batch:
        """Run one forward pass: a chunk or one token of each request in it, a new token where a sequence ends.

        The step is one transaction: if anything in it raises (an error, or a KeyboardInterrupt in the
        scheduling, the forward pass or the bookkeeping after it), the engine is left as it was before
        the step, pool rows included, and the exception is raised again: stepping on loses nothing.
        The parts record each change in an undo log (:mod:`.journal`), undone newest first: a step
        costs what it changes, not a copy of the pool's books.

        Ctrl-C: the engine holds SIGINT only while a change and its undo record are made (schedule,
        postprocess), while a rollback runs, and from the commit until the watchers are told (they run
        under the program's handler); each hold puts back exactly the handler that was in force and hands
        a held SIGINT to it (:class:`~.journal.SigintHold`): a handler of the program's is called,
        ``SIG_IGN`` drops it, ``SIG_DFL`` ends the process. One exception: Python's own handler, after the
        commit (a held Ctrl-C, one inside the hold's own exit, one that cuts a watcher short), would raise
        KeyboardInterrupt and lose this committed batch, so that Ctrl-C is raised by the next :meth:`step`
        (or by :attr:`done` when nothing is left to run) before anything changes. One landing in the
        instant between a failure and the rollback's hold leaves the undo log behind; the engine
        finishes that rollback before it changes or answers anything.

        Raises
        ------
        WrongThreadError
            Called from another thread than the one that made the engine.
        RuntimeError
            Nothing to run (no request waiting or running), or the scheduler chose nothing while requests
            wait (the step is undone).
        KeyboardInterrupt
            Held from the end of the last step (nothing has changed).
        WatcherError
            A watcher raised; the step committed and every other watcher was told (``.batch``: the step's).
        """
        self._check_thread("step")
        if self.held_interrupts:
            self.held_interrupts = 0
            raise KeyboardInterrupt("held from the end of the last step, which committed")
        self._settle()
        if self.scheduler.done:
            raise RuntimeError("step: nothing to run (no request waiting or running)")
        with blas_threads_for_step(self.blas_threads):  # OpenBLAS's count for this step; the caller's put back
            self.journal.begin()
            try:
                self._snapshot_unjournaled()
                batch = bookkeeping(self.scheduler.schedule)
                if not batch.requests:
                    self._stalled()
                self._save_rows(batch)
                logits = self.runner.run(batch)  # [len(batch.requests), vocab]
                mx.eval(logits)  # the lazy pass runs here, inside the try
                bookkeeping(self.scheduler.postprocess, batch, logits, keep_logits=self.keep_logits)
                if hasattr(self.runner, "release"):  # rows the runner keeps per request (a sliding window's ring)
                    bookkeeping(self.runner.release, batch.finished)
                hold = SigintHold().start()  # the step is done: from here to the return a Ctrl-C is held
            except BaseException:
                with SigintHold():  # a second Ctrl-C waits for the rollback, then goes to the program's handler
                    self.journal.rollback()
                raise
        records = self.journal.commit()  # committed: the batch, finished requests included, is returned
        try:
            return self._hand_back(hold, batch, records)
        except KeyboardInterrupt:  # Python's handler, back in force: raised now, it would lose the committed batch
            self.held_interrupts += 1
            return batch

    def _hand_back(self, hold: SigintHold, batch: Batch, records: list) -> Batch:
        """Stop holding Ctrl-C, tell the watchers, hand on a Ctrl-C held since the commit, return ``batch``.

        The watchers run under the program's handler (a stuck one can be interrupted). A Ctrl-C held since
        the commit goes to that handler after them; where it is Python's own (a KeyboardInterrupt here would
        lose the batch), it waits for the next step, as does one that cuts a watcher short or lands in
        :meth:`SigintHold.stop` once the handler is back. A watcher that raises does not keep the others from
        being told; its error reaches the caller as a :class:`WatcherError` holding the batch."""
        try:
            held = hold.stop()
        except KeyboardInterrupt:  # landed inside stop(), after Python's handler was back
            held = hold.count + 1
        raised = self._tell_watchers(batch, records)
        if any(isinstance(e, KeyboardInterrupt) for _, e in raised):
            self.held_interrupts += 1
        if held:
            if hold.previous is signal.default_int_handler:
                self.held_interrupts += 1
            else:
                deliver()
        errors = [(w, e) for w, e in raised if not isinstance(e, KeyboardInterrupt)]
        if errors:
            watcher, error = errors[0]
            raise WatcherError(
                f"step {self.steps} committed, but {len(errors)} watcher(s) raised, the first "
                f"{getattr(watcher, '__qualname__', type(watcher).__qualname__)}: {type(error).__name__}: {error}"
                " (the step stands; its Batch is this error's .batch)",
                batch,
                errors,
            ) from error
        return batch

    def _tell_watchers(self, batch: Batch, records: list) -> list:
        """Call every watcher with the committed step, each whatever the others raise (a KeyboardInterrupt
        included); return ``(watcher, exception)`` for each that raised."""
        raised = []
        for watcher in list(self.watchers):
            try:
                watcher(self, batch, records)
            except (Exception, KeyboardInterrupt) as error:
                raised.append((watcher, error))
        return raised

    def _stalled(self) -> None:
        s = self.scheduler
        raise RuntimeError(
            f"step: the scheduler chose nothing to run while {len(s.waiting)} request(s) wait and {len(s.running)} "
            "run: no step could ever finish them (a scheduler or prefix cache of your own that never admits or "
            "never frees rows?); this step is undone"
        )

    def _settle(self) -> None:
        """Finish a rollback a Ctrl-C cut short (its undo records still logged)."""
        if len(self.journal):
            self.journal.rollback()

    def _check_thread(self, what: str) -> None:
        if threading.get_ident() != self.thread:
            raise WrongThreadError(
                f"{what}: this engine was made in thread {self.thread} and is used from thread "
                f"{threading.get_ident()}; MLX's streams are per thread: make and use an engine in one thread"
            )

    @property
    def held_interrupt(self) -> bool:
        """Whether a Ctrl-C landed after the last step committed (the next :meth:`step` raises it)."""
        return self.held_interrupts > 0

    def _snapshot_unjournaled(self) -> None:
        """The fallback of :mod:`.protocols` for parts that keep no undo log: copy them now, put back on rollback."""
        s = self.scheduler
        keep = {id(x): x for x in (self.allocator, s.cache, s, self.journal)}
        for part in self._unjournaled:
            keep.update((id(r), r) for r in (*s.waiting, *s.running))
            try:
                saved = copy.deepcopy(vars(part), dict(keep))
            except RecursionError:
                raise EngineArgumentError(
                    f"{type(part).__name__}: a part without an undo log is copied at every step, and this one "
                    "is nested too deep to copy: give it a journal (ropepool.engine.protocols)"
                ) from None
            self.journal.record(vars(part).update, saved)
        if s in self._unjournaled:
            for req in (*s.waiting, *s.running):
                self.journal.record(req.set_state, req.state())

    def _save_rows(self, batch: Batch) -> None:
        """Rows this step writes that held k and v before it (taken from the cache or a preempted request):
        copied now, written back through the one pool writer if the step is undone."""
        reclaimed = set(batch.reclaimed)
        rows = sorted({s for s in batch.slots if s in reclaimed})
        if rows:
            self.journal.record(self.runner.restore_rows, rows, self.runner.save_rows(rows))

    @property
    def done(self) -> bool:
        """Nothing waiting or running. A Ctrl-C held from the end of the last step is raised here when
        nothing is left to run (no next step would raise it)."""
        self._settle()
        if self.held_interrupts and self.scheduler.done:
            self.held_interrupts = 0
            raise KeyboardInterrupt("held from the end of the last step, which committed")
        return self.scheduler.done


def check_pool_memory(runner: Runner, pool_rows: int) -> None:
    """Refuse pools larger than this machine's memory, before MLX (or the allocator's lists) try to fill it.

    The pools are every layer's (k and v ``[Hkv, D]`` a row each, or MLA's latent), at the most rows each
    will hold (:meth:`Runner.most_rows`): ``P`` for the slot pools, and ``P`` for a sliding layer's rings
    together (a ring holds at most its request's positions). The allocator keeps about 50 bytes of Python
    objects per row (its free list and reference counts).
    """
    pools = sum(
        rows * (p.size // p.shape[0]) * p.dtype.size
        for rows, layer in zip(runner.most_rows(), runner.pools)
        for p in layer
    )  # bytes, every layer at its most rows, rings included
    need, have = pools + 50 * pool_rows, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise EngineArgumentError(
            f"pool_rows = {pool_rows} needs {pools / 2**30:.1f} GiB of KV pools ({pool_rows} rows x "
            f"{pools // pool_rows} bytes, every layer's pools, sliding-window rings included) and "
            f"{50 * pool_rows / 2**30:.1f} GiB of row bookkeeping: more than this machine's {have / 2**30:.1f} GiB"
        )


def generate(
    model,
    prompts,
    max_new_tokens,
    *,
    pool_rows: int,
    backend: str = "auto",
    on_step=None,
    stop: int | None = None,
    prefix_cache: bool = True,
    max_step_tokens: int = 256,
    page_size: int = 1,
    keep_logits: bool = True,
    kv_dtype: str | None = None,
    kv_scales=None,
    group=None,
    blas_threads: int | None = None,
) -> list:
    """Serve ``prompts`` together on ``model`` and return one :class:`Result` per prompt, in order.

    Parameters
    ----------
    model : an mlx-lm model the engine serves (:data:`.model_spec.SUPPORTED`), float or quantized
    prompts : list of lists of token ids (Python or NumPy ints)
    max_new_tokens : int, or one int per prompt: the most new tokens each may write
    pool_rows : int, P, the rows of each layer's KV pool; may be far fewer than all requests'
        tokens together (then requests wait or are preempted, and rows are reused)
    backend : the ``rope_pool_fused`` backend ("auto", "cpu", "mlx", "metal", "cuda")
    on_step : optional ``f(engine, batch)``, called after every step
    stop : optional token id (e.g. ``<|im_end|>``): a request that chooses it finishes there, that
        token its last, and frees its rows at once
    prefix_cache, max_step_tokens, page_size : see :class:`Engine`
    keep_logits : False: every ``Result.logits`` is None (a long run then keeps no logits)
    kv_dtype : None (pools in the activations' dtype) or "fp8" (uint8 pools of e4m3 codes, read back
        dequantised; :class:`~.runner.Runner`)
    kv_scales : with "fp8", one ``(k_scale, v_scale)`` per layer
        (:func:`ropepool.engine.kv_scales.calibrate`); None: 1.0 everywhere
    group : the ``mx.distributed`` group ``model`` was split over (see :class:`Engine`); every rank calls
        ``generate`` with the same arguments and gets the same results
    blas_threads : OpenBLAS's thread count during the steps (see :class:`Engine`); None: the process's setting

    Returns
    -------
    list of Result: ``.tokens`` (greedy new tokens, ending at ``stop`` if chosen) and ``.logits``
    ``[len(tokens), vocab]`` float32

    Raises
    ------
    UnsupportedModelError
        Not a supported architecture, or RoPE the op does not compute.
    PoolTooSmallError
        A request needs more rows than ``pool_rows``; raised before any step runs.
    EngineArgumentError
        A prompt that is no list of token ids, empty or outside the vocab; ``max_new_tokens`` < 1 or
        of the wrong length; ``pool_rows``, ``stop``, ``max_step_tokens`` or ``page_size`` not an int
        in range.

    Example
    -------
    >>> import mlx.core as mx
    >>> from mlx_lm.models import llama
    >>> mx.random.seed(0)
    >>> model = llama.Model(llama.ModelArgs(model_type="llama", hidden_size=32, num_hidden_layers=1,
    ...     intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=64))
    >>> out = generate(model, [[1, 2, 3], [4, 5]], max_new_tokens=[2, 3], pool_rows=8)
    >>> [len(r.tokens) for r in out], out[1].logits.shape
    ([2, 3], (3, 64))
    """
    if isinstance(max_new_tokens, (list, tuple)):
        counts = list(max_new_tokens)
    else:
        counts = [max_new_tokens] * len(prompts)
    if len(counts) != len(prompts):
        raise EngineArgumentError(f"max_new_tokens: {len(counts)} counts for {len(prompts)} prompts")
    engine = Engine(
        model,
        pool_rows=pool_rows,
        backend=backend,
        stop=stop,
        prefix_cache=prefix_cache,
        max_step_tokens=max_step_tokens,
        page_size=page_size,
        keep_logits=keep_logits,
        kv_dtype=kv_dtype,
        kv_scales=kv_scales,
        group=group,
        blas_threads=blas_threads,
    )
    requests = [engine.add_request(p, n) for p, n in zip(prompts, counts)]  # every refusal before a step
    while not engine.done:
        batch = engine.step()
        if on_step is not None:
            on_step(engine, batch)
    return [Result(r.tokens, mx.stack(r.logits) if keep_logits else None) for r in requests]
