"""Options of the mid-episode GST questioner (``gst.*`` of ``vla-rollout``): the one home of their defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vla_common.strict import from_dict


@dataclass(frozen=True)
class GSTOptions:
    enabled: bool = False  # on by itself when every or at is set
    every: int | None = None  # ask every N steps
    at: list[int] = field(default_factory=list)  # ... and/or at these steps
    subtasks: list[str] | None = None  # None: every subtask the env supports
    per_subtask: int = 1  # questions per subtask each time
    map_level: str = "easy"  # map shown with GP, Pos, Ori and Traj (when the env has that level)
    camera: str | None = None  # None: the env family's question camera (house: ego, LIBERO: wrist)
    seed: int = 0

    @classmethod
    def from_dict(cls, cfg: dict[str, Any] | None) -> "GSTOptions":
        from vla.questions.subtasks import check_codes

        opts = from_dict(cls, cfg, "gst")
        if opts.every is not None and int(opts.every) < 1:
            raise ValueError(f"gst.every must be >= 1, got {opts.every}")
        if opts.subtasks is not None:
            check_codes(opts.subtasks)
        return opts

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["enabled"] = bool(self.enabled or self.every or self.at)
        return d
