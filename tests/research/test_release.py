"""A study released as a dataset package: loads with `datasets` and pandas, carries its card,
protocol versions and reporting card, and reproduces its report from the package alone."""

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from analysis.science.release import compare_reports, read_release, scrub_text, write_release
from analysis.release_input import Pseudonyms, study_release_input
from analysis.report import build_report
from tasks.models import ConditionImage, Rating, ScreenReport, Study
from tasks.services import rating_submit
from tasks.images import store_image
from tests.factories import (make_comparison, make_instance, make_item, make_rater, make_study,
                             png_bytes)
from tests.research.test_exports import VOTES

pytestmark = pytest.mark.django_db


def _imagenhub_study() -> tuple[Study, dict]:
    study = make_study(task_type="text_guided_editing", instructions="Rate SC and PQ. Ask me at help@example.org")
    instances = [make_instance(study, key=f"uid_{n}") for n in range(3)]
    for instance in instances:
        ConditionImage.objects.create(instance=instance, role="source", image=store_image(png_bytes((9, 9, 9))))
    items = {(n, m): make_item(study, instance=instances[n], model=m) for n in range(3) for m in ("Alpha", "Beta")}
    raters = {name: make_rater(platform="prolific", external_id=f"PROLIFIC-{name}-5f00aa")
              for name in ("r1", "r2", "r3")}
    for (rater, n, model), (sc, pq_) in VOTES.items():
        rating_submit(rater=raters[rater], item=items[(n, model)], values={"SC": sc, "PQ": pq_},
                      require_assignment=False, time_on_item_ms=4000 + 100 * n)
    return study, raters


def test_scrub_rule_replaces_emails_urls_phones_and_long_digit_runs():
    text = ("mail me: a.b+c@uni.example.com, see https://x.org/p?q=1 or www.site.com; call +44 20 7946 0958; "
            "id 123456789")
    assert scrub_text(text) == "mail me: [email], see [url] or [url]; call [phone]; id [number]"
    assert scrub_text("rated 3 of 5, took 12 s") == "rated 3 of 5, took 12 s"


def _evalmi_study() -> Study:
    study = make_study(protocol="evalmi", task_type="counting", instructions="Rate 1 to 5.")
    instances = [make_instance(study, key=f"{n:04d}", question="Are there two cats?", sub_questions=["Is it a cat?"])
                 for n in range(4)]
    items = [make_item(study, instance=i, model=m) for i in instances for m in ("SD", "DALLE", "MJ")]
    raters = [make_rater(platform="mturk", external_id=f"A1B2C3WORKER{k}") for k in range(4)]
    for k, rater in enumerate(raters):
        for j, item in enumerate(items):
            if (j + k) % 5 == 0:
                continue  # not every rater rates every item
            p, c = 1 + (j * 7 + k * 3) % 5, 1 + (j * 3 + k) % 5
            rating_submit(rater=rater, item=item, values={"perception": p, "correspondence": c},
                          answers={"q1": "yes" if (j + k) % 3 else "no", "q2": "yes" if j % 2 else "no"},
                          require_assignment=False, time_on_item_ms=3000 + 10 * j)
    from analysis.models import Judge, JudgeRun, JudgeScore

    run = JudgeRun.objects.create(judge=Judge.objects.create(name="CLIP-ish", kind="viescore", params={}),
                                  study=study, total=len(items), config_hash="x")
    JudgeScore.objects.bulk_create([JudgeScore(run=run, item=item, dimension=dim, value=float((j * 5 + k) % 7))
                                    for j, item in enumerate(items)
                                    for k, dim in enumerate(["perception", "correspondence"])])
    return study


def _pairwise_study() -> Study:
    study = make_study(protocol="pairwise", task_type="text_to_image")
    comparisons = [make_comparison(study) for _ in range(4)]
    raters = [make_rater(platform="prolific", external_id=f"5f9e{k}aa0000bb") for k in range(3)]
    choices = ["A", "B", "tie", "A", "A", "both_bad"]
    for k, rater in enumerate(raters):
        for j, comparison in enumerate(comparisons):
            rating_submit(rater=rater, comparison=comparison, values={"preference": choices[(j + k) % 6]},
                          require_assignment=False)
    return study


