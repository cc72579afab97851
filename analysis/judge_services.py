"""Starting, running, cancelling and resuming judge runs on a study.

A run's *units* are the study's items with an output image (and, for the GPT-4V judge on a
pairwise study, its comparisons too). The runner (:func:`judge_run_execute`, called by the
Celery job in ``analysis.jobs``) works through the units that have no score in the run yet:

- **cache**: every unit has a key sha256(judge config hash, resolved model, image content
  hashes, prompt hash). When an earlier run stored *parsed or refused* scores under that key,
  they are copied and no request is sent. Failed units (timeouts, 429s after retries,
  unparseable replies) are never cached, so a later run tries them again.
- **idempotent writes**: one unit's rows and its progress counters are written in one
  transaction; the unique constraints (run, item, dimension) and (run, comparison) turn a
  duplicate write by a second worker into a skipped unit, so a redelivered or resumed job
  never counts or stores a unit twice.
- **concurrency**: requests run in a thread pool of ``params.concurrency`` threads (default 4);
  only the main thread touches the database.
- **cancel**: :func:`judge_run_cancel` sets a flag the runner checks after every unit; units in
  flight finish, nothing new starts.
"""

from __future__ import annotations

import hashlib
import io
import logging
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.dispatch import Signal
from django.utils import timezone
from PIL import Image

from analysis.science import metrics
from analysis.science.judges import embedding, prompts
from analysis.science.judges import endpoints
from analysis.science.judges.client import ChatClient, ClientConfig
from analysis.science.judges.evaluators import EVALUATORS, DimensionScore, ItemInputs, evaluate_gpt4v_pair
from analysis.models import Judge, JudgeRun, JudgeScore, JudgeVerdict
from analysis.science import protocols
from tasks.models import Comparison, ConditionImage, Item, Study

logger = logging.getLogger(__name__)

RUNNABLE_KINDS = {Judge.Kind.VIESCORE, Judge.Kind.GPT4V, Judge.Kind.VICE, Judge.Kind.EVALMI, Judge.Kind.METRIC,
                  Judge.Kind.EMBEDDING}
CACHEABLE = [JudgeScore.ParseStatus.OK, JudgeScore.ParseStatus.REFUSED]
PSNR_CAP_DB = 100.0  # identical images have infinite PSNR; stored as this cap


class JudgeRunError(ValueError):
    """A run cannot be started or resumed; the message says why."""


# ------------------------------------------------------------------------------ judges

METRIC_KEYS = {"metrics"}
NAME_MAX = 100


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
        raise JudgeRunError(f"a judge name is 1 to {NAME_MAX} characters")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        raise JudgeRunError("a judge name must not contain control characters (NUL, newlines…)")
    return name


def judge_params_check(kind: str, params: object) -> dict:
    """The judge's params, checked against its kind's schema; JudgeRunError naming what is wrong.

    MLLM kinds: the operator endpoint they name must exist and serve the model; a ``base_url``
    only when the operator allows researcher URLs, and then it must resolve to public addresses.
    """
    try:
        params = endpoints.check_shape(params)
        if kind in endpoints.CHAT_KINDS:
            endpoints.check_chat_params(kind, params)
            _target(params)
        elif kind == Judge.Kind.METRIC:
            unknown = sorted(set(params) - METRIC_KEYS)
            if unknown:
                raise endpoints.EndpointError(f"unknown parameter(s) {', '.join(unknown)} for a metric judge; use metrics")
        elif kind == Judge.Kind.EMBEDDING:
            embedding.parse_params(params)
    except endpoints.EndpointError as exc:
        raise JudgeRunError(str(exc)) from None
    except ValueError as exc:  # embedding.parse_params
        raise JudgeRunError(str(exc)) from None
    return params


def _target(params: dict) -> endpoints.Target:
    """Where an MLLM judge's requests go, from the operator's endpoints (settings)."""
    return endpoints.resolve_target(
        params, endpoints.parse_endpoints(settings.JUDGE_ENDPOINTS),
        allow_researcher_urls=settings.JUDGE_ALLOW_RESEARCHER_URLS,
        allowed_networks=endpoints.parse_networks(settings.JUDGE_RESEARCHER_URL_NETWORKS),
    )


