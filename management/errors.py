"""HTTP refusals with RabbitMQ's status codes and JSON bodies."""

from __future__ import annotations

__all__ = ["HttpError", "bad_request", "not_authorised", "not_found"]


class HttpError(Exception):
    """Answered as ``{"error": error, "reason": reason}`` with `status`."""

    def __init__(self, status: int, error: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.error, self.reason = status, error, reason

    def body(self) -> dict[str, str] | None:
        """None for a bare answer (the challenge to a request without credentials)."""
        return {"error": self.error, "reason": self.reason} if self.error else None


def not_found(reason: str = "Not Found") -> HttpError:
    return HttpError(404, "Object Not Found", reason)


def bad_request(reason: str) -> HttpError:
    return HttpError(400, "bad_request", reason)


def not_authorised(reason: str, status: int = 401) -> HttpError:
    return HttpError(status, "not_authorised", reason)
