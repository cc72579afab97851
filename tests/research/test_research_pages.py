import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from analysis.models import Judge, JudgeRun
from tasks.models import Study
from tasks.services import rating_submit
from tests.factories import make_comparison, make_rater, make_study, make_user
from tests.research.bundles import csv_manifest, make_bundle, text_to_image_bundle
from tests.research.test_exports import _imagenhub_study_with_votes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("builds_run_at_once")]


@pytest.fixture
def researcher():
    return make_user("researcher")


@pytest.fixture
def study(researcher):
    study = _imagenhub_study_with_votes(slug="t2i")
    study.owners.add(researcher)
    return study


def _form(**overrides):
    fields = {"slug": "from-page", "title": "From the page", "protocol": "imagenhub", "task_type": "text_to_image",
              "raters_per_item": 3, "assignment_mode": "balanced", "bundle": text_to_image_bundle()}
    fields["bundle"].name = "bundle.zip"
    fields.update(overrides)
    return fields


def test_a_researcher_builds_a_study_from_the_page_and_lands_on_its_dashboard(client, study, researcher):
    client.force_login(researcher)
    response = client.post(reverse("research-study-new"), _form())
    assert response.status_code == 302 and response["Location"] == reverse("research-study", args=["from-page"])
    assert Study.objects.get(slug="from-page").items.count() == 4


def test_a_broken_bundle_shows_every_problem_with_its_line_and_creates_nothing(client, researcher, study):
    client.force_login(researcher)
    rows = [{"instance": "s1", "model": "A", "output": "nope.png"}, {"instance": "s1", "model": "A", "output": "x.png"}]
    bundle = make_bundle({"manifest.csv": csv_manifest(rows), "x.png": b"GIF89a broken"})
    bundle.name = "broken.zip"
    response = client.post(reverse("research-study-new"), _form(bundle=bundle))
    page = response.content.decode()
    assert response.status_code == 400
    assert "2 problems: nothing was created" in page
    assert "file &#x27;nope.png&#x27; is not in the zip" in page and "duplicate row" in page
    assert not Study.objects.filter(slug="from-page").exists()


def test_the_dashboard_refreshes_itself_and_htmx_gets_only_the_live_block(client, study, researcher):
    JudgeRun.objects.create(judge=Judge.objects.create(name="gpt-judge", kind="viescore"), study=study,
                            state="running", total=6, done=2)
    client.force_login(researcher)
    page = client.get(reverse("research-study", args=[study.slug])).content.decode()
    assert 'hx-trigger="every 10s"' in page and "<html" in page
    assert "18</strong> of 18 ratings needed" in page and "Target reached" in page
    assert "gpt-judge" in page and "2 / 6" in page
    assert "plots/sc-pq.svg" in page
    fragment = client.get(reverse("research-study", args=[study.slug]), HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and 'id="live"' in fragment and "Agreement" in fragment


def test_agreement_cells_are_coloured_against_a_configurable_threshold(client, study, researcher):
    client.force_login(researcher)
    url = reverse("research-study", args=[study.slug])
    strict = client.get(url + "?threshold=0.99").content.decode()
    lenient = client.get(url + "?threshold=-0.99").content.decode()
    assert "agree-low" in strict and 'class="agree-ok"' not in strict.split("<tbody>", 2)[2].split("</table>")[0]
    assert strict.count('class="agree-ok"') < lenient.count('class="agree-ok"')
    assert "below -0.99" in lenient


def _live_table(page: str) -> str:
    return page.split('class="table agreement"', 1)[1].split("<tbody>", 1)[1].split("</table>", 1)[0]


def test_a_researcher_sets_the_studys_own_threshold_and_the_colouring_follows_it(client, study, researcher, settings):
    settings.AGREEMENT_THRESHOLD = -0.99  # site default: every defined α would count as acceptable
    client.force_login(researcher)
    url = reverse("research-study", args=[study.slug])
    assert "agree-low" not in _live_table(client.get(url).content.decode())
    assert "is the site default" in client.get(url).content.decode()

    response = client.post(reverse("research-study-settings", args=[study.slug]), {"agreement_threshold": "0.99"},
                           follow=True)
    assert "Agreement threshold for t2i is now 0.99" in response.content.decode()
    study.refresh_from_db()
    assert study.settings["agreement_threshold"] == 0.99
    page = client.get(url).content.decode()
    assert "agree-low" in _live_table(page) and 'class="agree-ok"' not in _live_table(page)
    assert "set for this study" in page
    # ?threshold= still overrides for one view, without changing the study
    lenient = client.get(url + "?threshold=-0.99").content.decode()
    assert "agree-low" not in _live_table(lenient) and "for this view only" in lenient

    client.post(reverse("research-study-settings", args=[study.slug]), {"agreement_threshold": ""})
    study.refresh_from_db()
    assert "agreement_threshold" not in study.settings


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "abc"])
def test_a_threshold_outside_0_to_1_is_refused_with_a_message_and_nothing_stored(client, study, researcher, value):
    client.force_login(researcher)
    response = client.post(reverse("research-study-settings", args=[study.slug]), {"agreement_threshold": value},
                           follow=True)
    text = response.content.decode()
    assert "agreement_threshold must be a number in (0, 1]" in text or "Enter a number" in text
    study.refresh_from_db()
    assert "agreement_threshold" not in study.settings