def judge_endpoint_list() -> dict:
    """What researchers may know of the operator's endpoints: names, models, limits (no URLs,
    no key variables), and whether their own URLs are accepted."""
    return {
        "endpoints": [
            {"name": e.name, "models": list(e.models), "default_model": e.default_model,
             "max_concurrency": e.max_concurrency, "requests_per_minute": e.requests_per_minute}
            for e in endpoints.parse_endpoints(settings.JUDGE_ENDPOINTS).values()
        ],
        "researcher_urls": bool(settings.JUDGE_ALLOW_RESEARCHER_URLS),
    }


def judge_for_user(user, name: str) -> Judge | None:
    """The judge ``user`` means by ``name``: their own, else a shared one. Never another
    researcher's judge, whatever it is called."""
    judges = Judge.objects.filter(name=name)
    return judges.filter(owner=user).first() or judges.filter(owner__isnull=True).first()


def judge_create(*, name: str, kind: str, params: dict | None = None, version: str = "1",
                 lower_is_better: bool | None = None, owner=None) -> Judge:
    """Create a judge, or return the existing one with the same owner and name if its config matches.

    ``owner`` None makes a shared judge (staff, CLI and imports only; the API decides who may).
    Raises JudgeRunError for an unknown kind, parameters that fail the kind's schema (keys,
    URLs, unknown names, out-of-range values), an owned judge named like a shared one, or an
    existing judge of that name with a different configuration (change the name or the version
    instead of silently mixing configurations).
    """
    _check_name(name)
    if not isinstance(version, str) or not version or len(version) > 32 or "\x00" in version:
        raise JudgeRunError("version is 1 to 32 characters")
    params = dict(params) if isinstance(params, dict) else ({} if params is None else params)
    if kind not in Judge.Kind.values:
        raise JudgeRunError(f"unknown judge kind {kind!r}; use one of {', '.join(Judge.Kind.values)}")
    judge_params_check(kind, params)
    if kind == Judge.Kind.METRIC:
        chosen = params.get("metrics") or list(metrics.ALL_METRICS)
        if not isinstance(chosen, list) or not all(isinstance(m, str) for m in chosen):
            raise JudgeRunError("params.metrics must be a list of metric names")
        unknown = sorted(set(chosen) - set(metrics.ALL_METRICS))
        if unknown:
            raise JudgeRunError(f"unknown metric(s) {', '.join(unknown)}; use {', '.join(metrics.ALL_METRICS)}")
        if lower_is_better is None:
            lower_is_better = all(metrics.LOWER_IS_BETTER.get(m, False) for m in chosen)
    if kind == Judge.Kind.EMBEDDING:
        _embedding_params(name, params, owned=owner is not None)
    existing = Judge.objects.filter(name=name, owner=owner).first() if owner else (
        Judge.objects.filter(name=name, owner__isnull=True).first())
    if existing:
        if existing.kind != kind or existing.params != params or existing.version != version:
            raise JudgeRunError(f"a judge named {name!r} exists with another configuration; choose a new name or version")
        return existing
    if owner is not None and Judge.objects.filter(name=name, owner__isnull=True).exists():
        raise JudgeRunError(f"{name!r} is a shared judge's name; run it by name without kind, or choose another name")
    return Judge.objects.create(owner=owner, name=name, kind=kind, params=params, version=version,
                                lower_is_better=bool(lower_is_better))


def _embedding_params(name: str, params: dict, *, load: bool = False, owned: bool = False) -> embedding.EmbeddingParams:
    """Validated embedding-judge params; with ``load``, also checks the checkpoint directories
    and that torch/transformers are installed (at start, resume, and in the worker).

    Checkpoints are files on the operator's disk (and weights may be pickles): a researcher's
    own judge may only name directories under ``JUDGE_CHECKPOINT_DIRS``; shared judges are staff's.
    """
    try:
        parsed = embedding.parse_params(params)
        if owned:
            embedding.check_roots(parsed, settings.JUDGE_CHECKPOINT_DIRS)
        embedding.check_checkpoints(parsed)
        if load:
            embedding.require_backend()
    except ValueError as exc:  # CheckpointError is a ValueError
        raise JudgeRunError(f"judge {name}: {exc}") from None
    return parsed


