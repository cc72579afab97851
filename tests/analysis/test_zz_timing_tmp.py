import time
import pytest
from analysis.importers import imagenhub_import, judge_import
from analysis.report import build_report
from tasks.models import Study
import analysis.report as R

pytestmark = pytest.mark.django_db

def test_timing(shared_datasets, tmp_path, monkeypatch):
    viescore = shared_datasets / "viescore"
    slug = "ImagenHub_Text-Guided_IE"
    imagenhub_import(path=viescore / "human_ratings" / slug)
    for kind in ("gpt4o_0shot", "autometrics"):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / slug).symlink_to(viescore / kind / slug)
    judge_import(path=tmp_path / "gpt4o_0shot", fmt="viescore", judge_name="gpt4o-0shot")
    judge_import(path=tmp_path / "autometrics", fmt="autometrics")
    study = Study.objects.get(slug=slug)
    import cProfile, pstats
    Study.objects.filter(pk=study.pk).update(rater_sampling="sampled"); study.refresh_from_db()
    pr = cProfile.Profile(); pr.enable(); build_report(study); pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(35)
    return
    monkeypatch.setattr(R, "_correlation_interval", lambda *a, **k: {})
    monkeypatch.setattr(R, "put_rating_intervals", lambda *a, **k: None)
    t = time.perf_counter(); build_report(study); print("without", time.perf_counter() - t)