@pytest.mark.parametrize("build", [lambda: _imagenhub_study()[0], _evalmi_study, _pairwise_study],
                         ids=["imagenhub", "evalmi", "pairwise"])
def test_reproduce_rebuilds_the_shipped_report_from_the_package_alone(build, tmp_path, capsys):
    study = build()
    write_release(study_release_input(study), tmp_path / "pkg")
    shipped = json.loads((tmp_path / "pkg/report.json").read_text())
    assert shipped["models"], "the study has model numbers to reproduce"
    if study.protocol == "evalmi":
        assert shipped["judges"], "the judges' correlations are reproduced too"
    # no database of the site: the packaged study answers every read itself
    rebuilt = build_report(read_release(tmp_path / "pkg"))
    assert compare_reports(shipped, rebuilt) == []
    call_command("reproduce", str(tmp_path / "pkg"))
    assert "reproduced" in capsys.readouterr().out


def test_reproduce_finds_a_changed_vote_and_a_changed_number(tmp_path):
    study, _ = _imagenhub_study()
    write_release(study_release_input(study), tmp_path / "pkg")
    report = json.loads((tmp_path / "pkg/report.json").read_text())
    model = next(iter(report["models"]))
    report["models"][model]["dimensions"]["SC"]["mean"] += 0.01
    (tmp_path / "pkg/report.json").write_text(json.dumps(report))
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=f"models.{model}.dimensions.SC.mean"):
        call_command("reproduce", str(tmp_path / "pkg"))


def test_reproduce_reads_a_zipped_package_and_refuses_unsafe_member_names(tmp_path):
    import zipfile

    from analysis.science.release import zip_folder
    from django.core.management.base import CommandError

    study, _ = _imagenhub_study()
    write_release(study_release_input(study), tmp_path / "pkg")
    zip_folder(tmp_path / "pkg", tmp_path / "pkg.zip")
    call_command("reproduce", str(tmp_path / "pkg.zip"))
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as archive:
        archive.writestr("../outside.txt", "x")
    with pytest.raises(CommandError, match="unsafe member name"):
        call_command("reproduce", str(tmp_path / "evil.zip"))
    assert not (tmp_path.parent / "outside.txt").exists()