def _client_setup(judge: Judge) -> tuple[ClientConfig | None, int]:
    """(client config, thread count) for a judge; every path to a request comes through here
    (start, resume, the worker), so a judge row edited behind the API's back is checked again."""
    if judge.kind == Judge.Kind.EMBEDDING:
        _embedding_params(judge.name, judge.params, load=True, owned=judge.owner_id is not None)
        return None, 1
    try:
        judge_params_check(judge.kind, judge.params)
    except JudgeRunError as exc:
        raise JudgeRunError(f"judge {judge.name}: {exc}") from None
    if judge.kind == Judge.Kind.METRIC:
        return None, 1
    try:
        target = _target(judge.params)
        config = ClientConfig.from_target(
            target, judge.params, allowed_networks=endpoints.parse_networks(settings.JUDGE_RESEARCHER_URL_NETWORKS)
        )
    except (TypeError, ValueError) as exc:  # EndpointError is a ValueError
        raise JudgeRunError(f"judge {judge.name}: {exc}") from None
    return config, max(1, min(int(judge.params.get("concurrency", 4)), target.max_concurrency))


def _client_config(judge: Judge) -> ClientConfig | None:
    return _client_setup(judge)[0]


# ------------------------------------------------------------------------------ units

def _items(study: Study):
    return (
        Item.objects.for_study(study)
        .filter(image__isnull=False)
        .prefetch_related("instance__condition_images__image")
        .order_by("instance__position", "instance__key", "gen_model__name")
    )


def _comparisons(study: Study, judge: Judge):
    if judge.kind != Judge.Kind.GPT4V or study.protocol_def.unit_kind != protocols.COMPARISON:
        return Comparison.objects.none()
    return Comparison.objects.filter(study=study).select_related("item_a__image", "item_b__image", "item_a__instance").order_by("id")


def _read(stored) -> bytes:
    with stored.file.open("rb") as handle:
        return handle.read()


def _conditions(item: Item) -> dict[str, ConditionImage]:
    chosen: dict[str, ConditionImage] = {}
    for condition in item.instance.condition_images.all():
        if condition.role not in chosen or condition.position < chosen[condition.role].position:
            chosen[condition.role] = condition
    return chosen


def item_inputs(item: Item) -> ItemInputs:
    conditions = _conditions(item)
    return ItemInputs(
        task_type=item.study.task_type,
        prompt=item.instance.prompt,
        output=_read(item.image),
        conditions={role: _read(c.image) for role, c in conditions.items()},
        tokens={role: c.token for role, c in conditions.items() if c.token},
        question=item.instance.question,
    )


