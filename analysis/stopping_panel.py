"""The stopping and cost panel of a study's dashboard (and ``GET /api/studies/<slug>/stopping/``).

Which neighbouring models of the current ranking are separated, tied or still open, what settling
the open ones will take (ratings, and at the study's pay and current pace, money and hours), and
whether to stop. The numbers come from :mod:`analysis.science.stopping`: anytime-valid confidence
sequences, so the verdicts stay valid however often the dashboard is looked at (peeking).

Estimates per model:

* rating-scale studies: the subject model with degrees-of-freedom corrected inconsistencies
  (:func:`analysis.science.live_estimates.unit_estimates`, ``subject_dof``) per item on the
  study's primary dimension, averaged per model with :func:`analysis.science.allocation.model_state`
  (the std is the raters' noise, the study's prompts held fixed);
* pairwise studies: Bradley–Terry log-strengths (:func:`analysis.science.pairwise.pairwise_summary`),
  std = the bootstrap 95 % interval's width / (2 × 1.96).

The confidence sequence is tuned (``n_opt``) to the ratings the study plans on a pair of models
(2 × units × raters per item / models), fixed before any rating, as the method requires. The tie
margin and the error rate are the adaptive mode's ``Study.adaptive_margin`` (score units; 0: no
pair is ever tied) and ``Study.adaptive_alpha`` (default 5 %).

The science part is cached per study state (ratings count + last change, settings) like the rest
of the dashboard; pay, pace and budget are read fresh on every refresh.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pandas as pd
from django.core.cache import cache

from analysis import dashboard
from analysis.data import comparisons_frame
from analysis.science import allocation, live_estimates, stopping
from analysis.science.pairwise import pairwise_summary
from raters.costs import study_cost
from tasks.models import Study

README_HEADING = "### Stopping and cost: anytime-valid verdicts"
METHOD_LINE = ("Verdicts use anytime-valid confidence sequences (normal mixture, Howard et al. 2021): "
               "they hold at every look, so checking this panel as ratings arrive does not inflate false separations.")
Z95 = 1.959964
BOOTSTRAP = 200  # replicates behind the pairwise study's Bradley–Terry std (the report uses more)


def dimensions(study: Study) -> list[str]:
    """The dimensions the panel can rank on (none for a pairwise study)."""
    return dashboard.analysis_dimensions(study) if study.protocol_def.has_scales else []


def _primary(dims: list[str]) -> str | None:
    """The dimension the panel ranks on by default: ImagenHub's overall score O, EvalMi's
    correspondence when present, else the protocol's first; None for pairwise studies."""
    if not dims:
        return None
    if "O" in dims:
        return "O"
    return "correspondence" if "correspondence" in dims else dims[0]


class UnknownDimension(ValueError):
    """A dimension the study does not have; the message is for the researcher."""


def dimension_of(study: Study, asked: str | None, choices: list[str] | None = None) -> str | None:
    """``asked`` if it is one of the study's dimensions (``choices``: :func:`dimensions`, when the
    caller has them), the primary one when nothing was asked; :class:`UnknownDimension` otherwise
    (a pairwise study has none to ask for)."""
    choices = dimensions(study) if choices is None else choices
    if asked in (None, ""):
        return _primary(choices)
    if asked not in choices:
        raise UnknownDimension(f"dimension must be one of {', '.join(choices)}" if choices
                               else "a pairwise study has no dimensions to choose")
    return asked


def _number(value, default: float, low: float, high: float) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and low < value < high
    return float(value) if ok else default


# The adaptive assignment mode's fields (Study.adaptive_margin / adaptive_alpha) set them; a study
# without them (or before that migration) has no tie margin and the usual 5 %.
def tie_margin(study: Study) -> float:
    return _number(getattr(study, "adaptive_margin", None), 0.0, 0.0, math.inf)


def verdict_alpha(study: Study) -> float:
    return _number(getattr(study, "adaptive_alpha", None), stopping.ALPHA, 0.0, 0.5)


@dataclass(frozen=True)
class ModelRow:
    model: str
    estimate: float | None
    std: float | None
    ratings: int


@dataclass(frozen=True)
class PairRow:
    upper: str
    lower: str
    diff: float
    low: float | None
    high: float | None
    ratings: int
    verdict: str
    extra_ratings: float | None  # None: never settles at this gap (a zero gap and no tie margin)
    cost: str | None = None  # money as text (exact decimals), in the study's currency
    hours: float | None = None


