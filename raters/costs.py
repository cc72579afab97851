"""What a study costs in rater pay, at its pay per hour: the estimate the configure page and the
API show, and the pay per screen the Prolific bonus uses (``raters.payouts``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from analysis.science import protocols
from tasks.models import Item, Rating, Study


@dataclass(frozen=True)
class CostEstimate:
    """What the study costs at its pay per hour. Money in the study's currency, rounded to cents.

    ``screens_needed``: units × raters per item (the ratings the study asks for), divided by
    1 − hidden gold share (gold screens are extra work raters are paid for). ``seconds_per_unit``
    is the median time on a unit of the study's own ratings once there are ``MEASURED_MIN`` of
    them, else the researcher's estimate (``measured`` says which).
    """

    units: int
    raters_per_item: int
    ratings_needed: int
    ratings_done: int
    gold_share: float
    seconds_per_unit: float | None
    measured: bool
    pay_per_hour: Decimal | None
    currency: str

    @property
    def screens_needed(self) -> float:
        return self.ratings_needed / (1 - self.gold_share)

    @property
    def screens_left(self) -> float:
        return max(self.ratings_needed - self.ratings_done, 0) / (1 - self.gold_share)

    def _money(self, screens: float) -> Decimal | None:
        if self.pay_per_hour is None or self.seconds_per_unit is None:
            return None
        hours = Decimal(str(screens)) * Decimal(str(self.seconds_per_unit)) / Decimal(3600)
        return (hours * self.pay_per_hour).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

    @property
    def hours_total(self) -> float | None:
        return None if self.seconds_per_unit is None else self.screens_needed * self.seconds_per_unit / 3600

    @property
    def total(self) -> Decimal | None:
        return self._money(self.screens_needed)

    @property
    def left(self) -> Decimal | None:
        return self._money(self.screens_left)

    @property
    def pay_per_unit(self) -> Decimal | None:
        return self._money(1) if self.pay_per_hour is not None and self.seconds_per_unit else None

    def as_dict(self) -> dict:
        money = lambda v: None if v is None else str(v)  # noqa: E731 (JSON: exact decimals as text)
        return {"units": self.units, "raters_per_item": self.raters_per_item, "ratings_needed": self.ratings_needed,
                "ratings_done": self.ratings_done, "gold_share": self.gold_share,
                "seconds_per_unit": self.seconds_per_unit, "seconds_measured": self.measured,
                "pay_per_hour": money(self.pay_per_hour), "currency": self.currency,
                "total": money(self.total), "left": money(self.left)}


MEASURED_MIN = 20  # ratings with a time before their median replaces the researcher's estimate


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def study_cost(study: Study) -> CostEstimate:
    """The study's estimated cost (see CostEstimate). Imported ratings neither count as done nor
    as a measured time: nobody is paid for them here."""
    pairwise = study.protocol == protocols.PAIRWISE
    units_qs = study.comparisons if pairwise else Item.objects.filter(study=study, gold__isnull=True,
                                                                      attention_check__isnull=True)
    units = units_qs.count()
    ratings = Rating.objects.filter(study=study).exclude(source=Rating.Source.IMPORT)
    done = ratings.filter(**({"comparison__gold__isnull": True} if pairwise else
                             {"item__gold__isnull": True, "item__attention_check__isnull": True})).count()
    times = list(ratings.filter(time_on_item_ms__isnull=False).order_by("-id")
                 .values_list("time_on_item_ms", flat=True)[:5000])
    if len(times) >= MEASURED_MIN:
        seconds, measured = _median(times) / 1000, True
    else:
        seconds, measured = (float(study.seconds_per_unit_estimate) if study.seconds_per_unit_estimate else None), False
    gold_share = float(study.protocol_settings.get("gold_share", 0.0) or 0.0)
    needed = units * study.raters_per_item
    return CostEstimate(units=units, raters_per_item=study.raters_per_item, ratings_needed=needed,
                        ratings_done=min(done, needed), gold_share=gold_share,
                        seconds_per_unit=seconds, measured=measured, pay_per_hour=study.pay_per_hour,
                        currency=study.pay_currency or "")
