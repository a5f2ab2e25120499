"""Publisher throttling of a reader (`control_throttle` and friends), pure.

Why a connection stops reading: credit (`flow`) or a resource alarm. A
connection only actually blocks once it publishes while a reason exists (so
consumers keep working), and only clients that announced the
`connection.blocked` capability hear about resource alarms. Methods return the
new reader state plus effects for the reader to execute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PAUSE_HEARTBEAT", "RESUME_HEARTBEAT", "SEND_UNBLOCKED", "Throttle"]

PAUSE_HEARTBEAT = ("pause_heartbeat",)
RESUME_HEARTBEAT = ("resume_heartbeat",)
SEND_UNBLOCKED = ("send_unblocked",)
_RESOURCES = ("memory", "disk")


@dataclass
class Throttle:
    capability: bool = False
    blocked_by: set[str] = field(default_factory=set)
    should_block: bool = False
    blocked_message_sent: bool = False
    last_blocked_at: int | None = None

    def resources(self) -> list[str]:
        return [r for r in _RESOURCES if r in self.blocked_by]

    def reason(self) -> str:
        return "low on " + " & ".join(self.resources())

    def control(self, state: str, credit_blocked: bool, now: int) -> tuple[str, list[tuple]]:
        if credit_blocked:
            self.blocked_by.add("flow")
        else:
            self.blocked_by.discard("flow")
        effects: list[tuple] = []
        if state == "running":
            state = self._maybe_block(state, now, effects)
        elif state == "blocked":
            state = self._maybe_unblock(state, effects)
            state = self._maybe_block(state, now, effects)
        return state, effects

    def publish_received(self, state: str, now: int) -> tuple[str, list[tuple]]:
        effects: list[tuple] = []
        if self.blocked_by:
            self.should_block = True
            state = self._maybe_block(state, now, effects)
        return state, effects

    def _maybe_block(self, state: str, now: int, effects: list[tuple]) -> str:
        if not (self.should_block and self.blocked_by):
            return state
        if state == "running":
            effects.append(PAUSE_HEARTBEAT)
        self.last_blocked_at = now
        if self.resources() and not self.blocked_message_sent and self.capability:
            effects.append(("send_blocked", self.reason()))
            self.blocked_message_sent = True
        return "blocked"

    def _maybe_unblock(self, state: str, effects: list[tuple]) -> str:
        if self.should_block and self.blocked_by:
            return state
        effects.append(RESUME_HEARTBEAT)
        self.should_block = False
        if self.blocked_message_sent and not self.resources():
            effects.append(SEND_UNBLOCKED)
            self.blocked_message_sent = False
        return "running"

    def connection_state(self, state: str, credit_blocked: bool, now_ms: int) -> str:
        """What the connection reports as `state` (`rabbit_reader`'s `flow` / `running`)."""
        if not self.resources() and (
            credit_blocked
            or ("flow" in self.blocked_by and self.last_blocked_at is not None
                and now_ms - self.last_blocked_at < 5000)
        ):
            return "flow"
        if state == "blocked":
            return "blocked"
        if state == "running" and self.blocked_by:
            return "blocking"
        return state