@dataclass(frozen=True)
class Science:
    """The cached part: verdicts and ratings to settle, no money."""

    method: str
    dimension: str | None
    models: list[ModelRow]
    pairs: list[PairRow]
    extra_ratings: float | None
    n_opt: float
    margin: float
    note: str | None  # why there are no verdicts yet
    codes: tuple[int, ...] = ()  # verdict codes of ``pairs`` (into stopping.VERDICTS)


@dataclass(frozen=True)
class StoppingPanel:
    method: str
    dimension: str | None  # the one ranked on
    dimensions: list[str]  # the study's, to choose from
    primary: str | None  # the default: the study's decision rides on it
    models: list[ModelRow]
    pairs: list[PairRow]
    separated: int
    tied: int
    open: int
    extra_ratings: float | None
    cost: str | None
    currency: str
    pay_per_rating: str | None
    seconds_per_rating: float | None
    ratings_per_hour: float | None
    hours: float | None
    remaining_ratings: int
    stop: bool
    reason: str
    n_opt: float
    margin: float
    alpha: float
    anytime: bool
    method_note: str
    note: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _model_estimates(study: Study, dim: str | None
                     ) -> tuple[str, str | None, list[str], np.ndarray, np.ndarray, np.ndarray] | str:
    """(method, dimension, model names, estimate, std, ratings) on dimension ``dim`` (None: a
    pairwise study) or the reason there are none."""
    if not study.protocol_def.has_scales:
        frame = comparisons_frame(study)
        if frame.empty:
            return "no comparisons yet"
        table = pairwise_summary(frame[["model_a", "model_b", "preference"]], n_boot=BOOTSTRAP).table
        std = (table["bt_ci_high"].to_numpy(float) - table["bt_ci_low"].to_numpy(float)) / (2 * Z95)
        return ("Bradley–Terry log-strength", None, [str(m) for m in table["model"]],
                table["bt_score"].to_numpy(float), std, table["comparisons"].to_numpy(float))
    ratings = dashboard.scored_ratings(study)
    if ratings.empty or dim not in ratings:
        return "no ratings yet"
    ratings = ratings[np.isfinite(ratings[dim].to_numpy(float))]
    if ratings.empty:
        return "no ratings yet"
    unit_codes, units = pd.factorize(ratings["item"], sort=True)
    rater_codes, raters = pd.factorize(ratings["rater"], sort=True)
    estimate, std, n = live_estimates.unit_estimates(ratings[dim].to_numpy(float), unit_codes, rater_codes,
                                                     len(units), len(raters))
    unit_model = ratings.groupby(unit_codes)["model"].first().sort_index().astype(str)
    model_codes, names = pd.factorize(unit_model, sort=True)
    state = allocation.model_state(allocation.UnitState.of(model_codes, n, estimate, std, cap=0), len(names))
    return "subject model (live, dof-corrected)", dim, [str(m) for m in names], state.estimate, state.std, state.n


def _science(study: Study, planned: int, dim: str | None) -> Science:
    margin, alpha = tie_margin(study), verdict_alpha(study)
    found = _model_estimates(study, dim)
    if isinstance(found, str):
        return Science("", dim, [], [], None, 0.0, margin, found)
    method, dim, names, estimate, std, n = found
    models = [ModelRow(m, _finite(e), _finite(s), int(k)) for m, e, s, k in zip(names, estimate, std, n)]
    if len(names) < 2:
        return Science(method, dim, models, [], None, 0.0, margin, "one model only: nothing to rank")
    n_opt = max(2.0 * planned / len(names), float(n.max()) if len(n) else 1.0, 1.0)
    verdicts = stopping.pair_verdicts(estimate, std, n, margin=margin, alpha=alpha, n_opt=n_opt)
    forecast = stopping.forecast(verdicts, len(names), alpha=alpha, n_opt=n_opt)
    pairs = [
        PairRow(upper=names[a], lower=names[b], diff=float(d), low=_finite(d - h), high=_finite(d + h),
                ratings=int(k), verdict=stopping.VERDICTS[c], extra_ratings=_finite(extra))
        for a, b, d, h, k, c, extra in zip(verdicts.a, verdicts.b, verdicts.diff, verdicts.halfwidth, verdicts.n,
                                           verdicts.code, forecast.per_pair)
    ]
    models.sort(key=lambda row: -row.estimate if row.estimate is not None else math.inf)
    note = None if np.isfinite(std).all() else "some models have no standard error yet (no item with two ratings)"
    return Science(method, dim, models, pairs, _finite(forecast.total), n_opt, margin, note,
                   tuple(int(c) for c in verdicts.code))


