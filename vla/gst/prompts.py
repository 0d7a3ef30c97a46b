"""Question prompts in GST-Bench's answer formats (docs/ARCHITECTURE.md §4, docs/GST.md).

The wording follows the benchmark's conventions and answer formats; every prompt states the
convention it is scored with, so a model that follows the prompt is scored correctly.
"""

from __future__ import annotations

from vla.questions.subtasks import SUBTASKS

_INTRO = "You are given a video of an agent exploring an indoor scene."
_CURRENT = " The last image is your current view."
_VISUAL = "the object marked with a red box in the video"
_ANGLE = (
    " Answer with an integer number of degrees in (-180, 180]: 0 means straight ahead, positive values"
    " mean the target is to your left, negative values to your right."
)
_DIST = " Answer with the horizontal distance in metres, with one decimal (e.g. 2.4)."
_POINT = (
    " Answer with the position on the top-down map as <point>x y</point>, where x (to the right) and y"
    " (downwards) are integers from 0 to 999 across the image."
)
_CHOICE = " Answer with the letter of one option: A, B, C or D."


def target_phrase(code: str, category: str | None) -> str:
    return _VISUAL if SUBTASKS[code].target == "visual" else f"the {category.replace('_', ' ')}"


def prompt(code: str, category: str | None = None, local_image: bool = False) -> str:
    """The question text. ``local_image``: the paper's control setting, the target visible in the current
    view (marked with a red box there too when it is a visual target)."""
    if code not in SUBTASKS:
        raise ValueError(f"unknown GST subtask {code!r}")
    t = target_phrase(code, category) if SUBTASKS[code].target else None
    seen = (
        (" is visible in your current view" + (" (with a red box)." if SUBTASKS[code].target == "visual" else "."))
        if local_image
        else " is not visible in your current view."
    )
    if code in ("EDv", "EDs"):
        return (
            _INTRO + _CURRENT + f" {t[0].upper() + t[1:]}{seen}"
            " In which direction is it, relative to the direction you are facing?" + _ANGLE
        )
    if code in ("EDistv", "EDists"):
        return _INTRO + _CURRENT + f" {t[0].upper() + t[1:]}{seen} How far is it from you?" + _DIST
    if code in ("GPv", "GPs"):
        return _INTRO + f" The image after the video is a top-down map of the scene. Where is {t} on the map?" + _POINT
    if code == "Pos":
        return (
            _INTRO
            + _CURRENT.replace("last image", "image after the video")
            + " The final image is a top-down map of the scene. Where are you on the map?"
            + _POINT
        )
    if code == "Ori":
        return (
            _INTRO
            + _CURRENT.replace("last image", "image after the video")
            + " The final image is a top-down map of the scene."
            " Which direction are you facing on the map? Answer with an integer number of degrees in (-180, 180]:"
            " 0 means facing the top of the map, positive values are counter-clockwise (turning left),"
            " negative clockwise."
        )
    if code.startswith("TDS"):
        level = {
            "TDS-E": "photo-like renders without the ceiling",
            "TDS-M": "occupancy maps (walls and objects in black)",
            "TDS-H": "maps of the walls only",
        }[code]
        return (
            _INTRO
            + f" The four images A-D after the video are top-down views of scenes ({level})."
            + " Which one shows the scene in the video?"
            + _CHOICE
        )
    if code == "Traj":
        return (
            "You are given a short video clip of an agent moving through an indoor scene. The four images A-D are the"
            + " same top-down map, each with a red trajectory; a blue dot marks its start."
            + " Which trajectory did the agent follow in the clip?"
            + _CHOICE
        )
    raise AssertionError(code)