def test_an_outsider_cannot_change_a_studys_threshold(client, study):
    outsider = make_user("outsider")
    outsider.user_permissions.add(Permission.objects.get(codename="add_study"))
    client.force_login(outsider)
    response = client.post(reverse("research-study-settings", args=[study.slug]), {"agreement_threshold": "0.9"})
    assert response.status_code == 404
    study.refresh_from_db()
    assert "agreement_threshold" not in study.settings


def test_a_study_built_without_a_threshold_follows_the_site_default_and_one_built_with_it_keeps_it(client, researcher,
                                                                                                   settings):
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    client.force_login(researcher)
    settings.AGREEMENT_THRESHOLD = 0.55
    client.post(reverse("research-study-new"), _form())
    plain = Study.objects.get(slug="from-page")
    assert "agreement_threshold" not in plain.protocol_settings
    assert "≥ 0.55" in client.get(reverse("research-study", args=[plain.slug])).content.decode()
    client.post(reverse("research-study-new"), _form(slug="own", agreement_threshold="0.7"))
    assert Study.objects.get(slug="own").settings["agreement_threshold"] == 0.7
    refused = client.post(reverse("research-study-new"), _form(slug="bad", agreement_threshold="2"))
    assert refused.status_code == 400
    assert "Ensure this value is less than or equal to 1" in refused.content.decode()
    assert not Study.objects.filter(slug="bad").exists()


def test_publish_close_and_clone_buttons_call_the_services(client, study, researcher):
    client.force_login(researcher)
    client.post(reverse("research-study-action", args=[study.slug, "close"]))
    study.refresh_from_db()
    assert study.state == "closed"
    response = client.post(reverse("research-study-action", args=[study.slug, "clone"]))
    clone = Study.objects.get(slug="t2i-copy")
    assert response["Location"] == reverse("research-study", args=[clone.slug]) and clone.state == "draft"
    response = client.post(reverse("research-study-action", args=[study.slug, "close"]), follow=True)
    assert "is closed, not open" in response.content.decode()


def test_research_pages_refuse_raters_hide_other_studies_and_send_visitors_to_login(client, study):
    url = reverse("research-study", args=[study.slug])
    assert client.get(url)["Location"].startswith(reverse("login"))
    client.force_login(make_rater().user)
    assert client.get(url).status_code == 403
    assert client.get(reverse("research-study-new")).status_code == 403
    other = make_user("other")
    make_study(slug="others").owners.add(other)
    client.force_login(other)
    assert client.get(url).status_code == 404
    assert client.post(reverse("research-study-action", args=[study.slug, "close"])).status_code == 404
    assert client.get(reverse("research-export", args=[study.slug])).status_code == 404