def test_the_package_loads_with_datasets_offline_images_included_and_with_pandas(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    from PIL import Image

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    study, _ = _imagenhub_study()
    write_release(study_release_input(study), tmp_path / "pkg")
    folder, cache = str(tmp_path / "pkg"), str(tmp_path / "hf-cache")
    items = datasets.load_dataset(folder, "items", split="train", cache_dir=cache)
    assert len(items) == 6
    assert isinstance(items.features["image"], datasets.Image)
    first = items[0]
    assert isinstance(first["image"], Image.Image) and first["image"].size == (32, 32)
    assert len(first["condition_images"]) == 1 and isinstance(first["condition_images"][0], Image.Image)
    assert first["condition_roles"] == ["source"]
    votes = datasets.load_dataset(folder, "votes", split="train", cache_dir=cache)
    assert len(votes) == 18 and set(votes.column_names) >= {"rater", "item", "SC", "PQ", "O", "SC_z",
                                                             "protocol_version"}
    raters = datasets.load_dataset(folder, "raters", split="train", cache_dir=cache)
    assert len(raters) == 3
    # pandas / pyarrow read the same files without datasets
    frame = pd.read_parquet(tmp_path / "pkg/data/votes.parquet")
    assert frame["SC"].tolist() == votes["SC"]
    stored = sorted(Rating.objects.filter(study=study).values_list("created_at", "updated_at"))
    written = sorted(zip(frame["created_at"].dt.to_pydatetime(), frame["updated_at"].dt.to_pydatetime()))
    assert written == stored  # to the microsecond, whichever way the database hands them over
    items_frame = pd.read_parquet(tmp_path / "pkg/data/items.parquet")
    mos = items_frame.set_index(["instance", "model"])["SC_mean"]
    assert mos[("uid_0", "Alpha")] == pytest.approx((1 + 1 + 0.5) / 3)
    assert pq.ParquetFile(tmp_path / "pkg/data/items.parquet").schema_arrow.field("image").type.num_fields == 2


def test_raters_are_pseudonyms_crowd_ids_never_leave_unless_the_payment_list_is_asked_for(tmp_path):
    study, raters = _imagenhub_study()
    reporter = raters["r1"]
    ScreenReport.objects.create(study=study, rater=reporter, position=0, broken_image=True,
                                comment="image 2 blank, mail me at jo@example.com or +1 (555) 010-9999")
    ScreenReport.objects.create(study=study, rater=raters["r2"], position=1,
                                comment=f"I am {raters['r2'].external_id}, pay me")
    from raters.services import rater_block

    rater_block(rater=raters["r3"], reason=f"speeder {raters['r3'].external_id}", actor=None)
    write_release(study_release_input(study), tmp_path / "pkg")
    every_byte = b"".join(p.read_bytes() for p in (tmp_path / "pkg").rglob("*") if p.is_file())
    for rater in raters.values():
        assert rater.external_id.encode() not in every_byte
        assert f"rater{rater.pk}".encode() not in every_byte
    assert b"jo@example.com" not in every_byte and b"010-9999" not in every_byte
    assert b"help@example.org" in every_byte  # the study's own instructions are released as written
    names = Pseudonyms(study)
    votes = pd.read_parquet(tmp_path / "pkg/data/votes.parquet")
    assert set(votes["rater"]) == {names(r.pk) for r in raters.values()}
    reports = pd.read_parquet(tmp_path / "pkg/data/screen_reports.parquet")
    assert reports["comment"].tolist() == ["image 2 blank, mail me at [email] or [phone]", "I am [crowd id], pay me"]
    assert reports["rater"].tolist() == [names(reporter.pk), names(raters["r2"].pk)]
    table = pd.read_parquet(tmp_path / "pkg/data/raters.parquet").set_index("rater")
    assert table.loc[names(raters["r3"].pk), "exclusion_reason"] == f"blocked: Blocked in {study.slug}: speeder [crowd id]"
    # another study gives the same rater another pseudonym; a second release the same one
    assert Pseudonyms(make_study())(reporter.pk) != names(reporter.pk)
    assert Pseudonyms(study)(reporter.pk) == names(reporter.pk)
    card = (tmp_path / "pkg/README.md").read_text()
    assert "[email]" in card and "[phone]" in card  # the scrub rule is written in the card
    assert not (tmp_path / "pkg/private").exists()
    # the blocked rater is left out of the numbers, and the package still reproduces its report
    shipped = json.loads((tmp_path / "pkg/report.json").read_text())
    assert [e["rater"] for e in shipped["excluded_raters"]] == [names(raters["r3"].pk)]
    assert compare_reports(shipped, build_report(read_release(tmp_path / "pkg"))) == []

    write_release(study_release_input(study, payment_list=True), tmp_path / "paid")
    payments = pd.read_csv(tmp_path / "paid/private/payment_list.csv")
    assert set(payments["crowd_id"]) == {r.external_id for r in raters.values()}


def test_the_card_has_the_front_matter_the_hub_reads_and_the_reporting_card_in_three_forms(tmp_path):
    import yaml

    study, _ = _imagenhub_study()
    write_release(study_release_input(study, pay_per_item=0.05, currency="GBP"), tmp_path / "pkg")
    text = (tmp_path / "pkg/README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front["license"] == "cc-by-4.0" and front["size_categories"] == ["n<1K"]
    assert {c["config_name"] for c in front["configs"]} == {"items", "votes", "raters"}
    assert front["configs"][0]["data_files"][0]["path"] == "data/items.parquet"
    assert "text-to-image" in front["task_categories"] and front["pretty_name"] == study.title
    card = json.loads((tmp_path / "pkg/reporting_card.json").read_text())
    assert card["raters"] == 3 and card["ratings"] == 18 and card["items_per_rater"]["median"] == 6
    assert card["rater_source"] == {"prolific": 3}
    # median time per item: times 4000, 4100, 4200 ms (6 votes each) → 4.1 s; 0.05 per item → 43.9 per hour
    assert card["compensation"]["median_seconds_per_item"] == 4.1
    assert card["compensation"]["per_hour"] == round(0.05 * 3600 / 4.1, 2)
    report = json.loads((tmp_path / "pkg/report.json").read_text())
    assert card["agreement"]["SC"]["alpha"] == report["study_level"]["dimensions"]["SC"]["alpha"]
    assert "| Compensation per hour | 43.9 GBP |" in (tmp_path / "pkg/reporting_card.md").read_text()
    tex = (tmp_path / "pkg/reporting_card.tex").read_text()
    assert tex.startswith(r"\begin{tabular}") and r"text\_guided\_editing" in tex and "43.9 GBP" in tex
    versions = json.loads((tmp_path / "pkg/protocol_versions.json").read_text())
    assert versions[0]["content"]["instructions"].startswith("Rate SC and PQ")
    assert "Semantic consistency" in versions[0]["content"]["worked_examples"]


def test_a_study_that_changed_its_protocol_mid_way_says_so_and_reproduces_per_version(tmp_path, capsys):
    study, raters = _imagenhub_study()
    first = study.current_protocol_version_id
    study.instructions = "New instructions: ignore watermarks."
    study.save()
    later = make_item(study, instance=make_instance(study, key="uid_late"), model="Alpha")
    study.refresh_from_db()
    later.study = study
    for rater in raters.values():
        rating_submit(rater=rater, item=later, values={"SC": 1, "PQ": 1}, require_assignment=False)
    assert Rating.objects.filter(study=study).exclude(protocol_version_id=first).count() == 3
    write_release(study_release_input(study), tmp_path / "pkg")
    text = (tmp_path / "pkg/README.md").read_text()
    assert "This study mixes protocol versions" in text
    assert "version 1" in text and "version 2" in text
    votes = pd.read_parquet(tmp_path / "pkg/data/votes.parquet")
    assert votes["protocol_version"].value_counts().to_dict() == {1: 18, 2: 3}
    versions = json.loads((tmp_path / "pkg/protocol_versions.json").read_text())
    assert versions[1]["content"]["instructions"] == "New instructions: ignore watermarks."
    call_command("reproduce", str(tmp_path / "pkg"), "--protocol-version", "2")
    rebuilt = json.loads(capsys.readouterr().out)
    assert rebuilt["study_level"]["ratings"] == 3


def _owned_imagenhub_study(client):
    from tests.factories import make_user

    study, raters = _imagenhub_study()
    owner = make_user("release-owner")
    study.owners.add(owner)
    client.force_login(owner)
    return study, raters


def test_the_release_page_builds_a_release_in_the_background_and_serves_its_zip(client, tmp_path,
                                                                                django_capture_on_commit_callbacks):
    import io
    import zipfile

    from analysis.models import DatasetRelease

    study, _ = _owned_imagenhub_study(client)
    assert b"build one</a> to see the" in client.get(f"/research/{study.slug}/").content  # no release yet
    page = client.get(f"/research/{study.slug}/release/")
    assert page.status_code == 200 and b"Build release" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/research/{study.slug}/release/", {"license": "cc-by-4.0", "pay_per_item": "0.05",
                                                                      "currency": "GBP"})
    assert response.status_code == 302
    release = DatasetRelease.objects.get(study=study)
    assert release.state == DatasetRelease.State.DONE, release.error
    assert release.manifest["counts"]["votes"] == 18 and release.card["raters"] == 3
    page = client.get(f"/research/{study.slug}/release/")
    assert b"Compensation per hour" in page.content and b"43.9 GBP" in page.content
    dashboard = client.get(f"/research/{study.slug}/").content.decode()  # the card on the study page too
    card = dashboard[dashboard.index('data-testid="reporting-card"'):]
    assert f"from release {release.pk}" in card and "43.9 GBP" in card[:card.index("</section>")]
    download = client.get(f"/research/{study.slug}/release/{release.pk}.zip")
    assert download.status_code == 200
    blob = b"".join(download.streaming_content)
    names = zipfile.ZipFile(io.BytesIO(blob)).namelist()
    folder = f"{study.slug}-release-{release.pk}"
    assert f"{folder}/README.md" in names and f"{folder}/data/items.parquet" in names
    (tmp_path / "r.zip").write_bytes(blob)
    call_command("reproduce", str(tmp_path / "r.zip"))


