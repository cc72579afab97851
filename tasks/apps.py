from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tasks import build_services, jobs
        from tasks.assignment import adaptive
        from tasks.provenance import connect_signals

        connect_signals()
        # The build job sits above the service that stores a build.
        build_services.build_queued.connect(jobs.study_build_queue, dispatch_uid="tasks.jobs.study_build_queue")
        # The recomputation of a stale adaptive list runs as a job, off the claiming rater's request.
        adaptive.recompute_queued.connect(jobs.adaptive_recompute_queue, dispatch_uid="tasks.jobs.adaptive_recompute_queue")