@pytest.mark.parametrize("name", ["histograms", "sc-pq", "mos", "alpha"])
def test_each_plot_is_an_svg(client, study, researcher, name):
    client.force_login(researcher)
    response = client.get(reverse("research-plot", args=[study.slug, name]))
    assert response["Content-Type"] == "image/svg+xml" and response.content.lstrip().startswith(b"<?xml")
    assert b"<svg" in response.content


def test_the_leaderboard_ranks_models_by_the_report_mean_with_gap_tests(client, study, researcher):
    client.force_login(researcher)
    page = client.get(reverse("research-leaderboard", args=[study.slug])).content.decode()
    # From VOTES: Alpha's O mean is above Beta's.
    assert page.index("<strong>Alpha</strong>") < page.index("<strong>Beta</strong>")
    assert "Gap to next" in page
    sc = client.get(reverse("research-leaderboard", args=[study.slug]) + "?dim=SC").content.decode()
    assert "Mean SC" in sc


def test_the_leaderboard_shows_rank_intervals_and_all_pairs_with_holm_from_the_report(client, study, researcher):
    client.force_login(researcher)
    page = client.get(reverse("research-leaderboard", args=[study.slug])).content.decode()
    assert "Rank 95 % CI" in page and "model pairs, Holm-adjusted" in page and "p (Holm)" in page
    results = client.get(reverse("api-study-results", args=[study.slug])).json()
    board = results["leaderboard"]["O"]
    assert set(board["ranks"]) == {"Alpha", "Beta"} and len(board["pairs"]) == 1
    assert board["pairs"][0]["first"] == "Alpha" and board["pairs"][0]["p_holm"] == board["pairs"][0]["p"]


def test_a_pairwise_leaderboard_shows_bradley_terry_and_the_absolute_ranking_of_the_same_models(client, researcher, study):
    pairwise = make_study(slug="pairs", protocol="pairwise")
    pairwise.owners.add(researcher)
    raters = [make_rater() for _ in range(3)]
    for _ in range(3):
        comparison = make_comparison(pairwise)
        for rater in raters:
            rating_submit(rater=rater, comparison=comparison, values={"preference": "A"}, require_assignment=False)
    study.gen_models.filter(name="Alpha").update(name="ModelA")
    study.gen_models.filter(name="Beta").update(name="ModelB")
    client.force_login(researcher)
    page = client.get(reverse("research-leaderboard", args=["pairs"])).content.decode()
    assert "BT score" in page and page.index("<strong>ModelA</strong>") < page.index("<strong>ModelB</strong>")
    assert "Absolute order: ModelA › ModelB" in page and "<strong>1.00</strong>" in page
    assert "Rank 95 % CI" in page and "model pairs, Holm-adjusted" in page


def test_the_export_link_downloads_the_dataset_zip(client, study, researcher):
    client.force_login(researcher)
    response = client.get(reverse("research-export", args=[study.slug]))
    assert response["Content-Type"] == "application/zip"
    assert b"".join(response.streaming_content)[:2] == b"PK"


def test_alpha_over_time_has_a_bootstrap_band_around_every_defined_alpha(client, study, researcher):
    from analysis.dashboard import alpha_series

    series = alpha_series(study).dropna(subset=["alpha"])
    assert len(series) and series["ci_low"].notna().all()
    assert (series["ci_low"] <= series["alpha"] + 1e-9).all() and (series["alpha"] <= series["ci_high"] + 1e-9).all()
    client.force_login(researcher)
    svg = client.get(reverse("research-plot", args=[study.slug, "alpha"])).content.decode()
    assert "PolyCollection" in svg  # the shaded band
    assert "threshold 0.4" in svg


