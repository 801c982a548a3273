"""Streams and events on kiln's host runtime: one stream, on which every op has finished when
its call returns. A Stream orders work as MindSpore's do (trivially: nothing runs ahead), and
an Event records the moment everything launched before it had finished."""
import time


class Stream:
    """A handle on kiln's host stream. Work needs no queueing on it: each op is done when its
    call returns, so waiting on a stream or an event returns at once. `priority` is kept for
    MindSpore's signature; kiln has no other stream to rank it against."""

    _next_id = 0

    def __init__(self, priority=0, **kwargs):
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"Stream: priority must be an int, got {type(priority).__name__}")
        self.priority = priority
        self.id = Stream._next_id
        Stream._next_id += 1

    def record_event(self, event=None):
        event = Event() if event is None else _checked_event(event, "Stream.record_event")
        event.record(self)
        return event

    def wait_event(self, event):
        _checked_event(event, "Stream.wait_event")

    def wait_stream(self, stream):
        _checked_stream(stream, "Stream.wait_stream")

    def synchronize(self):
        """Everything launched on it has finished already."""

    def query(self):
        """True: no work is pending on it."""
        return True

    def __eq__(self, other):
        return isinstance(other, Stream) and other.id == self.id

    def __hash__(self):
        return hash(("kiln.runtime.Stream", self.id))

    def __repr__(self):
        return f"Stream(id={self.id}, priority={self.priority}, device=CPU)"


class Event:
    """Marks a point in the work launched so far. With enable_timing, elapsed_time gives the
    milliseconds between two recorded events (time.perf_counter; the work before each had
    finished when it was recorded)."""

    def __init__(self, enable_timing=False, blocking=False):
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self._recorded_at = None

    def record(self, stream=None):
        if stream is not None:
            _checked_stream(stream, "Event.record")
        self._recorded_at = time.perf_counter()

    def wait(self, stream=None):
        if stream is not None:
            _checked_stream(stream, "Event.wait")

    def synchronize(self):
        """The work before the event has finished (it had when the event was recorded)."""

    def query(self):
        """True: the work the event marks has finished."""
        return True

    def elapsed_time(self, end_event):
        """Milliseconds from this event to end_event, both recorded and timing-enabled."""
        _checked_event(end_event, "Event.elapsed_time")
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events must be created with "
                               "enable_timing=True")
        if self._recorded_at is None or end_event._recorded_at is None:
            raise RuntimeError("Event.elapsed_time: both events must be recorded first")
        return (end_event._recorded_at - self._recorded_at) * 1000.0


def _checked_stream(stream, who):
    if not isinstance(stream, Stream):
        raise TypeError(f"{who}: expected a kiln.runtime.Stream, got {type(stream).__name__}")
    return stream


def _checked_event(event, who):
    if not isinstance(event, Event):
        raise TypeError(f"{who}: expected a kiln.runtime.Event, got {type(event).__name__}")
    return event


_DEFAULT = Stream()
_current = _DEFAULT


def default_stream():
    """The stream work runs on unless another is made current."""
    return _DEFAULT


def communication_stream():
    """Collectives (kiln.communication) run on the host stream too."""
    return _DEFAULT


def current_stream():
    return _current


def set_cur_stream(stream):
    """Makes `stream` the current one (current_stream returns it)."""
    global _current
    _current = _checked_stream(stream, "set_cur_stream")


class StreamCtx:
    """`with StreamCtx(stream):` makes stream current inside the block and restores the one
    before after it."""

    def __init__(self, ms_stream):
        self.stream = None if ms_stream is None else _checked_stream(ms_stream, "StreamCtx")
        self._previous = None

    def __enter__(self):
        self._previous = current_stream()
        if self.stream is not None:
            set_cur_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        set_cur_stream(self._previous)
        return False