def _hash(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _prompt_hash(judge: Judge, text_fingerprint: str) -> str:
    version = prompts.PROMPT_VERSION.get(judge.kind) or {Judge.Kind.EMBEDDING: embedding.VERSION}.get(judge.kind, metrics.VERSION)
    return _hash(version, text_fingerprint)


def item_cache_key(judge: Judge, item: Item, model: str) -> str:
    """sha256(config hash, model, output + condition image hashes, prompt hash)."""
    conditions = _conditions(item)
    images = [item.image.sha256] + [f"{role}:{c.image.sha256}" for role, c in sorted(conditions.items())]
    if judge.kind == Judge.Kind.EMBEDDING:  # uses every image of a subject set, not only the first
        images = [item.image.sha256] + sorted(
            f"{c.role}:{c.position}:{c.image.sha256}" for c in item.instance.condition_images.all()
        )
    text = ItemInputs(
        task_type=item.study.task_type,
        prompt=item.instance.prompt,
        output=b"",
        tokens={role: c.token for role, c in conditions.items() if c.token},
        question=item.instance.question,
    ).text_fingerprint()
    return _hash(judge.config_hash, model, ",".join(images), _prompt_hash(judge, text))


def comparison_cache_key(judge: Judge, comparison: Comparison, model: str) -> str:
    return _hash(
        judge.config_hash, model, "pair", comparison.item_a.image.sha256, comparison.item_b.image.sha256,
        _prompt_hash(judge, _hash(comparison.item_a.instance.prompt)),
    )


# ------------------------------------------------------------------------- metric judge

def _pixels(data: bytes, size: tuple[int, int] | None = None, *, mode: str = "RGB") -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        image = image.convert(mode)
        if size and image.size != size:
            image = image.resize(size, Image.Resampling.BILINEAR)
        return np.asarray(image)


def evaluate_metrics(inputs: ItemInputs, params: dict) -> list[DimensionScore]:
    """Classical metrics of one item. Full-reference ones need a source image (editing tasks);
    the output is resized to the source's size first. PSNR of identical images is stored as
    100 dB. Metrics that do not apply to the item are left out."""
    chosen = params.get("metrics") or list(metrics.ALL_METRICS)
    source = inputs.conditions.get("source")
    values: dict[str, float] = {}
    if source is not None:
        src = _pixels(source)
        size = (src.shape[1], src.shape[0])
        out = _pixels(inputs.output, size)
        mask = None
        if "mask" in inputs.conditions:
            mask = _pixels(inputs.conditions["mask"], size, mode="L") > 127
            if mask.all():
                mask = None
        values = metrics.editing_metrics(out, src, mask=mask)
    else:
        out = _pixels(inputs.output)
        values = {"sharpness": metrics.sharpness(out), "noise": metrics.noise_sigma(out)}
    results = []
    for name in chosen:
        if name in values:
            value = values[name]
            if name.endswith("PSNR") and value == float("inf"):
                value = PSNR_CAP_DB
            results.append(DimensionScore(name, float(value), rationale=f"{name} computed offline"))
    return results


# ---------------------------------------------------------------------- embedding judge

def embedding_item(item: Item) -> embedding.EmbeddingItem:
    """An item with every condition image of each role, in position order."""
    conditions: dict[str, list[bytes]] = {}
    for condition in sorted(item.instance.condition_images.all(), key=lambda c: (c.role, c.position)):
        conditions.setdefault(condition.role, []).append(_read(condition.image))
    return embedding.EmbeddingItem(
        task_type=item.study.task_type, prompt=item.instance.prompt, output=_read(item.image), conditions=conditions,
    )


def _execute_embedding_batches(run: JudgeRun, units, params: embedding.EmbeddingParams, fingerprint: str) -> bool:
    """Score units ``batch_size`` items at a time (one forward pass per batch of images);
    returns True when the run was cancelled. Models load once per worker process."""
    batch: list[_Unit] = []

    def flush() -> None:
        try:
            results = embedding.score_items([embedding_item(u.obj) for u in batch], params, fingerprint=fingerprint)
        except embedding.CheckpointError as exc:  # the model cannot load: the whole run fails, with the reason
            raise JudgeRunError(f"judge {run.judge.name}: {exc}") from None
        for unit, scores in zip(batch, results):
            _write(run, unit, _rows_for(run, unit, scores), calls=0, cached=False)
        batch.clear()

    for unit in units:
        cached_rows = _from_cache(run, unit)
        if cached_rows is not None:
            _write(run, unit, cached_rows, calls=0, cached=True)
            continue
        batch.append(unit)
        if len(batch) >= params.batch_size:
            flush()
            if _cancel_requested(run):
                return True
    if batch:
        flush()
    return False


# ------------------------------------------------------------------------ run lifecycle

# A judge run is due (``run_id``): its receiver (analysis.jobs, connected in analysis.apps) queues
# the job, which sits above this module.
run_queued = Signal()


def _queue(run: JudgeRun) -> None:
    transaction.on_commit(lambda: run_queued.send(sender=JudgeRun, run_id=run.id))


# Metrics that compare the output with its source image, those that also need the edit's mask,
# and those of the output alone (computed for every item).
FULL_REFERENCE_METRICS = ("L1", "L2", "PSNR", "SSIM")
MASKED_METRICS = ("bg_L1", "bg_L2", "bg_PSNR", "bg_SSIM")


def _items_with_roles(study: Study, roles) -> int:
    """How many of the study's judgeable items have a condition image of every one of ``roles``."""
    items = _items(study)
    for role in roles:
        items = items.filter(instance__condition_images__role=role)
    return items.distinct().count()


def judge_run_check(*, judge: Judge, study: Study) -> None:
    """Refuse a run that cannot give one usable score on this study, before anything is queued.

    Raises JudgeRunError saying why and what would work instead:

    - a pairwise study compares judges with the raters through verdicts on its pairs, which only
      the GPT-4V evaluator gives; any other judge's single-image scores have no human score to
      meet (the report and the judges page would show nothing);
    - metrics chosen by name that no item can have: full-reference metrics (L1, L2, PSNR, SSIM,
      ``bg_*``) need a source image; a choice of ``bg_`` metrics only also needs a mask on some
      item (mixed with whole-image ones, items without a mask simply lack them). No-reference
      sharpness and noise work everywhere; an empty choice means "every metric that applies".
    - VIEScore needs the condition images of its task's prompt (a subject for subject-driven
      generation, the source for editing); embedding CLIP-I/DINO need reference images.
    Items lacking a source on a study where some have one are judged on what they have.
    """
    if study.protocol_def.unit_kind == protocols.COMPARISON and judge.kind != Judge.Kind.GPT4V:
        raise JudgeRunError(
            f"{study.slug} is a pairwise study: judges are compared with its raters through verdicts on its pairs, "
            f"which only the GPT-4V evaluator (kind gpt4v) gives; a {judge.kind} judge scores images one at a time "
            "and there is no human score per image to compare it with"
        )
    if judge.kind == Judge.Kind.METRIC:
        chosen = judge.params.get("metrics") or []
        full = [m for m in chosen if m in FULL_REFERENCE_METRICS + MASKED_METRICS]
        if full and not _items_with_roles(study, ["source"]):
            raise JudgeRunError(
                f"{', '.join(full)}: {'these metrics compare' if len(full) > 1 else 'this metric compares'} each output "
                f"with its source image, and no item of {study.slug} ({study.task_type}) has one; choose sharpness or "
                "noise, which need no reference"
            )
        masked = [m for m in chosen if m in MASKED_METRICS]
        if masked and len(masked) == len(chosen) and not _items_with_roles(study, ["source", "mask"]):
            raise JudgeRunError(
                f"{', '.join(masked)}: {'these metrics measure' if len(masked) > 1 else 'this metric measures'} the change "
                f"outside the edit's mask, and no item of {study.slug} "
                f"({study.task_type}) has a source image with a mask; choose L1, L2, PSNR or SSIM of the whole image"
            )
    elif judge.kind == Judge.Kind.VIESCORE:
        _, roles, _ = prompts.VIESCORE_SC.get(study.task_type, prompts.VIESCORE_SC["text_to_image"])
        if roles and not _items_with_roles(study, roles):
            raise JudgeRunError(
                f"VIEScore on {study.task_type} shows the judge the {' and '.join(roles)} image(s) beside the output, "
                f"and no item of {study.slug} has them"
            )
    elif judge.kind == Judge.Kind.EMBEDDING:
        chosen = embedding.parse_params(judge.params).metrics
        if not embedding.applicable(chosen, study.task_type):
            raise JudgeRunError(
                f"{', '.join(chosen)} need reference images (a source or subject set); "
                f"{study.task_type} items have none"
            )


@transaction.atomic
def judge_run_start(*, judge: Judge, study: Study) -> JudgeRun:
    """Create a run of ``judge`` on every item of ``study`` and queue it after commit."""
    if judge.kind not in RUNNABLE_KINDS:
        raise JudgeRunError(f"judges of kind {judge.kind!r} are imported, not run")
    _client_config(judge)  # fail now, not in the worker, when the endpoint is not configured
    judge_run_check(judge=judge, study=study)
    total = _items(study).count() + _comparisons(study, judge).count()
    if not total:
        raise JudgeRunError(f"study {study.slug} has no items with an output image to judge")
    run = JudgeRun.objects.create(judge=judge, study=study, total=total, config_hash=judge.config_hash)
    _queue(run)
    return run


@transaction.atomic
def judge_run_request(*, user, study: Study, judge_name: str, kind: str | None = None, params: dict | None = None,
                      version: str = "1", shared: bool = False) -> JudgeRun:
    """Start a run of the judge ``user`` calls ``judge_name`` on ``study`` (the API's entry point).

    Without ``kind`` the name finds the user's own judge, else a shared one; another
    researcher's judge is never found. With ``kind`` the user's judge is created, or reused when
    theirs of that name has the same kind, params and version; ``shared`` (staff only) creates
    or reuses a shared judge instead. Judge and run are created in one transaction: a run that
    cannot start (no endpoint, nothing to judge) leaves no new judge.
    """
    if shared and not user.is_staff:
        raise JudgeRunError("only staff create shared judges")
    _check_name(judge_name)
    if kind is None:
        if params or shared:
            raise JudgeRunError("params and shared create a judge: give its kind as well")
        judge = judge_for_user(user, judge_name)
        if judge is None:
            raise JudgeRunError(f"you have no judge named {judge_name!r} (nor is one shared); give its kind (and params) to create it")
    else:
        judge = judge_create(name=judge_name, kind=kind, params=params, version=version, owner=None if shared else user)
    return judge_run_start(judge=judge, study=study)


@transaction.atomic
def judge_run_cancel(*, run: JudgeRun) -> JudgeRun:
    """Ask a run to stop. A queued run stops at once; a running one after its current units."""
    run = JudgeRun.objects.select_for_update().get(pk=run.pk)
    if not run.is_active:
        return run
    run.cancel_requested = True
    fields = ["cancel_requested"]
    if run.state == JudgeRun.State.QUEUED:
        run.state, run.finished_at = JudgeRun.State.CANCELLED, timezone.now()
        fields += ["state", "finished_at"]
    run.save(update_fields=fields)
    return run


@transaction.atomic
def judge_run_resume(*, run: JudgeRun, retry_failed: bool = True) -> JudgeRun:
    """Queue a cancelled, failed or stalled run again; units already scored are kept.

    With ``retry_failed`` the run's failed units (not refusals) are cleared first so they are
    asked again.
    """
    run = JudgeRun.objects.select_for_update().get(pk=run.pk)
    if not run.can_resume:
        raise JudgeRunError(f"run {run.pk} is {run.state}; only cancelled, failed or stalled runs can be resumed")
    _client_config(run.judge)
    if retry_failed:
        failed_items = JudgeScore.objects.filter(run=run, parse_status=JudgeScore.ParseStatus.FAILED).values("item_id")
        JudgeScore.objects.filter(run=run, item_id__in=failed_items).delete()
        JudgeVerdict.objects.filter(run=run, parse_status=JudgeScore.ParseStatus.FAILED).delete()
    _recount(run)
    run.state, run.cancel_requested, run.error, run.finished_at = JudgeRun.State.QUEUED, False, "", None
    run.heartbeat_at = timezone.now()
    run.save(update_fields=["state", "cancel_requested", "error", "finished_at", "heartbeat_at"])
    _queue(run)
    return run


def _recount(run: JudgeRun) -> None:
    scores = JudgeScore.objects.filter(run=run)
    verdicts = JudgeVerdict.objects.filter(run=run)
    bad = [JudgeScore.ParseStatus.FAILED, JudgeScore.ParseStatus.REFUSED]
    run.done = scores.values("item_id").distinct().count() + verdicts.count()
    run.failed = scores.filter(parse_status__in=bad).values("item_id").distinct().count() + verdicts.filter(parse_status__in=bad).count()
    run.save(update_fields=["done", "failed"])


# ----------------------------------------------------------------------------- runner

@dataclass
class _Unit:
    kind: str  # "item" or "pair"
    obj: Item | Comparison
    key: str


def _pending_units(run: JudgeRun, model: str):
    judge = run.judge
    scored = set(JudgeScore.objects.filter(run=run).values_list("item_id", flat=True))
    for item in _items(run.study):
        if item.id not in scored:
            yield _Unit("item", item, item_cache_key(judge, item, model))
    judged = set(JudgeVerdict.objects.filter(run=run).values_list("comparison_id", flat=True))
    for comparison in _comparisons(run.study, judge):
        if comparison.id not in judged:
            yield _Unit("pair", comparison, comparison_cache_key(judge, comparison, model))


def _score_row(run: JudgeRun, item: Item, key: str, s: DimensionScore) -> JudgeScore:
    return JudgeScore(
        run=run, item=item, dimension=s.dimension, value=s.value, sub_scores=s.sub_scores, rationale=s.rationale,
        raw_response=s.raw_response, parse_status=s.parse_status, latency_ms=s.latency_ms,
        prompt_tokens=s.prompt_tokens, completion_tokens=s.completion_tokens, cache_key=key, details=s.details,
    )


def _write(run: JudgeRun, unit: _Unit, rows: list, *, calls: int, cached: bool) -> bool:
    """Store one unit's rows and bump the counters together; False if another worker did it."""
    if unit.kind == "item":
        bad = any(r.parse_status != JudgeScore.ParseStatus.OK for r in rows) or not rows
    else:
        bad = rows[0].parse_status != JudgeScore.ParseStatus.OK
    try:
        with transaction.atomic():
            model = JudgeScore if unit.kind == "item" else JudgeVerdict
            model.objects.bulk_create(rows)
            JudgeRun.objects.filter(pk=run.pk).update(
                done=F("done") + 1, failed=F("failed") + int(bad), calls=F("calls") + calls,
                cached=F("cached") + int(cached), heartbeat_at=timezone.now(),
            )
    except IntegrityError:
        logger.info("run %s: unit %s %s was already stored by another worker", run.pk, unit.kind, unit.obj.pk)
        if calls:
            JudgeRun.objects.filter(pk=run.pk).update(calls=F("calls") + calls)
        return False
    return True


def _same_owner(run: JudgeRun) -> Q:
    """Cached answers come only from judges of the same owner (or shared ones for a shared
    judge): one researcher's replies and rationales never fill another's run."""
    owner = run.judge.owner_id
    return Q(run__judge__owner_id=owner) if owner else Q(run__judge__owner__isnull=True)


def _from_cache(run: JudgeRun, unit: _Unit) -> list | None:
    if unit.kind == "item":
        source = (
            JudgeScore.objects.filter(_same_owner(run), cache_key=unit.key, parse_status__in=CACHEABLE).exclude(run=run)
            .order_by("-run__created_at").values_list("run_id", flat=True).first()
        )
        if source is None:
            return None
        rows = list(JudgeScore.objects.filter(run_id=source, item_id=unit.obj.pk, cache_key=unit.key))
        if not rows or any(r.parse_status == JudgeScore.ParseStatus.FAILED for r in rows):
            rows = list(JudgeScore.objects.filter(run_id=source, cache_key=unit.key))
            rows = [r for r in rows if r.item_id == rows[0].item_id] if rows else []
        if not rows or any(r.parse_status == JudgeScore.ParseStatus.FAILED for r in rows):
            return None
        for row in rows:
            row.pk, row.id, row.run, row.item = None, None, run, unit.obj
            row._state.adding = True
        return rows
    verdict = (
        JudgeVerdict.objects.filter(_same_owner(run), cache_key=unit.key, parse_status__in=CACHEABLE).exclude(run=run)
        .order_by("-run__created_at").first()
    )
    if verdict is None:
        return None
    verdict.pk, verdict.id, verdict.run, verdict.comparison = None, None, run, unit.obj
    verdict._state.adding = True
    return [verdict]


def _evaluate(judge: Judge, unit: _Unit, inputs, client: ChatClient | None) -> list:
    if unit.kind == "pair":
        prompt, image_a, image_b = inputs
        return [evaluate_gpt4v_pair(prompt, image_a, image_b, client, judge.params)]
    if judge.kind == Judge.Kind.METRIC:
        return evaluate_metrics(inputs, judge.params)
    return EVALUATORS[judge.kind](inputs, client, judge.params)


def _rows_for(run: JudgeRun, unit: _Unit, results: list) -> list:
    if unit.kind == "item":
        return [_score_row(run, unit.obj, unit.key, s) for s in results]
    outcome = results[0]
    return [
        JudgeVerdict(
            run=run, comparison=unit.obj, first=outcome.first or "", second=outcome.second or "", final=outcome.final or "",
            parse_status=outcome.status, rationale_first=outcome.rationale_first, rationale_second=outcome.rationale_second,
            latency_ms=outcome.latency_ms, prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
            cache_key=unit.key,
        )
    ]


def _inputs_for(unit: _Unit):
    if unit.kind == "pair":
        c = unit.obj
        return (c.item_a.instance.prompt, _read(c.item_a.image), _read(c.item_b.image))
    return item_inputs(unit.obj)


def _cancel_requested(run: JudgeRun) -> bool:
    return JudgeRun.objects.filter(pk=run.pk, cancel_requested=True).exists()


def _finish(run: JudgeRun, state: str, error: str = "") -> None:
    JudgeRun.objects.filter(pk=run.pk).update(state=state, finished_at=timezone.now(), error=error[:2000], heartbeat_at=timezone.now())


def judge_run_execute(*, run_id: int, task_id: str = "") -> JudgeRun | None:
    """Work through a run's remaining units. Safe to call twice or after a crash.

    Returns the run, or None when there was nothing to do (already finished or cancelled).
    """
    now = timezone.now()
    claimed = JudgeRun.objects.filter(
        pk=run_id, state__in=[JudgeRun.State.QUEUED, JudgeRun.State.RUNNING], cancel_requested=False
    ).update(state=JudgeRun.State.RUNNING, heartbeat_at=now, task_id=task_id[:64])
    run = JudgeRun.objects.select_related("judge", "study").filter(pk=run_id).first()
    if run is None:
        return None
    if not claimed:
        if run.is_active and run.cancel_requested:
            _finish(run, JudgeRun.State.CANCELLED)
        return None
    if run.started_at is None:
        JudgeRun.objects.filter(pk=run.pk).update(started_at=now)
    judge = run.judge
    try:
        config, concurrency = _client_setup(judge)
    except JudgeRunError as exc:  # e.g. the endpoint was removed, or the row was edited to a forbidden URL
        _finish(run, JudgeRun.State.FAILED, str(exc))
        run.refresh_from_db()
        return run
    if judge.kind == Judge.Kind.EMBEDDING:
        params = embedding.parse_params(judge.params)
        fingerprint = embedding.checkpoints_fingerprint(params)
        cancelled = _execute_embedding_batches(run, _pending_units(run, fingerprint), params, fingerprint)
        _finish(run, JudgeRun.State.CANCELLED if cancelled else JudgeRun.State.DONE)
        run.refresh_from_db()
        return run
    client = ChatClient(config) if config else None
    model = config.model if config else "offline"
    units = _pending_units(run, model)
    in_flight: dict[Future, _Unit] = {}
    sent_before = 0
    cancelled = False

    def calls_since_last() -> int:
        nonlocal sent_before
        if client is None:
            return 0
        now_sent = client.requests_sent
        delta, sent_before = now_sent - sent_before, now_sent
        return delta

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"judge-run-{run.pk}") as pool:
        exhausted = False
        while True:
            while not exhausted and len(in_flight) < concurrency:
                unit = next(units, None)
                if unit is None:
                    exhausted = True
                    break
                cached_rows = _from_cache(run, unit)
                if cached_rows is not None:
                    _write(run, unit, cached_rows, calls=0, cached=True)
                    continue
                in_flight[pool.submit(_evaluate, judge, unit, _inputs_for(unit), client)] = unit
            if not in_flight:
                break
            finished, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            for future in finished:
                unit = in_flight.pop(future)
                try:
                    results = future.result()
                except ValueError as exc:  # e.g. an editing item without its source image
                    results = [DimensionScore("error", None, JudgeScore.ParseStatus.FAILED, rationale=str(exc))]
                    if unit.kind == "pair":
                        raise
                _write(run, unit, _rows_for(run, unit, results), calls=calls_since_last(), cached=False)
            if _cancel_requested(run):
                cancelled = True
                for future in in_flight:
                    future.cancel()
                exhausted = True
                # units already running still finish; store them so their calls are not wasted
                for future in list(in_flight):
                    if not future.cancelled():
                        unit = in_flight.pop(future)
                        _write(run, unit, _rows_for(run, unit, future.result()), calls=calls_since_last(), cached=False)
                in_flight.clear()
    if cancelled:
        _finish(run, JudgeRun.State.CANCELLED)
    else:
        _finish(run, JudgeRun.State.DONE)
    run.refresh_from_db()
    return run


def judge_run_fail(*, run_id: int, error: str) -> None:
    """Mark a run failed (the job hit its time limit or an unexpected error); it can be resumed."""
    JudgeRun.objects.filter(pk=run_id, state__in=[JudgeRun.State.QUEUED, JudgeRun.State.RUNNING]).update(
        state=JudgeRun.State.FAILED, error=error[:2000], finished_at=timezone.now()
    )