def test_the_dashboard_shows_the_judges_scatter_only_when_a_judge_scored_the_study(client, study, researcher):
    from analysis.models import JudgeScore

    client.force_login(researcher)
    url = reverse("research-study", args=[study.slug])
    assert "Judges vs humans" not in client.get(url).content.decode()
    judge = Judge.objects.create(name="viescore-gpt", kind="viescore")
    run = JudgeRun.objects.create(judge=judge, study=study, state="done", total=6, done=6)
    for item in study.items.all():
        JudgeScore.objects.create(run=run, item=item, dimension="SC", value=0.5)
    page = client.get(url).content.decode()
    assert "Judges vs humans" in page
    assert f"/studies/{study.slug}/judges/scatter.svg?judge=viescore-gpt&amp;dim=SC&amp;human=SC" in page
    assert f'href="/studies/{study.slug}/judges/"' in page
    scatter = client.get(f"/studies/{study.slug}/judges/scatter.svg?judge=viescore-gpt&dim=SC&human=SC")
    assert scatter.status_code == 200 and scatter["Content-Type"] == "image/svg+xml"


def _evalmi_study_with_ratings(owner) -> Study:
    from tests.factories import make_instance, make_item

    study = make_study(slug="evalmi-plots", protocol="evalmi", task_type="counting")
    study.owners.add(owner)
    instance = make_instance(study, key="7", question="Are there two cats?", sub_questions=["Is one black?"])
    items = [make_item(study, instance=instance, model=m) for m in ("Flux", "SD")]
    for p, c in [(5, 4), (3, 2), (4, 4)]:
        rater = make_rater()
        for k, item in enumerate(items):
            rating_submit(rater=rater, item=item, values={"perception": p - k, "correspondence": c - k},
                          answers={"q1": "yes", "q2": "no"}, require_assignment=False)
    return study


def test_plots_of_an_evalmi_study_with_ratings_render_and_the_sc_pq_plot_is_not_one_of_them(client, researcher):
    study = _evalmi_study_with_ratings(researcher)
    client.force_login(researcher)
    assert "plots/sc-pq.svg" not in client.get(reverse("research-study", args=[study.slug])).content.decode()
    assert client.get(reverse("research-plot", args=[study.slug, "sc-pq"])).status_code == 404
    for name in ("histograms", "mos", "alpha"):
        response = client.get(reverse("research-plot", args=[study.slug, name]))
        assert response.status_code == 200 and b"<svg" in response.content, name


def test_a_pairwise_study_has_no_plot_route_that_answers(client, researcher):
    pairwise = make_study(slug="pairs-plots", protocol="pairwise")
    pairwise.owners.add(researcher)
    client.force_login(researcher)
    for name in ("histograms", "sc-pq", "mos", "alpha"):
        assert client.get(reverse("research-plot", args=[pairwise.slug, name])).status_code == 404, name


def test_a_researcher_declares_the_raters_a_fixed_panel_and_the_leaderboard_says_which_intervals_it_shows(
        client, study, researcher):
    client.force_login(researcher)
    assert study.rater_sampling == "sampled"
    board = client.get(reverse("research-leaderboard", args=[study.slug])).content.decode()
    assert "items and raters" in board and 'title="items resampled, raters fixed"' in board
    response = client.post(reverse("research-study-settings", args=[study.slug]),
                           {"agreement_threshold": "", "rater_sampling": "fixed"}, follow=True)
    assert "Raters of t2i: Fixed (experts)" in response.content.decode()
    study.refresh_from_db()
    assert study.rater_sampling == "fixed"
    board = client.get(reverse("research-leaderboard", args=[study.slug])).content.decode()
    assert "items only" in board and 'title="items resampled, raters fixed"' not in board
    client.post(reverse("research-study-settings", args=[study.slug]), {"rater_sampling": "everyone"})
    study.refresh_from_db()
    assert study.rater_sampling == "fixed"  # an unknown choice changes nothing
