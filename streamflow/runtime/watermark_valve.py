"""The watermark valve: combine the watermarks and statuses of a task's input channels.

A port of Flink's ``StatusWatermarkValve``
(flink-streaming-java/src/main/java/org/apache/flink/streaming/runtime/watermarkstatus/
StatusWatermarkValve.java). Sans-I/O: every feed method returns the events the task must
forward downstream, in order, and an empty list when there is nothing to forward.

Theory of operation
-------------------
Each input channel has a watermark, a status (ACTIVE or IDLE) and is either *aligned* or
not. Only aligned channels count towards the output watermark. The valve itself has a
status too (IDLE once every channel is idle) and remembers the last watermark it output.

Rules (each one is a line of Flink's ``inputWatermark`` / ``inputWatermarkStatus``):

1. Channels start ACTIVE, with watermark ``MIN_WATERMARK``, aligned; the valve starts
   ACTIVE with last output ``MIN_WATERMARK``.
2. A watermark is dropped if its channel is idle, if the valve is idle, or if it is not
   strictly above the channel's last watermark.
3. Otherwise the channel takes it; an unaligned channel re-aligns once its watermark is
   ``>=`` the last output watermark.
4. The output watermark is the minimum over the aligned channels, emitted only if it is
   strictly greater than the last output: the output never goes back.
5. ACTIVE -> IDLE unaligns the channel. If no channel is active any more, the valve
   flushes: it emits the maximum over all channels' watermarks (if greater than the last
   output), whichever channel went idle last, then it emits IDLE (FLINK-40475: before it,
   the flush ran only when the last channel's watermark equalled the last output, so the
   result depended on the order the channels went idle in).
   If other channels are still active and the channel's watermark equals the last output,
   the minimum over the remaining aligned channels may advance (rule 4).
6. IDLE -> ACTIVE aligns the channel only if its watermark is ``>=`` the last output
   (otherwise it must catch up, rule 3), and emits ACTIVE if the valve was idle; a channel
   aligned again re-derives the minimum (rule 4), after the ACTIVE (FLINK-40475: a channel
   that went idle above the output and came back as the only aligned one held its
   watermark back until a larger one arrived).
7. Status inputs that change nothing (ACTIVE on an active channel, IDLE on an idle one)
   are ignored.

End of input
------------
The valve has no notion of a finished channel. When an input ends, the caller feeds it
``MAX_WATERMARK`` (as Flink's sources do at the end of input), so that it never holds the
output back again; if that channel is idle, the caller first feeds ``ACTIVE`` for it,
because an idle channel's watermarks are dropped (rule 2). Flink's ``WatermarkToDataOutput``
does the same: a watermark emitted while idle marks the output active first.

Invalid input (a channel index out of range) raises ``ValueError`` and changes nothing.
Finding the minimum is a linear scan over the aligned channels (Flink keeps a heap); it runs
once per input watermark, not per record.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamflow.runtime.events import MIN_WATERMARK, Watermark, WatermarkStatus

__all__ = ["ChannelState", "ValveOutput", "WatermarkValve"]

ValveOutput = list[Watermark | WatermarkStatus]
"""What the task forwards downstream after one input, in order."""

_ACTIVE = WatermarkStatus.ACTIVE
_IDLE = WatermarkStatus.IDLE


@dataclass(frozen=True, slots=True)
class ChannelState:
    """A snapshot of one input channel, for tests and metrics (Flink's SubpartitionStatus)."""

    watermark: int
    status: WatermarkStatus
    aligned: bool


class WatermarkValve:
    """Combines per-channel watermarks and statuses into the task's output (see module doc)."""

    __slots__ = ("_active_count", "_aligned", "_last_output", "_status", "_statuses", "_watermarks")

    def __init__(self, num_inputs: int) -> None:
        if num_inputs < 1:
            raise ValueError(f"a valve needs at least one input, got {num_inputs}")
        self._watermarks: list[int] = [MIN_WATERMARK] * num_inputs
        self._statuses: list[WatermarkStatus] = [_ACTIVE] * num_inputs
        self._aligned: set[int] = set(range(num_inputs))
        self._active_count = num_inputs
        self._last_output = MIN_WATERMARK
        self._status = _ACTIVE

    # -- read-only views ------------------------------------------------------------------

    @property
    def num_inputs(self) -> int:
        return len(self._watermarks)

    @property
    def last_output_watermark(self) -> int:
        return self._last_output

    @property
    def is_idle(self) -> bool:
        return self._status is _IDLE

    def channel_state(self, channel: int) -> ChannelState:
        self._check(channel)
        return ChannelState(self._watermarks[channel], self._statuses[channel], channel in self._aligned)

    # -- inputs ---------------------------------------------------------------------------

    def input_watermark(self, channel: int, timestamp: int) -> ValveOutput:
        """Feed a watermark received on ``channel`` (Flink's ``inputWatermark``)."""
        self._check(channel)
        # Rule 2: ignore it if the channel or the whole valve is idle, or if it goes back.
        if self._status is _IDLE or self._statuses[channel] is _IDLE:
            return []
        if timestamp <= self._watermarks[channel]:
            return []
        self._watermarks[channel] = timestamp
        # Rule 3: a previously unaligned channel is aligned again once it has caught up.
        if channel not in self._aligned and timestamp >= self._last_output:
            self._aligned.add(channel)
        return self._advance_to_min_of_aligned()

    def input_status(self, channel: int, status: WatermarkStatus) -> ValveOutput:
        """Feed a watermark status received on ``channel`` (Flink's ``inputWatermarkStatus``)."""
        self._check(channel)
        current = self._statuses[channel]
        if status is _IDLE and current is _ACTIVE:
            return self._to_idle(channel)
        if status is _ACTIVE and current is _IDLE:
            return self._to_active(channel)
        return []  # rule 7

    # -- transitions ----------------------------------------------------------------------

    def _to_idle(self, channel: int) -> ValveOutput:
        # Rule 5: an idle channel is not aligned.
        self._statuses[channel] = _IDLE
        self._active_count -= 1
        self._aligned.discard(channel)
        caught_up = self._watermarks[channel] == self._last_output
        if self._active_count == 0:
            # No channel will advance any more: flush the max over all channels (rule 5).
            out = self._advance_to_max_of_all()
            self._status = _IDLE
            out.append(_IDLE)
            return out
        if caught_up:
            # The channel may have been the minimum: the remaining aligned ones may advance.
            return self._advance_to_min_of_aligned()
        return []

    def _to_active(self, channel: int) -> ValveOutput:
        # Rule 6: aligned only if its watermark has not fallen behind the output.
        self._statuses[channel] = _ACTIVE
        self._active_count += 1
        out: ValveOutput = []
        if self._status is _IDLE:
            self._status = _ACTIVE
            out.append(_ACTIVE)
        if self._watermarks[channel] >= self._last_output:
            self._aligned.add(channel)
            out.extend(self._advance_to_min_of_aligned())  # after the ACTIVE (rule 6)
        return out

    def _advance_to_min_of_aligned(self) -> ValveOutput:
        # Rule 4 (Flink's findAndOutputNewMinWatermarkAcrossAlignedSubpartitions).
        if not self._aligned:
            return []
        low = min(self._watermarks[c] for c in self._aligned)
        if low <= self._last_output:
            return []
        self._last_output = low
        return [Watermark(low)]

    def _advance_to_max_of_all(self) -> ValveOutput:
        # Flink's findAndOutputMaxWatermarkAcrossAllSubpartitions.
        high = max(self._watermarks)
        if high <= self._last_output:
            return []
        self._last_output = high
        return [Watermark(high)]

    def _check(self, channel: int) -> None:
        if not 0 <= channel < len(self._watermarks):
            raise ValueError(f"channel {channel} out of range for {len(self._watermarks)} inputs")
