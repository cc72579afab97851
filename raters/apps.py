from django.apps import AppConfig


class RatersConfig(AppConfig):
    name = "raters"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The rules' jobs sit above the services that decide when they are due.
        from raters import jobs, services

        services.queue_rater_rules.connect(jobs.rater_rules_queue, dispatch_uid="raters.jobs.rater_rules_queue")
        services.queue_study_rules.connect(jobs.study_rules_queue, dispatch_uid="raters.jobs.study_rules_queue")
