"""Configuring a study: codes per outcome, sessions, consent, pay, instructions and examples,
quality policy and collaborators, in any state where it is safe (what the study will cost:
``raters.costs``).

The configure page and ``PATCH /api/studies/<slug>/`` both validate with
``tasks.configure_forms.StudyConfigureForm`` and write through :func:`study_configure`: one
transaction, so a refused change stores nothing at all.

While a study is a draft everything may change. Once it is open (or closed) only the fields in
``SAFE_WHILE_OPEN``: what raters already saw or were measured under (consent, instructions,
assignment, hidden gold share, the qualification test) stays as it was, so every rater of a
study answered the same study. Raters per item may only grow while open (claims already made
must stay within it).
"""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from raters.models import AttentionCheck, QualityPolicy
from tasks.images import ImageRejected, inspect_image, store_image
from tasks.models import Item, Study, WorkedExample
from tasks.study_services import user_is_researcher

# Study fields the configure page sets (the builder sets slug, title, protocol and task type).
STUDY_FIELDS = (
    "completion_code", "completion_url", "screened_out_code", "screened_out_url",
    "qualification_failed_code", "qualification_failed_url", "closed_code", "closed_url",
    "units_per_session", "raters_per_item", "assignment_mode",
    "consent_text", "estimated_minutes", "pay_per_hour", "pay_currency", "contact",
    "instructions", "seconds_per_unit_estimate",
    "adaptive_target_halfwidth", "adaptive_alpha", "adaptive_margin", "adaptive_min_ratings",
)
POLICY_FIELDS = (
    "qualification_required", "qualification_size", "qualification_pass_share", "qualification_max_attempts",
    "attention_max_failures", "attention_action",
    "min_median_time_ms", "straightline_max_std", "min_consensus_r", "gold_min_accuracy", "gold_min_items",
    "gold_action", "behaviour_action", "behaviour_min_flags", "rules_after_session", "rules_every_ratings",
)
SETTINGS_FIELDS = ("gold_share",)  # kept in the study's protocol settings
CONFIG_FIELDS = STUDY_FIELDS + POLICY_FIELDS + SETTINGS_FIELDS + ("collaborators",)

# What may change once raters have started: codes and links, contact and pay (the cost estimate),
# the size of future sessions, more raters per item, who collaborates, and how raters are
# screened (the rules run over every rater again, so all are judged alike).
SAFE_WHILE_OPEN = frozenset({
    "completion_code", "completion_url", "screened_out_code", "screened_out_url",
    "qualification_failed_code", "qualification_failed_url", "closed_code", "closed_url",
    "units_per_session", "raters_per_item", "estimated_minutes", "pay_per_hour", "pay_currency", "contact",
    "seconds_per_unit_estimate", "collaborators",
    "attention_max_failures", "attention_action", "min_median_time_ms", "straightline_max_std", "min_consensus_r",
    "gold_min_accuracy", "gold_min_items", "gold_action", "behaviour_action", "behaviour_min_flags",
    "rules_after_session", "rules_every_ratings",
})

EXAMPLE_MAX_BYTES = 5 * 1024 * 1024
EXAMPLES_MAX = 12


class ConfigurationRefused(ValueError):
    """The change does not fit the study's state or its rules. ``errors``: field → message
    (``"__all__"`` for the whole change)."""

    def __init__(self, errors: dict[str, str], *, conflict: bool = False):
        self.errors = errors
        self.conflict = conflict  # refused for the study's state (HTTP 409), not for the values (400)
        super().__init__("; ".join(f"{k}: {v}" if k != "__all__" else v for k, v in errors.items()))


def study_configuration(study: Study) -> dict:
    """The study's current value of every configurable field (policy defaults where it has none)."""
    policy = QualityPolicy.for_study(study)
    values = {name: getattr(study, name) for name in STUDY_FIELDS}
    values.update({name: getattr(policy, name) for name in POLICY_FIELDS})
    values["gold_share"] = study.protocol_settings.get("gold_share", 0.0)
    values["collaborators"] = sorted(study.collaborators.values_list("username", flat=True))
    return values


def editable_fields(study: Study) -> frozenset[str]:
    """The fields that may change in the study's current state."""
    return frozenset(CONFIG_FIELDS) if study.state == Study.State.DRAFT else SAFE_WHILE_OPEN