def test_the_api_requests_polls_and_downloads_a_release_and_refuses_a_second_one_while_building(
        client, django_capture_on_commit_callbacks):
    study, _ = _owned_imagenhub_study(client)
    with django_capture_on_commit_callbacks(execute=False):  # the job has not run yet
        queued = client.post(f"/api/studies/{study.slug}/releases/", {"license": "cc0-1.0"},
                             content_type="application/json")
        assert queued.status_code == 202 and queued.json()["state"] == "queued"
        again = client.post(f"/api/studies/{study.slug}/releases/", {}, content_type="application/json")
        assert again.status_code == 409
    bad = client.post(f"/api/studies/{study.slug}/releases/", {"license": "mine", "currency": "<script>"},
                      content_type="application/json")
    assert bad.status_code == 400
    from analysis.jobs import build_release_job

    build_release_job(queued.json()["id"])  # what the worker runs
    detail = client.get(f"/api/studies/{study.slug}/releases/{queued.json()['id']}/").json()
    assert detail["state"] == "done" and detail["license"] == "cc0-1.0"
    zipped = client.get(f"/api/studies/{study.slug}/releases/{queued.json()['id']}/download/")
    assert zipped.status_code == 200 and zipped["Content-Type"] == "application/zip"
    assert build_release_job(queued.json()["id"]) is None  # a second delivery does nothing


