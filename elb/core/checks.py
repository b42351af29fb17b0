"""One line of ``elb validate`` (and of the drivers' own checks): what was checked, ok or not, and
how to fix it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    what: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # ok, but worth a look: ``warn``, with the fix

    def line(self) -> str:
        """One line, whatever the detail (a scheduler's error spans several)."""
        fix = f" -> {self.fix}" if self.fix and (self.warning or not self.ok) else ""
        text = " ".join(f"{self.what}: {self.detail}{fix}".split())
        return f"{'FAIL' if not self.ok else 'warn' if self.warning else 'ok  '} {text}"

    def as_json(self) -> dict[str, object]:
        """JSON-ready: what, ok, warning, detail, and the fix (empty when ok and no warning)."""
        fix = self.fix if (self.warning or not self.ok) else ""
        return {"what": self.what, "ok": self.ok, "warning": self.warning, "detail": self.detail, "fix": fix}