def _same(old, new) -> bool:
    if isinstance(old, (Decimal, float, int)) and isinstance(new, (Decimal, float, int)) \
            and not isinstance(old, bool) and not isinstance(new, bool):
        return Decimal(str(old)) == Decimal(str(new))
    return old == new


def _collaborator_users(study: Study, usernames: list[str]) -> list:
    users = {u.username: u for u in get_user_model().objects.filter(username__in=usernames)}
    owners = set(study.owners.values_list("pk", flat=True))
    problems = []
    for name in usernames:
        user = users.get(name)
        if user is None or not user.is_active:
            problems.append(f"No researcher account {name!r}")
        elif user.pk in owners:
            problems.append(f"{name!r} owns the study already")
        elif not user_is_researcher(user):
            # a rater account would gain the study's research pages, ratings and raters' ids
            problems.append(f"{name!r} is not a researcher account")
    if problems:
        raise ConfigurationRefused({"collaborators": "; ".join(problems) + "."})
    return [users[name] for name in usernames]


@transaction.atomic
def study_configure(*, study: Study, changes: dict, actor) -> Study:
    """Apply ``changes`` (cleaned values by field name, as the configure form gives them).

    Unchanged values are ignored, so a whole form may be sent back. Refused as a whole
    (ConfigurationRefused, nothing stored) when a changed field may not change in this state,
    raters per item shrinks on an open study, a collaborator is not a researcher, or the study's
    own checks fail. Only the owners (and staff) change who collaborates.
    """
    study = Study.objects.select_for_update().get(pk=study.pk)
    unknown = sorted(set(changes) - set(CONFIG_FIELDS))
    if unknown:
        raise ConfigurationRefused({"__all__": f"Unknown fields: {', '.join(unknown)}."})
    current = study_configuration(study)
    changed = {name: value for name, value in changes.items() if not _same(current[name], value)}
    allowed = editable_fields(study)
    locked = sorted(name for name in changed if name not in allowed)
    errors = {name: f"Changes only while the study is a draft; it is {study.get_state_display().lower()} and "
                    "raters have seen it as it is. Clone it to change this." for name in locked}
    shrinks = changed.get("raters_per_item", current["raters_per_item"]) < current["raters_per_item"]
    if study.state != Study.State.DRAFT and shrinks:
        errors["raters_per_item"] = (f"An open study can only get more raters per item (now "
                                     f"{current['raters_per_item']}): units already handed out count against it.")
    if "collaborators" in changed and not (actor.is_staff or study.owners.filter(pk=actor.pk).exists()):
        errors["collaborators"] = "Only the study's owners change who collaborates on it."
    if errors:
        raise ConfigurationRefused(errors, conflict=bool(locked) or "raters_per_item" in errors)
    if "collaborators" in changed:
        study.collaborators.set(_collaborator_users(study, list(changed.pop("collaborators"))))
    study_changes = {name: value for name, value in changed.items() if name in STUDY_FIELDS}
    for name, value in study_changes.items():
        setattr(study, name, value)
    if "gold_share" in changed:
        study.settings = {**(study.settings or {}), "gold_share": float(changed["gold_share"])}
    try:
        study.full_clean(exclude=["slug"])  # the slug is not changed here (and is checked unique)
    except ValidationError as exc:
        raise ConfigurationRefused({k: " ".join(v) for k, v in exc.message_dict.items()}) from None
    if study_changes or "gold_share" in changed:
        study.save(update_fields=[*study_changes, *(["settings"] if "gold_share" in changed else [])])
    policy_changes = {name: value for name, value in changed.items() if name in POLICY_FIELDS}
    if policy_changes:
        policy = QualityPolicy.objects.select_for_update().filter(study=study).first() or QualityPolicy(study=study)
        for name, value in policy_changes.items():
            setattr(policy, name, value)
        try:
            policy.full_clean(exclude=["study"])
        except ValidationError as exc:
            raise ConfigurationRefused({k: " ".join(v) for k, v in exc.message_dict.items()}) from None
        policy.save()
    return study


# ------------------------------------------------------------------ worked examples


