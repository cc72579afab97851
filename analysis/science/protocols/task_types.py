"""Which task types each protocol runs, and which protocol settings apply to which task.

The builder's task-type select offers these (and only these) per protocol; the API and the
builder service refuse anything else. A setting that does not apply to the study's task is not
stored: ImagenHub's ``description_models`` (text-guided editors that were given a description
instead of an instruction) means something only for text-guided editing.
"""

from __future__ import annotations

from analysis.science import protocols

TASK_TYPES: dict[str, dict[str, str]] = {key: dict(p.task_types) for key, p in protocols.PROTOCOLS.items()}

# setting -> the task types it applies to (settings absent here apply to every task of the protocol)
TASK_ONLY_SETTINGS: dict[str, tuple[str, ...]] = {
    "description_models": ("text_guided_editing",),
}


def task_type_problem(protocol: str, task_type: str) -> str | None:
    """Why ``task_type`` is not a task of ``protocol``, or None."""
    tasks = TASK_TYPES.get(protocol)
    if tasks is None or task_type in tasks:
        return None
    return f"task type {task_type!r} is not one of the {protocol} tasks: {', '.join(tasks)}"


def applicable_settings(protocol: str, task_type: str, settings: dict) -> dict:
    """``settings`` without the ones that do not apply to ``task_type``."""
    return {key: value for key, value in settings.items()
            if key not in TASK_ONLY_SETTINGS or task_type in TASK_ONLY_SETTINGS[key]}
