from importlib import import_module

from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "analysis"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the Celery jobs in every process (web too): services queue them by name.
        import_module("analysis.jobs")