def _cache_key(study: Study, planned: int, dim: str | None) -> str:
    state = json.dumps([dashboard.state_key(study), study.settings, study.protocol, planned, tie_margin(study),
                        verdict_alpha(study), dim], sort_keys=True, default=str)
    return f"stopping:{study.pk}:{hashlib.sha256(state.encode()).hexdigest()}"


def _money(value: Decimal | None) -> str | None:
    return None if value is None else str(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def panel(study: Study, progress=None, dimension: str | None = None) -> StoppingPanel:
    """The panel's numbers on ``dimension`` (default: the primary one, :func:`_primary`; one the study
    does not have raises :class:`UnknownDimension`). ``progress``: the dashboard's
    (:func:`analysis.dashboard.progress`), read again when not given."""
    choices = dimensions(study)
    dim = dimension_of(study, dimension, choices)
    progress = progress or dashboard.progress(study)
    science = cache.get_or_set(_cache_key(study, progress.needed, dim),
                               lambda: _science(study, progress.needed, dim), 3600)
    cost = study_cost(study)
    pay_per_unit = cost.pay_per_unit  # one screen at the study's pay and measured pace
    pay_per_rating = pay_per_unit / Decimal(str(1 - cost.gold_share)) if pay_per_unit is not None else None
    rate = progress.rate_per_hour
    remaining = max(progress.needed - progress.counted, 0)

    def priced(extra: float | None) -> tuple[str | None, float | None]:
        if extra is None:
            return None, None
        money = _money(pay_per_rating * Decimal(str(extra))) if pay_per_rating is not None else None
        return money, (extra / rate if rate else None)

    pairs = [PairRow(**{**asdict(p), "cost": priced(p.extra_ratings)[0], "hours": priced(p.extra_ratings)[1]})
             if p.verdict == stopping.OPEN else p for p in science.pairs]
    counts = {v: sum(1 for p in pairs if p.verdict == v) for v in stopping.VERDICTS}
    total_cost, total_hours = priced(science.extra_ratings)
    if science.note and not pairs:
        stop, reason = False, science.note
    else:  # the science's rule: stop when all are settled or the open ones need more than is left
        total = science.extra_ratings if science.extra_ratings is not None else math.inf
        advice = stopping.recommend(SimpleNamespace(code=np.array(science.codes, np.int64)),
                                    SimpleNamespace(total=total), remaining_ratings=remaining)
        stop, reason = advice.stop, advice.reason
    seconds = cost.seconds_per_unit
    return StoppingPanel(
        method=science.method, dimension=science.dimension, dimensions=choices,
        primary=_primary(choices), models=science.models, pairs=pairs,
        separated=counts[stopping.SEPARATED], tied=counts[stopping.TIED], open=counts[stopping.OPEN],
        extra_ratings=science.extra_ratings, cost=total_cost, currency=cost.currency,
        pay_per_rating=_money(pay_per_rating), seconds_per_rating=seconds, ratings_per_hour=rate, hours=total_hours,
        remaining_ratings=remaining, stop=stop, reason=reason, n_opt=science.n_opt, margin=science.margin,
        alpha=verdict_alpha(study), anytime=True, method_note=METHOD_LINE, note=science.note,
    )


def anytime_band(series: pd.DataFrame, planned: float, alpha: float = stopping.ALPHA) -> pd.DataFrame:
    """α-as-ratings-arrive with its band widened from a fixed 95 % one to the anytime-valid one:
    the bootstrap interval's standard error (width / (2 × 1.96)) times the confidence sequence's
    multiplier at that many ratings, tuned to the study's ``planned`` ratings. A dashboard that
    shows α after every batch can then be read at any look (clipped to α's range [-1, 1])."""
    out = series.copy()
    if out.empty or "ci_low" not in out:
        return out
    low, high = out["ci_low"].astype(float), out["ci_high"].astype(float)
    se = (high - low) / (2 * Z95)
    half = stopping.halfwidth(se.to_numpy(float), out["ratings"].to_numpy(float), alpha=alpha,
                              n_opt=max(float(planned), float(out["ratings"].max()), 1.0))
    centre = out["alpha"].astype(float).to_numpy()
    out["ci_low"] = np.clip(centre - half, -1.0, 1.0)
    out["ci_high"] = np.clip(centre + half, -1.0, 1.0)
    out.loc[low.isna().to_numpy(), ["ci_low", "ci_high"]] = np.nan
    return out


def alpha_series_anytime(study: Study) -> pd.DataFrame:
    """The dashboard's α over time (:func:`analysis.dashboard.alpha_series`) with the anytime band."""
    return anytime_band(dashboard.alpha_series(study), dashboard.progress(study).needed, verdict_alpha(study))
