from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "analysis"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A rater's session ended (raters sends it; raters never imports analysis): the owners'
        # notices may be due.
        from analysis import notices
        from raters import services

        services.session_ended.connect(notices.session_ended, dispatch_uid="analysis.notices.session_ended")
