"""The analysis app limits BLAS to settings.BLAS_THREADS threads per process (the report runs its
parts in threads of its own; BLAS threads on top oversubscribe the cores)."""

from django.conf import settings
from threadpoolctl import threadpool_info


def test_blas_runs_the_configured_number_of_threads():
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas, "numpy and scipy load a BLAS library"
    assert settings.BLAS_THREADS == 1
    assert {pool["num_threads"] for pool in blas} == {1}