@transaction.atomic
def worked_example_add(*, study: Study, upload, caption: str) -> WorkedExample:
    """Add an example image (checked by Pillow: a readable PNG/JPEG/WebP/… of at most
    ``EXAMPLE_MAX_BYTES``) with the caption that explains its right rating. Drafts only."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state != Study.State.DRAFT:
        raise ConfigurationRefused({"__all__": "Examples change only while the study is a draft: raters have "
                                               "read the instructions as they are."})
    if study.worked_examples.count() >= EXAMPLES_MAX:
        raise ConfigurationRefused({"image": f"A study has at most {EXAMPLES_MAX} examples."})
    caption = (caption or "").replace("\x00", "").strip()
    if not caption:
        raise ConfigurationRefused({"caption": "Say what rating this example deserves, and why."})
    if len(caption) > WorkedExample.CAPTION_MAX:
        raise ConfigurationRefused({"caption": f"At most {WorkedExample.CAPTION_MAX} characters."})
    if upload is None:
        raise ConfigurationRefused({"image": "Choose an image file."})
    if upload.size > EXAMPLE_MAX_BYTES:
        raise ConfigurationRefused({"image": f"The image is {upload.size / 1e6:.1f} MB; at most "
                                             f"{EXAMPLE_MAX_BYTES / 1e6:.0f} MB."})
    data = upload.read(EXAMPLE_MAX_BYTES + 1)
    try:
        inspected = inspect_image(data, name="The image")
    except ImageRejected as exc:
        raise ConfigurationRefused({"image": str(exc)}) from None
    image = store_image(data, name="example", inspected=inspected)
    position = (study.worked_examples.order_by("-position").values_list("position", flat=True).first() or 0) + 1
    return WorkedExample.objects.create(study=study, image=image, caption=caption, position=position)


@transaction.atomic
def worked_example_remove(*, study: Study, example_id: int) -> None:
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state != Study.State.DRAFT:
        raise ConfigurationRefused({"__all__": "Examples change only while the study is a draft."})
    deleted, _ = WorkedExample.objects.filter(study=study, pk=example_id).delete()
    if not deleted:
        raise ConfigurationRefused({"__all__": "No such example in this study."})


# ------------------------------------------------------------------ attention checks

ATTENTION_MAX = 10


@transaction.atomic
def attention_checks_set(*, study: Study, count: int, spacing: int) -> list[AttentionCheck]:
    """Replace the study's attention checks with ``count`` instructed-response items, the k-th
    shown once a rater's queue reaches ``k × spacing`` screens. Drafts only; not pairwise (checks
    are single items). ``count`` 0 removes them.

    Each check is a study item set aside (its ratings never enter analysis), told apart by its
    instruction: "choose the middle of the first scale" (ImagenHub SC 0.5, a 1–5 Likert 3), an
    answer a careful rater gives whatever the image shows. Items are taken in their random
    ``rank`` order among those without gold and not yet handed out.
    """
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state != Study.State.DRAFT:
        raise ConfigurationRefused({"__all__": "Attention checks change only while the study is a draft."})
    if not study.protocol_def.takes_attention_checks:
        raise ConfigurationRefused({"__all__": "Pairwise studies have no attention checks (they are single items); "
                                               "use hidden gold comparisons."})
    if not 0 <= count <= ATTENTION_MAX:
        raise ConfigurationRefused({"count": f"Between 0 and {ATTENTION_MAX}."})
    if not 1 <= spacing <= 1000:
        raise ConfigurationRefused({"spacing": "Between 1 and 1000 screens."})
    AttentionCheck.objects.filter(study=study).delete()  # a draft: nobody has answered them
    if count == 0:
        return []
    pool = list(Item.objects.filter(study=study, gold__isnull=True, claims=0).order_by("rank")[:count])
    if len(pool) < count:
        raise ConfigurationRefused({"count": f"Only {len(pool)} items are free to set aside as checks."})
    dimension = study.protocol_def.dimensions(study.protocol_settings)[0]
    value = dimension.choices[len(dimension.choices) // 2]
    instruction = f"Attention check: please choose {value:g} for {dimension.label} on this image, whatever you see."
    return [AttentionCheck.objects.create(study=study, item=item, instruction=instruction[:300],
                                          expected_values={dimension.key: value}, after_items=spacing * (k + 1))
            for k, item in enumerate(pool)]
