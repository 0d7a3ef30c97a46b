"""``LiberoEnv``: one LIBERO task as a gymnasium env with the observation contract of docs/ARCHITECTURE.md §3.

* Official protocol by default: fixed init states of the suite (one per trial), 10 no-op settling
  steps inside ``reset``, 256x256 images rotated 180 degrees, 7-dim delta-EEF action in [-1, 1],
  8-dim state, success = the env's own goal predicate (``info["success"]``); ``info["episode_metrics"]``
  says how far the goal got (its stages, the first one never reached: :mod:`envs.libero.progress`).
* Observations carry ``agentview`` and ``wrist`` :class:`CameraFrame`s: RGB, metric depth,
  instance masks (``labels`` = category; :meth:`LiberoEnv.instance_names` = instance id -> object
  name), ``K`` and ``T_world_cam``; ``sensors`` hold joint_states, gripper_states, ee_states and
  robot_state (what LIBERO's datasets store). ``render=False`` drops all cameras (fast scripted
  rollouts). ``env.env_spec`` declares all of it.
* The simulator (and its GL context) is created on the first ``reset``, so an env object can be
  built in a parent process and used after ``fork``. Call ``close()`` when done.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import gymnasium as gym
import numpy as np

from spatial_memory.frame import CameraFrame

from .. import _gl
from ..base import ActionSpec, ArraySpec, CameraSpec, EnvSpec, Observation, SceneTruth, TaskInfo, VLAEnv, check_action
from ..orientation import ORIENTATIONS, orient
from . import camera, dataset_format, language, segmentation, suites
from . import perturb as perturbations
from .config import RENDER_QUALITIES, SAMPLED_SEED, SAMPLED_TRIALS, SETTLE_STEPS, check_arm_init_noise
from .frames import FrameGate
from .progress import GoalProgress
from .render_context import KeepRenderContext, dispose
from .render_quality import FastScene
from .truth import categories, scene_truth

CAMERAS = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}
# OSC_POSE delta end-effector action and the 8-dim state of the protocol
ACTION_NAMES = ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")
STATE_NAMES = ("eef_x", "eef_y", "eef_z", "eef_ax", "eef_ay", "eef_az", "gripper_left", "gripper_right")
# dataset key prefixes of the official LIBERO HDF5 files
RECORD_NAMES = {"agentview": "agentview", "wrist": "eye_in_hand"}


def quat_xyzw_to_axis_angle(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    w = np.clip(q[3], -1.0, 1.0)
    s = np.sqrt(max(1.0 - w * w, 0.0))
    if s < 1e-8:
        return np.zeros(3)
    return q[:3] * (2.0 * np.arccos(w) / s)


class LiberoEnv(VLAEnv):
    CAMERAS = CAMERAS

    def __init__(
        self,
        suite: str = "libero_spatial",
        task_id: int = 0,
        *,
        resolution: int = 256,
        cameras: tuple[str, ...] | list[str] = ("agentview", "wrist"),
        render: bool = True,
        depth: bool = True,
        segmentation: bool = True,
        orientation: str = "rot180",
        settle_steps: int = SETTLE_STEPS,
        max_steps: int | None = None,
        controller: str = "OSC_POSE",
        hard_reset: bool = True,
        env_seed: int = suites.ENV_SEED,
        init_states: str = "official",
        arm_init_noise: float = 0.0,
        perturb: str = "",
        render_quality: str = "default",
        instruction: str = "own",
    ) -> None:
        suites.check_suite(suite)
        suites.check_task(suite, task_id)
        unknown = [c for c in cameras if c not in CAMERAS]
        if unknown:
            raise ValueError(f"unknown LIBERO camera(s) {unknown}; available: {list(CAMERAS)}")
        if orientation not in ORIENTATIONS:
            raise ValueError(f"unknown image orientation {orientation!r}; expected one of {ORIENTATIONS}")
        if int(resolution) < 8:
            raise ValueError(f"resolution must be >= 8 pixels, got {resolution}")
        self.suite, self.task_id = suite, task_id
        self.resolution, self.cameras = int(resolution), tuple(cameras)
        self.render_cameras = bool(render) and bool(self.cameras)
        self.depth, self.segmentation, self.orientation = depth, segmentation, orientation
        if render_quality not in RENDER_QUALITIES:
            raise ValueError(f"render_quality must be one of {RENDER_QUALITIES}, got {render_quality!r}")
        self.render_quality = render_quality
        self.settle_steps, self.controller, self.hard_reset = int(settle_steps), controller, bool(hard_reset)
        self.env_seed = int(env_seed)
        self._stream = 0  # resets drawn from LIBERO's random stream since env.seed(env_seed)
        self._rng: Any = None  # numpy's global generator state where this env's stream stands
        if init_states not in ("official", "sampled"):
            raise ValueError(f"init_states must be 'official' or 'sampled', got {init_states!r}")
        self.init_states = suites.check_init_states(suite, init_states)
        check_arm_init_noise(arm_init_noise, init_states)
        self.arm_init_noise = float(arm_init_noise)
        self.perturb = perturbations.canonical(perturb)  # env.perturb (docs/LIBERO.md); "" = the nominal scene
        self._perturber = perturbations.Perturber(perturbations.parse(perturb))
        bench = suites.benchmark(suite)
        self._libero_task = bench.get_task(task_id)
        self._init_states = bench.get_task_init_states(task_id) if init_states == "official" else []
        # env.instruction=distractor: another task's instruction, its goal on this scene's objects
        self._goal: list[list[str]] | None = None
        text = self._libero_task.language
        if instruction != "own":
            if instruction != "distractor":
                raise ValueError(f"instruction must be 'own' or 'distractor', got {instruction!r}")
            other, self._goal = language.distractor(suite, task_id)
            text = bench.get_task(other).language
        self.task = TaskInfo(
            task_id=task_id,
            name=self._libero_task.name,
            instruction=text,
            max_steps=int(max_steps or suites.MAX_STEPS[suite]),
            num_trials=len(self._init_states) if init_states == "official" else SAMPLED_TRIALS,
        )
        self.instruction = self.task.instruction
        self.max_episode_steps = self.task.max_steps
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float64)
        self.observation_space = gym.spaces.Dict({})  # observations are `Observation` objects (see module doc)
        self._env = None
        self._raw: dict[str, Any] | None = None
        self._steps = 0
        self._trial: int | None = None
        self._static: dict[str, tuple[np.ndarray, int]] = {}
        self._gate = FrameGate()  # the camera sensors, opened only for the steps whose frames are read
        self._frames_next = True

    # ------------------------------------------------------------------ simulator lifecycle
    @property
    def bddl_file(self) -> str:
        """The task's BDDL file, where its LIBERO benchmark says (libero_mem: the project's files)."""
        return suites.benchmark(self.suite).get_task_bddl_file_path(self.task_id)

    def _ensure_sim(self):
        if self._env is not None:
            return self._env
        from libero.libero.envs.env_wrapper import ControlEnv

        kwargs: dict[str, Any] = dict(
            bddl_file_name=self.bddl_file, controller=self.controller, hard_reset=self.hard_reset
        )
        if self.arm_init_noise:  # drawn from the trial's seeded stream at each reset, like the placement
            kwargs["initialization_noise"] = {"magnitude": self.arm_init_noise, "type": "gaussian"}
        if self.render_cameras:
            _gl.before_first_context()
            kwargs.update(
                has_offscreen_renderer=True,
                use_camera_obs=True,
                camera_names=[CAMERAS[c] for c in self.cameras],
                camera_heights=self.resolution,
                camera_widths=self.resolution,
                camera_depths=self.depth,
                camera_segmentations="instance" if self.segmentation else None,
            )
        else:
            kwargs.update(has_offscreen_renderer=False, use_camera_obs=False)
        self._env = ControlEnv(**kwargs)
        if self.render_cameras:  # one GL context and upload of the scene for the env's life
            fast = FastScene() if self.render_quality == "fast" else None
            self._keep_context = KeepRenderContext(fast)
            self._keep_context.install(self._env.env)
        self._env.seed(self.env_seed)  # once per task env, as OpenVLA's get_libero_env
        self._stream = 0
        self._rng = np.random.get_state()
        return self._env

    @property
    def sim_env(self):
        """libero's inner robosuite env (privileged; for experts and tools)."""
        return self._ensure_sim().env

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env = None
                if getattr(self, "_keep_context", None) is not None:  # the GL context goes with the simulator
                    dispose(self._keep_context.context)
                    self._keep_context.context = None
                    if self._keep_context.fast is not None:
                        self._keep_context.fast.close()

    def __del__(self):  # pragma: no cover - best effort; close() is the contract
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Trial ``k``: the suite's init state ``k``, with LIBERO's random stream where OpenVLA's
        sequential evaluation has it for episode ``k`` (``seed`` only seeds gymnasium's unused
        ``np_random``)."""
        super().reset(seed=seed)
        options = options or {}
        trial = int(options.get("trial", 0))
        if not 0 <= trial < self.task.num_trials:
            raise ValueError(f"trial {trial} out of range: {self.task.name} has {self.task.num_trials} init states")
        env = self._ensure_sim()
        if self.init_states == "sampled":  # a fresh placement from the BDDL regions, a function of the trial
            # LIBERO appends a joint sampler (a door's or a drawer's init) on every model reload and
            # never drops the old ones; each draws from the stream first, so without this a sampled
            # trial's placement would depend on how many resets the env had before it
            getattr(env.env, "object_property_initializers", []).clear()
            env.seed(SAMPLED_SEED + trial)
            self._raw = env.reset()
            env.seed(self.env_seed)
            self._stream = -1  # off LIBERO's sequential stream (sampled trials never seek)
        else:
            self._seek(trial)
            env.reset()
            self._stream += 1
            self._rng = np.random.get_state()
            self._raw = env.set_init_state(self._init_states[trial])
        if self.render_cameras:  # after the reset: a hard reset builds new observables
            self._keep_context.after_reset(env.env.sim)
            if self.segmentation:
                segmentation.install(env.env, self.resolution, self.resolution)
            self._gate.install(env.env)
        self._frames_next = True
        if self._perturber:  # env.perturb: the scene's changes for this trial, before the objects settle
            self._perturber.apply_scene(env.sim, env.env, trial)
        self.instruction = self._perturber.instruction(self.task.instruction, trial)
        self._static = self._camera_statics()
        if self._goal is not None:  # the problem's goal check reads this list at every step
            env.env.parsed_problem["goal_state"] = [list(g) for g in self._goal]
        self._settle(force=bool(self._perturber))
        self._trial, self._steps = trial, 0
        self._progress = GoalProgress(env.env)
        self._progress.reset()
        return self._observation(), {"success": bool(env.check_success()), "trial": trial}

    def _seek(self, trial: int) -> None:
        """Bring LIBERO's random stream to where episode ``trial`` of a sequential run finds it.

        LIBERO re-samples the fixtures' placement (cabinets, stoves, racks move by up to ~2 cm) from
        numpy's global generator on every reset; the init states fix only the movable objects. The
        official evaluation seeds the env once per task (``env.seed(0)``) and runs trials 0, 1, ...
        in order, so episode ``k`` sees the stream after ``k`` resets. An env that is asked for
        trial ``k`` elsewhere in its stream re-seeds and replays the resets it skipped (about a
        second each without rendering), so results do not depend on worker scheduling or resume.
        The generator is numpy's global one (libero's ``seed`` is ``np.random.seed``): each env keeps
        its own place in it and restores it first, so other envs or code in the process between two
        resets do not move this env's stream."""
        env = self._env
        np.random.set_state(self._rng)
        if self._stream > trial:
            env.seed(self.env_seed)
            self._stream = 0
        while self._stream < trial:
            env.reset()
            self._stream += 1

    def _settle(self, force: bool = False) -> None:
        """The protocol's no-op steps (objects settle). Cameras are switched off meanwhile: nobody
        sees these frames, and rendering them would cost ~0.6 s each on a software renderer.
        ``force``: the observation is rebuilt even without settle steps (the scene was changed)."""
        if self.settle_steps <= 0:
            if force:
                self._raw = self._env.env._get_observations(force_update=True)
            return
        inner = self._env.env
        cams = [o for o in inner._observables.values() if o.modality == "image" and o.is_enabled()]
        for o in cams:
            o.set_enabled(False)
        try:
            noop = np.array(suites.NOOP_ACTION)
            for _ in range(self.settle_steps):
                self._raw, _, _, _ = self._env.step(noop)
        finally:
            for o in cams:
                o.set_enabled(True)
        if cams:
            self._raw = inner._get_observations(force_update=True)

    def render_next(self, wanted: bool | Collection[str]) -> None:
        """Which cameras the next :meth:`step` renders (:class:`envs.base.RendersOnDemand`): all (True),
        none (False) or those named; the others are missing from its observation, and a step that renders
        none costs the physics alone. The frames of every step that does render are those it would have
        rendered anyway (:mod:`envs.libero.frames`). Applies to one step. With the ``noise``
        perturbation every step renders every camera (its noise is one stream)."""
        if not isinstance(wanted, bool):
            wanted = frozenset(wanted)
            unknown = sorted(wanted - set(self.cameras))
            if unknown:
                raise ValueError(f"render_next: camera(s) {unknown} not among this env's {list(self.cameras)}")
        self._frames_next = wanted

    def step(self, action):
        if self._env is None or self._raw is None:
            raise RuntimeError("call reset() before step()")
        a = check_action(action, self.action_space)
        wanted = True if "noise" in self._perturber.factors else self._frames_next
        rendered = frozenset(self.cameras) if wanted is True else frozenset(wanted or ())
        self._frames_next = True
        self._gate.open = frozenset(CAMERAS[c] for c in rendered)
        try:
            self._raw, _, done, _ = self._env.step(a)
        finally:
            self._gate.open = True
        self._steps += 1
        success = bool(done)
        truncated = self._steps >= self.max_episode_steps and not success
        self._progress.update(self._steps, success)
        info = {"success": success, "episode_metrics": self._progress.metrics()}
        return self._observation(rendered), float(success), success, truncated, info

    # ------------------------------------------------------------------ observations
    def _camera_statics(self) -> dict[str, tuple[np.ndarray, int]]:
        if not self.render_cameras:
            return {}
        model = self._env.sim.model._model
        out = {}
        for name in self.cameras:
            cam_id = model.camera(CAMERAS[name]).id
            out[name] = (camera.intrinsics(model, cam_id, self.resolution, self.resolution, self.orientation), cam_id)
        return out

    def _object_names(self) -> dict[int, str]:
        return {i + 1: n for i, n in enumerate(self._env.env.model.instances_to_ids.keys())}

    def _observation(self, rendered: Collection[str] | None = None) -> Observation:
        """The observation of the current state, with the frames of the ``rendered`` cameras (None: all)."""
        raw = self._raw
        state = np.concatenate(
            [raw["robot0_eef_pos"], quat_xyzw_to_axis_angle(raw["robot0_eef_quat"]), raw["robot0_gripper_qpos"]]
        ).astype(np.float32)
        state = self._perturber.noisy_state(state)
        frames: dict[str, CameraFrame] = {}
        sensors: dict[str, Any] = {}
        shown = [c for c in self.cameras if rendered is None or c in rendered] if self.render_cameras else []
        if shown:
            model, data = self._env.sim.model._model, self._env.sim.data._data
            names = self._object_names()
            cats = categories(self._env.env.parsed_problem)
            labels = {i: cats.get(n, n) for i, n in names.items()}
            for name in shown:
                key = CAMERAS[name]
                K, cam_id = self._static[name]
                rgb = orient(raw[f"{key}_image"], self.orientation)
                if self.depth:
                    depth = orient(camera.depth_to_metres(raw[f"{key}_depth"][..., 0], model), self.orientation)
                else:
                    depth = np.zeros(rgb.shape[:2], np.float32)
                rgb, depth = self._perturber.noisy_image(rgb, depth)
                inst = None
                if self.segmentation:
                    inst = np.ascontiguousarray(
                        orient(raw[f"{key}_segmentation_instance"][..., 0], self.orientation), dtype=np.int32
                    )
                frames[name] = CameraFrame(
                    rgb=np.ascontiguousarray(rgb),
                    depth=np.ascontiguousarray(depth),
                    K=K,
                    T_world_cam=camera.T_world_cam(data, cam_id),
                    instance=inst,
                    labels=labels if inst is not None else {},
                    step=self._steps,
                )
        sensors["joint_states"] = self._perturber.noisy_state(np.asarray(raw["robot0_joint_pos"], dtype=np.float32))
        sensors["gripper_states"] = np.asarray(raw["robot0_gripper_qpos"], dtype=np.float32)
        sensors["ee_states"] = state[:6].copy()
        sensors["robot_state"] = np.concatenate(
            [raw["robot0_gripper_qpos"], raw["robot0_eef_pos"], raw["robot0_eef_quat"]]
        )
        return Observation(cameras=frames, state=state, instruction=self.instruction, step=self._steps, sensors=sensors)

    @property
    def env_spec(self) -> EnvSpec:
        cams = tuple(
            CameraSpec(c, self.resolution, self.resolution, depth=True, instance=self.segmentation)
            for c in self.cameras
        )
        return EnvSpec(
            family="libero",
            action=ActionSpec.from_space(self.action_space, ACTION_NAMES),
            state=ArraySpec((8,), "float32", STATE_NAMES),
            cameras=cams if self.render_cameras else (),
            sensors={
                "joint_states": ArraySpec((7,), "float32"),
                "gripper_states": ArraySpec((2,), "float32"),
                "ee_states": ArraySpec((6,), "float32"),
                "robot_state": ArraySpec((9,), "float64"),
            },
            task={**self.task.to_dict(), "suite": self.suite},
            info={
                "orientation": self.orientation,
                "controller": self.controller,
                "settle_steps": self.settle_steps,
                "env_seed": self.env_seed,
                **({"perturb": self.perturb} if self.perturb else {}),  # absent for the nominal scene
                # absent for the default: the images of a recording or a run made with the decimated copy say so
                **({"render_quality": self.render_quality} if self.render_quality != "default" else {}),
                "gripper": "-1 open, +1 close",
            },
        )

    # ------------------------------------------------------------------ privileged
    def instance_names(self) -> dict[int, str]:
        """Instance id (in the cameras' masks) -> LIBERO object name (privileged: the simulator's own names)."""
        if self._env is None:
            raise RuntimeError("call reset() before instance_names()")
        return self._object_names()

    def scene_truth(self) -> SceneTruth:
        if self._env is None:
            raise RuntimeError("call reset() before scene_truth()")
        return scene_truth(self._env.env)

    record_names = RECORD_NAMES

    def sim_state(self) -> np.ndarray:
        """Flattened MuJoCo state (time, qpos, qvel), as LIBERO's datasets store it."""
        return self._env.get_sim_state()

    def dataset_attrs(self) -> dict[str, str]:
        """File-level attributes of LIBERO's HDF5 datasets for this task (:mod:`.dataset_format`)."""
        return dataset_format.dataset_attrs(self)

    def model_xml(self) -> str:
        """The MJCF of the current episode (LIBERO's per-demo ``model_file``)."""
        return self._ensure_sim().env.sim.model.get_xml()

    def record_frame(self, frame) -> dict[str, np.ndarray]:
        """A camera frame as the official files store it (OpenGL image convention)."""
        return dataset_format.record_frame(frame, self.orientation)

    def expert(self):
        from .expert import LiberoExpert

        return LiberoExpert(self)