def test_report_by_version_splits_the_ratings_by_the_protocol_they_were_cast_under(capsys):
    study, raters = _imagenhub_study()
    study.instructions = "Changed."
    study.save()
    later = make_item(study, instance=make_instance(study, key="uid_late"), model="Alpha")
    study.refresh_from_db()
    later.study = study
    for rater in raters.values():
        rating_submit(rater=rater, item=later, values={"SC": 1, "PQ": 1}, require_assignment=False)
    call_command("report", study.slug, "--by-version", "--json", "--n-boot", "0")
    reports = json.loads(capsys.readouterr().out)
    assert sorted(reports) == ["1", "2"]
    assert reports["1"]["study_level"]["ratings"] == 18 and reports["2"]["study_level"]["ratings"] == 3
    assert reports["2"]["models"]["Alpha"]["dimensions"]["SC"]["mean"] == 1.0
    whole = build_report(study, n_boot=0)
    assert whole["study_level"]["ratings"] == 21
    call_command("report", study.slug, "--n-boot", "0")
    assert "mixes protocol versions: v1 (18 ratings), v2 (3 ratings)" in capsys.readouterr().out


@pytest.mark.parametrize("protocol", ["imagenhub", "evalmi", "pairwise"])
def test_a_study_without_ratings_still_releases_and_reproduces(tmp_path, protocol):
    study = make_study(protocol=protocol, task_type="text_to_image")
    make_comparison(study) if protocol == "pairwise" else make_item(study)
    manifest = write_release(study_release_input(study), tmp_path / "pkg")
    assert manifest["counts"]["votes"] == 0 and manifest["counts"]["items"] >= 1
    shipped = json.loads((tmp_path / "pkg/report.json").read_text())
    assert compare_reports(shipped, build_report(read_release(tmp_path / "pkg"))) == []


def test_a_demo_study_with_a_source_and_a_mask_per_output_releases_every_condition_image(tmp_path, monkeypatch):
    """The demo builder's mask-guided editing study: each output carries two condition images."""
    datasets = pytest.importorskip("datasets")
    from tasks.demo import build_demo
    from tasks.models import Item

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    build_demo(only=["demo-mask-guided-editing"])
    study = Study.objects.get(slug="demo-mask-guided-editing")
    study.state = Study.State.OPEN
    study.save()
    items = list(Item.objects.filter(study=study).order_by("id"))
    for k in range(3):
        rater = make_rater(platform="prolific", external_id=f"DEMO-PID-{k}")
        for j, item in enumerate(items):
            rating_submit(rater=rater, item=item, values={"SC": [0, 0.5, 1][(j + k) % 3], "PQ": [1, 0.5][j % 2]},
                          require_assignment=False)
    write_release(study_release_input(study), tmp_path / "pkg")
    loaded = datasets.load_dataset(str(tmp_path / "pkg"), "items", split="train", cache_dir=str(tmp_path / "c"))
    assert len(loaded) == len(items)
    assert all(sorted(row["condition_roles"]) == ["mask", "source"] for row in loaded)
    assert all(len(row["condition_images"]) == 2 for row in loaded)
    assert loaded[0]["image"].size == loaded[0]["condition_images"][0].size  # an edit keeps the source's size
    call_command("reproduce", str(tmp_path / "pkg"))
