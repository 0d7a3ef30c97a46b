"""The ``libero_mem`` tasks: BDDL files built from one template (docs/LIBERO.md, "A memory suite").

Every task is a pair member: the two tasks of a pair share the scene, the objects, the declared
regions and the instruction, and differ only in where the black bowl starts (region ``spot_a`` or
``spot_b``). Their goal puts the cream cheese where the bowl *started*: the goal region is the bowl's
initial region itself. The bowl must leave that region first (into the drawer, or onto the plate),
so once it has, the frames of the two tasks of a pair look alike and only what was seen earlier
tells the policy where the cheese goes.

``python -m envs.libero.mem.tasks`` writes the files into ``envs/libero/mem/bddl/`` (committed;
a test checks that they equal what the template builds).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

BDDL_DIR = Path(__file__).with_name("bddl")
PROBLEM = "LIBERO_Kitchen_Tabletop_Manipulation"  # LIBERO's problem class of the kitchen table scenes
TABLE = "kitchen_table"
BOWL, CHEESE, PLATE = "akita_black_bowl_1", "cream_cheese_1", "plate_1"
CABINET = "white_cabinet_1"
DRAWER = f"{CABINET}_top_region"

# regions on the kitchen table (x1, y1, x2, y2; x away from the robot) and yaw. The cabinet stands
# where libero_10's KITCHEN_SCENE4 has it and spot_a is that scene's bowl region; its top drawer
# starts open (the bottom one is under the middle drawer's overhang, where the expert's release
# stalled). Everything else stays out of the open drawer's way (y <= -0.075): a hand carrying low
# past the drawer's front caught on it, and a hand coming round for a second grasp of the bowl
# nearer the drawer pushed the drawer almost shut.
TABLE_REGIONS: dict[str, tuple[tuple[float, float, float, float], float]] = {
    "white_cabinet_init_region": ((-0.01, 0.29, 0.01, 0.31), 0.0),
    "spot_a": ((0.005, -0.125, 0.055, -0.075), 0.0),
    "spot_b": ((-0.175, -0.125, -0.125, -0.075), 0.0),
    "cream_cheese_init_region": ((-0.08, -0.29, -0.04, -0.25), 0.0),
    "plate_init_region": ((0.125, -0.295, 0.155, -0.265), 0.0),
}
FIXTURE_REGIONS = {CABINET: ("top_side", "top_region", "middle_region", "bottom_region")}
SPOTS = ("spot_a", "spot_b")


@dataclass(frozen=True)
class MemTask:
    name: str
    language: str
    start: str  # the bowl's initial table region (spot_a | spot_b)
    hide: tuple[str, str]  # where the bowl goes: (predicate, target)
    tests: str  # what the task tests (docs)

    @property
    def recall_region(self) -> str:
        """The goal's region for the cheese: the bowl's initial region."""
        return f"{TABLE}_{self.start}"

    @property
    def goal(self) -> list[list[str]]:
        rel, target = self.hide
        out = [[rel, BOWL, target], ["On", CHEESE, self.recall_region]]
        if target == DRAWER:
            out.append(["Close", DRAWER])
        return out


DRAWER_TEXT = "put the black bowl in the top drawer, put the cream cheese where the bowl was and close the drawer"
PLATE_TEXT = "put the black bowl on the plate, then put the cream cheese where the bowl was"
TASKS: tuple[MemTask, ...] = (
    MemTask(
        "KITCHEN_MEM_drawer_recall_spot_a",
        DRAWER_TEXT,
        "spot_a",
        ("In", DRAWER),
        "where an object stood before it was hidden in a drawer",
    ),
    MemTask(
        "KITCHEN_MEM_drawer_recall_spot_b",
        DRAWER_TEXT,
        "spot_b",
        ("In", DRAWER),
        "where an object stood before it was hidden in a drawer",
    ),
    MemTask(
        "KITCHEN_MEM_plate_recall_spot_a",
        PLATE_TEXT,
        "spot_a",
        ("On", PLATE),
        "where an object stood before it was moved onto a plate",
    ),
    MemTask(
        "KITCHEN_MEM_plate_recall_spot_b",
        PLATE_TEXT,
        "spot_b",
        ("On", PLATE),
        "where an object stood before it was moved onto a plate",
    ),
)


def _region(name: str, target: str, ranges=None, yaw: float | None = None) -> list[str]:
    out = [f"      ({name}", f"          (:target {target})"]
    if ranges is not None:
        out += [
            "          (:ranges (",
            "              (" + " ".join(repr(float(v)) for v in ranges) + ")",
            "            )",
            "          )",
        ]
    if yaw is not None:
        out += ["          (:yaw_rotation (", f"              ({yaw!r} {yaw!r})", "            )", "          )"]
    out.append("      )")
    return out


def bddl(task: MemTask) -> str:
    """The BDDL text of a task (LIBERO's syntax, as its official files)."""
    lines = [f"(define (problem {PROBLEM})", "  (:domain robosuite)", f"  (:language {task.language})", "    (:regions"]
    for name, (ranges, yaw) in TABLE_REGIONS.items():
        lines += _region(name, TABLE, ranges, yaw)
    for fixture, names in FIXTURE_REGIONS.items():
        for name in names:
            lines += _region(name, fixture)
    lines += ["    )", ""]
    lines += ["  (:fixtures", f"    {TABLE} - {TABLE}", f"    {CABINET} - white_cabinet", "  )", ""]
    lines += ["  (:objects"]
    lines += [f"    {o} - {o.rsplit('_', 1)[0]}" for o in (BOWL, CHEESE, PLATE)]
    lines += ["  )", ""]
    lines += ["  (:obj_of_interest", f"    {BOWL}", f"    {CHEESE}", "  )", ""]
    init = [
        ["On", BOWL, f"{TABLE}_{task.start}"],
        ["On", CHEESE, f"{TABLE}_cream_cheese_init_region"],
        ["On", PLATE, f"{TABLE}_plate_init_region"],
        ["On", CABINET, f"{TABLE}_white_cabinet_init_region"],
        ["Open", DRAWER],
    ]
    lines += ["  (:init"] + [f"    ({' '.join(p)})" for p in init] + ["  )", ""]
    goal = " ".join(f"({' '.join(p)})" for p in task.goal)
    lines += ["  (:goal", f"    (And {goal})", "  )", "", ")", ""]
    return "\n".join(lines)


def path(task: MemTask) -> Path:
    return BDDL_DIR / f"{task.name}.bddl"


def write(out: Path = BDDL_DIR) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for t in TASKS:
        p = out / f"{t.name}.bddl"
        p.write_text(bddl(t))
        written.append(p)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write the libero_mem BDDL files from their template.")
    ap.add_argument("--out", type=Path, default=BDDL_DIR)
    args = ap.parse_args(argv)
    for p in write(args.out):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
