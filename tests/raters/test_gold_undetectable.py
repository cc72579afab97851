"""Over many screens of real work (gold slotted in by the engine, as in production), nothing a
rater receives tells gold from work: a classifier on the ids and names the pages carry does no
better than chance, and the work a submit does (its SQL statements) does not depend on gold.

The red team's attack: gold assignments are created after the claimed batch, so any id derived
from them (form-field names were ``a<assignment id>-…``) is out of order on exactly the gold
screens. The tests run that attack, and show the page's id-like features are one constant.
"""

import re
import time
from html.parser import HTMLParser

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from scipy.stats import fisher_exact, mannwhitneyu

from tasks.models import Assignment, Comparison
from tests.factories import crowd_enter, make_comparison, make_gold, make_instance, make_item, make_study

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

RATERS = 6
SCREENS = 6  # claimed per rater; gold_share 0.25 adds two gold screens to each


class _Attributes(HTMLParser):
    """Every tag's attributes as a browser sees them."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))


# Attributes that carry the unit's own content (its images) or the screen's place in the queue
# (the URL, progress): these differ from screen to screen for every screen, gold or not.
_CONTENT_OR_PLACE = {"src", "srcset", "href", "data-full", "action", "hx-post", "hx-get", "style",
                     "aria-valuenow", "aria-valuemax", "data-position", "width", "height", "alt", "hx-headers"}
_TOKENS = {"csrfmiddlewaretoken", "shown"}  # a signature and a time, new on every render


def _id_features(html: str) -> tuple:
    """The id-like features of a page: every attribute that could name a unit (form-field names,
    element ids, data-*, values), in page order; content, place and per-render tokens left out."""
    parser = _Attributes()
    parser.feed(html)
    features = []
    for tag, attrs in parser.tags:
        for name, value in attrs.items():
            if name in _CONTENT_OR_PLACE or (name == "value" and attrs.get("name") in _TOKENS):
                continue
            features.append((tag, name, value))
    return tuple(features)


def _integers(features: tuple) -> list[int]:
    return [int(n) for _, _, value in features for n in re.findall(r"\d+", value)]


def _is_gold(assignments) -> bool:
    a = assignments[0]
    return hasattr(a.comparison, "gold") if a.comparison_id else hasattr(a.item, "gold")


def _work(client, study, answer) -> list[dict]:
    """Every rater works through their session in the browser's way; per screen: whether it was
    gold, its id features, and its submit's statements count and wall time."""
    screens = []
    for n in range(RATERS):
        client.cookies.clear()
        url = crowd_enter(client, study, f"undetectable-{n}")
        first = True
        while url and "/rate/" in url:
            position = int(url.rstrip("/").rsplit("/", 1)[1])
            with CaptureQueriesContext(connection) as shown:
                page = client.get(url)
            html = page.content.decode()
            units = list(Assignment.objects.filter(rater__external_id=f"undetectable-{n}", position=position)
                         .select_related("item__gold", "comparison__gold").order_by("slot"))
            form = {"shown": re.search(r'name="shown" value="([^"]+)"', html).group(1)}
            form |= {name: answer(name) for name in set(re.findall(r'name="([a-z]\d+-[\w-]+)"', html))}
            started = time.perf_counter()
            with CaptureQueriesContext(connection) as ctx:
                response = client.post(url, form)
            elapsed = time.perf_counter() - started
            assert response.status_code == 302, response.content.decode()[:300]
            statements = [q for q in ctx.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
            screens.append({"gold": _is_gold(units), "features": _id_features(html), "queries": len(statements),
                            "first": first, "page_queries": len(shown.captured_queries),
                            "page_headers": sorted(page.headers),
                            "seconds": elapsed, "last": not response.url.rstrip("/").rsplit("/", 1)[1].isdigit()})
            url, first = response.url, False
    return screens


def _red_team_guess(screens: list[dict]) -> list[bool]:
    """The attack that worked: a screen whose ids are larger than the next screen's is out of
    creation order, so gold. (With no ids in the page it never fires.)"""
    guesses = []
    for here, following in zip(screens, screens[1:] + [None]):
        mine = _integers(here["features"])
        theirs = _integers(following["features"]) if following else []
        guesses.append(bool(mine and theirs and max(mine) > max(theirs)))
    return guesses


def _assert_undetectable(screens: list[dict]):
    gold = [s for s in screens if s["gold"]]
    plain = [s for s in screens if not s["gold"]]
    assert len(gold) >= RATERS and len(plain) >= RATERS * SCREENS - 2
    # 1. The id-like features are one constant on every screen (but a rater's first, which has no
    #    back link): any classifier built on them predicts the same for gold and work: chance.
    #    (Compared per group: gold lands at a random place in a batch, so it need not ever be a
    #    rater's first screen, and a set comparison across groups failed on such a draw.)
    for first in (True, False):
        assert len({s["features"] for s in screens if s["first"] == first}) == 1
    # Showing a screen does no work an ordinary screen does not, and sends the same headers. (The
    # count itself varies with things that are not gold: a newcomer's first screens also extend
    # their short lease, a pairwise screen may preload the next; so gold's counts are a subset.)
    assert {s["page_queries"] for s in gold} <= {s["page_queries"] for s in plain}
    assert {tuple(s["page_headers"]) for s in screens} == {tuple(plain[0]["page_headers"])}
    # 2. The red team's classifier, run for real: no better than chance (Fisher's exact test).
    guesses = _red_team_guess(screens)
    pairs = [(guess, s["gold"]) for guess, s in zip(guesses, screens)]
    table = [[pairs.count((True, True)), pairs.count((True, False))],
             [pairs.count((False, True)), pairs.count((False, False))]]
    assert fisher_exact(table, alternative="greater").pvalue > 0.05, table
    # 3. Submits: the same number of statements for gold and work (the deterministic form of
    #    "timing does not depend on gold"), so Mann-Whitney finds no difference in them. The
    #    session's last submit claims the next batch: compared apart.
    for last in (False, True):
        g = [s["queries"] for s in gold if s["last"] == last]
        p = [s["queries"] for s in plain if s["last"] == last]
        if g and p:
            assert set(g) == set(p) and len(set(g)) == 1, (last, g, p)
    g = [s["queries"] for s in gold if not s["last"]]
    p = [s["queries"] for s in plain if not s["last"]]
    assert mannwhitneyu(g, p).pvalue > 0.05, (g, p)
    # Wall times vary with the machine's load: reported, not asserted (the statements are).
    g_times = [s["seconds"] for s in gold if not s["last"]]
    p_times = [s["seconds"] for s in plain if not s["last"]]
    p_value = mannwhitneyu(g_times, p_times).pvalue
    print(f"submit ms, median gold {1000 * sorted(g_times)[len(g_times) // 2]:.1f} vs "
          f"work {1000 * sorted(p_times)[len(p_times) // 2]:.1f}; Mann-Whitney p = {p_value:.2f}")


def test_text_to_image_gold_screens_cannot_be_told_from_work_by_ids_names_or_submit_work(client):
    study = make_study(units_per_session=SCREENS, raters_per_item=RATERS, settings={"gold_share": 0.25})
    for _ in range(SCREENS):
        make_item(study)
    for _ in range(4 * RATERS):  # more gold than the raters use: each draws their own
        make_gold(make_item(study))
    _assert_undetectable(_work(client, study, lambda name: "0.5"))


def test_evalmi_gold_trials_cannot_be_told_from_work_by_ids_names_or_submit_work(client):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=SCREENS, raters_per_item=RATERS,
                       settings={"images_per_trial": 3, "gold_share": 0.25})
    for n in range(SCREENS + 4 * RATERS):
        instance = make_instance(study, question="Are there three apples?")
        for m in "ABC":
            item = make_item(study, instance=instance, model=f"Model{m}")
            if n >= SCREENS:
                make_gold(item, values={"perception": 3, "correspondence": 3}, answers={"q1": "yes"}, tolerance=1)
    _assert_undetectable(_work(client, study, lambda name: "yes" if name.endswith("-q1") else "3"))


def test_pairwise_gold_comparisons_cannot_be_told_from_work_by_ids_names_or_submit_work(client):
    from tasks.models import ComparisonGold

    study = make_study(protocol="pairwise", units_per_session=SCREENS, raters_per_item=RATERS,
                       settings={"gold_share": 0.25})
    for _ in range(SCREENS):
        make_comparison(study)
    for _ in range(4 * RATERS):
        ComparisonGold.objects.create(comparison=make_comparison(study), preference="A")
    assert Comparison.objects.filter(study=study).count() == SCREENS + 4 * RATERS
    _assert_undetectable(_work(client, study, lambda name: "left"))
