"""LLM calls during an outage, and how a sync form runs its async body (`run_sync`).

Every call is the LLM's blocking `predict` in a daemon thread, awaited within its step's deadline
(`DEADLINES`) whatever its client's own retries; past it the call is given up, its answer dropped. A thread
serves sync and async forms alike, where an async client would be bound to the event loop of its first
call. A circuit breaker per LLM object (`LLMGuard`, `guard_of`) tells every step that calls it of an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Coroutine, Dict, Optional, Set, Tuple, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Consecutive failed calls that open the breaker.
FAILURES = 3
#: Seconds the breaker stays open before it lets one trial call through.
COOLDOWN = 30.0
#: Seconds each step waits for the LLM's answer (None: no deadline). NER answers a few names (4 s keeps a
#: retrieval's fallback within 5 s); rerank writes its reasoning first; extraction, up to 20 triplets.
DEADLINES: Dict[str, Optional[float]] = {"ner": 4.0, "rerank": 15.0, "extraction": 30.0}
#: HTTP statuses that refuse one request for its content: the LLM is up, and the breaker counts no failure.
REQUEST_ERRORS = frozenset({400, 413, 422})

_SKIPPED = (
    "%s %s skipped: the circuit breaker is open after %d failed call(s) in a row, so no call is made for "
    "%.0f s more (then one trial call); the no-LLM path stands. Further skipped calls are logged at DEBUG."
)
_OPENED = (
    "%s %s failed (%s), %d failed call(s) in a row: no %s call for the next %.0f s (NER, rerank and triplet "
    "extraction take their no-LLM path at once%s), then one trial call."
)


class LLMUnavailable(Exception):
    """An LLM call gave no answer: it failed, ran out of its deadline, or was not made or waited for
    (`skipped`: the breaker is open, or opened while it was in flight)."""

    def __init__(self, message: str, skipped: bool = False) -> None:
        super().__init__(message)
        self.skipped = skipped


class _Deadline(Exception):
    """The call ran out of its deadline."""


class _Abandoned(Exception):
    """The breaker opened while the call was in flight: it is no longer waited for."""


class _Flight:
    """One call in flight, and how to stop waiting for it (set by the waiter)."""

    def __init__(self, trial: bool) -> None:
        self.trial = trial  # the one call let through after the cooldown
        self.stop: Optional[Callable[[], None]] = None


class LLMGuard:
    """The deadline of each step's calls to one LLM object, and the circuit breaker over them.

    The breaker opens after `failures` consecutive failed calls, after the first while the LLM has never
    answered (it is unreachable), and at once after a call that ran out of its deadline (the next would
    too); the calls in flight are then no longer waited for. While it is open no call is made: the caller
    takes its no-LLM path at once. After `cooldown` seconds one trial call goes through: its success closes
    the breaker, its failure opens it again. A probe (the first extraction call of an explicit ingest) is
    that trial before the cooldown ends. An unusable answer is no failure, nor is a request refused for its
    content (`REQUEST_ERRORS`). Thread-safe and async-safe: no call holds the lock while it waits.

    Args:
        failures: Consecutive failed calls that open the breaker.
        cooldown: Seconds it stays open before one trial call.
        deadlines: Seconds each step ("ner", "rerank", "extraction") waits for an answer; None for no
            deadline. Steps not named take `DEADLINES`.
        clock: The clock of the cooldown (seconds, monotonic); tests pass a fake one.
        name: The LLM's name in log messages (by default its class name, given by `set_guard`).
    """

    def __init__(
        self,
        failures: int = FAILURES,
        cooldown: float = COOLDOWN,
        deadlines: Optional[Dict[str, Optional[float]]] = None,
        clock: Callable[[], float] = time.monotonic,
        name: Optional[str] = None,
    ) -> None:
        if failures < 1 or cooldown < 0:
            got = f"got {failures} and {cooldown}"
            raise ValueError(f"failures must be at least 1 and cooldown at least 0, {got}")
        self.failures, self.cooldown, self.clock = failures, cooldown, clock
        self.name, self._named = name or "LLM", name is not None
        self.deadlines = {**DEADLINES, **(deadlines or {})}
        self._lock = threading.Lock()
        self._answered = False  # the LLM answered a call once
        self._failed = 0  # consecutive failed calls
        self._open_until: Optional[float] = None  # set while the breaker is open (or trying one call)
        self._trying = False  # the trial call is in flight
        self._skipped = 0  # calls not made since it opened
        self._flights: Set[_Flight] = set()

    @property
    def is_open(self) -> bool:
        """Whether calls are refused now (open, or its trial call in flight)."""
        with self._lock:
            return self._open_until is not None and (self._trying or self.clock() < self._open_until)

    @property
    def answering(self) -> bool:
        """Whether the LLM answered its last call (not only: not known to fail)."""
        with self._lock:
            return self._answered and self._failed == 0 and self._open_until is None

    async def call(self, step: str, fn: Callable[[], T], probe: bool = False) -> T:
        """`fn()`, one blocking LLM call of `step` ("ner", "rerank" or "extraction": it names the deadline),
        in a daemon thread within the step's deadline; a `probe` is the trial call through an open breaker.
        Raises `LLMUnavailable`: the breaker is open (`fn` is not called), or the call failed or timed out."""
        flight = self._admit(step, probe)
        try:
            value = await _in_thread(fn, self.deadlines.get(step), flight)
        except BaseException as exc:
            error = self._failure(step, flight, exc)  # what the caller sees
            if error is exc:
                raise
            raise error from exc
        self._succeeded(step, flight)
        return value

    def _admit(self, step: str, probe: bool = False) -> _Flight:
        """Let the call through, or raise `LLMUnavailable(skipped=True)` while the breaker is open (a probe
        goes through as its trial call unless one is in flight)."""
        with self._lock:
            now = self.clock()
            if self._open_until is None or (not self._trying and (probe or now >= self._open_until)):
                flight = _Flight(trial=self._open_until is not None)
                self._trying = self._trying or flight.trial
                self._flights.add(flight)
                if flight.trial:
                    why = f"{self.cooldown:.0f} s since the breaker opened"
                    why = "an explicit ingest" if now < self._open_until else why
                    logger.info("%s: %s; trying one %s call.", self.name, why, step)
                return flight
            self._skipped += 1
            first, failed, wait = self._skipped == 1, self._failed, max(0.0, self._open_until - now)
        logger.log(logging.WARNING if first else logging.DEBUG, _SKIPPED, self.name, step, failed, wait)
        raise LLMUnavailable(f"not called: the circuit breaker of {self.name} is open", skipped=True)

    def _succeeded(self, step: str, flight: _Flight) -> None:
        with self._lock:
            self._flights.discard(flight)
            was_open, skipped = self._open_until is not None, self._skipped
            self._answered, self._failed, self._skipped = True, 0, 0
            self._open_until, self._trying = None, False
        if was_open:
            message = "%s answered again (%s): LLM calls resume (%d were skipped meanwhile)."
            logger.warning(message, self.name, step, skipped)

    def _failure(self, step: str, flight: _Flight, exc: BaseException) -> BaseException:
        """Count a failed call; return the exception the caller raises."""
        if isinstance(exc, _Abandoned) or not isinstance(exc, Exception):  # cancelled: no verdict on the LLM
            with self._lock:
                self._flights.discard(flight)
                self._trying = self._trying and not flight.trial
            why = "not waited for: the circuit breaker opened while it was in flight"
            return LLMUnavailable(why, skipped=True) if isinstance(exc, _Abandoned) else exc
        if getattr(exc, "status_code", None) in REQUEST_ERRORS:  # refused for its content: the LLM is up
            self._succeeded(step, flight)
            return exc
        why = f"{type(exc).__name__}: {exc}"
        if timed_out := isinstance(exc, _Deadline):
            why = f"no answer within {self.deadlines.get(step):g} s"
        with self._lock:
            self._flights.discard(flight)
            self._failed += 1
            trial, was_open, count = flight.trial, self._open_until is not None, self._failed
            opens = trial or timed_out or count >= self.failures or not self._answered
            stops = []
            if opens:
                self._open_until, self._trying = self.clock() + self.cooldown, self._trying and not trial
                if not was_open:
                    self._skipped, stops = 0, [f.stop for f in self._flights if f.stop is not None]
        if opens and (trial or not was_open):
            dropped = f"; {len(stops)} call(s) in flight are not waited for" if stops else ""
            logger.warning(_OPENED, self.name, step, why, count, self.name, self.cooldown, dropped)
        for stop in stops:
            stop()
        return LLMUnavailable(f"{step} call failed: {why:.300}")


async def ask(
    llm: Any, step: str, read: Callable, fallback: str, prompt: Any, **values: Any
) -> Tuple[Any, bool]:
    """`read` of the LLM's answer to `prompt` (formatted with `values`), asked under the LLM's guard, and
    whether the call gave no answer. When it gives none, or `read` raises on it (the answer is unusable),
    that is logged with what stands instead (`fallback`), and the value is None."""
    answer, title = None, "NER" if step == "ner" else step  # the step's name in the messages
    try:
        answer = await guard_of(llm).call(step, lambda: llm.predict(prompt, **values))
        return read(answer), False
    except LLMUnavailable as exc:
        level = logging.DEBUG if exc.skipped else logging.WARNING
        logger.log(level, "LLM %s gave no answer (%s); %s.", title, exc, fallback)
        return None, True
    except Exception as exc:  # untrusted text: an unusable answer must not fail the step
        logger.warning("LLM %s unusable (%s); %s. Answer: %.300r", title, exc, fallback, answer)
        return None, False


async def _in_thread(fn: Callable[[], T], deadline: Optional[float], flight: _Flight) -> T:
    """`fn()` in a daemon thread (with the caller's context: LlamaIndex spans nest as usual), awaited for
    at most `deadline` seconds (None: no deadline), or until the breaker opens (`flight.stop`); then
    `_Deadline` or `_Abandoned` is raised and the thread is left to finish, its outcome dropped."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:  # on the loop
        if not outcome.done():
            outcome.set_result(value) if ok else outcome.set_exception(value)

    def run() -> None:
        try:
            ok, value = True, context.run(fn)
        except BaseException as exc:  # handed to the caller
            ok, value = False, exc
        _on_loop(loop, settle, ok, value)

    flight.stop = lambda: _on_loop(loop, settle, False, _Abandoned())
    threading.Thread(target=run, name="graphrag-llm-call", daemon=True).start()
    try:
        done, _ = await asyncio.wait({outcome}, timeout=deadline)
    finally:
        outcome.cancel()  # if still waited for: the thread's outcome is dropped
    if not done:
        raise _Deadline()
    return outcome.result()  # an LLM's own TimeoutError passes as it is


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """`fn(*args)` on `loop`, from any thread; nothing once the loop is closed (nobody waits any more)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


_LOOPS = threading.local()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The sync form of an async body (as LlamaIndex's `asyncio_run`): the coroutine run in this thread's own
    event loop, kept for its next call (a new loop costs 0.1 to 0.3 ms a call, 1% of a retrieval); inside a
    running loop (a coroutine, a notebook), in a new thread's loop. Unlike `asyncio_run`, which runs the
    coroutine again on any RuntimeError, an error of the body reaches the caller as it is."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if not hasattr(_LOOPS, "loop"):
            _LOOPS.loop = asyncio.new_event_loop()
        return _LOOPS.loop.run_until_complete(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphrag-sync") as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, coro).result()


_GUARDS: Dict[int, LLMGuard] = {}
_GUARDS_LOCK = threading.Lock()


def guard_of(llm: Any) -> LLMGuard:
    """The guard of an LLM object, made with the defaults on first use, and dropped with the object."""
    return _GUARDS.get(id(llm)) or set_guard(llm, LLMGuard(), replace=False)


def set_guard(llm: Any, guard: LLMGuard, replace: bool = True) -> LLMGuard:
    """Give an LLM object its guard (other thresholds, deadlines or a clock), named after its class unless
    named; every step calling that object uses it from then on. Returns the object's guard (with
    `replace=False`, the one it already has, if any)."""
    if not guard._named:
        guard.name = type(llm).__name__
    with _GUARDS_LOCK:
        known = _GUARDS.get(id(llm))
        if known is not None and not replace:
            return known
        _GUARDS[id(llm)] = guard
    if known is None:
        with contextlib.suppress(TypeError):  # not weak-referenceable: kept for the process
            weakref.finalize(llm, _GUARDS.pop, id(llm), None)
    return guard
